//! AVX2 kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4).
//!
//! One weight block is decoded once (`Block32::weights`) and dotted with `C` activation rows
//! (`C` = 1 for `DotFn`, 4 for `DotRowsFn`), for `RW` weight rows (tiles, `avx2_tile.rs`);
//! every (row, token) sees the same operations in the same order, so its result does not
//! depend on `RW` or `C`. Generic over VNNI: `false` here
//! (`maddubs` + `madd`), `true` from `avx512.rs` (256-bit `vpdpbusd`, avx512vnni+vl).
//!
//! No closures in these generic bodies: a closure is compiled without the target features of
//! the function it ends up in, and its intrinsics then stay out-of-line calls (10x slower).
//! Callers (the `#[target_feature]` entry points) guarantee the CPU features and that `nb`
//! blocks are readable from `w` and from every `a[r]`.
use super::blocks::*;
use super::avx2::{bits32, fp16, fp16x2, hsum_f32x8, hsum_i32x8, iq4_values, load256, mul_us8, nibbles32, nl4_values};
use super::scalar_k::{e8m0_half, KVALUES_MXFP4};
use core::arch::x86_64::*;

/// A 32-element weight block type and its activation format (Q8_0, or Q8_1 when `MIN`).
pub(super) trait Block32 {
    /// Weights carry a minimum (Q4_1, Q5_1): unsigned values, Q8_1 activations
    /// `{ f16 d; f16 s; i8 qs[32] }` and an `m·s` term. Otherwise signed values and Q8_0
    /// activations `{ f16 d; i8 qs[32] }`.
    const MIN: bool;
    /// Two accumulator chains (even / odd blocks, summed before the final `hsum`), as ggml's
    /// AVX2 IQ4_NL kernel does; every other type keeps ggml's single chain.
    const PAIRED: bool = false;
    /// One f32 chain per (row, token), a block's exact integer sum at a time:
    /// `fma(f32(Σ), d_w·d_a, acc)` (llama.cpp's repacked `q4_0_8x8` / `iq4_nl_8x8` gemv and
    /// gemm, `scalar::dot_q4_0_q8_0_chain`; [`chain32`]); not with `MIN`.
    const CHAIN: bool = false;
    /// Block `i`: the 32 values (i8, or u8 when `MIN`), d and m (0 when not `MIN`).
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32);
    /// The weight scales of blocks `i..i + 8` (`CHAIN` types; f16 `d` first in an 18-byte
    /// block unless the type says otherwise).
    #[inline(always)]
    unsafe fn scales8(w: *const u8, i: usize) -> __m256 {
        fp16x8(w.add(18 * i), 18)
    }
}

/// Σ unsigned×signed byte products, 4 bytes per i32 lane; VNNI: one `vpdpbusd`.
#[inline(always)]
pub(super) unsafe fn udot<const VNNI: bool>(ax: __m256i, sy: __m256i) -> __m256i {
    if VNNI {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy)
    } else {
        mul_us8(ax, sy)
    }
}

/// Accumulates block `i` of weight row `w` against every token into `acc` / `summs`.
#[inline(always)]
unsafe fn step<B: Block32, const VNNI: bool, const C: usize>(
    w: *const u8,
    a: &[*const u8; C],
    i: usize,
    acc: &mut [__m256; C],
    summs: &mut [f32; C],
) {
    let (qx, dw, mw) = B::weights(w, i);
    // |x| for the unsigned side of maddubs; the sign moves onto the activations
    let ax = if B::MIN { qx } else { _mm256_sign_epi8(qx, qx) };
    for t in 0..C {
        if B::MIN {
            let ab = a[t].add(36 * i);
            let (da, sa) = fp16x2(ab, ab.add(2));
            let p = udot::<VNNI>(ax, load256(ab.add(4)));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(p), acc[t]);
            summs[t] += mw * sa;
        } else {
            let ab = a[t].add(34 * i);
            let p = udot::<VNNI>(ax, _mm256_sign_epi8(load256(ab.add(2)), qx));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * fp16(ab)), _mm256_cvtepi32_ps(p), acc[t]);
        }
    }
}

