//! AVX2 (+FMA, F16C) dot kernels for every supported weight type: dispatch, safe wrappers and
//! shared helpers here; `avx2_q.rs` (32-element block types), `avx2_k.rs` (K-quants, IQ4_XS)
//! and `avx2_float.rs` (F32, F16, BF16) hold the kernels.
//!
//! The integer parts follow ggml-cpu/arch/x86/quants.c: unsigned×signed byte products with
//! `_mm256_maddubs_epi16` (sign tricks where both sides are signed), pairs summed with
//! `_mm256_madd_epi16`, block sums converted to f32 and accumulated with FMA. Every integer
//! block sum is exact (no i16 saturation is reachable for activations in [-127, 127], which is
//! what `activation::quantize` produces); only the f32 accumulation order differs from the
//! scalar references in `scalar.rs` / `scalar_k.rs`.
//!
//! Soundness: the `unsafe fn`s need avx2+fma+f16c. They are reachable only through [`dot`]
//! and [`dot_rows`], which check the CPU first, and from `avx512.rs` (whose callers checked
//! a superset).
use super::blocks::*;
use super::avx2_float::*;
use super::avx2_k::*;
use super::avx2_q::*;
use super::avx2_iq::*;
use super::avx2_tq::*;
use super::f16::f16_to_f32;
use super::scalar_k::KVALUES_IQ4NL;
use super::{DotFn, DotRowsFn, GgmlType};
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

/// The AVX2 kernel for `ty`, or `None` (type without a kernel, or a CPU without avx2/fma/f16c).
pub(super) fn dot(ty: GgmlType) -> Option<DotFn> {
    if !has_avx2() {
        return None;
    }
    use GgmlType::*;
    Some(match ty {
        F32 => dot_f32,
        F16 => dot_f16,
        BF16 => dot_bf16,
        Q4_0 => dot_q4_0,
        Q4_1 => dot_q4_1,
        Q5_0 => dot_q5_0,
        Q5_1 => dot_q5_1,
        Q8_0 => dot_q8_0,
        Q2_K => dot_q2_k,
        Q3_K => dot_q3_k,
        Q4_K => dot_q4_k,
        Q5_K => dot_q5_k,
        Q6_K => dot_q6_k,
        IQ4_NL => dot_iq4_nl,
        MXFP4 => dot_mxfp4,
        IQ4_XS => dot_iq4_xs,
        TQ1_0 => dot_tq1_0,
        TQ2_0 => dot_tq2_0,
        IQ2_XXS => dot_iq2_xxs,
        IQ2_XS => dot_iq2_xs,
        IQ2_S => dot_iq2_s,
        IQ3_XXS => dot_iq3_xxs,
        IQ3_S => dot_iq3_s,
        IQ1_S => dot_iq1_s,
        IQ1_M => dot_iq1_m,
        _ => return None,
    })
}

/// The AVX2 multi-row kernel for `ty` (one weight row, several activation rows), or `None`.
pub(super) fn dot_rows(ty: GgmlType) -> Option<DotRowsFn> {
    if !has_avx2() {
        return None;
    }
    use GgmlType::*;
    Some(match ty {
        Q4_0 => rows_q4_0,
        Q4_1 => rows_q4_1,
        Q5_0 => rows_q5_0,
        Q5_1 => rows_q5_1,
        Q8_0 => rows_q8_0,
        Q4_K => rows_q4_k,
        Q6_K => rows_q6_k,
        IQ4_NL => rows_iq4_nl,
        MXFP4 => rows_mxfp4,
        IQ2_XXS => rows_iq2_xxs,
        IQ2_XS => rows_iq2_xs,
        IQ2_S => rows_iq2_s,
        IQ3_XXS => rows_iq3_xxs,
        IQ3_S => rows_iq3_s,
        IQ1_S => rows_iq1_s,
        IQ1_M => rows_iq1_m,
        _ => return None,
    })
}

/// The AVX2 kernels (single- and multi-row) in the order of llama.cpp's repacked rows-of-8
/// kernels for `ty` (`quant::row_chain`), or `None`.
pub(super) fn chain(ty: GgmlType) -> Option<(DotFn, DotRowsFn)> {
    if !has_avx2() {
        return None;
    }
    match ty {
        GgmlType::Q4_0 => Some((dot_q4_0x8, rows_q4_0x8)),
        GgmlType::IQ4_NL => Some((dot_iq4_nlx8, rows_iq4_nlx8)),
        GgmlType::MXFP4 => Some((dot_mxfp4x8, rows_mxfp4x8)),
        _ => None,
    }
}

