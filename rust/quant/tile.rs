//! Tile kernels: a block of weight rows × a block of tokens per call, for prefill (many
//! tokens) and decode (one token, one row at a time).
//!
//! Inside, a register tile of `RW` weight rows × `C` tokens is computed at a time: each weight
//! block is decoded once per tile and each activation block loaded once per tile. Every output
//! element sees exactly the operations of the single-row `DotFn` of the same type and ISA
//! (same integer block sums, same f32 accumulation sequence), so a token's result does not
//! depend on how many tokens or rows share the call (prefill vs decode, batch composition).
//! `tests_tile.rs` checks this bit for bit under every ISA the machine has.
//!
//! | ISA        | kernels (file)                                                   | register tile (rows × tokens) |
//! |------------|------------------------------------------------------------------|------------------|
//! | avx512vnni | Q8_0, Q5_0, Q4_0, IQ4_NL, Q4_1, Q5_1: 512-bit, two blocks per register, packed activations (`avx512_tile.rs`) | 1 × 16 (rows ≤ 1024 elements), 3 × 6; decode 1 × 1 |
//! | avx512     | Q4_K, Q6_K: the 512-bit bodies of `avx512.rs` (plain or VNNI); batch orders under VNNI: 16-row panels repacked per call, rows in lanes (`avx512_packed.rs`) | 1 × 8 (panels: 16 × 4), decode 1 × 1 |
//! | avx512vnni | the grid i-quants: `vec_dot` order through the AVX2 multi-row kernels (`avx2_iq.rs`), tiled order in 16-row lane panels (`avx512_packed.rs`) | 1 row × 16 tokens (decode 1 × 1); panels 16 × 4 |
//! | avx2       | the 32-element types (`avx2_q.rs`), Q4_K, Q6_K (`avx2_k.rs`)      | 1 × 4, decode 1 × 1 |
//! | avx2, avx512 | F32, F16 in tinyBLAS's 16-lane chains for batches, the `DotFn` loop for one token (`float_tile.rs`) | avx2 1 × 4, avx512 4 × 6 |
//! | avx512bf16 | F32, F16 in the fast mode only: bf16 pair products (`bf16_tile.rs`, twin `bf16_dot.rs`; `quant::fast_float_kernel`) | 4 × 6, 4 × 1 |
//!
//! Decode reads one row at a time: the weights stream from memory as one sequential run,
//! which the hardware prefetchers follow; 4 rows in flight (4 streams a row apart) measured
//! 8.8 vs 16 GB/s for Q8_0 and 10.6 vs 16.4 for Q6_K on one Zen 4 core, and a 1.5B model's
//! decode went from 12.3 to 21.1 tok/s on one thread.
//!
//! Several tokens: the rows go in blocks of `ROW_BLOCK_BYTES` that every column pass reads
//! while they sit in L2, so a matrix larger than the caches streams from memory once per call
//! (a speculative verification of 17 tokens over Gemma 3's 178 MB output matrix had read it
//! twice: 16 tokens, then 1).
//!
//! AVX-512 machines without VNNI use the AVX2 tiles for the 32-element types (as their `DotFn`
//! does). Other types and ISAs have no tile kernel (`tile_kernel` is `None`): loop over the
//! `DotFn` / `DotRowsFn`.
// the register-tile driver serves the x86 kernels only
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
use super::dispatch::Isa;
use super::GgmlType;

/// `out[t * out_stride + r] = dot(n, &w[r * w_stride..], token t)` for `r < rows`, `t < cols`,
/// where token t's activations (in the kernel's input layout, see [`TileKernel`]) start at
/// `a[t * a_stride..]`. Like the `DotFn`s, a kernel stops at the whole blocks present in `n`,
/// in the last weight row and in the last token (never reading past a slice); output elements
/// past the end of `out` are not written.
pub type TileFn =
    fn(n: usize, w: &[u8], w_stride: usize, rows: usize, a: &[u8], a_stride: usize, cols: usize, out: &mut [f32], out_stride: usize);

/// Converts one token's `vec_dot_type` row (`n` elements) into a kernel's input layout; `out`
/// holds `act_bytes(n)` bytes.
pub type PrepFn = fn(n: usize, q: &[u8], out: &mut [u8]);

