//! AVX2 kernels for the grid i-quants (against block_q8_K activations) in both of llama.cpp's
//! x86 orders: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S (`iquant.rs` documents the orders), and
//! IQ1_S, IQ1_M below (`iquant1.rs`). For the sign-grid ones:
//! per 32 elements the grid magnitudes (unsigned bytes) `maddubs` the activations with the
//! element signs applied, `madd` by the odd multipliers of the two 16-element halves into
//! the 8 i32 lanes ggml's kernels use; per superblock `fma(d_w · d_a, lanes, acc)` and
//! `FACTOR · hsum_float_8` (`vec_dot`), or the whole sum in one chain (tiled). Integer sums
//! exact (grid values ≤ 62, activations in [-127, 127]: no 16-bit saturation), so every
//! result equals the scalar reference bit for bit.
//! Callers (`avx2.rs` wrappers) guarantee avx2+fma+f16c and that `nb` blocks are readable
//! from `w` and `a`.
use super::avx2::{bits32, fp16, hsum_f32x8, hsum_i32x8, load256, rd_f32};
use super::blocks::{Q8_K_BYTES, Q8_K_QS};
use super::iquant::{grid4 as g4, grid8 as g8, rd_u16 as u16_at, rd_u32 as u32_at, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS, KSIGN_BYTES};
use super::iquant1::IQ1S;
use core::arch::x86_64::*;

/// The 8 IQ3 grid entries `gi(0..8)` (32 magnitudes).
#[inline(always)]
unsafe fn g4x8(grid: &[u8], gi: impl Fn(usize) -> usize) -> __m256i {
    _mm256_set_epi32(g4(grid, gi(7)), g4(grid, gi(6)), g4(grid, gi(5)), g4(grid, gi(4)), g4(grid, gi(3)), g4(grid, gi(2)), g4(grid, gi(1)), g4(grid, gi(0)))
}

/// The ±1 signs of the four groups of 8 whose 7-bit sign indices are `idx(0..4)`.
#[inline(always)]
unsafe fn ksign_bytes(idx: impl Fn(usize) -> u32) -> __m256i {
    let m = |l: usize| KSIGN_BYTES[(idx(l) & 127) as usize];
    _mm256_set_epi64x(m(3), m(2), m(1), m(0))
}

/// ±1 bytes from 32 sign bits (bit j set: byte j is -1).
#[inline(always)]
unsafe fn sign_bytes(p: *const u8) -> __m256i {
    _mm256_or_si256(bits32(p), _mm256_set1_epi8(1))
}

/// Chunk `c` (elements 32c..32c+32) of a block of `T`: magnitudes, signs (±1 bytes, for
/// `_mm256_sign_epi8`), and the multipliers of its two halves.
#[inline(always)]
unsafe fn chunk<const T: u8>(b: *const u8, c: usize) -> (__m256i, __m256i, i16, i16) {
    let odd = |ls: u32| (2 * (ls & 15) + 1) as i16;
    match T {
        IQ2_XXS => {
            let (g, s) = (u32_at(b.add(2 + 8 * c)), u32_at(b.add(6 + 8 * c)));
            let mag = _mm256_set_epi64x(
                g8(IQ2XXS, (g >> 24) as usize),
                g8(IQ2XXS, ((g >> 16) & 255) as usize),
                g8(IQ2XXS, ((g >> 8) & 255) as usize),
                g8(IQ2XXS, (g & 255) as usize),
            );
            (mag, ksign_bytes(|l| s >> (7 * l)), odd(s >> 28), odd(s >> 28))
        }
        IQ2_XS => {
            let q = |l: usize| u16_at(b.add(2 + 8 * c + 2 * l));
            let mag = _mm256_set_epi64x(g8(IQ2XS, (q(3) & 511) as usize), g8(IQ2XS, (q(2) & 511) as usize), g8(IQ2XS, (q(1) & 511) as usize), g8(IQ2XS, (q(0) & 511) as usize));
            let sc = *b.add(66 + c) as u32;
            (mag, ksign_bytes(|l| q(l) >> 9), odd(sc), odd(sc >> 4))
        }
        IQ2_S => {
            let qh = *b.add(66 + c) as usize;
            let gi = |l: usize| *b.add(2 + 4 * c + l) as usize | (((qh >> (2 * l)) & 3) << 8);
            let mag = _mm256_set_epi64x(g8(IQ2S, gi(3)), g8(IQ2S, gi(2)), g8(IQ2S, gi(1)), g8(IQ2S, gi(0)));
            let sc = *b.add(74 + c) as u32;
            (mag, sign_bytes(b.add(34 + 4 * c)), odd(sc), odd(sc >> 4))
        }
        IQ3_XXS => {
            let s = u32_at(b.add(66 + 4 * c));
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize;
            let mag = g4x8(IQ3XXS, gi);
            (mag, ksign_bytes(|l| s >> (7 * l)), odd(s >> 28), odd(s >> 28))
        }
        _ => {
            // IQ3_S
            let qh = *b.add(66 + c) as usize;
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize | (((qh >> i) & 1) << 8);
            let mag = g4x8(IQ3S, gi);
            let m = odd((*b.add(106 + c / 2) as u32) >> (4 * (c % 2)));
            (mag, sign_bytes(b.add(74 + 4 * c)), m, m)
        }
    }
}