pub(super) use super::blocks::nblocks;


/// Whole blocks present in `n` elements, in `w`, and in each of `rows` activation rows that
/// start every `stride` bytes of `a` (the last row is the shortest).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_nblocks(
    n: usize,
    bs: usize,
    w: &[u8],
    wts: usize,
    a: &[u8],
    ats: usize,
    stride: usize,
    rows: usize,
) -> usize {
    let nb = (n / bs).min(w.len() / wts);
    match rows.checked_sub(1).map(|last| last.checked_mul(stride)) {
        None => nb,
        Some(None) => 0,
        Some(Some(off)) => nb.min(a.len().saturating_sub(off) / ats),
    }
}

/// Safe wrappers over kernels that take one activation row.
/// SAFETY (of the generated code): handed out only by a `dot` that checked the kernel's CPU
/// features; the kernel reads `nb` blocks of each side, bounded to the slices by `nblocks`.
macro_rules! wrappers {
    ($($name:ident => $kernel:ident, $bs:expr, $wts:expr, $ats:expr;)*) => {$(
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let nb = $crate::quant::avx2::nblocks(n, $bs, w, $wts, a, $ats);
            // SAFETY: see the macro's comment: features checked by the dispatcher, reads bounded by `nb`.
            unsafe { $kernel(nb, w.as_ptr(), a.as_ptr()) }
        }
    )*};
}

/// Safe wrappers over tile kernels (`fn k<const RW: usize, const C: usize>(nb, [w; RW],
/// [a; C]) -> [[f32; C]; RW]`) used with one weight row: a `DotFn` (C = 1) and a `DotRowsFn`
/// (C = 4, then C = 1 for the remainder; every (row, token) sees the same operations for any C).
/// SAFETY (of the generated code): as for `wrappers!`; `rows_nblocks` bounds the reads of
/// every row, and rows past the slice are only formed (wrapping) when `nb` is 0.
macro_rules! row_wrappers {
    ($($dot:ident, $rows:ident => $kernel:ident, $bs:expr, $wts:expr, $ats:expr;)*) => {$(
        fn $dot(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let nb = $crate::quant::avx2::nblocks(n, $bs, w, $wts, a, $ats);
            // SAFETY: see the macro's comment: features checked by the dispatcher, reads bounded by `nb`.
            unsafe { $kernel::<1, 1>(nb, [w.as_ptr()], [a.as_ptr()])[0][0] }
        }
        fn $rows(n: usize, w: &[u8], a: &[u8], stride: usize, out: &mut [f32]) {
            let nb = $crate::quant::avx2::rows_nblocks(n, $bs, w, $wts, a, $ats, stride, out.len());
            let (wp, ap) = (w.as_ptr(), a.as_ptr());
            let row = |r: usize| ap.wrapping_add(r.wrapping_mul(stride));
            let mut chunks = out.chunks_exact_mut(4);
            let mut r = 0;
            for o in &mut chunks {
                // SAFETY: see the macro's comment: rows r..r+4 hold `nb` blocks each.
                o.copy_from_slice(&unsafe { $kernel::<1, 4>(nb, [wp], [row(r), row(r + 1), row(r + 2), row(r + 3)]) }[0]);
                r += 4;
            }
            for o in chunks.into_remainder() {
                // SAFETY: as above, for row r.
                *o = unsafe { $kernel::<1, 1>(nb, [wp], [row(r)]) }[0][0];
                r += 1;
            }
        }
    )*};
}
pub(super) use row_wrappers;

/// Safe entry points of multi-row kernels `unsafe fn(nb, w, a, stride, out)` over QK_K blocks.
macro_rules! stride_rows {
    ($($rows:ident => $kernel:ident, $wts:expr;)*) => {$(
        fn $rows(n: usize, w: &[u8], a: &[u8], stride: usize, out: &mut [f32]) {
            let nb = rows_nblocks(n, QK_K, w, $wts, a, Q8_K_BYTES, stride, out.len());
            // SAFETY: features checked by the dispatcher; `rows_nblocks` bounds the reads of
            // every one of the `out.len()` rows `stride` bytes apart.
            unsafe { $kernel(nb, w.as_ptr(), a.as_ptr(), stride, out) }
        }
    )*};
}

