//! AVX-512 dot kernels.
//!
//! - Q4_K, Q6_K: 512-bit kernels (64 elements per register), in two builds: plain
//!   (`maddubs` + `madd`) and VNNI (`vpdpwssd`) when `avx512vnni` is present.
//! - Q8_0, Q5_0, Q4_0, Q4_1, Q5_1, IQ4_NL (32-element blocks): the AVX2 block bodies
//!   (`avx2_q.rs`) with 256-bit `vpdpbusd` (avx512vnni+vl). Without VNNI these types use the
//!   AVX2 kernels: a 512-bit two-blocks-per-register build measured slower than AVX2 here (the
//!   per-block f16 scales and lane shuffles cost more than the halved integer work saves).
//! - Every other type uses its AVX2 kernel under this ISA (see `dispatch.rs`).
//!
//! All kernels are generic over `RW` weight rows × `C` activation rows (`DotRowsFn`, tiles);
//! each (row, token) sees the same operations for any `RW`, `C`. Integer block sums are exact; only the f32
//! accumulation order differs from `scalar.rs`.
//!
//! Soundness: kernels need avx512f+bw+vl (+avx2, fma, f16c; +avx512vnni for the VNNI
//! builds). They are reachable only through [`dot`] / [`dot_rows`], which check the CPU first.
use super::blocks::*;
use super::avx2::{fp16, fp16x2, hsum_f32x8, k4_mins_dot, k4_scales_mins, load128, load256, rd_f32, row_wrappers};
use super::avx2_q::{blocks32, BIQ4_NL, BMXFP4, BQ4_0, BQ4_1, BQ5_0, BQ5_1, BQ8_0};
use super::avx512_gemv::{q4_k_gemv1, q4_k_gemv4};
use super::tile::{drive, Tile, TileFn, TileKernel};
use super::{DotFn, DotRowsFn, GgmlType};
use core::arch::x86_64::*;

pub(super) fn has_avx512() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// Whether the CPU has AVX-512 VNNI (used by the kernels `dot` hands out when it does).
pub fn has_vnni() -> bool {
    has_avx512() && is_x86_feature_detected!("avx512vnni")
}

/// `(DotFn, DotRowsFn)` of the AVX-512 kernel for `ty` (VNNI build when available), or `None`
/// (no kernel for the type on this CPU: the caller falls back to AVX2).
fn kernels(ty: GgmlType) -> Option<(DotFn, DotRowsFn)> {
    if !has_avx512() {
        return None;
    }
    let vnni = is_x86_feature_detected!("avx512vnni");
    use GgmlType::*;
    Some(match (ty, vnni) {
        (Q4_K, false) => (dot_q4_k, rows_q4_k),
        (Q4_K, true) => (dot_q4_k_vnni, rows_q4_k_vnni),
        (Q6_K, false) => (dot_q6_k, rows_q6_k),
        (Q6_K, true) => (dot_q6_k_vnni, rows_q6_k_vnni),
        (Q8_0, true) => (dot_q8_0_vnni, rows_q8_0_vnni),
        (Q5_0, true) => (dot_q5_0_vnni, rows_q5_0_vnni),
        (Q4_0, true) => (dot_q4_0_vnni, rows_q4_0_vnni),
        (Q4_1, true) => (dot_q4_1_vnni, rows_q4_1_vnni),
        (Q5_1, true) => (dot_q5_1_vnni, rows_q5_1_vnni),
        (IQ4_NL, true) => (dot_iq4_nl_vnni, rows_iq4_nl_vnni),
        (MXFP4, true) => (dot_mxfp4_vnni, rows_mxfp4_vnni),
        _ => return None,
    })
}

/// The AVX-512 kernel for `ty`, or `None` (use AVX2).
pub(super) fn dot(ty: GgmlType) -> Option<DotFn> {
    kernels(ty).map(|k| k.0)
}