const IQ2_XXS: u8 = 0;
const IQ2_XS: u8 = 1;
const IQ2_S: u8 = 2;
const IQ3_XXS: u8 = 3;
const IQ3_S: u8 = 4;

/// The 8 i32 lanes of one superblock: lane k sums the elements with `(e % 32) / 4 == k`.
#[inline(always)]
unsafe fn block_lanes<const T: u8>(wb: *const u8, ab: *const u8) -> __m256i {
    let mut sum = _mm256_setzero_si256();
    for c in 0..8 {
        let (mag, signs, m_lo, m_hi) = chunk::<T>(wb, c);
        let q8s = _mm256_sign_epi8(load256(ab.add(Q8_K_QS + 32 * c)), signs);
        let mult = _mm256_set_m128i(_mm_set1_epi16(m_hi), _mm_set1_epi16(m_lo));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_maddubs_epi16(mag, q8s), mult));
    }
    sum
}

#[inline(always)]
unsafe fn dot<const T: u8, const TILED: bool>(nb: usize, w: *const u8, a: *const u8, bytes: usize, factor: f32) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut total = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(bytes * i), a.add(Q8_K_BYTES * i));
        let lanes = block_lanes::<T>(wb, ab);
        if TILED {
            total = (hsum_i32x8(lanes) as f32 * (fp16(wb) * factor)).mul_add(rd_f32(ab), total);
        } else {
            acc = _mm256_fmadd_ps(_mm256_set1_ps(fp16(wb) * rd_f32(ab)), _mm256_cvtepi32_ps(lanes), acc);
        }
    }
    if TILED {
        total
    } else {
        factor * hsum_f32x8(acc)
    }
}