/// A tile kernel and the activation layout it reads.
#[derive(Clone, Copy)]
pub struct TileKernel {
    pub run: TileFn,
    /// Bytes of one token's activations as `run` reads them, for `n` elements.
    pub act_bytes: fn(usize) -> usize,
    /// `None`: `run` reads `vec_dot_type(ty)` rows as they are; else the conversion to its layout.
    pub prep: Option<PrepFn>,
    /// Whether the kernel repacks weight panels per call for several tokens (`avx512_packed`,
    /// `avx512_chain`): a matmul then splits its rows across the pool (each panel packed
    /// once); otherwise a prefill splits its tokens.
    pub packs: bool,
    /// The kernel in llama.cpp's batch order, for the first `batch_tokens(ty, n)` tokens of a
    /// matmul (Q4_K, Q6_K; same activation layout as `run`).
    pub batch: Option<TileFn>,
}

/// The tile kernel for `ty` on this machine, if there is one.
pub fn tile_kernel(ty: GgmlType) -> Option<TileKernel> {
    tile_kernel_for(ty, super::isa())
}

/// The tile kernel for `ty` under `isa`: bit-identical per element to `dot_fn_for(ty, isa)`.
pub fn tile_kernel_for(ty: GgmlType, isa: Isa) -> Option<TileKernel> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => super::float_tile::kernel(ty, isa).or_else(|| super::avx2_tile::kernel(ty)),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => super::float_tile::kernel(ty, isa).or_else(|| match super::avx512::dot(ty) {
            // the AVX-512 kernel for the type, or (only when it has none) the AVX2 one
            Some(_) => super::avx512_tile::kernel(ty),
            None => super::avx2_tile::kernel(ty).or_else(|| super::avx512_packed::iq_kernel(ty)),
        }),
        _ => {
            let _ = ty;
            None
        }
    }
}

/// A [`TileFn`] over a multi-row kernel (one weight row against the tokens per call) and its
/// single-row twin `one` (for one token), for weights of `ty` in its `vec_dot_type` layout:
/// every element stops at the whole blocks of `n`, of the last weight row and of the last
/// token, as the tile contract says.
#[allow(clippy::too_many_arguments)]
pub(super) fn rows_tile(ty: GgmlType, (one, f): (super::DotFn, super::DotRowsFn), n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    if rows == 0 || cols == 0 {
        return;
    }
    let (bs, wts) = ty.block();
    let ats = super::vec_dot_type(ty).block().1;
    let w_last = (rows - 1).checked_mul(ws).map_or(0, |off| w.len().saturating_sub(off));
    let a_last = (cols - 1).checked_mul(as_).map_or(0, |off| a.len().saturating_sub(off));
    let n = (n / bs).min(w_last / wts).min(a_last / ats) * bs;
    if cols == 1 {
        for (r, o) in out.iter_mut().take(rows).enumerate() {
            *o = one(n, r.checked_mul(ws).and_then(|o| w.get(o..)).unwrap_or(&[]), a);
        }
        return;
    }
    const CHUNK: usize = 64;
    let mut tmp = [0f32; CHUNK];
    for r in 0..rows {
        let wr = r.checked_mul(ws).and_then(|o| w.get(o..)).unwrap_or(&[]);
        for t0 in (0..cols).step_by(CHUNK) {
            let c = (cols - t0).min(CHUNK);
            let at = t0.checked_mul(as_).and_then(|o| a.get(o..)).unwrap_or(&[]);
            f(n, wr, at, as_, &mut tmp[..c]);
            for (t, &v) in tmp[..c].iter().enumerate() {
                if let Some(o) = out.get_mut((t0 + t) * os + r) {
                    *o = v;
                }
            }
        }
    }
}

/// A register-tile kernel family (one weight type, one ISA build).
pub(super) trait Tile {
    /// Elements per block.
    const BS: usize;
    /// Weight bytes per block.
    const WTS: usize;
    /// Whole blocks in `bytes` bytes of one token's activations.
    fn act_blocks(bytes: usize) -> usize;
    /// The kernel prefetches the weights itself when `C == 1` (see [`pf_dist`]).
    const SELF_PREFETCH: bool = false;
    /// `RW` weight rows × `C` tokens over `nb` blocks: `[r][t]`.
    /// # Safety
    /// The CPU has the kernel's features; `nb` blocks are readable from every `w[r]` and `a[t]`.
    unsafe fn run<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW];
}