/// The AVX-512 multi-row kernel for `ty` (the twin of [`dot`]'s), or `None`.
pub(super) fn dot_rows(ty: GgmlType) -> Option<DotRowsFn> {
    kernels(ty).map(|k| k.1)
}

/// Every AVX-512 build for `ty` the CPU can run, named, as (single-row, multi-row) pairs
/// (tests exercise the plain builds even on VNNI machines, where `dot` never hands them out).
#[cfg(test)]
pub(super) fn variants(ty: GgmlType) -> Vec<(&'static str, DotFn, DotRowsFn)> {
    let mut v: Vec<(&'static str, DotFn, DotRowsFn)> = Vec::new();
    if !has_avx512() {
        return v;
    }
    match ty {
        GgmlType::Q4_K => v.push(("avx512-plain", dot_q4_k, rows_q4_k)),
        GgmlType::Q6_K => v.push(("avx512-plain", dot_q6_k, rows_q6_k)),
        _ => {}
    }
    if let (true, Some((d, r))) = (has_vnni(), kernels(ty)) {
        v.push(("avx512-vnni", d, r));
    }
    v
}

// ---------------------------------------------------------------- entry points

// 256-bit VNNI builds of the AVX2 32-element block kernels.
macro_rules! vnni32 {
    ($($kernel:ident => $blk:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        unsafe fn $kernel<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            blocks32::<$blk, true, RW, C>(nb, w, a)
        }
    )*};
}

vnni32! {
    k_q8_0_vnni => BQ8_0;
    k_q5_0_vnni => BQ5_0;
    k_q4_0_vnni => BQ4_0;
    k_q4_1_vnni => BQ4_1;
    k_q5_1_vnni => BQ5_1;
    k_iq4_nl_vnni => BIQ4_NL;
    k_mxfp4_vnni => BMXFP4;
}

// 512-bit K-quant kernels: one generic `#[inline(always)]` body per type, instantiated with
// and without VNNI inside functions that enable the features.
macro_rules! k512 {
    ($($body:ident, $batch:expr => $plain:ident / $vnni:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
        unsafe fn $plain<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            $body::<false, { $batch }, RW, C>(nb, w, a)
        }
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        unsafe fn $vnni<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            $body::<true, { $batch }, RW, C>(nb, w, a)
        }
    )*};
}

// Q4_K in both of llama.cpp's orders (gemv, gemm); Q6_K in both of its orders: the one-token
// order (ggml's AVX2 `vec_dot`, 8 f32 lanes) and the tiled (batch) one.
k512! {
    q4_k_body, false => k_q4_k / k_q4_k_vnni;
    q4_k_gemm_body, true => k_q4_k_gemm / k_q4_k_gemm_vnni;
    q6_k_body, false => k_q6_k / k_q6_k_vnni;
    q6_k_body, true => k_q6_k_tiled / k_q6_k_tiled_vnni;
}

// Safe wrappers (SAFETY: handed out only by `kernels`, after the features of each build were
// detected; reads bounded by `nblocks` / `rows_nblocks`, see `avx2::row_wrappers!`).
row_wrappers! {
    dot_q8_0_vnni, rows_q8_0_vnni => k_q8_0_vnni, 32, 34, 34;
    dot_q5_0_vnni, rows_q5_0_vnni => k_q5_0_vnni, 32, 22, 34;
    dot_q4_0_vnni, rows_q4_0_vnni => k_q4_0_vnni, 32, 18, 34;
    dot_q4_1_vnni, rows_q4_1_vnni => k_q4_1_vnni, 32, 20, 36;
    dot_q5_1_vnni, rows_q5_1_vnni => k_q5_1_vnni, 32, 24, 36;
    dot_iq4_nl_vnni, rows_iq4_nl_vnni => k_iq4_nl_vnni, 32, 18, 34;
    dot_mxfp4_vnni, rows_mxfp4_vnni => k_mxfp4_vnni, 32, 17, 34;
    dot_q4_k, rows_q4_k => k_q4_k, QK_K, Q4_K_BYTES, Q8_K_BYTES;
    dot_q4_k_vnni, rows_q4_k_vnni => k_q4_k_vnni, QK_K, Q4_K_BYTES, Q8_K_BYTES;
    dot_q6_k, rows_q6_k => k_q6_k, QK_K, Q6_K_BYTES, Q8_K_BYTES;
    dot_q6_k_vnni, rows_q6_k_vnni => k_q6_k_vnni, QK_K, Q6_K_BYTES, Q8_K_BYTES;
}