macro_rules! kernels {
    ($($vec:ident, $tiled:ident => $t:ident, $bytes:expr, $factor:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $vec(nb: usize, w: *const u8, a: *const u8) -> f32 {
            dot::<$t, false>(nb, w, a, $bytes, $factor)
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $tiled(nb: usize, w: *const u8, a: *const u8) -> f32 {
            dot::<$t, true>(nb, w, a, $bytes, $factor)
        }
    )*};
}

kernels! {
    iq2_xxs_vec, iq2_xxs_tiled => IQ2_XXS, 66, 0.125;
    iq2_xs_vec, iq2_xs_tiled => IQ2_XS, 74, 0.125;
    iq2_s_vec, iq2_s_tiled => IQ2_S, 82, 0.125;
    iq3_xxs_vec, iq3_xxs_tiled => IQ3_XXS, 98, 0.25;
    iq3_s_vec, iq3_s_tiled => IQ3_S, 110, 1.0;
}

// ---------------------------------------------------------------- IQ1_S, IQ1_M
// Grid values -1, 0, 1 (signed bytes) and a ±1/8 shift; see `iquant1.rs` for the orders.

const IQ1_S: u8 = 5;

/// Chunk `ib` of an IQ1_S (`T == IQ1_S`) or IQ1_M block: grid values, the shift signs (±1
/// bytes), the multipliers of the two halves.
#[inline(always)]
unsafe fn chunk1<const T: u8>(b: *const u8, ib: usize) -> (__m256i, __m256i, i16, i16) {
    let one = 0x0101_0101_0101_0101i64;
    if T == IQ1_S {
        let qh = u16_at(b.add(34 + 2 * ib)) as usize;
        let gi = |l: usize| *b.add(2 + 4 * ib + l) as usize | (((qh >> (3 * l)) & 7) << 8);
        let v = _mm256_set_epi64x(g8(IQ1S, gi(3)), g8(IQ1S, gi(2)), g8(IQ1S, gi(1)), g8(IQ1S, gi(0)));
        let m = (2 * ((qh >> 12) & 7) + 1) as i16;
        (v, _mm256_set1_epi64x(if qh & 0x8000 != 0 { -1 } else { one }), m, m)
    } else {
        let h = |l: usize| (*b.add(32 + 2 * ib + l / 2) >> (4 * (l % 2))) as usize;
        let gi = |l: usize| *b.add(4 * ib + l) as usize | ((h(l) & 7) << 8);
        let v = _mm256_set_epi64x(g8(IQ1S, gi(3)), g8(IQ1S, gi(2)), g8(IQ1S, gi(1)), g8(IQ1S, gi(0)));
        let dl = |l: usize| if h(l) & 8 != 0 { -1 } else { one };
        let sc = u16_at(b.add(48 + 2 * (ib / 2)));
        let m = |k: u32| (2 * ((sc >> (6 * (ib as u32 % 2) + 3 * k)) & 7) + 1) as i16;
        (v, _mm256_set_epi64x(dl(3), dl(2), dl(1), dl(0)), m(0), m(1))
    }
}

/// The f32 scale of an IQ1_S / IQ1_M block.
#[inline(always)]
unsafe fn d1<const T: u8>(b: *const u8) -> f32 {
    super::iquant1::block_d(T == IQ1_S, b)
}

/// The grid lanes and the shift lanes of one superblock.
#[inline(always)]
unsafe fn block_lanes1<const T: u8>(wb: *const u8, ab: *const u8) -> (__m256i, __m256i) {
    let (mut sv, mut sd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for ib in 0..8 {
        let (v, delta, m_lo, m_hi) = chunk1::<T>(wb, ib);
        let q8 = load256(ab.add(Q8_K_QS + 32 * ib));
        let mult = _mm256_set_m128i(_mm_set1_epi16(m_hi), _mm_set1_epi16(m_lo));
        let pv = _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(q8, v));
        let pd = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_sign_epi8(q8, delta));
        sv = _mm256_add_epi32(sv, _mm256_madd_epi16(pv, mult));
        sd = _mm256_add_epi32(sd, _mm256_madd_epi16(pd, mult));
    }
    (sv, sd)
}

#[inline(always)]
unsafe fn dot1<const T: u8, const TILED: bool>(nb: usize, w: *const u8, a: *const u8, bytes: usize) -> f32 {
    let (mut acc, mut acc_d, mut acc1, mut total) = (_mm256_setzero_ps(), _mm256_setzero_ps(), 0f32, 0f32);
    for i in 0..nb {
        let (wb, ab) = (w.add(bytes * i), a.add(Q8_K_BYTES * i));
        let (sv, sd) = block_lanes1::<T>(wb, ab);
        let dw = d1::<T>(wb);
        if TILED {
            let isum = 8 * hsum_i32x8(sv) + hsum_i32x8(sd);
            total = (isum as f32 * (dw * 0.125)).mul_add(rd_f32(ab), total);
            continue;
        }
        let d = rd_f32(ab) * dw;
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sv), acc);
        if T == IQ1_S {
            acc1 = d.mul_add(hsum_i32x8(sd) as f32, acc1);
        } else {
            acc_d = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sd), acc_d);
        }
    }
    if TILED {
        return total;
    }
    let delta = if T == IQ1_S { acc1 } else { hsum_f32x8(acc_d) };
    0.125f32.mul_add(delta, hsum_f32x8(acc))
}

const IQ1_M: u8 = 6;