stride_rows! {
    rows_iq2_xxs => iq2_xxs_rows, 66;
    rows_iq2_xxs_tiled => iq2_xxs_rows_tiled, 66;
    rows_iq2_xs => iq2_xs_rows, 74;
    rows_iq2_xs_tiled => iq2_xs_rows_tiled, 74;
    rows_iq2_s => iq2_s_rows, 82;
    rows_iq2_s_tiled => iq2_s_rows_tiled, 82;
    rows_iq3_xxs => iq3_xxs_rows, 98;
    rows_iq3_xxs_tiled => iq3_xxs_rows_tiled, 98;
    rows_iq3_s => iq3_s_rows, 110;
    rows_iq3_s_tiled => iq3_s_rows_tiled, 110;
    rows_iq1_s => iq1_s_rows, 50;
    rows_iq1_s_tiled => iq1_s_rows_tiled, 50;
    rows_iq1_m => iq1_m_rows, 56;
    rows_iq1_m_tiled => iq1_m_rows_tiled, 56;
}

/// The multi-row kernels in llama.cpp's batch order (see `quant::batch_tokens`), or `None`.
pub(super) fn dot_batch_rows(ty: GgmlType) -> Option<DotRowsFn> {
    if !has_avx2() {
        return None;
    }
    use GgmlType::*;
    Some(match ty {
        IQ2_XXS => rows_iq2_xxs_tiled,
        IQ2_XS => rows_iq2_xs_tiled,
        IQ2_S => rows_iq2_s_tiled,
        IQ3_XXS => rows_iq3_xxs_tiled,
        IQ3_S => rows_iq3_s_tiled,
        IQ1_S => rows_iq1_s_tiled,
        IQ1_M => rows_iq1_m_tiled,
        _ => return None,
    })
}

wrappers! {
    dot_f32 => f32_f32, 1, 4, 4;
    dot_f16 => f16_f16, 1, 2, 2;
    dot_bf16 => bf16_bf16, 1, 2, 2;
    dot_f32_tiny => f32_f32_tiny, 1, 4, 4;
    dot_f16_tiny => f16_f16_tiny, 1, 2, 2;
    dot_q2_k => q2_k_gemv, QK_K, Q2_K_BYTES, Q8_K_BYTES;
    dot_q2_k_gemm => q2_k_gemm, QK_K, Q2_K_BYTES, Q8_K_BYTES;
    dot_q3_k => q3_k_vec, QK_K, Q3_K_BYTES, Q8_K_BYTES;
    dot_q3_k_tiled => q3_k_tiled, QK_K, Q3_K_BYTES, Q8_K_BYTES;
    dot_q5_k => q5_k_vec, QK_K, Q5_K_BYTES, Q8_K_BYTES;
    dot_q5_k_tiled => q5_k_tiled, QK_K, Q5_K_BYTES, Q8_K_BYTES;
    dot_iq4_xs => iq4_xs_vec, QK_K, IQ4_XS_BYTES, Q8_K_BYTES;
    dot_iq4_xs_tiled => iq4_xs_tiled, QK_K, IQ4_XS_BYTES, Q8_K_BYTES;
    dot_tq1_0 => tq1_0_q8_k, QK_K, TQ1_0_BYTES, Q8_K_BYTES;
    dot_tq2_0 => tq2_0_q8_k, QK_K, TQ2_0_BYTES, Q8_K_BYTES;
    dot_iq2_xxs => iq2_xxs_vec, QK_K, 66, Q8_K_BYTES;
    dot_iq2_xxs_tiled => iq2_xxs_tiled, QK_K, 66, Q8_K_BYTES;
    dot_iq2_xs => iq2_xs_vec, QK_K, 74, Q8_K_BYTES;
    dot_iq2_xs_tiled => iq2_xs_tiled, QK_K, 74, Q8_K_BYTES;
    dot_iq2_s => iq2_s_vec, QK_K, 82, Q8_K_BYTES;
    dot_iq2_s_tiled => iq2_s_tiled, QK_K, 82, Q8_K_BYTES;
    dot_iq3_xxs => iq3_xxs_vec, QK_K, 98, Q8_K_BYTES;
    dot_iq3_xxs_tiled => iq3_xxs_tiled, QK_K, 98, Q8_K_BYTES;
    dot_iq3_s => iq3_s_vec, QK_K, 110, Q8_K_BYTES;
    dot_iq3_s_tiled => iq3_s_tiled, QK_K, 110, Q8_K_BYTES;
    dot_iq1_s => iq1_s_vec, QK_K, 50, Q8_K_BYTES;
    dot_iq1_s_tiled => iq1_s_tiled, QK_K, 50, Q8_K_BYTES;
    dot_iq1_m => iq1_m_vec, QK_K, 56, Q8_K_BYTES;
    dot_iq1_m_tiled => iq1_m_tiled, QK_K, 56, Q8_K_BYTES;
}