// ---------------------------------------------------------------- helpers
// `#[inline(always)]`, no closures: compiled inside the target_feature entry points above.
// With VNNI = true they use avx512vnni instructions, so they are only instantiated from the
// `*_vnni` entry points.

/// acc + Σ pairs of i16 products (madd), per i32 lane.
#[inline(always)]
pub(super) unsafe fn wdot<const VNNI: bool>(acc: __m512i, x: __m512i, y: __m512i) -> __m512i {
    if VNNI {
        _mm512_dpwssd_epi32(acc, x, y)
    } else {
        _mm512_add_epi32(acc, _mm512_madd_epi16(x, y))
    }
}

/// Single-token calls (decode): prefetch the lines of a `len`-byte block `pf_dist()` ahead of
/// `p` (a hint: never faults, the address is not dereferenced).
#[inline(always)]
pub(super) unsafe fn prefetch_ahead(p: *const u8, len: usize) {
    let d = super::tile::pf_dist();
    if d > 0 {
        let mut off = 0;
        while off < len {
            _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(d + off) as *const i8);
            off += 64;
        }
    }
}

/// Two 256-bit halves → one 512-bit register (`lo` in bits 0..256).
#[inline(always)]
pub(super) unsafe fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

#[inline(always)]
unsafe fn load512(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const _)
}

// ---------------------------------------------------------------- Q4_K · Q8_K
// block_q4_K { f16 d; f16 dmin; u8 scales[12] @4; u8 qs[128] @16; }
// block_q8_K { f32 d; i8 qs[256] @4; i16 bsums[16] @260; }
// 64-element group j: [low nibbles of qs[32j..], high nibbles] against q8[64j..64j+64];
// i16 lanes 0..16 take scale 2j, lanes 16..32 scale 2j+1.

/// Groups 2k and 2k+1 of a Q4_K block at `wb` from one 64-byte load: each group's 64 4-bit
/// values (u8: its low nibbles, then its high ones) and the i16 scale of each lane (`sc16`:
/// the block's 8 scales as i16).
#[inline(always)]
unsafe fn q4_k_group_pair(wb: *const u8, k: usize, sc16: __m512i) -> [(__m512i, __m512i); 2] {
    let m4 = _mm512_set1_epi8(0x0f);
    let bits = load512(wb.add(16 + 64 * k));
    let (lo, hi) = (_mm512_and_si512(bits, m4), _mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4));
    [(_mm512_shuffle_i64x2::<0x44>(lo, hi), q4_k_scale(2 * k, sc16)), (_mm512_shuffle_i64x2::<0xEE>(lo, hi), q4_k_scale(2 * k + 1, sc16))]
}

/// The 128 values of groups 2k and 2k+1 as they lie in one 64-byte load: the low nibbles
/// (elements 0..32 and 64..96 of the 128: sub-blocks 4k and 4k+2) and the high ones (32..64,
/// 96..128: sub-blocks 4k+1, 4k+3), each with its i16 scale per lane.
#[inline(always)]
pub(super) unsafe fn q4_k_nibbles(wb: *const u8, k: usize, sc16: __m512i) -> [(__m512i, __m512i); 2] {
    let m4 = _mm512_set1_epi8(0x0f);
    let bits = load512(wb.add(16 + 64 * k));
    [
        (_mm512_and_si512(bits, m4), q4_k_scales(4 * k, 4 * k + 2, sc16)),
        (_mm512_and_si512(_mm512_srli_epi16::<4>(bits), m4), q4_k_scales(4 * k + 1, 4 * k + 3, sc16)),
    ]
}

