//! IEEE half and bfloat16 conversions (round-to-nearest-even, like F16C / ggml).

/// f16 bits → f32 (exact).
#[inline]
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h as u32) & 0x8000) << 16;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = if exp == 0 {
        if mant == 0 {
            sign
        } else {
            // subnormal: normalise
            let mut e = 0i32;
            let mut m = mant;
            while m & 0x400 == 0 {
                m <<= 1;
                e += 1;
            }
            let m = m & 0x3ff;
            sign | (((127 - 15 + 1 - e) as u32) << 23) | (m << 13)
        }
    } else if exp == 0x1f {
        sign | 0x7f80_0000 | (mant << 13)
    } else {
        sign | ((exp + 127 - 15) << 23) | (mant << 13)
    };
    f32::from_bits(bits)
}

/// f32 → f16 bits, round to nearest even (matches _cvtss_sh with rounding mode 0).
#[inline]
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let mant = x & 0x7f_ffff;
    if exp == 0xff {
        // inf / nan
        return sign | 0x7c00 | if mant != 0 { 0x200 | (mant >> 13) as u16 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign;
        }
        let m = mant | 0x80_0000;
        let shift = (14 - e) as u32;
        let half = 1u32 << (shift - 1);
        let rem = m & ((1u32 << shift) - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && (r & 1) == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (mant >> 13);
    let rem = mant & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && (r & 1) == 1) {
        r += 1; // may carry into the exponent, which is the correct result
    }
    sign | r as u16
}

/// Round an f32 through f16 and back.
#[inline]
pub fn round_f16(f: f32) -> f32 {
    f16_to_f32(f32_to_f16(f))
}

/// [`round_f16`] of every element (x86 with F16C: 8 at a time through `vcvtps2ph` /
/// `vcvtph2ps`, the same round-to-nearest-even).
pub fn round_f16_slice(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: AVX and F16C checked.
        return unsafe { round_f16_f16c(x) };
    }
    x.iter_mut().for_each(|v| *v = round_f16(*v));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx,f16c")]
unsafe fn round_f16_f16c(x: &mut [f32]) {
    use core::arch::x86_64::*;
    let mut c = x.chunks_exact_mut(8);
    for v in &mut c {
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(v.as_ptr()));
        _mm256_storeu_ps(v.as_mut_ptr(), _mm256_cvtph_ps(h));
    }
    c.into_remainder().iter_mut().for_each(|v| *v = round_f16(*v));
}

#[inline]
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 → bf16 bits, round to nearest even (ggml_compute_fp32_to_bf16).
#[inline]
pub fn f32_to_bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16; // quiet nan
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

#[inline]
pub fn read_f16(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

#[cfg(test)]
mod tests {
    /// The vector rounding equals the scalar one on every f16 value, the halfway points
    /// between them, overflow, subnormals, infinities and NaN.
    #[test]
    fn round_f16_slice_equals_round_f16() {
        use super::*;
        let mut x: Vec<f32> = (0..=u16::MAX).map(f16_to_f32).collect();
        let mids: Vec<f32> = (0..0x7bffu16).map(|h| (f16_to_f32(h) + f16_to_f32(h + 1)) / 2.0).collect();
        x.extend(mids.iter().flat_map(|&m| [m, -m, f32::from_bits(m.to_bits() + 1), f32::from_bits(m.to_bits() - 1)]));
        x.extend([65520.0, 65519.99, 1e9, -1e9, 1e-8, -3e-8, 6e-8, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1.0 + 3.0]);
        let mut fast = x.clone();
        round_f16_slice(&mut fast);
        for (i, (&a, &v)) in fast.iter().zip(&x).enumerate() {
            let want = round_f16(v);
            assert!(a.to_bits() == want.to_bits() || (a.is_nan() && want.is_nan()), "x[{i}] = {v:e}: {a:e} vs {want:e}");
        }
    }

    use super::*;

    #[test]
    fn f16_roundtrip_all_values() {
        for h in 0u16..=0xffff {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f32_to_f16(f) & 0x7c00 == 0x7c00);
                continue;
            }
            assert_eq!(f32_to_f16(f), h, "h={h:#x} f={f}");
        }
    }

    #[test]
    fn f16_rounding_ties_to_even() {
        // 1 + 2^-11 is exactly between 1.0 and the next f16; ties go to even (1.0).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(1e-8), 0);
    }

    #[test]
    fn bf16_basic() {
        assert_eq!(bf16_to_f32(f32_to_bf16(1.5)), 1.5);
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3f80);
    }
}