/// Single-token (decode) calls stream the weights from memory. Kernels that prefetch inside
/// their block loop (`Tile::SELF_PREFETCH`) fetch one line `PREFETCH_BYTES` ahead per block (pair)
/// and row, spread over the loop (measured: 4–8 KiB ahead ≈ 12.5 GB/s for Q8_0 on one core,
/// vs 9–11 GB/s with per-tile bursts that stall on full fill buffers); for the others `drive`
/// prefetches whole tiles `PREFETCH_TILES` ahead.
const PREFETCH_BYTES: usize = 6144;
const PREFETCH_TILES: usize = 2;

/// Experiment knobs (tests only): prefetch distances (`usize::MAX`: the constants above).
#[cfg(test)]
pub(super) static PF_OVERRIDE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);
#[cfg(test)]
pub(super) static PF_DIST: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(usize::MAX);

/// Bytes ahead that self-prefetching single-token kernels prefetch (0: none).
#[inline(always)]
pub(super) fn pf_dist() -> usize {
    #[cfg(test)]
    {
        let v = PF_DIST.load(std::sync::atomic::Ordering::Relaxed);
        if v != usize::MAX {
            return v;
        }
    }
    PREFETCH_BYTES
}

#[inline(always)]
fn pf_tiles() -> usize {
    #[cfg(test)]
    {
        let v = PF_OVERRIDE.load(std::sync::atomic::Ordering::Relaxed);
        if v != usize::MAX {
            return v;
        }
    }
    PREFETCH_TILES
}