/// Scale `a` in i16 lanes 0..16 and scale `b` in lanes 16..32.
#[inline(always)]
unsafe fn q4_k_scales(a: usize, b: usize, sc16: __m512i) -> __m512i {
    let idx = _mm512_mask_blend_epi16(0xFFFF_0000, _mm512_set1_epi16(a as i16), _mm512_set1_epi16(b as i16));
    _mm512_permutexvar_epi16(idx, sc16)
}

/// Group j's i16 scale per lane: scale 2j in lanes 0..16, 2j+1 in lanes 16..32.
#[inline(always)]
unsafe fn q4_k_scale(j: usize, sc16: __m512i) -> __m512i {
    q4_k_scales(2 * j, 2 * j + 1, sc16)
}

#[inline(always)]
unsafe fn q4_k_body<const VNNI: bool, const BATCH: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    // the gemv order (llama.cpp's one-token kernel); the gemm order is `q4_k_gemm_body`.
    // Per row and token, lane 0 of `acc` is the integer sums' chain and lane 1 the min terms'
    // (`fma(f32(Σ), d·d_a, chain)` per lane: the scalar reference's operations)
    let _ = BATCH;
    if C == 1 {
        // one token: `avx512_gemv.rs` (four rows at once, or one)
        let mut out = [[0f32; C]; RW];
        if RW == 4 {
            for (o, x) in out.iter_mut().zip(q4_k_gemv4::<VNNI>(nb, [w[0], w[1], w[2], w[3]], a[0])) {
                o[0] = x;
            }
        } else {
            for (o, &wr) in out.iter_mut().zip(&w) {
                o[0] = q4_k_gemv1::<VNNI>(nb, wr, a[0]);
            }
        }
        return out;
    }
    let mut acc = [[_mm_setzero_ps(); C]; RW];
    for i in 0..nb {
        for r in 0..RW {
            let wb = w[r].add(144 * i);
            let dmw = _mm_cvtph_ps(_mm_cvtsi32_si128(core::ptr::read_unaligned(wb as *const i32))); // [d, dmin]
            let sm = k4_scales_mins(wb.add(4));
            let sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm)); // i16 scales 0..8
            let mut sumi = [_mm512_setzero_si512(); C];
            for k in 0..2 {
                for (j, (q4, s)) in q4_k_group_pair(wb, k, sc16).into_iter().enumerate() {
                    for t in 0..C {
                        let y = a[t].add(Q8_K_BYTES * i + Q8_K_QS + 64 * (2 * k + j));
                        sumi[t] = wdot::<VNNI>(sumi[t], _mm512_maddubs_epi16(q4, load512(y)), s);
                    }
                }
            }
            // each min twice, against the 16 bsums: Σ_j min_j · (bsums[2j] + bsums[2j+1]) in 8 lanes
            let mins16 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
            for t in 0..C {
                let ab = a[t].add(Q8_K_BYTES * i);
                let m8 = _mm256_madd_epi16(mins16, load256(ab.add(Q8_K_BSUMS)));
                // [Σ sumi, Σ mins, ..] from the 16 + 8 lanes (integer sums: exact in any order)
                let s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[t]), _mm512_extracti64x4_epi64::<1>(sumi[t]));
                let h = _mm256_hadd_epi32(s8, m8); // per half: [s, s, m, m]
                let x = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
                let sums = _mm_cvtepi32_ps(_mm_hadd_epi32(x, x));
                acc[r][t] = _mm_fmadd_ps(sums, _mm_mul_ps(dmw, _mm_set1_ps(rd_f32(ab))), acc[r][t]);
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            let v = acc[r][t];
            out[r][t] = _mm_cvtss_f32(v) - _mm_cvtss_f32(_mm_movehdup_ps(v));
        }
    }
    out
}

