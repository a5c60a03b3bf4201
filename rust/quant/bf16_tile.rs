//! AVX-512 BF16 tiles for F32 / F16 matmul weights in the fast mode (`quant::prefill_kernel`):
//! the arithmetic of `bf16_dot::dot` (its reference twin), 32 weights per `vdpbf16ps` where the
//! exact tiles (`float_tile.rs`) need two 16-lane FMAs. The activations are rounded to bf16
//! once per token (`prep`); the weights are rounded as they are loaded, once per register tile
//! of 4 rows × 6 tokens (4 × 1 for fewer tokens). Every output element sees the same chain
//! whatever the tile, so a token's result does not depend on the batch.
//!
//! Soundness: every `unsafe fn` needs avx512f+bw+bf16 and f16c, checked by `kernel`.
use super::bf16_dot;
use super::float_tile::{drive, hsum16};
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

#[inline(always)]
unsafe fn dp(acc: __m512, w: __m512i, a: *const u8, i: usize) -> __m512 {
    let x = _mm512_loadu_si512(a.add(2 * i) as *const _);
    _mm512_dpbf16_ps(acc, core::mem::transmute::<__m512i, __m512bh>(w), core::mem::transmute::<__m512i, __m512bh>(x))
}

/// 4 weight rows × 6 tokens: 24 chains, named accumulators (as `float_tile`'s).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,f16c")]
unsafe fn tile_4x6<const F16: bool>(n: usize, w: [*const u8; 4], a: [*const u8; 6]) -> [[f32; 6]; 4] {
    let z = _mm512_setzero_ps();
    let (mut c00, mut c01, mut c02, mut c03, mut c04, mut c05) = (z, z, z, z, z, z);
    let (mut c10, mut c11, mut c12, mut c13, mut c14, mut c15) = (z, z, z, z, z, z);
    let (mut c20, mut c21, mut c22, mut c23, mut c24, mut c25) = (z, z, z, z, z, z);
    let (mut c30, mut c31, mut c32, mut c33, mut c34, mut c35) = (z, z, z, z, z, z);
    let mut i = 0;
    while i < n {
        let (w0, w1, w2, w3) = (ld32::<F16>(w[0], i), ld32::<F16>(w[1], i), ld32::<F16>(w[2], i), ld32::<F16>(w[3], i));
        macro_rules! tok {
            ($k:expr, $a:ident, $b:ident, $c:ident, $d:ident) => {
                $a = dp($a, w0, a[$k], i);
                $b = dp($b, w1, a[$k], i);
                $c = dp($c, w2, a[$k], i);
                $d = dp($d, w3, a[$k], i);
            };
        }
        tok!(0, c00, c10, c20, c30);
        tok!(1, c01, c11, c21, c31);
        tok!(2, c02, c12, c22, c32);
        tok!(3, c03, c13, c23, c33);
        tok!(4, c04, c14, c24, c34);
        tok!(5, c05, c15, c25, c35);
        i += 32;
    }
    // each accumulator reduced where it is (an array of them went through the stack)
    macro_rules! row {
        ($($c:ident),*) => {
            [$(hsum16($c)),*]
        };
    }
    [row!(c00, c01, c02, c03, c04, c05), row!(c10, c11, c12, c13, c14, c15), row!(c20, c21, c22, c23, c24, c25), row!(c30, c31, c32, c33, c34, c35)]
}

/// 4 weight rows × 1 token (decode, and the last tokens of a batch).
#[target_feature(enable = "avx512f,avx512bw,avx512bf16,f16c")]
unsafe fn tile_4x1<const F16: bool>(n: usize, w: [*const u8; 4], a: [*const u8; 1]) -> [[f32; 1]; 4] {
    let mut c = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i < n {
        for (r, c) in c.iter_mut().enumerate() {
            *c = dp(*c, ld32::<F16>(w[r], i), a[0], i);
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