/// Σ over `nb` blocks of d_w·d_a·Σ(w·a) (+ m·s), for each of `RW` weight rows × `C` activation
/// rows (`[r][t]`), in ggml's order (`scalar::fma_lanes`: one FMA chain per (row, token),
/// block after block; two for `PAIRED` types); each (row, token) sees the same operations
/// for any `RW`, `C`.
#[inline(always)]
pub(super) unsafe fn blocks32<B: Block32, const VNNI: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    if B::CHAIN {
        return chain32::<B, RW, C>(nb, w, a);
    }
    let mut acc0 = [[_mm256_setzero_ps(); C]; RW];
    let mut acc1 = [[_mm256_setzero_ps(); C]; RW];
    let mut summs = [[0f32; C]; RW];
    let mut i = 0;
    while i + 2 <= nb {
        for r in 0..RW {
            step::<B, VNNI, C>(w[r], &a, i, &mut acc0[r], &mut summs[r]);
            let odd = if B::PAIRED { &mut acc1[r] } else { &mut acc0[r] };
            step::<B, VNNI, C>(w[r], &a, i + 1, odd, &mut summs[r]);
        }
        i += 2;
    }
    if i < nb {
        for r in 0..RW {
            step::<B, VNNI, C>(w[r], &a, i, &mut acc0[r], &mut summs[r]);
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            let v = if B::PAIRED { _mm256_add_ps(acc0[r][t], acc1[r][t]) } else { acc0[r][t] };
            out[r][t] = hsum_f32x8(v);
            if B::MIN {
                out[r][t] += summs[r][t];
            }
        }
    }
    out
}

/// The 8 i32 lanes of each of `p[0..8]` summed: lane j = Σ p[j] (exact; an `hadd` tree).
#[inline(always)]
unsafe fn sums8(p: &[__m256i; 8]) -> __m256i {
    let s01 = _mm256_hadd_epi32(p[0], p[1]);
    let s23 = _mm256_hadd_epi32(p[2], p[3]);
    let s45 = _mm256_hadd_epi32(p[4], p[5]);
    let s67 = _mm256_hadd_epi32(p[6], p[7]);
    let lo = _mm256_hadd_epi32(s01, s23);
    let hi = _mm256_hadd_epi32(s45, s67);
    _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(lo, hi), _mm256_permute2x128_si256::<0x31>(lo, hi))
}

/// The f16 at `p`, `p + stride`, … (8 of them) as 8 f32 lanes (one F16C conversion).
#[inline(always)]
unsafe fn fp16x8(p: *const u8, stride: usize) -> __m256 {
    let mut h = [0u16; 8];
    for (j, x) in h.iter_mut().enumerate() {
        *x = core::ptr::read_unaligned(p.add(j * stride) as *const u16);
    }
    _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr() as *const __m128i))
}

/// [`blocks32`] for `CHAIN` types (signed values, Q8_0 activations, `Block32::scales8`): 8
/// blocks at a time, their integer sums reduced together ([`sums8`]) and their scales
/// `d_w·d_a` multiplied as one vector, then the chain's FMAs block after block; the last
/// `nb % 8` blocks one at a time.
#[inline(always)]
unsafe fn chain32<B: Block32, const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
    let mut out = [[0f32; C]; RW];
    let mut i = 0;
    while i + 8 <= nb {
        for r in 0..RW {
            let dwv = B::scales8(w[r], i);
            for t in 0..C {
                let ab = a[t].add(34 * i);
                // (a loop, not `array::from_fn`: a closure would lose the target features)
                let mut p = [_mm256_setzero_si256(); 8];
                for (j, pj) in p.iter_mut().enumerate() {
                    let (qx, _, _) = B::weights(w[r], i + j);
                    *pj = mul_us8(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(load256(ab.add(34 * j + 2)), qx));
                }
                let sf = _mm256_cvtepi32_ps(sums8(&p));
                let sc = _mm256_mul_ps(dwv, fp16x8(ab, 34));
                let (sf, sc) = (core::mem::transmute::<__m256, [f32; 8]>(sf), core::mem::transmute::<__m256, [f32; 8]>(sc));
                let mut acc = out[r][t];
                for j in 0..8 {
                    acc = sf[j].mul_add(sc[j], acc);
                }
                out[r][t] = acc;
            }
        }
        i += 8;
    }
    while i < nb {
        for r in 0..RW {
            let (qx, dw, _) = B::weights(w[r], i);
            for t in 0..C {
                let ab = a[t].add(34 * i);
                let p = mul_us8(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(load256(ab.add(2)), qx));
                out[r][t] = (hsum_i32x8(p) as f32).mul_add(dw * fp16(ab), out[r][t]);
            }
        }
        i += 1;
    }
    out
}

/// `block_q8_0 { f16 d; i8 qs[32]; }`
#[allow(non_camel_case_types)]
pub(super) struct BQ8_0;

impl Block32 for BQ8_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q8_0_BYTES * i);
        (load256(wb.add(2)), fp16(wb), 0.0)
    }
}

/// `block_q4_0 { f16 d; u8 qs[16]; }`: nibble - 8
#[allow(non_camel_case_types)]
pub(super) struct BQ4_0;

impl Block32 for BQ4_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q4_0_BYTES * i);
        (_mm256_sub_epi8(nibbles32(wb.add(2)), _mm256_set1_epi8(8)), fp16(wb), 0.0)
    }
}