row_wrappers! {
    dot_q4_0x8, rows_q4_0x8 => q4_0x8_q8_0, 32, 18, 34;
    dot_iq4_nlx8, rows_iq4_nlx8 => iq4_nlx8_q8_0, 32, 18, 34;
    dot_q4_0, rows_q4_0 => q4_0_q8_0, 32, 18, 34;
    dot_q4_1, rows_q4_1 => q4_1_q8_1, 32, 20, 36;
    dot_q5_0, rows_q5_0 => q5_0_q8_0, 32, 22, 34;
    dot_q5_1, rows_q5_1 => q5_1_q8_1, 32, 24, 36;
    dot_q8_0, rows_q8_0 => q8_0_q8_0, 32, 34, 34;
    dot_iq4_nl, rows_iq4_nl => iq4_nl_q8_0, 32, 18, 34;
    dot_mxfp4, rows_mxfp4 => mxfp4_q8_0, 32, 17, 34;
    dot_mxfp4x8, rows_mxfp4x8 => mxfp4x8_q8_0, 32, 17, 34;
    dot_q4_k, rows_q4_k => q4_k_gemv, QK_K, Q4_K_BYTES, Q8_K_BYTES;
    dot_q6_k, rows_q6_k => q6_k_vec, QK_K, Q6_K_BYTES, Q8_K_BYTES;
}

// ---------------------------------------------------------------- helpers
// All `#[inline(always)]` so they are compiled inside (and with the features of) the
// `#[target_feature]` kernels that call them. Callers guarantee the CPU features and that
// every pointer is valid for the bytes read.

/// f16 at `p` → f32, exact (same value as F16C / GGML_CPU_FP16_TO_FP32).
///
/// Normal numbers are rebiased in integer registers; zero, subnormals, inf and NaN take the
/// (rare, predictable) `f16_to_f32` path. A lone `vcvtph2ps` is avoided on purpose: LLVM
/// narrows its input to a `vpinsrw` that merges into whatever register is free — often an
/// accumulator — turning every block into one long dependency chain (3x slower Q8_0).
#[inline(always)]
pub(super) unsafe fn fp16(p: *const u8) -> f32 {
    let h = read_unaligned(p as *const u16) as u32;
    let e = h & 0x7c00;
    if e == 0 || e == 0x7c00 {
        return f16_to_f32(h as u16);
    }
    f32::from_bits(((h & 0x8000) << 16) | (((h & 0x7fff) << 13) + (112 << 23)))
}

/// The two f16 at `p` and `q` → f32 with one F16C conversion (both lanes are used, so the
/// input is a full 32-bit `vmovd`, which breaks dependencies).
#[inline(always)]
pub(super) unsafe fn fp16x2(p: *const u8, q: *const u8) -> (f32, f32) {
    let x = read_unaligned(p as *const u16) as u32 | (read_unaligned(q as *const u16) as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(x as i32));
    (_mm_cvtss_f32(v), _mm_cvtss_f32(_mm_movehdup_ps(v)))
}

#[inline(always)]
pub(super) unsafe fn rd_f32(p: *const u8) -> f32 {
    read_unaligned(p as *const f32)
}

#[inline(always)]
pub(super) unsafe fn load256(p: *const u8) -> __m256i {
    _mm256_loadu_si256(p as *const __m256i)
}

#[inline(always)]
pub(super) unsafe fn load128(p: *const u8) -> __m128i {
    _mm_loadu_si128(p as *const __m128i)
}

/// One 64-element group `j` of llama.cpp's repacked Q4_K gemm into its two FMA chains: the
/// group's integer sum `isum` scaled by `d = d_w·d_a`, its min term (lane j of `mins`, from
/// [`k4_mins_dot`]) by `dm = dmin_w·d_a`.
#[inline(always)]
pub(super) unsafe fn q4_k_gemm_step(acc: &mut f32, acc_m: &mut f32, isum: i32, mins: __m128i, j: usize, d: f32, dm: f32) {
    let mj = _mm_cvtsi128_si32(match j {
        0 => mins,
        1 => _mm_srli_si128::<4>(mins),
        2 => _mm_srli_si128::<8>(mins),
        _ => _mm_srli_si128::<12>(mins),
    });
    *acc_m = (mj as f32).mul_add(dm, *acc_m);
    *acc = (isum as f32).mul_add(d, *acc);
}

