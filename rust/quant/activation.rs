//! Quantization of f32 activations into the formats weights are dotted against.
//! Matches ggml-cpu's x86 paths (AVX2): Q8_0 uses id = 127/amax and round-half-even.
//! The scalar functions here are the reference; `activation_avx512.rs` vectorizes them.
use super::blocks::*;
use super::f16::{f32_to_bf16, f32_to_f16};
use super::GgmlType;

/// Round half to even, as `_mm256_round_ps(_MM_ROUND_NEAREST)` and ggml's `nearest_int`.
/// Inputs here are within [-127.5, 127.5], where adding and subtracting 1.5·2^23 rounds
/// to the nearest integer with ties to even (the default FP rounding mode) in two plain
/// adds, instead of a libm call on targets compiled without SSE4.1.
#[inline]
fn rint(x: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23
    if x.abs() < 4_194_304.0 {
        (x + MAGIC) - MAGIC
    } else {
        x.round_ties_even()
    }
}

/// Quantize `x` (len a multiple of the block size) into `out` (resized to fit).
pub fn quantize(ty: GgmlType, x: &[f32], out: &mut Vec<u8>) {
    out.clear();
    out.resize(ty.row_bytes(x.len()), 0);
    quantize_into(ty, x, out);
}

/// Quantize `x` into `out`, which holds `ty.row_bytes(x.len())` bytes (whole blocks that fit
/// in both are written). Q8_0 / Q8_1 / Q8_K use the AVX-512 quantizers where the CPU has them
/// (same bytes as the scalar functions below, which are their reference).
pub fn quantize_into(ty: GgmlType, x: &[f32], out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if super::activation_avx512::quantize_into(ty, x, out) {
        return;
    }
    match ty {
        GgmlType::Q8_0 => q8_0(x, out),
        GgmlType::Q8_1 => q8_1(x, out),
        GgmlType::Q8_K => q8_k(x, out),
        GgmlType::F16 => {
            #[cfg(target_arch = "x86_64")]
            let done = f16c::narrow(x, out);
            #[cfg(not(target_arch = "x86_64"))]
            let done = 0;
            for (o, &v) in out[2 * done..].chunks_exact_mut(2).zip(&x[done..]) {
                o.copy_from_slice(&f32_to_f16(v).to_le_bytes());
            }
        }
        GgmlType::BF16 => {
            for (o, &v) in out.chunks_exact_mut(2).zip(x) {
                o.copy_from_slice(&f32_to_bf16(v).to_le_bytes());
            }
        }
        _ => {
            for (o, &v) in out.chunks_exact_mut(4).zip(x) {
                o.copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// `block_q8_0 { f16 d; i8 qs[32]; }`
pub fn q8_0(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(32).zip(out.chunks_exact_mut(34)) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        ob[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        for (q, &v) in ob[2..].iter_mut().zip(xb) {
            *q = rint(v * id) as i8 as u8;
        }
    }
}

/// `block_q8_1 { f16 d; f16 s; i8 qs[32]; }` with s = d * sum(qs)
pub fn q8_1(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(32).zip(out.chunks_exact_mut(36)) {
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for (q, &v) in ob[4..].iter_mut().zip(xb) {
            let r = rint(v * id) as i32;
            sum = sum.wrapping_add(r); // non-finite or subnormal-max blocks saturate r; never overflow-panic
            *q = r as i8 as u8;
        }
        ob[0..2].copy_from_slice(&f32_to_f16(d).to_le_bytes());
        ob[2..4].copy_from_slice(&f32_to_f16(d * sum as f32).to_le_bytes());
    }
}

/// `block_q8_K { f32 d; i8 qs[256]; i16 bsums[16]; }` (quantize_row_q8_K_ref)
pub fn q8_k(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(256).zip(out.chunks_exact_mut(Q8_K_BYTES)) {
        let mut amax = 0f32;
        let mut max = 0f32;
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            ob.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        let qs = &mut ob[4..260];
        for (q, &v) in qs.iter_mut().zip(xb) {
            *q = (rint(iscale * v) as i32).min(127) as i8 as u8;
        }
        let mut bsums = [0i16; 16];
        for (j, s) in bsums.iter_mut().enumerate() {
            *s = qs[j * 16..j * 16 + 16].iter().map(|&q| q as i8 as i16).sum();
        }
        ob[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
        for (j, s) in bsums.iter().enumerate() {
            ob[260 + 2 * j..262 + 2 * j].copy_from_slice(&s.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod rint_tests {
    #[test]
    fn magic_rint_is_ties_to_even() {
        for i in -100_000..100_000 {
            let x = i as f32 * 0.00271;
            assert_eq!(super::rint(x), x.round_ties_even(), "{x}");
        }
        for x in [0.5f32, 1.5, 2.5, -0.5, -1.5, 126.5, -127.5] {
            assert_eq!(super::rint(x), x.round_ties_even());
        }
    }
}

/// f32 → f16 eight at a time with F16C (round to nearest even, as `f32_to_f16`).
#[cfg(target_arch = "x86_64")]
mod f16c {
    use std::arch::x86_64::*;

    /// Converts the leading multiple of 8 of `x` into `out`; returns how many it did.
    pub fn narrow(x: &[f32], out: &mut [u8]) -> usize {
        if !(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")) {
            return 0;
        }
        let n = x.len().min(out.len() / 2) / 8 * 8;
        // SAFETY: F16C checked; 8 floats read and 8 halves written per step, within `n`.
        unsafe { run(n, x, out) };
        n
    }

    #[target_feature(enable = "avx2,f16c")]
    unsafe fn run(n: usize, x: &[f32], out: &mut [u8]) {
        let mut i = 0;
        while i < n {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(x.as_ptr().add(i)));
            _mm_storeu_si128(out.as_mut_ptr().add(2 * i) as *mut __m128i, h);
            i += 8;
        }
    }
}


#[cfg(test)]
mod f16_tests {
    use super::*;

    /// The F16C path equals the scalar `f32_to_f16` bit for bit: ties, subnormals,
    /// overflow, signed zeros, and a sweep of random bit patterns (NaNs excluded).
    #[test]
    fn f16c_narrowing_equals_scalar() {
        let mut x: Vec<f32> = vec![0.0, -0.0, 1.0, -1.0, 65504.0, 65520.0, 1e6, -1e6, 6.1e-5, 5.96e-8, 2.98e-8, 1e-10, 1.0009765625, 1.00048828125, 1.000732421875];
        let mut s = 0x9E37_79B9_7F4A_7C15u64;
        while x.len() < 4096 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = f32::from_bits(s as u32);
            if !v.is_nan() {
                x.push(v);
            }
        }
        let mut out = vec![0u8; 2 * x.len()];
        quantize_into(GgmlType::F16, &x, &mut out);
        for (i, &v) in x.iter().enumerate() {
            assert_eq!(u16::from_le_bytes([out[2 * i], out[2 * i + 1]]), f32_to_f16(v), "{v:e}");
        }
    }
}