/// Lane t: Σ of the 16 i32 lanes of `x[t]` for t < `x.len()` (≤ 8), 0 for the rest (exact).
#[inline(always)]
unsafe fn hsum_i32x16_lanes(x: &[__m512i]) -> __m256i {
    // (loops, not closures: a closure does not inherit the caller's target features)
    let mut y = [_mm256_setzero_si256(); 8];
    for (t, &v) in x.iter().enumerate().take(8) {
        y[t] = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v));
    }
    // within 128-bit halves: [Σ0..3 of y0, y1, y2, y3 | Σ4..7 of y0..y3], then y4..y7
    let a = _mm256_hadd_epi32(_mm256_hadd_epi32(y[0], y[1]), _mm256_hadd_epi32(y[2], y[3]));
    let b = _mm256_hadd_epi32(_mm256_hadd_epi32(y[4], y[5]), _mm256_hadd_epi32(y[6], y[7]));
    _mm256_add_epi32(_mm256_permute2x128_si256::<0x20>(a, b), _mm256_permute2x128_si256::<0x31>(a, b))
}

/// Q4_K in the order of llama.cpp's repacked gemm ([`scalar::dot_q4_k_q8_k_gemm`]): per
/// 64-element group j, `fma(f32(Σ), d_w·d_a, acc)` and `fma(f32(min term), dmin_w·d_a, acc_m)`,
/// the chains of up to 8 tokens side by side in the lanes of one f32 vector (the same
/// operations per lane as the scalar chain), the group sums of 8 tokens reduced together.
///
/// [`scalar::dot_q4_k_q8_k_gemm`]: super::scalar::dot_q4_k_q8_k_gemm
#[inline(always)]
unsafe fn q4_k_gemm_body<const VNNI: bool, const BATCH: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    const NC: usize = 2;
    const { assert!(C <= 8 * NC, "q4_k_gemm_body: at most 16 tokens") };
    let chunks = C.div_ceil(8);
    let mut acc = [[_mm256_setzero_ps(); NC]; RW];
    let mut acc_m = [[_mm256_setzero_ps(); NC]; RW];
    for i in 0..nb {
        // d_a of each token, 8 per vector (0 past C)
        let mut dyf = [0f32; 8 * NC];
        for (t, d) in dyf.iter_mut().enumerate().take(C) {
            *d = rd_f32(a[t].add(Q8_K_BYTES * i));
        }
        let dy = [_mm256_loadu_ps(dyf.as_ptr()), _mm256_loadu_ps(dyf.as_ptr().add(8))];
        for r in 0..RW {
            let wb = w[r].add(144 * i);
            let (dw, mw) = fp16x2(wb, wb.add(2));
            let sm = k4_scales_mins(wb.add(4));
            let sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm)); // i16 scales 0..8
            for c in 0..chunks {
                let (t0, n) = (8 * c, (C - 8 * c).min(8));
                let dd = _mm256_mul_ps(_mm256_set1_ps(dw), dy[c]);
                let dm = _mm256_mul_ps(_mm256_set1_ps(mw), dy[c]);
                // min terms: lane j per token → one vector per group j, lane t
                let mut mv = [_mm_setzero_si128(); 8];
                for (t, m) in mv.iter_mut().enumerate().take(n) {
                    *m = k4_mins_dot(sm, a[t0 + t].add(Q8_K_BYTES * i + Q8_K_BSUMS));
                }
                let mut z = [_mm256_setzero_si256(); 4];
                for (k, v) in z.iter_mut().enumerate() {
                    *v = _mm256_set_m128i(mv[k + 4], mv[k]);
                }
                let (u0, u1) = (_mm256_unpacklo_epi32(z[0], z[1]), _mm256_unpackhi_epi32(z[0], z[1]));
                let (u2, u3) = (_mm256_unpacklo_epi32(z[2], z[3]), _mm256_unpackhi_epi32(z[2], z[3]));
                let mins = [_mm256_unpacklo_epi64(u0, u2), _mm256_unpackhi_epi64(u0, u2), _mm256_unpacklo_epi64(u1, u3), _mm256_unpackhi_epi64(u1, u3)];
                let groups = [q4_k_group_pair(wb, 0, sc16), q4_k_group_pair(wb, 1, sc16)];
                for (j, &mj) in mins.iter().enumerate() {
                    let (q4, s) = groups[j / 2][j % 2];
                    let mut sumi = [_mm512_setzero_si512(); 8];
                    for (t, v) in sumi.iter_mut().enumerate().take(n) {
                        let p16 = _mm512_maddubs_epi16(q4, load512(a[t0 + t].add(Q8_K_BYTES * i + Q8_K_QS + 64 * j)));
                        *v = wdot::<VNNI>(*v, p16, s);
                    }
                    let isum = _mm256_cvtepi32_ps(hsum_i32x16_lanes(&sumi[..n]));
                    acc[r][c] = _mm256_fmadd_ps(isum, dd, acc[r][c]);
                    acc_m[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mj), dm, acc_m[r][c]);
                }
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for c in 0..chunks {
            let mut v = [0f32; 8];
            _mm256_storeu_ps(v.as_mut_ptr(), _mm256_sub_ps(acc[r][c], acc_m[r][c]));
            for (t, &x) in v.iter().enumerate().take((C - 8 * c).min(8)) {
                out[r][8 * c + t] = x;
            }
        }
    }
    let _ = BATCH;
    out
}