/// Σ of the 8 i32 lanes (exact).
#[inline(always)]
pub(super) unsafe fn hsum_i32x8(v: __m256i) -> i32 {
    hsum_i32x4(_mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v)))
}

/// Σ of the 4 i32 lanes (exact).
#[inline(always)]
pub(super) unsafe fn hsum_i32x4(v: __m128i) -> i32 {
    let s = _mm_add_epi32(v, _mm_shuffle_epi32::<0b01_00_11_10>(v));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s)))
}

/// ggml `hsum_float_8`.
#[inline(always)]
pub(super) unsafe fn hsum_f32x8(x: __m256) -> f32 {
    let mut r = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    _mm_cvtss_f32(r)
}

/// ggml `bytes_from_nibbles_32`: 16 bytes at `p` → 32 bytes, low nibbles (elements 0..16)
/// in the low lane, high nibbles (elements 16..32) in the high lane.
#[inline(always)]
pub(super) unsafe fn nibbles32(p: *const u8) -> __m256i {
    let t = load128(p);
    let b = _mm256_set_m128i(_mm_srli_epi16::<4>(t), t);
    _mm256_and_si256(b, _mm256_set1_epi8(0x0f))
}

/// ggml `bytes_from_bits_32`: the 32 bits at `p` → 32 bytes, 0xFF where the bit is set.
#[inline(always)]
pub(super) unsafe fn bits32(p: *const u8) -> __m256i {
    let x = read_unaligned(p as *const u32);
    let shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    let bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(x as i32), shuf);
    let bytes = _mm256_or_si256(bytes, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
    _mm256_cmpeq_epi8(bytes, _mm256_set1_epi64x(-1))
}

/// Σ of unsigned×signed byte products, 4 bytes per i32 lane (maddubs + madd by ones).
#[inline(always)]
pub(super) unsafe fn mul_us8(ax: __m256i, sy: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1))
}

/// i16 lanes 0..8 = `s[k]`, lanes 8..16 = `s[k+1]` (sign-extended) from 16 i8 scales.
#[inline(always)]
pub(super) unsafe fn scale_pair(s: __m128i, k: usize) -> __m256i {
    let lo = 0x0101010101010101i64.wrapping_mul(k as i64);
    let hi = 0x0101010101010101i64.wrapping_mul(k as i64 + 1);
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(s, _mm_set_epi64x(hi, lo)))
}

/// Broadcast i16 element `k` (0..8) of each 128-bit lane of `s` to all 16 lanes.
#[inline(always)]
pub(super) unsafe fn bcast_i16(s: __m256i, k: usize) -> __m256i {
    let pair = ((2 * k) as i16) | (((2 * k + 1) as i16) << 8);
    _mm256_shuffle_epi8(s, _mm256_set1_epi16(pair))
}

/// `v >> (2*s)` on 16-bit lanes, `s` in 0..4 (constant after unrolling).
#[inline(always)]
pub(super) unsafe fn shr2s(v: __m256i, s: usize) -> __m256i {
    match s {
        0 => v,
        1 => _mm256_srli_epi16::<2>(v),
        2 => _mm256_srli_epi16::<4>(v),
        _ => _mm256_srli_epi16::<6>(v),
    }
}

/// The 12 packed 6-bit (scale, min) bytes of Q4_K / Q5_K → 16 bytes: scales[0..8], mins[0..8]
/// (the `utmp` shuffle of ggml's kernels; same values as `scalar::scale_min_k4`), in vector
/// lanes (no inserts from general registers: those compete for the shuffle port the
/// single-token loop is bound by). Reads 16 bytes at `p` (the 12 and 4 that follow in the block).
#[inline(always)]
pub(super) unsafe fn k4_scales_mins(p: *const u8) -> __m128i {
    // u32 lanes [u0, u1, u2, _]: t0 = u0 & 0x3f.., t2 = u1 & 0x3f..,
    // t1 = (u2 & 0x0f..) | ((u0 >> 6) & 0x03..) << 4, t3 = ((u2 >> 4) & 0x0f..) | ((u1 >> 6) & 0x03..) << 4
    let x = load128(p);
    let a = _mm_and_si128(x, _mm_set1_epi32(0x3f3f3f3f)); // [t0, t2, ..]
    let b = _mm_slli_epi32::<4>(_mm_and_si128(_mm_srli_epi32::<6>(x), _mm_set1_epi32(0x03030303))); // [hi0, hi1, ..]
    let c = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32::<0xAA>(x), _mm_set_epi32(4, 0, 4, 0)), _mm_set1_epi32(0x0f0f0f0f));
    _mm_unpacklo_epi32(a, _mm_or_si128(c, b)) // [t0, t1, t2, t3]
}

