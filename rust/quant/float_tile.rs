//! F32 / F16 tile kernels (AVX2, AVX-512): llama.cpp's tinyBLAS order for batches, with
//! several independent accumulation chains per call. tinyBLAS gives each output one
//! 16-lane f32 chain (lane j sums elements ≡ j mod 16 with FMA, then `reduce16`); the
//! `DotFn` (`avx2::f16_f16_tiny`) runs that chain alone and waits on the FMA latency at every
//! step. Here a register tile of rows × tokens runs its chains side by side (AVX2: 1 row ×
//! 4 tokens in two 8-lane halves; AVX-512: 4 rows × 6 tokens, one 16-lane register each;
//! F16 activations widened to f32 once per token, so only the weights are converted),
//! every output seeing exactly the chain of the `DotFn`, so results are bit-identical to it
//! (`tests_tile.rs`). The one-token order (`ggml_vec_dot`) stays a loop over the `DotFn`.
use super::dispatch::{dot_fn_for, Isa};
use super::scalar::reduce16;
use super::tile::{PrepFn, TileFn, TileKernel};
use super::GgmlType;
use std::arch::x86_64::*;

fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

fn has_avx512() -> bool {
    has_avx2() && is_x86_feature_detected!("avx512f")
}

/// The F32 / F16 tile kernel under `isa` (Avx2 or Avx512), or `None`.
pub(super) fn kernel(ty: GgmlType, isa: Isa) -> Option<TileKernel> {
    let wide = match isa {
        Isa::Avx512 if has_avx512() => true,
        Isa::Avx2 | Isa::Avx512 if has_avx2() => false,
        _ => return None,
    };
    let (run, batch, elem): (TileFn, TileFn, usize) = match (ty, wide) {
        (GgmlType::F32, false) => (run_vec::<false, false>, run_tiny_avx2::<false>, 4),
        (GgmlType::F16, false) => (run_vec::<true, false>, run_tiny_avx2::<true>, 2),
        (GgmlType::F32, true) => (run_vec::<false, true>, run_tiny_avx512::<false>, 4),
        (GgmlType::F16, true) => (run_vec::<true, true>, run_tiny_avx512::<true>, 2),
        _ => return None,
    };
    let _ = elem;
    // F16 activations (already rounded to f16) are widened to f32 once per token, so the
    // tiles convert only the weights
    let prep: Option<PrepFn> = if ty == GgmlType::F16 { Some(widen_f16) } else { None };
    Some(TileKernel { run, act_bytes: |n| 4 * n, prep, packs: false, batch: Some(batch) })
}

fn widen_f16(n: usize, q: &[u8], out: &mut [u8]) {
    let n = n.min(q.len() / 2).min(out.len() / 4);
    let mut i = 0;
    if has_avx2() {
        // SAFETY: F16C checked; 8 halves read from q[2i..2i+16] and 8 floats written to
        // out[4i..4i+32], both within the `n` elements bounded above.
        unsafe { widen8(n, q, out, &mut i) };
    }
    for (o, k) in out[4 * i..].chunks_exact_mut(4).zip(i..n) {
        let i = k;
        let h = u16::from_le_bytes([q[2 * i], q[2 * i + 1]]);
        o.copy_from_slice(&super::f16::f16_to_f32(h).to_le_bytes());
    }
}

#[target_feature(enable = "avx2,f16c")]
unsafe fn widen8(n: usize, q: &[u8], out: &mut [u8], i: &mut usize) {
    while *i + 8 <= n {
        let h = _mm_loadu_si128(q.as_ptr().add(2 * *i) as *const __m128i);
        _mm256_storeu_ps(out.as_mut_ptr().add(4 * *i) as *mut f32, _mm256_cvtph_ps(h));
        *i += 8;
    }
}