// ---------------------------------------------------------------- Q6_K · Q8_K
// block_q6_K { u8 ql[128]; u8 qh[64] @128; i8 scales[16] @192; f16 d @208; }
// Per 128-element chunk c: ql[64c..64c+64] low nibbles = elements 0..64 of the chunk, high
// nibbles = elements 64..128; qh[32c..32c+32] bit pairs 0,1 / 2,3 / 4,5 / 6,7 per 32 elements.
// Σ sc·(q6-32)·q8 = Σ sc·q6·q8 - 32·Σ_g sc[g]·bsums[g].

static GROUP_IDX: [u16; 32] =
    [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3];

#[inline(always)]
unsafe fn q6_k_body<const VNNI: bool, const BATCH: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    let m4 = _mm512_set1_epi8(0x0f);
    let m3 = _mm512_set1_epi8(3);
    // per-i16 shift counts: low 256 bits / high 256 bits
    let sh01 = join(_mm256_setzero_si256(), _mm256_set1_epi16(2));
    let sh23 = join(_mm256_set1_epi16(4), _mm256_set1_epi16(6));
    let gidx = load512(GROUP_IDX.as_ptr() as *const u8);
    let mut acc = [[0f32; C]; RW];
    // the one-token order: ggml's AVX2 kernel's 8 f32 lanes (`acc8`), fed per superblock by
    // the 16 i32 lanes folded to 8: lanes l and l+8 hold what the AVX2 kernel's lane l sums
    // from its two 32-byte halves (integer sums, exact in any order)
    let mut acc8 = [[_mm256_setzero_ps(); C]; RW];
    for i in 0..nb {
        for r in 0..RW {
            let wb = w[r].add(210 * i);
            if C == 1 && RW == 1 {
                // (several rows of one token walk their rows far apart, `tile::gemv_loop`: the
                // hardware prefetchers follow those streams, and measured faster alone)
                prefetch_ahead(wb, 210);
            }
            let dw = fp16(wb.add(208));
            let sc16 = _mm256_cvtepi8_epi16(load128(wb.add(192)));
            let mut sumi = [_mm512_setzero_si512(); C];
            for t in 0..C {
                let corr = _mm256_madd_epi16(sc16, load256(a[t].add(Q8_K_BYTES * i + Q8_K_BSUMS)));
                let corr = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(corr));
                sumi[t] = _mm512_zextsi256_si512(corr);
            }
            let sc16 = _mm512_castsi256_si512(sc16);
            for c in 0..2 {
                let ql = load512(wb.add(64 * c));
                let qh = _mm512_broadcast_i64x4(load256(wb.add(128 + 32 * c)));
                let h_lo = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m3));
                let h_hi = _mm512_slli_epi16::<4>(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m3));
                let q_lo = _mm512_or_si512(_mm512_and_si512(ql, m4), h_lo);
                let q_hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16::<4>(ql), m4), h_hi);
                let s_lo = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((8 * c) as i16)), sc16);
                let s_hi = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((8 * c + 4) as i16)), sc16);
                for t in 0..C {
                    let y = a[t].add(Q8_K_BYTES * i + Q8_K_QS + 128 * c);
                    sumi[t] = wdot::<VNNI>(sumi[t], _mm512_maddubs_epi16(q_lo, load512(y)), s_lo);
                    sumi[t] = wdot::<VNNI>(sumi[t], _mm512_maddubs_epi16(q_hi, load512(y.add(64))), s_hi);
                }
            }
            for t in 0..C {
                let dy = rd_f32(a[t].add(Q8_K_BYTES * i));
                if BATCH {
                    // llama.cpp's tiled kernel: per superblock fma(f32(Σ) · d_w, d_a, total)
                    acc[r][t] = (_mm512_reduce_add_epi32(sumi[t]) as f32 * dw).mul_add(dy, acc[r][t]);
                } else {
                    let s8 = _mm256_add_epi32(_mm512_castsi512_si256(sumi[t]), _mm512_extracti64x4_epi64::<1>(sumi[t]));
                    acc8[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dw), _mm256_cvtepi32_ps(s8), acc8[r][t]);
                }
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            out[r][t] = if BATCH { acc[r][t] } else { hsum_f32x8(acc8[r][t]) };
        }
    }
    out
}

