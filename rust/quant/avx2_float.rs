//! AVX2 (+FMA, F16C) dot kernels of the float weight types: F32 and F16 in ggml's
//! `vec_dot_f32` / `vec_dot_f16` order (one token) and tinyBLAS's 16-lane order (batches),
//! BF16. Callers (`avx2.rs` wrappers) guarantee avx2+fma+f16c and `n` readable elements.
use super::avx2::{fp16, hsum_f32x8, load128};
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

/// [`scalar::dot_float_ggml`]'s order with 8-lane registers (lanes 0..8 and 8..16 of each
/// 16-lane chain side by side), for F32 or (`F16`) F16 rows, one token's order or (`TINY`)
/// the batch order.
///
/// [`scalar::dot_float_ggml`]: super::scalar::dot_float_ggml
#[inline(always)]
unsafe fn float_ggml<const F16: bool, const TINY: bool>(n: usize, w: *const u8, a: *const u8) -> f32 {
    let (ld, el) = (ld_float8::<F16>, ld_float::<F16>);
    if TINY && n % 16 == 0 {
        let mut acc = [_mm256_setzero_ps(); 2];
        let mut i = 0;
        while i < n {
            acc[0] = _mm256_fmadd_ps(ld(w, i), ld(a, i), acc[0]);
            acc[1] = _mm256_fmadd_ps(ld(w, i + 8), ld(a, i + 8), acc[1]);
            i += 16;
        }
        let mut l = [0f32; 16];
        _mm256_storeu_ps(l.as_mut_ptr(), acc[0]);
        _mm256_storeu_ps(l.as_mut_ptr().add(8), acc[1]);
        return super::scalar::reduce16(&l);
    }
    let np = n / 64 * 64;
    let mut acc = [_mm256_setzero_ps(); 8];
    let mut i = 0;
    while i < np {
        for (k, s) in acc.iter_mut().enumerate() {
            *s = _mm256_fmadd_ps(ld(w, i + 8 * k), ld(a, i + 8 * k), *s);
        }
        i += 64;
    }
    let mut l = [0f32; 64];
    for (k, s) in acc.iter().enumerate() {
        _mm256_storeu_ps(l.as_mut_ptr().add(8 * k), *s);
    }
    let r = super::scalar::reduce64(&l);
    if F16 {
        // ggml_vec_dot_f16 adds the rest in f64, ggml_vec_dot_f32 in f32
        let mut s = r as f64;
        for i in np..n {
            s += (el(w, i) * el(a, i)) as f64;
        }
        s as f32
    } else {
        let mut s = r;
        for i in np..n {
            s += el(w, i) * el(a, i);
        }
        s
    }
}

/// Elements i..i+8 of an F32 / (`F16`) F16 row as f32 (no closures: a closure does not
/// inherit its caller's target features).
#[inline(always)]
unsafe fn ld_float8<const F16: bool>(p: *const u8, i: usize) -> __m256 {
    if F16 {
        _mm256_cvtph_ps(load128(p.add(2 * i)))
    } else {
        _mm256_loadu_ps((p as *const f32).add(i))
    }
}

#[inline(always)]
unsafe fn ld_float<const F16: bool>(p: *const u8, i: usize) -> f32 {
    if F16 {
        fp16(p.add(2 * i))
    } else {
        read_unaligned((p as *const f32).add(i))
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f32_f32(n: usize, w: *const u8, a: *const u8) -> f32 {
    float_ggml::<false, false>(n, w, a)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_f16(n: usize, w: *const u8, a: *const u8) -> f32 {
    float_ggml::<true, false>(n, w, a)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f32_f32_tiny(n: usize, w: *const u8, a: *const u8) -> f32 {
    float_ggml::<false, true>(n, w, a)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_f16_tiny(n: usize, w: *const u8, a: *const u8) -> f32 {
    float_ggml::<true, true>(n, w, a)
}

#[inline(always)]
unsafe fn ld_bf16x8(p: *const u8) -> __m256 {
    _mm256_castsi256_ps(_mm256_slli_epi32::<16>(_mm256_cvtepu16_epi32(load128(p))))
}

#[inline(always)]
unsafe fn bf16(p: *const u8) -> f32 {
    f32::from_bits((read_unaligned(p as *const u16) as u32) << 16)
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn bf16_bf16(n: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, s) in acc.iter_mut().enumerate() {
            let o = 2 * (i + 8 * k);
            *s = _mm256_fmadd_ps(ld_bf16x8(w.add(o)), ld_bf16x8(a.add(o)), *s);
        }
        i += 32;
    }
    while i + 8 <= n {
        acc[0] = _mm256_fmadd_ps(ld_bf16x8(w.add(2 * i)), ld_bf16x8(a.add(2 * i)), acc[0]);
        i += 8;
    }
    let mut sum = hsum_f32x8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    while i < n {
        sum += bf16(w.add(2 * i)) * bf16(a.add(2 * i));
        i += 1;
    }
    sum
}
