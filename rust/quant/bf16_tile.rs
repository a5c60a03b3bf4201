//! AVX-512 BF16 tiles for F32 / F16 matmul weights in the fast mode (`quant::prefill_kernel`):
//! the arithmetic of `bf16_dot::dot` (its reference twin), 32 weights per `vdpbf16ps` where the
//! exact tiles (`float_tile.rs`) need two 16-lane FMAs. The activations are rounded to bf16
//! once per token (`prep`); the weights are rounded as they are loaded, once per register tile
//! of 4 rows × 6 tokens (4 × 1 for fewer tokens). Every output element sees the same chain
//! whatever the tile, so a token's result does not depend on the batch.
//!
//! Soundness: every `unsafe fn` needs avx512f+bw+bf16 and f16c, checked by `kernel`.
use super::bf16_dot;
use super::float_tile::{drive, hsum16, tile_4x6, tok4};
use super::tile::{PrepFn, TileFn, TileKernel};
use super::GgmlType;
use std::arch::x86_64::*;

fn has_bf16() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16")
        && is_x86_feature_detected!("f16c")
}

/// The fast mode's tile for `ty` (F32, F16) with rows of `n` elements (a multiple of 32), or
/// `None` (another type or length, no AVX-512 BF16).
pub(super) fn kernel(ty: GgmlType, n: usize) -> Option<TileKernel> {
    if n % 32 != 0 || !has_bf16() {
        return None;
    }
    let (run, prep): (TileFn, PrepFn) = match ty {
        GgmlType::F16 => (run::<true>, prep::<true>),
        GgmlType::F32 => (run::<false>, prep::<false>),
        _ => return None,
    };
    Some(TileKernel { run, act_bytes: |n| 2 * n, prep: Some(prep), packs: false, batch: None })
}

/// `vec_dot_type` row → bf16 row (`bf16_dot::round_row`, 32 elements per conversion).
fn prep<const F16: bool>(n: usize, q: &[u8], out: &mut [u8]) {
    let n = n.min(q.len() / if F16 { 2 } else { 4 }).min(out.len() / 2);
    let whole = n / 32 * 32;
    // SAFETY: the CPU features are checked by `kernel`, which hands `prep` out; `whole`
    // elements of `q` and of `out` are present (bounded above).
    unsafe { prep32::<F16>(whole, q.as_ptr(), out.as_mut_ptr()) };
    bf16_dot::round_row::<F16>(n - whole, &q[whole * if F16 { 2 } else { 4 }..], &mut out[2 * whole..]);
}

#[target_feature(enable = "avx512f,avx512bw,avx512bf16,f16c")]
unsafe fn prep32<const F16: bool>(n: usize, q: *const u8, out: *mut u8) {
    for i in (0..n).step_by(32) {
        _mm512_storeu_si512(out.add(2 * i) as *mut _, ld32::<F16>(q, i));
    }
}

/// Elements i..i+32 of an F16 / F32 row as 32 bf16 (`vcvtne2ps2bf16`: the second operand
/// gives the low half).
#[inline(always)]
unsafe fn ld32<const F16: bool>(p: *const u8, i: usize) -> __m512i {
    let (lo, hi) = if F16 {
        (_mm512_cvtph_ps(_mm256_loadu_si256(p.add(2 * i) as *const __m256i)), _mm512_cvtph_ps(_mm256_loadu_si256(p.add(2 * i + 32) as *const __m256i)))
    } else {
        (_mm512_loadu_ps(p.add(4 * i) as *const f32), _mm512_loadu_ps(p.add(4 * i + 64) as *const f32))
    };
    core::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo))
}

/// Elements i..i+32 of a token's bf16 row.
#[inline(always)]
unsafe fn lda(a: *const u8, i: usize) -> __m512i {
    _mm512_loadu_si512(a.add(2 * i) as *const _)
}

#[inline(always)]
unsafe fn dp(acc: __m512, w: __m512i, x: __m512i) -> __m512 {
    _mm512_dpbf16_ps(acc, core::mem::transmute::<__m512i, __m512bh>(w), core::mem::transmute::<__m512i, __m512bh>(x))
}

/// 4 weight rows × 6 tokens: 24 chains (`float_tile::tile_4x6`).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,f16c")]
unsafe fn tile_4x6<const F16: bool>(n: usize, w: [*const u8; 4], a: [*const u8; 6]) -> [[f32; 6]; 4] {
    tile_4x6!(n, 32, w, a, ld32::<F16>, lda, dp)
}

/// 4 weight rows × 1 token (decode, and the last tokens of a batch).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,f16c")]
unsafe fn tile_4x1<const F16: bool>(n: usize, w: [*const u8; 4], a: [*const u8; 1]) -> [[f32; 1]; 4] {
    let mut c = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i < n {
        for (r, c) in c.iter_mut().enumerate() {
            *c = dp(*c, ld32::<F16>(w[r], i), lda(a[0], i));
        }
        i += 32;
    }
    let mut out = [[0f32; 1]; 4];
    for (o, v) in out.iter_mut().zip(c) {
        o[0] = hsum16(v);
    }
    out
}

/// The tile contract (`tile.rs`) over whole groups of 32 elements (`bf16_dot::dot` stops
/// there too).
#[allow(clippy::too_many_arguments)]
fn run<const F16: bool>(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    let n = n / 32 * 32;
    let el = if F16 { 2 } else { 4 };
    // 4 × 6 tiles over whole groups of 6 tokens, 4 × 1 over the rest (the same chains)
    let six = cols / 6 * 6;
    // SAFETY: `kernel` checked the CPU features; `drive` passes rows with `n` weights and
    // tokens with `n` bf16 values present.
    drive::<4, 6>(n, el, 2, w, ws, rows, a, as_, six, out, os, |wp, ap| unsafe { tile_4x6::<F16>(n, wp, ap) });
    if six < cols {
        let (a, out) = (a.get(six * as_..).unwrap_or(&[]), out.get_mut(six * os..).unwrap_or(&mut []));
        drive::<4, 1>(n, el, 2, w, ws, rows, a, as_, cols - six, out, os, |wp, ap| unsafe { tile_4x1::<F16>(n, wp, ap) });
    }
}