// ---------------------------------------------------------------- tiles (K-quants)

/// K-quant tile families over the bodies above (standard Q8_K activations: a cache-line aligned
/// repack measured no faster, 40.4 vs 40.4 ns per 2048-long Q4_K dot, 30.1 vs 31.3 for Q6_K).
macro_rules! k_tiles {
    ($($tile:ident, $run:ident => $kernel:ident, $wts:expr, $rg:expr;)*) => {$(
        #[allow(non_camel_case_types)]
        struct $tile;
        impl Tile for $tile {
            const BS: usize = 256;
            const WTS: usize = $wts;
            const SELF_PREFETCH: bool = true;
            fn act_blocks(bytes: usize) -> usize {
                bytes / Q8_K_BYTES
            }
            #[inline(always)]
            unsafe fn run<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
                $kernel::<RW, C>(nb, w, a)
            }
        }
        #[allow(clippy::too_many_arguments)]
        fn $run(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            drive::<$tile, K_ROWS, K_COLS, { $rg }>(n, w, ws, rows, a, as_, cols, out, os)
        }
    )*};
}

/// K-quant register tile: rows × tokens. Measured (`tile_shapes`, 2048-long dots): Q4_K 1 × 8
/// 40.4 ns, 1 × 4 46.4, 2 × 4 44.0; Q6_K 1 × 8 31.3, 1 × 4 35.7.
const K_ROWS: usize = 1;
const K_COLS: usize = 8;
/// Rows per single-token (decode) call: one, or `Q4_K_GEMV_ROWS` for the Q4_K gemv order
/// (`q4_k_gemv4`: the token's loads and the integer reductions shared by four rows).
const K_GEMV_ROWS: usize = 1;
const Q4_K_GEMV_ROWS: usize = 4;
const Q6_K_GEMV_ROWS: usize = 4;

