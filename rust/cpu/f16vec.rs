//! f16 vector kernels for attention over an f16 KV cache: dot(f16, f16) and
//! out += p · v (f16), with an F16C/FMA path and its scalar twin.
use crate::quant::f16::f16_to_f32;
use crate::quant::{isa, Isa};

/// Σ a[i]·b[i] with f32 accumulation (ggml_vec_dot_f16).
#[inline]
pub fn dot_f16(a: &[u16], b: &[u16]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if isa() >= Isa::Avx2 && a.len().is_multiple_of(32) {
            // SAFETY: the ISA check guarantees AVX2/FMA/F16C; lengths are multiples of 32.
            return unsafe { x86::dot_f16(a, b) };
        }
    }
    dot_f16_scalar(a, b)
}

pub fn dot_f16_scalar(a: &[u16], b: &[u16]) -> f32 {
    a.iter().zip(b).map(|(&x, &y)| f16_to_f32(x) * f16_to_f32(y)).sum()
}

/// out[i] += p · v[i]
#[inline]
pub fn axpy_f16(out: &mut [f32], p: f32, v: &[u16]) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa() >= Isa::Avx2 && v.len().is_multiple_of(8) {
            // SAFETY: the ISA check guarantees AVX2/FMA/F16C; lengths are multiples of 8.
            return unsafe { x86::axpy_f16(out, p, v) };
        }
    }
    axpy_f16_scalar(out, p, v)
}

pub fn axpy_f16_scalar(out: &mut [f32], p: f32, v: &[u16]) {
    for (o, &x) in out.iter_mut().zip(v) {
        *o += p * f16_to_f32(x);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_f16(a: &[u16], b: &[u16]) -> f32 {
        let n = a.len().min(b.len());
        let (pa, pb) = (a.as_ptr(), b.as_ptr());
        let mut acc = [_mm256_setzero_ps(); 4];
        let mut i = 0;
        while i + 32 <= n {
            for (k, s) in acc.iter_mut().enumerate() {
                let x = _mm256_cvtph_ps(_mm_loadu_si128(pa.add(i + 8 * k) as *const __m128i));
                let y = _mm256_cvtph_ps(_mm_loadu_si128(pb.add(i + 8 * k) as *const __m128i));
                *s = _mm256_fmadd_ps(x, y, *s);
            }
            i += 32;
        }
        let s = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
        let h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        let h = _mm_add_ss(h, _mm_movehdup_ps(h));
        let mut r = _mm_cvtss_f32(h);
        while i < n {
            r += super::f16_to_f32(a[i]) * super::f16_to_f32(b[i]);
            i += 1;
        }
        r
    }

    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn axpy_f16(out: &mut [f32], p: f32, v: &[u16]) {
        let n = out.len().min(v.len());
        let pv = _mm256_set1_ps(p);
        let mut i = 0;
        while i + 8 <= n {
            let x = _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().add(i) as *const __m128i));
            let o = _mm256_loadu_ps(out.as_ptr().add(i));
            _mm256_storeu_ps(out.as_mut_ptr().add(i), _mm256_fmadd_ps(x, pv, o));
            i += 8;
        }
        while i < n {
            out[i] += p * super::f16_to_f32(v[i]);
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16::f32_to_f16;

    #[test]
    fn simd_matches_scalar() {
        let a: Vec<u16> = (0..256).map(|i| f32_to_f16(((i * 37 % 101) as f32 - 50.0) / 17.0)).collect();
        let b: Vec<u16> = (0..256).map(|i| f32_to_f16(((i * 53 % 89) as f32 - 44.0) / 13.0)).collect();
        let (x, y) = (dot_f16(&a, &b), dot_f16_scalar(&a, &b));
        assert!((x - y).abs() <= 1e-4 * y.abs().max(1.0), "{x} vs {y}");
        let mut o1 = vec![0.5f32; 256];
        let mut o2 = o1.clone();
        axpy_f16(&mut o1, 0.37, &a);
        axpy_f16_scalar(&mut o2, 0.37, &a);
        for (p, q) in o1.iter().zip(&o2) {
            assert!((p - q).abs() < 1e-5);
        }
    }
}
