//! AVX2 kernels for the sign-grid i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S (against
//! block_q8_K activations), in both of llama.cpp's x86 orders (`iquant.rs` documents them):
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
use super::iquant::{ksigns, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS};
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

#[inline(always)]
unsafe fn u16_at(p: *const u8) -> u32 {
    read_unaligned(p as *const u16) as u32
}

#[inline(always)]
unsafe fn u32_at(p: *const u8) -> u32 {
    read_unaligned(p as *const u32)
}

/// 8 magnitudes of an IQ2 grid entry / 4 of an IQ3 one.
#[inline(always)]
unsafe fn g8(grid: &[u8], i: usize) -> i64 {
    read_unaligned(grid.as_ptr().add(8 * (i & (grid.len() / 8 - 1))) as *const i64)
}

#[inline(always)]
unsafe fn g4(grid: &[u8], i: usize) -> i32 {
    read_unaligned(grid.as_ptr().add(4 * (i & (grid.len() / 4 - 1))) as *const i32)
}

/// The 8 IQ3 grid entries `gi(0..8)` (32 magnitudes).
#[inline(always)]
unsafe fn g4x8(grid: &[u8], gi: impl Fn(usize) -> usize) -> __m256i {
    _mm256_set_epi32(g4(grid, gi(7)), g4(grid, gi(6)), g4(grid, gi(5)), g4(grid, gi(4)), g4(grid, gi(3)), g4(grid, gi(2)), g4(grid, gi(1)), g4(grid, gi(0)))
}

/// Chunk `c` (elements 32c..32c+32) of a block of `T`: magnitudes, sign bits (bit j:
/// element j negative), and the multipliers of its two halves.
#[inline(always)]
unsafe fn chunk<const T: u8>(b: *const u8, c: usize) -> (__m256i, u32, i16, i16) {
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
            let signs = (0..4).fold(0u32, |acc, l| acc | (ksigns(s >> (7 * l)) as u32) << (8 * l));
            (mag, signs, odd(s >> 28), odd(s >> 28))
        }
        IQ2_XS => {
            let q = |l: usize| u16_at(b.add(2 + 8 * c + 2 * l));
            let mag = _mm256_set_epi64x(g8(IQ2XS, (q(3) & 511) as usize), g8(IQ2XS, (q(2) & 511) as usize), g8(IQ2XS, (q(1) & 511) as usize), g8(IQ2XS, (q(0) & 511) as usize));
            let signs = (0..4).fold(0u32, |acc, l| acc | (ksigns(q(l) >> 9) as u32) << (8 * l));
            let sc = *b.add(66 + c) as u32;
            (mag, signs, odd(sc), odd(sc >> 4))
        }
        IQ2_S => {
            let qh = *b.add(66 + c) as usize;
            let gi = |l: usize| *b.add(2 + 4 * c + l) as usize | (((qh >> (2 * l)) & 3) << 8);
            let mag = _mm256_set_epi64x(g8(IQ2S, gi(3)), g8(IQ2S, gi(2)), g8(IQ2S, gi(1)), g8(IQ2S, gi(0)));
            let sc = *b.add(74 + c) as u32;
            (mag, u32_at(b.add(34 + 4 * c)), odd(sc), odd(sc >> 4))
        }
        IQ3_XXS => {
            let s = u32_at(b.add(66 + 4 * c));
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize;
            let mag = g4x8(IQ3XXS, gi);
            let signs = (0..4).fold(0u32, |acc, l| acc | (ksigns(s >> (7 * l)) as u32) << (8 * l));
            (mag, signs, odd(s >> 28), odd(s >> 28))
        }
        _ => {
            // IQ3_S
            let qh = *b.add(66 + c) as usize;
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize | (((qh >> i) & 1) << 8);
            let mag = g4x8(IQ3S, gi);
            let m = odd((*b.add(106 + c / 2) as u32) >> (4 * (c % 2)));
            (mag, u32_at(b.add(74 + 4 * c)), m, m)
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
        let neg = bits32(&signs as *const u32 as *const u8);
        let q8 = load256(ab.add(Q8_K_QS + 32 * c));
        let q8s = _mm256_sub_epi8(_mm256_xor_si256(q8, neg), neg);
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