// SAFETY (of the generated code): `run` is reached only through `tile_kernel`, after the CPU
// check of the build it names; `drive` bounds `nb` by every row and token.
k_tiles! {
    TQ4_K, run_q4_k => k_q4_k, 144, Q4_K_GEMV_ROWS;
    TQ4_K_VNNI, run_q4_k_vnni => k_q4_k_vnni, 144, Q4_K_GEMV_ROWS;
    TQ4_K_GEMM, run_q4_k_gemm => k_q4_k_gemm, 144, K_GEMV_ROWS;
    TQ6_K, run_q6_k => k_q6_k, 210, Q6_K_GEMV_ROWS;
    TQ6_K_VNNI, run_q6_k_vnni => k_q6_k_vnni, 210, Q6_K_GEMV_ROWS;
    TQ6_K_TILED, run_q6_k_tiled => k_q6_k_tiled, 210, K_GEMV_ROWS;
    TQ6_K_TILED_VNNI, run_q6_k_tiled_vnni => k_q6_k_tiled_vnni, 210, K_GEMV_ROWS;
}

k_tiles! {
    TQ4_K_GEMM_VNNI, run_q4_k_gemm_vnni => k_q4_k_gemm_vnni, 144, K_GEMV_ROWS;
}

/// The row-wise batch-order VNNI tiles: the packed ones' fallback (rows too far apart for
/// their gathers) and their speed reference in tests.
pub(super) const Q4_K_GEMM_ROWWISE_VNNI: TileFn = run_q4_k_gemm_vnni;
pub(super) const Q6_K_TILED_ROWWISE_VNNI: TileFn = run_q6_k_tiled_vnni;

/// The AVX-512 K-quant tile kernel for `ty` (the twin of [`dot`]'s), or `None`.
pub(super) fn tile_kernel(ty: GgmlType) -> Option<TileKernel> {
    if !has_avx512() {
        return None;
    }
    let vnni = is_x86_feature_detected!("avx512vnni");
    let (run, batch): (TileFn, TileFn) = match (ty, vnni) {
        (GgmlType::Q4_K, false) => (run_q4_k, run_q4_k_gemm),
        (GgmlType::Q4_K, true) => (run_q4_k_vnni, super::avx512_packed::run_q4_k_gemm_packed),
        (GgmlType::Q6_K, false) => (run_q6_k, run_q6_k_tiled),
        (GgmlType::Q6_K, true) => (run_q6_k_vnni, super::avx512_packed::run_q6_k_tiled_packed),
        _ => return None,
    };
    Some(TileKernel { run, act_bytes: |n| GgmlType::Q8_K.row_bytes(n), prep: None, packs: vnni, batch: Some(batch) })
}

/// The plain (non-VNNI) K-quant tiles, for tests on VNNI machines.
#[cfg(test)]
pub(super) fn plain_tile(ty: GgmlType) -> Option<TileFn> {
    if !has_avx512() {
        return None;
    }
    match ty {
        GgmlType::Q4_K => Some(run_q4_k),
        GgmlType::Q6_K => Some(run_q6_k),
        _ => None,
    }
}

/// Q4_K and Q6_K (VNNI) tiles with other register-tile shapes (rows × tokens), for `tile_shapes`.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(super) fn k_shapes() -> Vec<(&'static str, TileFn, TileFn)> {
    macro_rules! shape {
        ($($name:expr => $rw:expr, $c:expr;)*) => {
            vec![$(($name,
                (|n, w, ws, rows, a, as_, cols, out, os| drive::<TQ4_K_VNNI, { $rw }, { $c }, K_GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)) as TileFn,
                (|n, w, ws, rows, a, as_, cols, out, os| drive::<TQ6_K_TILED_VNNI, { $rw }, { $c }, K_GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)) as TileFn,
            )),*]
        };
    }
    shape! {
        "1x4" => 1, 4;
        "1x6" => 1, 6;
        "1x8" => 1, 8;
        "1x12" => 1, 12;
        "2x3" => 2, 3;
        "2x4" => 2, 4;
        "3x3" => 3, 3;
    }
}