/// Bounds shared by the kernels: the rows (`el` bytes per weight) and tokens (`ael` bytes per
/// activation) whose `n` elements are all present.
#[allow(clippy::too_many_arguments)]
fn present(n: usize, el: usize, ael: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize) -> (usize, usize) {
    let fit = |len: usize, row: usize, stride: usize, k: usize| if row == 0 { k } else { k.min(if len < row { 0 } else { (len - row) / stride.max(1) + 1 }) };
    (fit(w.len(), n * el, ws, rows), fit(a.len(), n * ael, as_, cols))
}

/// One token's order: the `DotFn` per output.
#[allow(clippy::too_many_arguments)]
fn run_vec<const F16: bool, const WIDE: bool>(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    let ty = if F16 { GgmlType::F16 } else { GgmlType::F32 };
    if let Some(dot) = dot_fn_for(ty, if WIDE { Isa::Avx512 } else { Isa::Avx2 }) {
        each_dot::<F16>(dot, n, w, ws, rows, a, as_, cols, out, os);
    }
}

/// The tinyBLAS order where `n` is not a multiple of 16 (tinyBLAS declines such shapes):
/// the `DotFn` of the batch order, which falls back the same way.
#[allow(clippy::too_many_arguments)]
fn tiny_fallback<const F16: bool>(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    let ty = if F16 { GgmlType::F16 } else { GgmlType::F32 };
    if let Some(dot) = super::dispatch::dot_batch_fn_for(ty, Isa::Avx2) {
        each_dot::<F16>(dot, n, w, ws, rows, a, as_, cols, out, os);
    }
}