#[inline(always)]
fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let mut off = 0;
        while off < len {
            // SAFETY: a prefetch is a hint and never faults; the address is computed with wrapping
            // arithmetic and not dereferenced.
            unsafe { core::arch::x86_64::_mm_prefetch(p.wrapping_add(off) as *const i8, core::arch::x86_64::_MM_HINT_T0) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Geometry shared by the loops of one `drive` call.
struct Geo {
    nb: usize,
    w_stride: usize,
    a_stride: usize,
    out_stride: usize,
    row_bytes: usize,
}

/// Rows `0..rows` against tokens `t0..t0 + C`: `RW` rows at a time, then single rows.
/// # Safety
/// As `Tile::run`, for every row < `rows` and token < `t0 + C` (checked by `drive`).
#[inline(always)]
unsafe fn rows_loop<K: Tile, const RW: usize, const C: usize>(
    g: &Geo,
    w: *const u8,
    rows: usize,
    a: *const u8,
    t0: usize,
    out: &mut [f32],
    pf: bool,
) {
    let ap: [*const u8; C] = core::array::from_fn(|t| a.wrapping_add((t0 + t) * g.a_stride));
    let mut put = |r0: usize, v: &[[f32; C]]| {
        for (i, row) in v.iter().enumerate() {
            for (t, &x) in row.iter().enumerate() {
                if let Some(o) = out.get_mut((t0 + t) * g.out_stride + r0 + i) {
                    *o = x;
                }
            }
        }
    };
    let mut r = 0;
    while r + RW <= rows {
        if pf && !K::SELF_PREFETCH && pf_tiles() > 0 {
            let ahead = r + pf_tiles() * RW;
            if ahead < rows {
                prefetch(w.wrapping_add(ahead * g.w_stride), (RW.min(rows - ahead) - 1) * g.w_stride + g.row_bytes);
            }
        }
        let wp: [*const u8; RW] = core::array::from_fn(|i| w.wrapping_add((r + i) * g.w_stride));
        put(r, &K::run::<RW, C>(g.nb, wp, ap));
        r += RW;
    }
    while r < rows {
        put(r, &K::run::<1, C>(g.nb, [w.wrapping_add(r * g.w_stride)], ap));
        r += 1;
    }
}

/// One token (decode) over rows `0..rows`, `RG` rows per kernel call. With `RG` > 1 the rows
/// of one call lie a `rows / RG` apart, so each of the call's rows walks the matrix
/// sequentially (the hardware prefetchers follow a sequential walk within each page, not
/// `RG` rows interleaved in one); the rows past `RG · (rows / RG)` run one at a time.
/// # Safety
/// As `rows_loop` for one token.
#[inline(always)]
unsafe fn gemv_loop<K: Tile, const RG: usize>(g: &Geo, w: *const u8, rows: usize, a: *const u8, out: &mut [f32]) {
    if RG == 1 {
        return rows_loop::<K, 1, 1>(g, w, rows, a, 0, out, true);
    }
    let q = rows / RG;
    for j in 0..q {
        let wp: [*const u8; RG] = core::array::from_fn(|i| w.wrapping_add((i * q + j) * g.w_stride));
        let v = K::run::<RG, 1>(g.nb, wp, [a]);
        for (i, x) in v.iter().enumerate() {
            if let Some(o) = out.get_mut(i * q + j) {
                *o = x[0];
            }
        }
    }
    let r0 = RG * q;
    rows_loop::<K, 1, 1>(g, w.wrapping_add(r0 * g.w_stride), rows - r0, a, 0, out.get_mut(r0..).unwrap_or(&mut []), true);
}

/// The body of every `TileFn`: `RW` × `C` register tiles, `RG` rows at a time for single
/// tokens, fewer tokens (same rows) for the last columns (`RW` × 8 tiles need `RW` × 8
/// accumulators: keep `RW` ≤ 2 when `C` > 8).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn drive<K: Tile, const RW: usize, const C: usize, const RG: usize>(
    n: usize,
    w: &[u8],
    w_stride: usize,
    rows: usize,
    a: &[u8],
    a_stride: usize,
    cols: usize,
    out: &mut [f32],
    out_stride: usize,
) {
    if rows == 0 || cols == 0 {
        return;
    }
    // whole blocks present in n, in the last weight row and in the last token
    let w_last = (rows - 1).checked_mul(w_stride).map_or(0, |off| w.len().saturating_sub(off));
    let a_last = (cols - 1).checked_mul(a_stride).map_or(0, |off| a.len().saturating_sub(off));
    let nb = (n / K::BS).min(w_last / K::WTS).min(K::act_blocks(a_last));
    let g = Geo { nb, w_stride, a_stride, out_stride, row_bytes: nb * K::WTS };
    let (wp, ap) = (w.as_ptr(), a.as_ptr());
    // SAFETY (all calls below): the dispatcher handed this kernel out after checking the CPU;
    // every row < rows holds `nb` blocks (the last one does, and rows are `w_stride` apart —
    // earlier rows start before it and end within `w`), likewise every token < cols.
    unsafe {
        if cols == 1 {
            gemv_loop::<K, RG>(&g, wp, rows, ap, out);
            return;
        }
        // rows in blocks that stay in L2 across the column passes (see the module doc)
        let block = (ROW_BLOCK_BYTES / w_stride.max(1)).max(1).next_multiple_of(RW);
        let mut r0 = 0;
        while r0 < rows {
            let n = block.min(rows - r0);
            columns::<K, RW, C>(&g, wp.wrapping_add(r0 * w_stride), n, ap, cols, out.get_mut(r0..).unwrap_or(&mut []));
            r0 += n;
        }
    }
}

/// Weight bytes per row block of [`drive`]'s multi-pass calls (a quarter of Zen 4's and
/// Sapphire Rapids' L2, so a block stays cached while every column pass reads it).
pub(super) const ROW_BLOCK_BYTES: usize = 256 * 1024;

/// Rows `0..rows` against every token `0..cols`: `RW` × `C` tiles, then eights, then one
/// narrower tile for the last columns.
/// # Safety
/// As `rows_loop`, for every row < `rows` and token < `cols`.
#[inline(always)]
unsafe fn columns<K: Tile, const RW: usize, const C: usize>(g: &Geo, wp: *const u8, rows: usize, ap: *const u8, cols: usize, out: &mut [f32]) {
    let mut t0 = 0;
    while t0 + C <= cols {
        rows_loop::<K, RW, C>(g, wp, rows, ap, t0, out, false);
        t0 += C;
    }
    while cols - t0 >= 8 {
        rows_loop::<K, RW, 8>(g, wp, rows, ap, t0, out, false);
        t0 += 8;
    }
    match cols - t0 {
        1 => rows_loop::<K, RW, 1>(g, wp, rows, ap, t0, out, false),
        2 => rows_loop::<K, RW, 2>(g, wp, rows, ap, t0, out, false),
        3 => rows_loop::<K, RW, 3>(g, wp, rows, ap, t0, out, false),
        4 => rows_loop::<K, RW, 4>(g, wp, rows, ap, t0, out, false),
        5 => rows_loop::<K, RW, 5>(g, wp, rows, ap, t0, out, false),
        6 => rows_loop::<K, RW, 6>(g, wp, rows, ap, t0, out, false),
        7 => rows_loop::<K, RW, 7>(g, wp, rows, ap, t0, out, false),
        _ => {}
    }
}
