//! AVX2 kernels for the ternary types TQ1_0 and TQ2_0 (against block_q8_K activations), as
//! ggml-cpu/arch/x86/quants.c computes them: codes 0..2 as unsigned bytes `maddubs` the
//! activations into 16-bit sums, the `bsums` subtracted for the `-1`, `madd` to 8 i32 lanes,
//! one multiply-add per superblock; `hsum_float_8`. Bit-identical to `ternary.rs`.
//! Callers (`avx2.rs` wrappers) guarantee avx2+fma+f16c and that `nb` blocks are readable
//! from `w` and `a`.
use super::avx2::{fp16, hsum_f32x8, load128, load256, rd_f32};
use super::blocks::*;
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

/// The top base-3 digit of each byte (`(q · 3) >> 8`, via ggml's two rounding averages).
#[inline(always)]
unsafe fn top_digit(q: __m256i) -> __m256i {
    let x = _mm256_subs_epu8(q, _mm256_set1_epi8(1));
    let x = _mm256_avg_epu8(x, _mm256_avg_epu8(x, _mm256_setzero_si256()));
    _mm256_and_si256(_mm256_srli_epi16::<6>(x), _mm256_set1_epi8(3))
}

/// `x · 9` in every byte (mod 256), as ggml does it without 8-bit multiplies.
#[inline(always)]
unsafe fn times9_256(x: __m256i) -> __m256i {
    _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16::<3>(x), _mm256_set1_epi8(-8)), x)
}

#[inline(always)]
unsafe fn times9_128(x: __m128i) -> __m128i {
    _mm_add_epi8(_mm_and_si128(_mm_slli_epi16::<3>(x), _mm_set1_epi8(-8)), x)
}

/// `fma(d_a · d_w, f32(Σ lanes − bsums), acc)` for one superblock's 16-bit sums.
#[inline(always)]
unsafe fn finish(acc: __m256, sumi: __m256i, ab: *const u8, d_w: f32) -> __m256 {
    let s = _mm256_sub_epi16(sumi, load256(ab.add(Q8_K_BSUMS)));
    let s = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
    _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(rd_f32(ab) * d_w), acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tq1_0_q8_k(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        let (wb, ab) = (w.add(TQ1_0_BYTES * i), a.add(Q8_K_BYTES * i));
        let q8 = |o: usize| load256(ab.add(Q8_K_QS + o));
        // qs[0..32]: digits 0..5 of 32 bytes, elements 32n + m
        let x0 = load256(wb);
        let x1 = _mm256_add_epi8(x0, _mm256_add_epi8(x0, x0));
        let x2 = times9_256(x0);
        let x3 = times9_256(x1);
        let x4 = times9_256(x2);
        let p = |x: __m256i, o: usize| _mm256_maddubs_epi16(top_digit(x), q8(o));
        let mut s0 = _mm256_add_epi16(p(x0, 0), p(x1, 32));
        let mut s1 = _mm256_add_epi16(p(x2, 64), p(x3, 96));
        let mut s2 = p(x4, 128);
        // qs[32..48]: digits 0..5 of 16 bytes (elements 160 + 16n + m); qh: 4 digits of 4 bytes
        let y0 = load128(wb.add(32));
        let y1 = _mm_add_epi8(y0, _mm_add_epi8(y0, y0));
        let y2 = times9_128(y0);
        let y3 = times9_128(y1);
        let y4 = times9_128(y2);
        let qh = read_unaligned(wb.add(48) as *const i32);
        let h = _mm256_mullo_epi16(_mm256_cvtepu8_epi16(_mm_set1_epi32(qh)), _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1));
        let h = _mm256_and_si256(h, _mm256_set1_epi16(0xff));
        let y5 = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
        s0 = _mm256_add_epi16(s0, p(_mm256_set_m128i(y1, y0), 160));
        s1 = _mm256_add_epi16(s1, p(_mm256_set_m128i(y3, y2), 192));
        s2 = _mm256_add_epi16(s2, p(_mm256_set_m128i(y5, y4), 224));
        // ggml: (s0 - bsums) + (s1 + s2)
        let s0 = _mm256_sub_epi16(s0, load256(ab.add(Q8_K_BSUMS)));
        let s = _mm256_madd_epi16(_mm256_add_epi16(s0, _mm256_add_epi16(s1, s2)), _mm256_set1_epi16(1));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(rd_f32(ab) * fp16(wb.add(52))), acc);
    }
    hsum_f32x8(acc)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn tq2_0_q8_k(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let mut acc = _mm256_setzero_ps();
    for i in 0..nb {
        let (wb, ab) = (w.add(TQ2_0_BYTES * i), a.add(Q8_K_BYTES * i));
        let (mut s0, mut s1) = (_mm256_setzero_si256(), _mm256_setzero_si256());
        for j in [0usize, 32] {
            let x = load256(wb.add(j));
            let p = |x: __m256i, l: usize| _mm256_maddubs_epi16(_mm256_and_si256(x, m3), load256(ab.add(Q8_K_QS + 4 * j + 32 * l)));
            s0 = _mm256_add_epi16(s0, _mm256_add_epi16(p(x, 0), p(_mm256_srli_epi16::<2>(x), 1)));
            s1 = _mm256_add_epi16(s1, _mm256_add_epi16(p(_mm256_srli_epi16::<4>(x), 2), p(_mm256_srli_epi16::<6>(x), 3)));
        }
        acc = finish(acc, _mm256_add_epi16(s0, s1), ab, fp16(wb.add(64)));
    }
    hsum_f32x8(acc)
}