/// `dot` per output, on the activations as the `DotFn` reads them (F16 rows narrowed back
/// from the widened layout; exact, they are f16 values).
#[allow(clippy::too_many_arguments)]
fn each_dot<const F16: bool>(dot: super::DotFn, n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    let (rows, cols) = present(n, if F16 { 2 } else { 4 }, 4, w, ws, rows, a, as_, cols);
    let mut h = Vec::new();
    for t in 0..cols {
        let at: &[u8] = if F16 {
            h.clear();
            for c in a[t * as_..].chunks_exact(4).take(n) {
                h.extend_from_slice(&super::f16::f32_to_f16(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes());
            }
            &h
        } else {
            &a[t * as_..]
        };
        for r in 0..rows {
            if let Some(o) = out.get_mut(t * os + r) {
                *o = dot(n, &w[r * ws..], at);
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run_tiny_avx2<const F16: bool>(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    if n % 16 != 0 || !has_avx2() {
        return tiny_fallback::<F16>(n, w, ws, rows, a, as_, cols, out, os);
    }
    // SAFETY: AVX2/FMA/F16C checked above; `drive` passes rows and tokens whose `n`
    // elements are present.
    drive::<1, 4>(n, if F16 { 2 } else { 4 }, 4, w, ws, rows, a, as_, cols, out, os, |wp, ap| [unsafe { tiny4_avx2::<F16>(n, wp[0], ap) }]);
}

/// Walks `rows` × `cols` in register tiles of R rows × C tokens (`el` / `ael` bytes per
/// weight / activation), `tile` computing one; lanes past the last row / token repeat it, and
/// only the real outputs are written.
#[allow(clippy::too_many_arguments)]
pub(super) fn drive<const R: usize, const C: usize>(
    n: usize,
    el: usize,
    ael: usize,
    w: &[u8],
    ws: usize,
    rows: usize,
    a: &[u8],
    as_: usize,
    cols: usize,
    out: &mut [f32],
    os: usize,
    tile: impl Fn([*const u8; R], [*const u8; C]) -> [[f32; C]; R],
) {
    let (rows, cols) = present(n, el, ael, w, ws, rows, a, as_, cols);
    // (every row below `rows` and token below `cols` lies inside `w` / `a`: `present`)
    let (wb, ab) = (w.as_ptr(), a.as_ptr());
    let mut r = 0;
    while r < rows {
        let rc = (rows - r).min(R);
        let wp: [*const u8; R] = std::array::from_fn(|k| wb.wrapping_add((r + k.min(rc - 1)) * ws));
        let mut t = 0;
        while t < cols {
            let c = (cols - t).min(C);
            let ap: [*const u8; C] = std::array::from_fn(|k| ab.wrapping_add((t + k.min(c - 1)) * as_));
            let s = tile(wp, ap);
            for k in 0..c {
                let o = (t + k) * os + r;
                match out.get_mut(o..o + rc) {
                    Some(dst) => dst.iter_mut().zip(&s).for_each(|(d, sr)| *d = sr[k]),
                    // the last outputs of a short `out`
                    None => s.iter().take(rc).enumerate().for_each(|(j, sr)| {
                        if let Some(d) = out.get_mut(o + j) {
                            *d = sr[k];
                        }
                    }),
                }
            }
            t += c;
        }
        r += rc;
    }
}

#[inline(always)]
unsafe fn ld8<const F16: bool>(p: *const u8, i: usize) -> __m256 {
    if F16 {
        _mm256_cvtph_ps(_mm_loadu_si128(p.add(2 * i) as *const __m128i))
    } else {
        _mm256_loadu_ps((p as *const f32).add(i))
    }
}

/// One weight row against 4 tokens: 8 chains (two 8-lane halves per token; named
/// accumulators).
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tiny4_avx2<const F16: bool>(n: usize, w: *const u8, a: [*const u8; 4]) -> [f32; 4] {
    let z = _mm256_setzero_ps();
    let (mut l0, mut l1, mut l2, mut l3, mut h0, mut h1, mut h2, mut h3) = (z, z, z, z, z, z, z, z);
    let mut i = 0;
    while i < n {
        let (w0, w1) = (ld8::<F16>(w, i), ld8::<F16>(w, i + 8));
        macro_rules! tok {
            ($k:expr, $l:ident, $h:ident) => {
                $l = _mm256_fmadd_ps(w0, ld8::<false>(a[$k], i), $l);
                $h = _mm256_fmadd_ps(w1, ld8::<false>(a[$k], i + 8), $h);
            };
        }
        tok!(0, l0, h0);
        tok!(1, l1, h1);
        tok!(2, l2, h2);
        tok!(3, l3, h3);
        i += 16;
    }
    let mut out = [0f32; 4];
    let mut l = [0f32; 16];
    for (k, (lo, hi)) in [(l0, h0), (l1, h1), (l2, h2), (l3, h3)].into_iter().enumerate() {
        _mm256_storeu_ps(l.as_mut_ptr(), lo);
        _mm256_storeu_ps(l.as_mut_ptr().add(8), hi);
        out[k] = reduce16(&l);
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn run_tiny_avx512<const F16: bool>(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    if n % 16 != 0 || !has_avx512() {
        return tiny_fallback::<F16>(n, w, ws, rows, a, as_, cols, out, os);
    }
    // SAFETY: AVX-512F checked above; `drive` passes rows and tokens whose `n` elements
    // are present.
    drive::<4, 6>(n, if F16 { 2 } else { 4 }, 4, w, ws, rows, a, as_, cols, out, os, |wp, ap| unsafe { tiny_4x6_avx512::<F16>(n, wp, ap) });
}

#[inline(always)]
unsafe fn ld16<const F16: bool>(p: *const u8, i: usize) -> __m512 {
    if F16 {
        _mm512_cvtph_ps(_mm256_loadu_si256(p.add(2 * i) as *const __m256i))
    } else {
        _mm512_loadu_ps((p as *const f32).add(i))
    }
}

/// Four weight rows against 6 tokens (f32 activations): 24 chains of 16 lanes, named
/// accumulators (an array of registers was kept on the stack).
#[target_feature(enable = "avx512f,avx2,fma,f16c")]
unsafe fn tiny_4x6_avx512<const F16: bool>(n: usize, w: [*const u8; 4], a: [*const u8; 6]) -> [[f32; 6]; 4] {
    tile_4x6!(n, 16, w, a, ld16::<F16>, ld16::<false>, fma16)
}

#[inline(always)]
unsafe fn fma16(acc: __m512, w: __m512, x: __m512) -> __m512 {
    _mm512_fmadd_ps(w, x, acc)
}

/// The body of a tile of 4 weight rows × 6 tokens over `$n` elements, `$step` at a time: 24
/// chains in named accumulators (an array of registers went through the stack), each step
/// `$lw(row, i)` for the 4 rows, `$la(token, i)` once per token and `$madd(acc, w, x)`; each
/// chain reduced by [`hsum16`].
macro_rules! tile_4x6 {
    ($n:expr, $step:expr, $w:expr, $a:expr, $lw:path, $la:path, $madd:path) => {{
        let z = _mm512_setzero_ps();
        let (mut c00, mut c01, mut c02, mut c03, mut c04, mut c05) = (z, z, z, z, z, z);
        let (mut c10, mut c11, mut c12, mut c13, mut c14, mut c15) = (z, z, z, z, z, z);
        let (mut c20, mut c21, mut c22, mut c23, mut c24, mut c25) = (z, z, z, z, z, z);
        let (mut c30, mut c31, mut c32, mut c33, mut c34, mut c35) = (z, z, z, z, z, z);
        let mut i = 0;
        while i < $n {
            let ws = [$lw($w[0], i), $lw($w[1], i), $lw($w[2], i), $lw($w[3], i)];
            tok4!($la($a[0], i), ws, $madd, c00, c10, c20, c30);
            tok4!($la($a[1], i), ws, $madd, c01, c11, c21, c31);
            tok4!($la($a[2], i), ws, $madd, c02, c12, c22, c32);
            tok4!($la($a[3], i), ws, $madd, c03, c13, c23, c33);
            tok4!($la($a[4], i), ws, $madd, c04, c14, c24, c34);
            tok4!($la($a[5], i), ws, $madd, c05, c15, c25, c35);
            i += $step;
        }
        [
            [hsum16(c00), hsum16(c01), hsum16(c02), hsum16(c03), hsum16(c04), hsum16(c05)],
            [hsum16(c10), hsum16(c11), hsum16(c12), hsum16(c13), hsum16(c14), hsum16(c15)],
            [hsum16(c20), hsum16(c21), hsum16(c22), hsum16(c23), hsum16(c24), hsum16(c25)],
            [hsum16(c30), hsum16(c31), hsum16(c32), hsum16(c33), hsum16(c34), hsum16(c35)],
        ]
    }};
}

/// One token of [`tile_4x6`]: its activations `$x` into the chains of the 4 rows.
macro_rules! tok4 {
    ($x:expr, $ws:expr, $madd:path, $p:ident, $q:ident, $r:ident, $s:ident) => {
        let x = $x;
        $p = $madd($p, $ws[0], x);
        $q = $madd($q, $ws[1], x);
        $r = $madd($r, $ws[2], x);
        $s = $madd($s, $ws[3], x);
    };
}
pub(super) use tok4;
pub(super) use tile_4x6;

/// [`reduce16`] of the 16 lanes in registers (the same additions in the same order: halves,
/// quarters, then `(u0 + u2) + (u1 + u3)`). The first addition is a 512-bit one: a register
/// that 256-bit instructions read must be one of the 16 VEX registers without AVX-512VL, and
/// the tiles' accumulators then spilled.
#[inline(always)]
pub(super) unsafe fn hsum16(v: __m512) -> f32 {
    let t = _mm512_castps512_ps256(_mm512_add_ps(v, _mm512_shuffle_f32x4::<0b00_00_11_10>(v, v)));
    let u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps::<1>(t));
    let w = _mm_add_ps(u, _mm_movehl_ps(u, u));
    _mm_cvtss_f32(_mm_add_ss(w, _mm_movehdup_ps(w)))
}
