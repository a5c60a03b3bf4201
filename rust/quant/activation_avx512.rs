//! AVX-512 activation quantizers: the same bytes as the scalar `activation::q8_0` / `q8_1` /
//! `q8_k` (tests: `tests_tile.rs`), 16 floats per instruction.
//!
//! Why identical: the block maximum is a max (order-free); the scale and its inverse are the
//! same scalar f32 expressions; `vcvtps2dq` rounds to nearest-even (the default MXCSR mode,
//! which Rust never changes) like `rint`; values stay within [-127.5, 127.5], where the
//! saturating packs equal the scalar casts; sums are exact integers. Blocks holding a NaN or an
//! infinity, or a subnormal maximum (whose inverse overflows), go through the scalar code (their
//! casts differ: NaN → 0 and ±inf → ±127 in Rust, the indefinite integer in SIMD).
//!
//! Soundness: the `unsafe fn`s need avx512f+bw(+vl); they are reached only through
//! [`quantize_into`], which checks the CPU first.
use super::blocks::*;
use super::activation;
use super::f16::f32_to_f16;
use super::GgmlType;
use core::arch::x86_64::*;

fn has_avx512() -> bool {
    is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vl")
}

/// Quantizes `x` into `out` like `activation::quantize_into` for Q8_0 / Q8_1 / Q8_K; `false`
/// (nothing written) for other types or CPUs without AVX-512.
pub(super) fn quantize_into(ty: GgmlType, x: &[f32], out: &mut [u8]) -> bool {
    if !has_avx512() {
        return false;
    }
    let (bs, ts) = match ty {
        GgmlType::Q8_0 => (32, 34),
        GgmlType::Q8_1 => (32, 36),
        GgmlType::Q8_K => (QK_K, Q8_K_BYTES),
        _ => return false,
    };
    for (xb, ob) in x.chunks_exact(bs).zip(out.chunks_exact_mut(ts)) {
        // SAFETY: CPU checked above; `xb` holds `bs` floats and `ob` `ts` bytes.
        let done = unsafe {
            match ty {
                GgmlType::Q8_0 => q8_0_block(xb.as_ptr(), ob.as_mut_ptr()),
                GgmlType::Q8_1 => q8_1_block(xb.as_ptr(), ob.as_mut_ptr()),
                _ => q8_k_block(xb.as_ptr(), ob.as_mut_ptr()),
            }
        };
        if !done {
            match ty {
                GgmlType::Q8_0 => activation::q8_0(xb, ob),
                GgmlType::Q8_1 => activation::q8_1(xb, ob),
                _ => activation::q8_k(xb, ob),
            }
        }
    }
    true
}

/// |v| lanes, and whether any lane is NaN or ±inf.
#[inline(always)]
unsafe fn abs_finite(v: __m512) -> (__m512, bool) {
    let a = _mm512_abs_ps(v);
    // not finite ⇔ |v| ≥ inf or unordered
    let bad = _mm512_cmp_ps_mask::<_CMP_NLT_UQ>(a, _mm512_set1_ps(f32::INFINITY));
    (a, bad != 0)
}

/// 32 floats at `x` scaled by `id`, rounded (nearest-even), as 32 i8 (saturating pack; the
/// values are within ±127.5 here) and their i32 lanes (for sums).
#[inline(always)]
unsafe fn round32(x: *const f32, id: f32) -> (__m256i, __m512i, __m512i) {
    let s = _mm512_set1_ps(id);
    let i0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x), s));
    let i1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x.add(16)), s));
    let b = _mm256_set_m128i(_mm512_cvtsepi32_epi8(i1), _mm512_cvtsepi32_epi8(i0));
    (b, i0, i1)
}

/// d = amax/127 and id = 127/amax of a 32-value block, or None when the block is not all
/// finite or its maximum is subnormal (127/amax overflows; the casts of ±inf differ).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn block_scale(x: *const f32) -> Option<(f32, f32)> {
    let (a0, bad0) = abs_finite(_mm512_loadu_ps(x));
    let (a1, bad1) = abs_finite(_mm512_loadu_ps(x.add(16)));
    if bad0 || bad1 {
        return None;
    }
    let amax = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    id.is_finite().then_some((amax / 127.0, id))
}

/// One Q8_0 block; `false` (nothing written) when the block is not all finite.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn q8_0_block(x: *const f32, out: *mut u8) -> bool {
    let Some((d, id)) = block_scale(x) else { return false };
    out.cast::<[u8; 2]>().write_unaligned(f32_to_f16(d).to_le_bytes());
    let (b, _, _) = round32(x, id);
    _mm256_storeu_si256(out.add(2) as *mut __m256i, b);
    true
}

/// One Q8_1 block (`s = d · Σq`); `false` when the block is not all finite.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn q8_1_block(x: *const f32, out: *mut u8) -> bool {
    let Some((d, id)) = block_scale(x) else { return false };
    let (b, i0, i1) = round32(x, id);
    let sum = _mm512_reduce_add_epi32(_mm512_add_epi32(i0, i1));
    out.cast::<[u8; 2]>().write_unaligned(f32_to_f16(d).to_le_bytes());
    out.add(2).cast::<[u8; 2]>().write_unaligned(f32_to_f16(d * sum as f32).to_le_bytes());
    _mm256_storeu_si256(out.add(4) as *mut __m256i, b);
    true
}

/// One Q8_K block (`quantize_row_q8_K_ref`); `false` when the block is not all finite.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn q8_k_block(x: *const f32, out: *mut u8) -> bool {
    let mut m = _mm512_setzero_ps();
    for k in 0..16 {
        let (a, bad) = abs_finite(_mm512_loadu_ps(x.add(16 * k)));
        if bad {
            return false;
        }
        m = _mm512_max_ps(m, a);
    }
    let amax = _mm512_reduce_max_ps(m);
    if amax == 0.0 {
        core::ptr::write_bytes(out, 0, Q8_K_BYTES);
        return true;
    }
    // the first element with |v| == amax (the scalar loop keeps the first strict maximum)
    let mut max = 0f32;
    for k in 0..16 {
        let v = _mm512_loadu_ps(x.add(16 * k));
        let hit = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(_mm512_abs_ps(v), _mm512_set1_ps(amax));
        if hit != 0 {
            max = *x.add(16 * k + hit.trailing_zeros() as usize);
            break;
        }
    }
    let iscale = -127.0 / max;
    if !iscale.is_finite() {
        return false;
    }
    let s = _mm512_set1_ps(iscale);
    let lim = _mm512_set1_epi32(127);
    for g in 0..16 {
        let q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x.add(16 * g)), s)), lim);
        _mm_storeu_si128(out.add(4 + 16 * g) as *mut __m128i, _mm512_cvtsepi32_epi8(q));
        let sum = _mm512_reduce_add_epi32(q) as i16;
        out.add(260 + 2 * g).cast::<[u8; 2]>().write_unaligned(sum.to_le_bytes());
    }
    out.cast::<[u8; 4]>().write_unaligned((1.0 / iscale).to_le_bytes());
    true
}