/// `Σ_j mins[j] · (bsums[2j] + bsums[2j+1])` as 4 i32 lanes, for Q4_K / Q5_K.
/// `sm` from `k4_scales_mins`, `bsums` points at the 16 i16 bsums of a Q8_K block.
#[inline(always)]
pub(super) unsafe fn k4_mins_dot(sm: __m128i, bsums: *const u8) -> __m128i {
    let bs = load256(bsums);
    let q8s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256::<1>(bs));
    _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_srli_si128::<8>(sm)), q8s)
}

/// The 16 Q3_K scales (minus 32) as i8 lanes (ggml's kmask1/kmask2 unpacking).
#[inline(always)]
pub(super) unsafe fn q3_k_scales(p: *const u8) -> __m128i {
    const KMASK1: u32 = 0x03030303;
    const KMASK2: u32 = 0x0f0f0f0f;
    let a0 = read_unaligned(p as *const u32);
    let a1 = read_unaligned(p.add(4) as *const u32);
    let a2 = read_unaligned(p.add(8) as *const u32);
    let s = _mm_set_epi32(
        (((a1 >> 4) & KMASK2) | (((a2 >> 6) & KMASK1) << 4)) as i32,
        (((a0 >> 4) & KMASK2) | (((a2 >> 4) & KMASK1) << 4)) as i32,
        ((a1 & KMASK2) | (((a2 >> 2) & KMASK1) << 4)) as i32,
        ((a0 & KMASK2) | ((a2 & KMASK1) << 4)) as i32,
    );
    _mm_sub_epi8(s, _mm_set1_epi8(32))
}

/// 16 IQ4 codes at `p` → 32 signed codebook values (low nibbles, then high nibbles).
#[inline(always)]
pub(super) unsafe fn iq4_values(p: *const u8) -> __m256i {
    nl4_values(p, &KVALUES_IQ4NL)
}

/// 16 4-bit codes at `p` → 32 signed values of `table` (low nibbles, then high nibbles).
#[inline(always)]
pub(super) unsafe fn nl4_values(p: *const u8, table: &[i8; 16]) -> __m256i {
    let values = load128(table.as_ptr() as *const u8);
    let m4 = _mm_set1_epi8(0x0f);
    let bits = load128(p);
    _mm256_set_m128i(
        _mm_shuffle_epi8(values, _mm_and_si128(_mm_srli_epi16::<4>(bits), m4)),
        _mm_shuffle_epi8(values, _mm_and_si128(bits, m4)),
    )
}

/// The AVX2 kernel in llama.cpp's batch order for `ty` (F32, F16: tinyBLAS; Q2_K: its repacked
/// gemm; Q3_K, Q5_K, IQ4_XS: the tiled K-quant kernel), or `None`.
pub(super) fn dot_batch(ty: GgmlType) -> Option<DotFn> {
    if !has_avx2() {
        return None;
    }
    match ty {
        GgmlType::F32 => Some(dot_f32_tiny),
        GgmlType::F16 => Some(dot_f16_tiny),
        GgmlType::Q2_K => Some(dot_q2_k_gemm),
        GgmlType::Q3_K => Some(dot_q3_k_tiled),
        GgmlType::Q5_K => Some(dot_q5_k_tiled),
        GgmlType::IQ4_XS => Some(dot_iq4_xs_tiled),
        GgmlType::IQ2_XXS => Some(dot_iq2_xxs_tiled),
        GgmlType::IQ2_XS => Some(dot_iq2_xs_tiled),
        GgmlType::IQ2_S => Some(dot_iq2_s_tiled),
        GgmlType::IQ3_XXS => Some(dot_iq3_xxs_tiled),
        GgmlType::IQ3_S => Some(dot_iq3_s_tiled),
        GgmlType::IQ1_S => Some(dot_iq1_s_tiled),
        GgmlType::IQ1_M => Some(dot_iq1_m_tiled),
        _ => None,
    }
}