macro_rules! kernels1 {
    ($($vec:ident, $tiled:ident => $t:ident, $bytes:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $vec(nb: usize, w: *const u8, a: *const u8) -> f32 {
            dot1::<$t, false>(nb, w, a, $bytes)
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $tiled(nb: usize, w: *const u8, a: *const u8) -> f32 {
            dot1::<$t, true>(nb, w, a, $bytes)
        }
    )*};
}

kernels1! {
    iq1_s_vec, iq1_s_tiled => IQ1_S, 50;
    iq1_m_vec, iq1_m_tiled => IQ1_M, 56;
}

// ---------------------------------------------------------------- several activation rows
// One weight row against up to `ROWS` activation rows per pass, each block's grid decoded
// once per pass (prefill); every output is the single-row kernel's bits for that row.

const ROWS: usize = 16;

/// The decoded chunks of one block: (magnitudes or grid values, ±1 signs or shift signs,
/// the multipliers of both halves as one vector).
type Decoded = [(__m256i, __m256i, __m256i); 8];

#[inline(always)]
unsafe fn decode<const T: u8>(wb: *const u8) -> Decoded {
    // (a loop, not `array::from_fn`: a closure does not inherit the target features, and its
    // intrinsics would become calls)
    let z = _mm256_setzero_si256();
    let mut dec = [(z, z, z); 8];
    for (c, d) in dec.iter_mut().enumerate() {
        let (x, y, m_lo, m_hi) = if T >= IQ1_S {
            chunk1::<T>(wb, c)
        } else {
            chunk::<T>(wb, c)
        };
        *d = (x, y, _mm256_set_m128i(_mm_set1_epi16(m_hi), _mm_set1_epi16(m_lo)));
    }
    dec
}

/// The (grid, shift) lanes of one decoded block against one activation block: as
/// `block_lanes` / `block_lanes1` (the shift lanes are zero for the sign-grid types).
#[inline(always)]
unsafe fn lanes_of<const T: u8>(dec: &Decoded, ab: *const u8) -> (__m256i, __m256i) {
    let (mut sv, mut sd) = (_mm256_setzero_si256(), _mm256_setzero_si256());
    for (c, &(x, y, mult)) in dec.iter().enumerate() {
        let q8 = load256(ab.add(Q8_K_QS + 32 * c));
        if T >= IQ1_S {
            let pv = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(q8, x));
            let pd = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_sign_epi8(q8, y));
            sv = _mm256_add_epi32(sv, _mm256_madd_epi16(pv, mult));
            sd = _mm256_add_epi32(sd, _mm256_madd_epi16(pd, mult));
        } else {
            let q8s = _mm256_sign_epi8(q8, y);
            sv = _mm256_add_epi32(sv, _mm256_madd_epi16(_mm256_maddubs_epi16(x, q8s), mult));
        }
    }
    (sv, sd)
}

/// The weight block's f32 scale as the kernels use it (`fp16(d)`, IQ1_M's assembled one).
#[inline(always)]
unsafe fn d_of<const T: u8>(wb: *const u8) -> f32 {
    if T >= IQ1_S {
        d1::<T>(wb)
    } else {
        fp16(wb)
    }
}

/// `out[r] = dot(w, a + r·stride)` in the tiled order (`TILED`) or the `vec_dot` one.
#[inline(always)]
unsafe fn rows<const T: u8, const TILED: bool>(nb: usize, w: *const u8, a: *const u8, stride: usize, out: &mut [f32], bytes: usize, factor: f32) {
    for (g, o) in out.chunks_mut(ROWS).enumerate() {
        let a0 = a.add(g * ROWS * stride);
        let (mut acc, mut acc_d, mut acc1, mut total) = ([_mm256_setzero_ps(); ROWS], [_mm256_setzero_ps(); ROWS], [0f32; ROWS], [0f32; ROWS]);
        for i in 0..nb {
            let wb = w.add(bytes * i);
            let dec = decode::<T>(wb);
            let dw = d_of::<T>(wb);
            for r in 0..o.len() {
                let ab = a0.add(r * stride + Q8_K_BYTES * i);
                let (sv, sd) = lanes_of::<T>(&dec, ab);
                if TILED {
                    let isum = if T >= IQ1_S { 8 * hsum_i32x8(sv) + hsum_i32x8(sd) } else { hsum_i32x8(sv) };
                    total[r] = (isum as f32 * (dw * factor)).mul_add(rd_f32(ab), total[r]);
                    continue;
                }
                let d = if T >= IQ1_S { rd_f32(ab) * dw } else { dw * rd_f32(ab) };
                acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sv), acc[r]);
                if T == IQ1_S {
                    acc1[r] = d.mul_add(hsum_i32x8(sd) as f32, acc1[r]);
                } else if T == IQ1_M {
                    acc_d[r] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sd), acc_d[r]);
                }
            }
        }
        for (r, v) in o.iter_mut().enumerate() {
            *v = match (TILED, T) {
                (true, _) => total[r],
                (false, IQ1_S) => 0.125f32.mul_add(acc1[r], hsum_f32x8(acc[r])),
                (false, IQ1_M) => 0.125f32.mul_add(hsum_f32x8(acc_d[r]), hsum_f32x8(acc[r])),
                _ => factor * hsum_f32x8(acc[r]),
            };
        }
    }
}

