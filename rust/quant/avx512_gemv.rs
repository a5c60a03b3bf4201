//! Q4_K against one token (decode) in llama.cpp's gemv order, the one-token calls of
//! `avx512.rs`'s `q4_k_body`: per row, lane 0 of a chain pair sums the integer sums and lane 1
//! the min terms, `fma(f32(Σ), d·d_a, chain)` per block.
//!
//! - [`q4_k_gemv1`]: one row.
//! - [`q4_k_gemv4`]: four rows, each with one row's operations: the token's values loaded once
//!   for the four, the rows' integer sums reduced together (exact in any grouping), and the
//!   eight chains (lanes 2r, 2r + 1) advanced by one 8-lane FMA per block. `tile::gemv_loop`
//!   hands it rows a quarter of the matrix apart, so each row is a sequential walk that the
//!   hardware prefetchers follow (four rows side by side in one region ran at 6–10 GB/s from
//!   memory; in L2 the four-row kernel runs 24.7–27.4 GB/s against one row's 20.3).
//!
//! Soundness: as `avx512.rs` (inlined into its feature-enabled entry points).
use super::avx2::{k4_scales_mins, load256, rd_f32};
use super::avx512::{join, prefetch_ahead, q4_k_nibbles, wdot};
use super::blocks::*;
use core::arch::x86_64::*;

/// Block `i` of the token at `a`: its values against each 64-byte load of nibbles (low
/// nibbles, high nibbles, twice; two 256-bit halves per vector, folded into the insert's memory
/// operand, which keeps the lane shuffles off the weights: the one-token loop is bound by the
/// shuffle port) and its 16 bsums.
#[inline(always)]
unsafe fn q4_k_token(a: *const u8, i: usize) -> ([__m512i; 4], __m256i) {
    let ab = a.add(Q8_K_BYTES * i);
    let y = ab.add(Q8_K_QS);
    let ys = [
        join(load256(y), load256(y.add(64))),
        join(load256(y.add(32)), load256(y.add(96))),
        join(load256(y.add(128)), load256(y.add(192))),
        join(load256(y.add(160)), load256(y.add(224))),
    ];
    (ys, load256(ab.add(Q8_K_BSUMS)))
}

/// One row's block `wb`: the integer sums folded to 8 lanes, the min terms
/// `Σ_j min_j · (bsums[2j] + bsums[2j+1])` in 8 lanes, and the f16 pair [d, dmin].
#[inline(always)]
unsafe fn q4_k_gemv_row<const VNNI: bool>(wb: *const u8, ys: &[__m512i; 4], bsums: __m256i) -> (__m256i, __m256i, __m128i) {
    let dm = _mm_cvtsi32_si128(core::ptr::read_unaligned(wb as *const i32));
    let sm = k4_scales_mins(wb.add(4));
    let sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    let mut sumi = _mm512_setzero_si512();
    for k in 0..2 {
        let [(lo, s_lo), (hi, s_hi)] = q4_k_nibbles(wb, k, sc16);
        sumi = wdot::<VNNI>(sumi, _mm512_maddubs_epi16(lo, ys[2 * k]), s_lo);
        sumi = wdot::<VNNI>(sumi, _mm512_maddubs_epi16(hi, ys[2 * k + 1]), s_hi);
    }
    let s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi), _mm512_extracti64x4_epi64::<1>(sumi));
    // each min twice, against the 16 bsums
    (s8, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)), bsums), dm)
}

/// One row `w` against the token `a` over `nb` blocks, prefetching the row ahead.
#[inline(always)]
pub(super) unsafe fn q4_k_gemv1<const VNNI: bool>(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm_setzero_ps();
    for i in 0..nb {
        let wb = w.add(144 * i);
        prefetch_ahead(wb, 144);
        let (ys, bsums) = q4_k_token(a, i);
        let (s8, m8, dm) = q4_k_gemv_row::<VNNI>(wb, &ys, bsums);
        let h = _mm256_hadd_epi32(s8, m8); // per half: [s, s, m, m]
        let x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        let sums = _mm_cvtepi32_ps(_mm_hadd_epi32(x, x)); // [Σ sumi, Σ mins, ..]
        acc = _mm_fmadd_ps(sums, _mm_mul_ps(_mm_cvtph_ps(dm), _mm_set1_ps(rd_f32(a.add(Q8_K_BYTES * i)))), acc);
    }
    _mm_cvtss_f32(acc) - _mm_cvtss_f32(_mm_movehdup_ps(acc))
}

/// Four rows `w` against the token `a` over `nb` blocks (no software prefetch: the hardware
/// prefetchers follow the four streams, and measured faster alone).
#[inline(always)]
pub(super) unsafe fn q4_k_gemv4<const VNNI: bool>(nb: usize, w: [*const u8; 4], a: *const u8) -> [f32; 4] {
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        let (ys, bsums) = q4_k_token(a, i);
        // the four rows written out: one load instruction per row and field
        let (s0, m0, d0) = q4_k_gemv_row::<VNNI>(w[0].add(144 * i), &ys, bsums);
        let (s1, m1, d1) = q4_k_gemv_row::<VNNI>(w[1].add(144 * i), &ys, bsums);
        let (s2, m2, d2) = q4_k_gemv_row::<VNNI>(w[2].add(144 * i), &ys, bsums);
        let (s3, m3, d3) = q4_k_gemv_row::<VNNI>(w[3].add(144 * i), &ys, bsums);
        // per 128-bit half [s_r, m_r, s_r+1, m_r+1] partial sums, then the halves added:
        // [Σ sumi_0, Σ mins_0, Σ sumi_1, Σ mins_1, .., Σ mins_3]
        let g01 = _mm256_hadd_epi32(_mm256_hadd_epi32(s0, m0), _mm256_hadd_epi32(s1, m1));
        let g23 = _mm256_hadd_epi32(_mm256_hadd_epi32(s2, m2), _mm256_hadd_epi32(s3, m3));
        let sums = _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(g01, g23), _mm256_permute2x128_si256::<0x31>(g01, g23));
        let dm = _mm_unpacklo_epi64(_mm_unpacklo_epi32(d0, d1), _mm_unpacklo_epi32(d2, d3));
        let f = _mm256_mul_ps(_mm256_cvtph_ps(dm), _mm256_set1_ps(rd_f32(a.add(Q8_K_BYTES * i))));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), f, acc);
    }
    let mut l = [0f32; 8];
    _mm256_storeu_ps(l.as_mut_ptr(), acc);
    [l[0] - l[1], l[2] - l[3], l[4] - l[5], l[6] - l[7]]
}