/// `block_q4_1 { f16 d; f16 m; u8 qs[16]; }`: d·nibble + m
#[allow(non_camel_case_types)]
pub(super) struct BQ4_1;

impl Block32 for BQ4_1 {
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q4_1_BYTES * i);
        let (d, m) = fp16x2(wb, wb.add(2));
        (nibbles32(wb.add(4)), d, m)
    }
}

/// `block_q5_0 { f16 d; u32 qh; u8 qs[16]; }`: (nibble | bit<<4) - 16, formed as
/// nibble | (bit ? 0 : 0xF0) in i8.
#[allow(non_camel_case_types)]
pub(super) struct BQ5_0;

impl Block32 for BQ5_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q5_0_BYTES * i);
        let hi = _mm256_andnot_si256(bits32(wb.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
        (_mm256_or_si256(nibbles32(wb.add(6)), hi), fp16(wb), 0.0)
    }
}

/// `block_q5_1 { f16 d; f16 m; u32 qh; u8 qs[16]; }`: d·(nibble | bit<<4) + m
#[allow(non_camel_case_types)]
pub(super) struct BQ5_1;

impl Block32 for BQ5_1 {
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q5_1_BYTES * i);
        let (d, m) = fp16x2(wb, wb.add(2));
        let hi = _mm256_and_si256(bits32(wb.add(4)), _mm256_set1_epi8(0x10));
        (_mm256_or_si256(nibbles32(wb.add(8)), hi), d, m)
    }
}

/// `block_iq4_nl { f16 d; u8 qs[16]; }`: `kvalues_iq4nl[code]`
#[allow(non_camel_case_types)]
pub(super) struct BIQ4_NL;

impl Block32 for BIQ4_NL {
    const MIN: bool = false;
    const PAIRED: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(IQ4_NL_BYTES * i);
        (iq4_values(wb.add(2)), fp16(wb), 0.0)
    }
}

/// Q4_0 as llama.cpp's repacked `q4_0_8x8` kernels sum it (`Block32::CHAIN`).
#[allow(non_camel_case_types)]
pub(super) struct BQ4_0x8;

impl Block32 for BQ4_0x8 {
    const MIN: bool = false;
    const CHAIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        BQ4_0::weights(w, i)
    }
}

/// IQ4_NL as llama.cpp's repacked `iq4_nl_8x8` kernels sum it (`Block32::CHAIN`).
#[allow(non_camel_case_types)]
pub(super) struct BIQ4_NLx8;

impl Block32 for BIQ4_NLx8 {
    const MIN: bool = false;
    const CHAIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        BIQ4_NL::weights(w, i)
    }
}

/// `block_mxfp4 { u8 e; u8 qs[16]; }`: `kvalues_mxfp4[code]` · 2^(e-128); ggml's AVX2
/// `ggml_vec_dot_mxfp4_q8_0` is its IQ4_NL kernel (two chains) with this codebook and scale.
#[allow(non_camel_case_types)]
pub(super) struct BMXFP4;

impl Block32 for BMXFP4 {
    const MIN: bool = false;
    const PAIRED: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(MXFP4_BYTES * i);
        (nl4_values(wb.add(1), &KVALUES_MXFP4), e8m0_half(*wb), 0.0)
    }
}

/// MXFP4 as llama.cpp's repacked `mxfp4_8x8` kernels sum it (`Block32::CHAIN`).
#[allow(non_camel_case_types)]
pub(super) struct BMXFP4x8;

impl Block32 for BMXFP4x8 {
    const MIN: bool = false;
    const CHAIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        BMXFP4::weights(w, i)
    }
    #[inline(always)]
    unsafe fn scales8(w: *const u8, i: usize) -> __m256 {
        let d = |j: usize| e8m0_half(*w.add(MXFP4_BYTES * (i + j)));
        _mm256_setr_ps(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7))
    }
}

macro_rules! entry_points {
    ($($kernel:ident => $blk:ident;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $kernel<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            blocks32::<$blk, false, RW, C>(nb, w, a)
        }
    )*};
}

entry_points! {
    q8_0_q8_0 => BQ8_0;
    q4_0_q8_0 => BQ4_0;
    q4_1_q8_1 => BQ4_1;
    q5_0_q8_0 => BQ5_0;
    q5_1_q8_1 => BQ5_1;
    iq4_nl_q8_0 => BIQ4_NL;
    q4_0x8_q8_0 => BQ4_0x8;
    iq4_nlx8_q8_0 => BIQ4_NLx8;
    mxfp4_q8_0 => BMXFP4;
    mxfp4x8_q8_0 => BMXFP4x8;
}