macro_rules! row_kernels {
    ($($vec:ident, $tiled:ident => $t:ident, $bytes:expr, $factor:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $vec(nb: usize, w: *const u8, a: *const u8, stride: usize, out: &mut [f32]) {
            rows::<$t, false>(nb, w, a, stride, out, $bytes, $factor)
        }
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $tiled(nb: usize, w: *const u8, a: *const u8, stride: usize, out: &mut [f32]) {
            rows::<$t, true>(nb, w, a, stride, out, $bytes, $factor)
        }
    )*};
}

row_kernels! {
    iq2_xxs_rows, iq2_xxs_rows_tiled => IQ2_XXS, 66, 0.125;
    iq2_xs_rows, iq2_xs_rows_tiled => IQ2_XS, 74, 0.125;
    iq2_s_rows, iq2_s_rows_tiled => IQ2_S, 82, 0.125;
    iq3_xxs_rows, iq3_xxs_rows_tiled => IQ3_XXS, 98, 0.25;
    iq3_s_rows, iq3_s_rows_tiled => IQ3_S, 110, 1.0;
    iq1_s_rows, iq1_s_rows_tiled => IQ1_S, 50, 0.125;
    iq1_m_rows, iq1_m_rows_tiled => IQ1_M, 56, 0.125;
}

// ---------------------------------------------------------------- unpacked for lane panels
// The tiled order's block sum is Σ_g m_g · Σ_{k ∈ g} q_k · y_k over the 16 groups of 16
// elements (m_g the group's multiplier, q_k the signed weight: grid magnitude with its sign,
// or IQ1's 8·grid + shift sign), exact in i32; `avx512_packed.rs` computes it with 16 rows in
// vector lanes from blocks unpacked here.

/// Unpacks one block of `T`: `q[0..256]` the weights as `q + 128` bytes, `sc[0..16]` the
/// group multipliers; returns the block's tiled-order f32 factor `d · FACTOR`.
#[inline(always)]
unsafe fn unpack<const T: u8>(wb: *const u8, q: *mut u8, sc: *mut i32, factor: f32) -> f32 {
    let bias = _mm256_set1_epi8(-128);
    for c in 0..8 {
        let (v, m_lo, m_hi) = if T >= IQ1_S {
            let (g, shift, m_lo, m_hi) = chunk1::<T>(wb, c);
            let g2 = _mm256_add_epi8(g, g);
            let g4 = _mm256_add_epi8(g2, g2);
            (_mm256_add_epi8(_mm256_add_epi8(g4, g4), shift), m_lo, m_hi)
        } else {
            let (mag, signs, m_lo, m_hi) = chunk::<T>(wb, c);
            (_mm256_sign_epi8(mag, signs), m_lo, m_hi)
        };
        _mm256_storeu_si256(q.add(32 * c) as *mut __m256i, _mm256_xor_si256(v, bias));
        *sc.add(2 * c) = m_lo as i32;
        *sc.add(2 * c + 1) = m_hi as i32;
    }
    d_of::<T>(wb) * factor
}

/// `unsafe fn(block, q_out, sc_out) -> f32`: [`unpack`] for one type.
pub(super) type UnpackFn = unsafe fn(*const u8, *mut u8, *mut i32) -> f32;

macro_rules! unpackers {
    ($($name:ident => $t:ident, $factor:expr;)*) => {
        $(
            /// [`unpack`]: callers guarantee avx2+fma+f16c, a readable block, 256 writable
            /// bytes at `q` and 16 i32 at `sc`.
            #[target_feature(enable = "avx2,fma,f16c")]
            pub(super) unsafe fn $name(wb: *const u8, q: *mut u8, sc: *mut i32) -> f32 {
                unpack::<$t>(wb, q, sc, $factor)
            }
        )*
    };
}

unpackers! {
    unpack_iq2_xxs => IQ2_XXS, 0.125;
    unpack_iq2_xs => IQ2_XS, 0.125;
    unpack_iq2_s => IQ2_S, 0.125;
    unpack_iq3_xxs => IQ3_XXS, 0.25;
    unpack_iq3_s => IQ3_S, 1.0;
    unpack_iq1_s => IQ1_S, 0.125;
    unpack_iq1_m => IQ1_M, 0.125;
}
