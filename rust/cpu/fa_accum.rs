//! The accumulator updates of flash attention (`attention_fa.rs`), element by element as
//! ggml-cpu computes them: `y = f16(fma(x, v, y))` / `y = f16(y·s)` on an f16 accumulator,
//! `y = fma(x, v, y)` / `y = y·s` on an f32 one. The AVX2 + F16C + FMA versions do the same
//! operation per element (one rounding each, conversions round to nearest even), eight
//! lanes at a time; the scalar ones are their reference.
use crate::quant::f16::{f16_to_f32, f32_to_f16};

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn simd() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::sync::OnceLock;
        static OK: OnceLock<bool> = OnceLock::new();
        *OK.get_or_init(|| {
            crate::quant::isa() != crate::quant::Isa::Scalar
                && is_x86_feature_detected!("avx2")
                && is_x86_feature_detected!("f16c")
                && is_x86_feature_detected!("fma")
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// y = f16(fma(x, v, y)) over f16 vectors.
pub fn mad_f16(y: &mut [u16], x: &[u16], v: f32) {
    let n = y.len().min(x.len());
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if simd() {
        // SAFETY: AVX2, F16C and FMA were detected above.
        i = unsafe { x86::mad_f16(&mut y[..n], &x[..n], v) };
    }
    for j in i..n {
        y[j] = f32_to_f16(f16_to_f32(x[j]).mul_add(v, f16_to_f32(y[j])));
    }
}

/// y = f16(y·s) over an f16 vector.
pub fn scale_f16(y: &mut [u16], s: f32) {
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if simd() {
        // SAFETY: as `mad_f16`.
        i = unsafe { x86::scale_f16(y, s) };
    }
    for h in &mut y[i..] {
        *h = f32_to_f16(f16_to_f32(*h) * s);
    }
}

/// y = fma(x, v, y) over f32 vectors.
pub fn mad_f32(y: &mut [f32], x: &[f32], v: f32) {
    let n = y.len().min(x.len());
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut i = 0;
    #[cfg(target_arch = "x86_64")]
    if simd() {
        // SAFETY: as `mad_f16`.
        i = unsafe { x86::mad_f32(&mut y[..n], &x[..n], v) };
    }
    for j in i..n {
        y[j] = x[j].mul_add(v, y[j]);
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    /// Returns how many leading elements were done (a multiple of 8).
    #[target_feature(enable = "avx2,f16c,fma")]
    pub unsafe fn mad_f16(y: &mut [u16], x: &[u16], v: f32) -> usize {
        let n = y.len() / 8 * 8;
        let vv = _mm256_set1_ps(v);
        for i in (0..n).step_by(8) {
            // SAFETY: i + 8 <= len of both slices.
            let xs = _mm256_cvtph_ps(_mm_loadu_si128(x.as_ptr().add(i) as *const __m128i));
            let ys = _mm256_cvtph_ps(_mm_loadu_si128(y.as_ptr().add(i) as *const __m128i));
            let r = _mm256_fmadd_ps(xs, vv, ys);
            _mm_storeu_si128(y.as_mut_ptr().add(i) as *mut __m128i, _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r));
        }
        n
    }

    #[target_feature(enable = "avx2,f16c,fma")]
    pub unsafe fn scale_f16(y: &mut [u16], s: f32) -> usize {
        let n = y.len() / 8 * 8;
        let ss = _mm256_set1_ps(s);
        for i in (0..n).step_by(8) {
            let ys = _mm256_cvtph_ps(_mm_loadu_si128(y.as_ptr().add(i) as *const __m128i));
            _mm_storeu_si128(y.as_mut_ptr().add(i) as *mut __m128i, _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_mul_ps(ys, ss)));
        }
        n
    }

    #[target_feature(enable = "avx2,f16c,fma")]
    pub unsafe fn mad_f32(y: &mut [f32], x: &[f32], v: f32) -> usize {
        let n = y.len() / 8 * 8;
        let vv = _mm256_set1_ps(v);
        for i in (0..n).step_by(8) {
            let r = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), vv, _mm256_loadu_ps(y.as_ptr().add(i)));
            _mm256_storeu_ps(y.as_mut_ptr().add(i), r);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn simd_and_scalar_updates_agree_bit_for_bit() {
        let x: Vec<u16> = (0..203).map(|i| f32_to_f16(((i * 29 % 97) as f32 - 48.0) * 0.173)).collect();
        let y0: Vec<u16> = (0..203).map(|i| f32_to_f16(((i * 13 % 61) as f32 - 30.0) * 0.071)).collect();
        let (mut a, mut b) = (y0.clone(), y0.clone());
        mad_f16(&mut a, &x, 0.3141);
        for j in 0..b.len() {
            b[j] = f32_to_f16(f16_to_f32(x[j]).mul_add(0.3141, f16_to_f32(b[j])));
        }
        assert_eq!(a, b);
        scale_f16(&mut a, 0.77);
        b.iter_mut().for_each(|h| *h = f32_to_f16(f16_to_f32(*h) * 0.77));
        assert_eq!(a, b);
        let xf: Vec<f32> = x.iter().map(|&h| f16_to_f32(h)).collect();
        let (mut c, mut d) = (xf.clone(), xf.clone());
        mad_f32(&mut c, &xf, -1.37);
        d.iter_mut().zip(&xf).for_each(|(y, &x)| *y = x.mul_add(-1.37, *y));
        assert_eq!(c, d);
    }
}
