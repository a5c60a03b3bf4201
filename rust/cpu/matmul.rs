//! Products of quantized weight matrices with f32 activations. Activations are
//! quantized once per row into the weight type's `vec_dot_type`, then every output
//! element is one integer dot product.
//!
//! Types with a tile kernel (`quant::tile`: R weight rows × C tokens per register tile) split
//! the work by shape:
//! - one token (decode): rows split across the pool, several rows in flight per kernel call,
//!   weights prefetched ahead; each task writes its own contiguous run of outputs;
//! - enough tokens for every thread (prefill), kernels that do not repack: tokens split
//!   across the pool, each task quantizes its own tokens and runs all rows, writing whole
//!   output rows `[t0..t1, 0..n_out]` (no shared cache lines between tasks);
//! - a few tokens, and kernels that repack 16-row weight panels per call
//!   (`TileKernel::packs`: `quant::avx512_packed`, `quant::avx512_chain`): the tokens are
//!   quantized first (split across the pool when there are many), then rows split, each task
//!   running its rows against every token into a per-thread `[tokens × rows]` buffer (at most
//!   `TASK_OUT_BYTES`: more tasks when the product is large) copied into place. Each panel is
//!   then repacked once per matmul rather than once per token range: splitting the tokens
//!   spent 10% of a 1.5B model's pp512 repacking (2 threads; 3.6% this way). The F16 encoder
//!   tiles measured faster with the tokens split (all-MiniLM-L6-v2 in-process 243–265 vs
//!   209–257 sentences/s), Gemma 3's Q5_0 tiles the same either way.
//!
//! A tile kernel's element is bit-identical to the type's `DotFn`, so a token's output does
//! not depend on the split or the batch composition. The one exception is llama.cpp's own:
//! for Q4_K, the tiled K-quants, F32 and F16 it computes the first `quant::batch_tokens(ty, n)`
//! tokens of a matmul in a batch order (`TileKernel::batch`, `quant::dot_batch_fn`), and so
//! does this module, so that results match llama.cpp's bit for bit; Q4_0 / IQ4_NL matmul
//! weights take the order of its repacked kernels throughout under `LLAMARS_EXACT=1`
//! (`Weight::new`, `quant::row_chain`). Other types loop over the `DotFn` (or `DotRowsFn`)
//! per output row.
use super::pool::ThreadPool;
use crate::quant::{self, activation, DotFn, DotRowsFn, GgmlType, TileKernel};
use std::cell::RefCell;

/// A weight matrix viewed in place (usually inside the memory map).
/// ggml layout: `n_out` rows of `n_in` elements, each row `row_bytes` long.
#[derive(Clone, Copy)]
pub struct Weight {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub row_bytes: usize,
    ptr: *const u8,
    len: usize,
    pub dot: DotFn,
    /// One weight row against several activation rows (prefill), when the type has one.
    pub dot_rows: Option<DotRowsFn>,
    /// Several rows × several tokens per call, when the type has a tile kernel.
    pub tile: Option<TileKernel>,
    /// The dot in llama.cpp's batch order (see `quant::batch_tokens`).
    pub dot_batch: Option<DotFn>,
    /// Its multi-row twin, when the type has one.
    pub dot_batch_rows: Option<DotRowsFn>,
}

// SAFETY: `Weight` only reads immutable mapped memory that the model keeps alive.
unsafe impl Send for Weight {}
unsafe impl Sync for Weight {}

impl Weight {
    /// A matrix multiplied as llama.cpp multiplies its matmul weights (in the orders of its
    /// repacked kernels where it repacks them, as `quant::row_chain` and
    /// `quant::prefill_kernel` say), under `LLAMARS_EXACT`.
    /// # Safety
    /// `data` must stay valid (and unmodified) for as long as the `Weight` is used.
    pub unsafe fn new(ty: GgmlType, n_in: usize, n_out: usize, data: &[u8], dot: DotFn) -> Weight {
        Weight::with_mode(ty, n_in, n_out, data, dot, quant::Exactness::new(None))
    }

    /// [`Weight::new`] under a given exactness.
    /// # Safety
    /// As [`Weight::new`].
    pub unsafe fn with_mode(ty: GgmlType, n_in: usize, n_out: usize, data: &[u8], dot: DotFn, mode: quant::Exactness) -> Weight {
        let w = Weight::plain(ty, n_in, n_out, data, dot);
        if let Some(k) = quant::fast_float_kernel(ty, n_in, mode) {
            // every token in the fast mode's bf16 order (no batch order, no row kernel)
            return Weight { tile: Some(k), dot_rows: None, dot_batch: None, dot_batch_rows: None, ..w };
        }
        match quant::chain_kernels(ty) {
            Some((dot, dot_rows, tile)) if quant::row_chain(ty, n_out, mode) => Weight { dot, dot_rows, tile, dot_batch: None, dot_batch_rows: None, ..w },
            _ => match quant::prefill_kernel(ty, n_out, mode) {
                Some(k) => Weight { tile: Some(k), ..w },
                None => w,
            },
        }
    }

    /// A matrix as llama.cpp's plain buffer holds it: the type's own kernels, never the
    /// repacked orders.
    /// # Safety
    /// As [`Weight::new`].
    pub unsafe fn plain(ty: GgmlType, n_in: usize, n_out: usize, data: &[u8], dot: DotFn) -> Weight {
        let dot_rows = quant::dot_rows_fn(ty);
        // the twin (bit-identical per element) of `quant::dot_fn(ty)`, which callers pass as `dot`
        let tile = quant::tile_kernel(ty);
        let dot_batch = quant::dot_batch_fn(ty);
        let dot_batch_rows = quant::dot_batch_rows_fn(ty);
        Weight { ty, n_in, n_out, row_bytes: ty.row_bytes(n_in), ptr: data.as_ptr(), len: data.len(), dot, dot_rows, tile, dot_batch, dot_batch_rows }
    }

    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: constructed from a slice the owner keeps alive (see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Rows `lo..hi` as a matrix of their own (a fused projection's parts); the same
    /// bytes, so each output is the bits the whole matrix gives for that row.
    pub fn rows(&self, lo: usize, hi: usize) -> Weight {
        let (lo, hi) = (lo.min(self.n_out), hi.min(self.n_out).max(lo.min(self.n_out)));
        let bytes = &self.bytes()[lo * self.row_bytes..hi * self.row_bytes];
        Weight { n_out: hi - lo, ptr: bytes.as_ptr(), len: bytes.len(), ..*self }
    }

    /// Where the matrix's bytes start: the identity of a model tensor (LoRA pairs are found by it).
    pub fn addr(&self) -> usize {
        self.ptr as usize
    }

    #[inline]
    pub fn row(&self, r: usize) -> &[u8] {
        &self.bytes()[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Dequantize row `r` into `out` (embedding lookup).
    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) {
        quant::dequantize(self.ty, self.row(r), &mut out[..self.n_in]);
    }
}

/// A raw pointer shared by tasks that each touch their own disjoint range of it.
#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
// SAFETY: every use below reads or writes a range no other task touches (stated at each use).
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}

/// Reusable buffers for quantized (and kernel-packed) activations.
#[derive(Default)]
pub struct Scratch {
    /// `vec_dot_type` rows, `[n_tokens, q_row]`.
    q: Vec<u8>,
    /// Tile-kernel input rows, `[n_tokens, act_bytes(n_in)]` (types whose kernel repacks).
    p: Vec<u8>,
    row: Vec<u8>,
}

thread_local! {
    /// Per-thread `[tokens × rows]` tile outputs of the few-tokens split.
    static TILE_OUT: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Rows ahead of the current one whose bytes are prefetched (decode streams weights from DRAM).
const PREFETCH_ROWS: usize = 2;

#[inline(always)]
fn prefetch_row(w: &Weight, r: usize, end: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if r < end {
            let row = w.row(r);
            let mut off = 0;
            while off < row.len() {
                // SAFETY: prefetch is a hint; the address is inside the row slice.
                unsafe { std::arch::x86_64::_mm_prefetch(row.as_ptr().add(off) as *const i8, std::arch::x86_64::_MM_HINT_T0) };
                off += 64;
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (w, r, end);
}

/// Tokens per tile: activations of one tile stay in L1/L2 while a weight row is reused.
const TOKEN_TILE: usize = 16;

/// Output rows per task are a multiple of this (whole cache lines of f32 outputs).
const ROW_ALIGN: usize = 16;

/// Bytes of one task's `[tokens × rows]` output buffer at most (rows permitting).
const TASK_OUT_BYTES: usize = 4 << 20;

/// Tokens per thread from which the activations are quantized across the pool.
const QUANT_TASK_TOKENS: usize = 8;

/// Which tokens take the weight type's batch order (see the module doc).
#[derive(Clone, Copy)]
enum Order<'a> {
    /// The first `n` tokens (llama.cpp's rule for one chunk, `quant::batch_tokens`).
    First(usize),
    /// Token t when `mask[t]`.
    Mask(&'a [bool]),
}

impl Order<'_> {
    fn batch(self, t: usize) -> bool {
        match self {
            Order::First(n) => t < n,
            Order::Mask(m) => m.get(t).copied().unwrap_or(false),
        }
    }

    /// `f(a, b, batch)` for the maximal runs `[a, b)` of `[t0, t1)` in one order.
    fn runs(self, t0: usize, t1: usize, mut f: impl FnMut(usize, usize, bool)) {
        let mut a = t0;
        while a < t1 {
            let o = self.batch(a);
            let mut b = a + 1;
            while b < t1 && self.batch(b) == o {
                b += 1;
            }
            f(a, b, o);
            a = b;
        }
    }
}

/// out[t, r] = Σ_k w[r, k] · x[t, k]   for t < n_tokens, r < n_out
/// x: [n_tokens, n_in] row-major, out: [n_tokens, n_out] row-major. The tokens are one chunk
/// as llama.cpp sees it (its batch orders by `quant::batch_tokens`).
pub fn matmul(pool: &ThreadPool, w: &Weight, x: &[f32], n_tokens: usize, out: &mut [f32], scratch: &mut Scratch) {
    matmul_masked(pool, w, x, n_tokens, out, scratch, None)
}

/// [`matmul`] with the batch order given per token (`batch[t]`; `model/orders.rs`) instead of
/// by the chunk rule; `None` is the chunk rule.
pub fn matmul_masked(pool: &ThreadPool, w: &Weight, x: &[f32], n_tokens: usize, out: &mut [f32], scratch: &mut Scratch, batch: Option<&[bool]>) {
    assert!(x.len() >= n_tokens * w.n_in && out.len() >= n_tokens * w.n_out);
    if n_tokens == 0 || w.n_out == 0 {
        return;
    }
    let has_batch = w.tile.map_or(w.dot_batch.is_some(), |k| k.batch.is_some()) && quant::batch_shape(w.ty, w.n_in, w.n_out);
    let order = match batch {
        _ if !has_batch => Order::First(0),
        Some(m) => Order::Mask(m),
        None => Order::First(quant::batch_tokens(w.ty, n_tokens)),
    };
    match w.tile {
        Some(k) => matmul_tiled(pool, w, &k, x, n_tokens, out, scratch, order),
        None => matmul_dots(pool, w, x, n_tokens, out, scratch, order),
    }
}

/// Quantizes tokens `x` ([tokens, n]) into `q` ([tokens, q_row]) and, when the kernel repacks,
/// into `p` ([tokens, a_row]).
#[allow(clippy::too_many_arguments)]
fn prepare(vt: GgmlType, k: &TileKernel, n: usize, x: &[f32], q: &mut [u8], q_row: usize, p: &mut [u8], a_row: usize) {
    for (t, xt) in x.chunks_exact(n).enumerate() {
        let qt = &mut q[t * q_row..(t + 1) * q_row];
        activation::quantize_into(vt, xt, qt);
        if let Some(prep) = k.prep {
            prep(n, qt, &mut p[t * a_row..(t + 1) * a_row]);
        }
    }
}

/// One matmul's activation buffers (`Scratch::q`, and `Scratch::p` when the kernel repacks
/// activations), shared by tasks that each own a range of tokens.
#[derive(Clone, Copy)]
struct TokenRows {
    q: SendPtr<u8>,
    p: SendPtr<u8>,
    q_row: usize,
    a_row: usize,
    has_prep: bool,
}

impl TokenRows {
    /// Quantizes tokens `t0..t1` of `x` ([tokens, n]) into their rows and returns their
    /// kernel input ([t1 - t0, a_row]).
    /// # Safety
    /// The buffers hold at least `t1` tokens, and no other task touches tokens `t0..t1`
    /// while the returned slice lives.
    unsafe fn prepare<'a>(self, vt: GgmlType, k: &TileKernel, n: usize, x: &[f32], t0: usize, t1: usize) -> &'a [u8] {
        let nt = t1 - t0;
        let q = std::slice::from_raw_parts_mut(self.q.0.add(t0 * self.q_row), nt * self.q_row);
        let p = if self.has_prep { std::slice::from_raw_parts_mut(self.p.0.add(t0 * self.a_row), nt * self.a_row) } else { &mut [][..] };
        prepare(vt, k, n, &x[t0 * n..t1 * n], q, self.q_row, p, self.a_row);
        if self.has_prep {
            p
        } else {
            q
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn matmul_tiled(pool: &ThreadPool, w: &Weight, k: &TileKernel, x: &[f32], n_tokens: usize, out: &mut [f32], s: &mut Scratch, order: Order) {
    let (n, n_out) = (w.n_in, w.n_out);
    let vt = quant::vec_dot_type(w.ty);
    let q_row = vt.row_bytes(n);
    let a_row = if k.prep.is_some() { (k.act_bytes)(n) } else { q_row };
    s.q.resize(n_tokens * q_row, 0);
    // packed rows start on cache lines (their loads are 64-byte vectors; split loads cost double)
    let p_off = if k.prep.is_some() {
        s.p.resize(n_tokens * a_row + 64, 0);
        s.p.as_ptr().align_offset(64).min(64)
    } else {
        0
    };
    let run = k.run;
    let batch = k.batch.unwrap_or(run);
    let kernel = |b: bool| if b { batch } else { run };
    let n_threads = pool.n_threads();
    let acts = TokenRows { q: SendPtr(s.q.as_mut_ptr()), p: SendPtr(s.p[p_off..].as_mut_ptr()), q_row, a_row, has_prep: k.prep.is_some() };

    if !k.packs && n_tokens > 1 && n_tokens >= n_threads * TOKEN_TILE {
        // Prefill: tokens split (two tasks per thread); each task quantizes its own tokens
        // and runs every row
        let per = n_tokens.div_ceil(n_threads * 2).next_multiple_of(TOKEN_TILE);
        let n_tasks = n_tokens.div_ceil(per);
        let op = SendPtr(out.as_mut_ptr());
        pool.run(n_tasks, |c| {
            // the whole wrappers (Sync), not their raw pointer fields
            let (acts, op) = (acts, op);
            let t0 = c * per;
            let t1 = (t0 + per).min(n_tokens);
            // SAFETY: task c alone touches tokens t0..t1: their activation rows (`acts` holds
            // n_tokens) and outputs [t0·n_out, t1·n_out) (within `out` by `matmul`'s assert).
            let (a, o) = unsafe { (acts.prepare(vt, k, n, x, t0, t1), std::slice::from_raw_parts_mut(op.0.add(t0 * n_out), (t1 - t0) * n_out)) };
            // each run of tokens in one of llama.cpp's orders
            order.runs(t0, t1, |ta, tb, b| {
                let (a, o) = (&a[(ta - t0) * a_row..], &mut o[(ta - t0) * n_out..]);
                kernel(b)(n, w.bytes(), w.row_bytes, n_out, a, a_row, tb - ta, o, n_out);
            });
        });
        return;
    }

    // Rows split (decode, few tokens, kernels that repack panels); the activations first,
    // split across the pool when there are enough tokens
    if n_tokens >= QUANT_TASK_TOKENS * n_threads && n_threads > 1 {
        let per = n_tokens.div_ceil(n_threads);
        pool.run(n_tokens.div_ceil(per), |c| {
            #[allow(clippy::redundant_locals)]
            let acts = acts;
            // SAFETY: task c alone touches tokens c·per.. (`acts` holds n_tokens)
            unsafe { acts.prepare(vt, k, n, x, c * per, ((c + 1) * per).min(n_tokens)) };
        });
    } else {
        // SAFETY: this thread alone touches the buffers, which hold n_tokens
        unsafe { acts.prepare(vt, k, n, x, 0, n_tokens) };
    }
    let a: &[u8] = if acts.has_prep { &s.p[p_off..] } else { &s.q };
    // a few tasks per thread (balance when a thread is descheduled), each at least 64 rows
    // (a task costs a pool hand-off; a decode row of 640 elements takes ~30 ns)
    let n_tasks = (n_out / 64).clamp(1, n_threads * 4);
    // and each task's [tokens × rows] buffer within TASK_OUT_BYTES
    let max_rows = (TASK_OUT_BYTES / (4 * n_tokens)).max(ROW_ALIGN) / ROW_ALIGN * ROW_ALIGN;
    let rows_per = n_out.div_ceil(n_tasks).next_multiple_of(ROW_ALIGN).min(max_rows);
    let n_tasks = n_out.div_ceil(rows_per);
    let op = SendPtr(out.as_mut_ptr());
    let wb = w.bytes();
    pool.run(n_tasks, |c| {
        // the whole wrapper (Sync), not its raw pointer field (edition-2021 closures capture fields)
        #[allow(clippy::redundant_locals)]
        let op = op;
        let r0 = c * rows_per;
        let r1 = (r0 + rows_per).min(n_out);
        let rows = r1 - r0;
        let wr = wb.get(r0 * w.row_bytes..).unwrap_or(&[]);
        if n_tokens == 1 {
            // SAFETY: task c alone writes outputs r0..r1 of the single token (in bounds: `matmul`'s assert).
            let o = unsafe { std::slice::from_raw_parts_mut(op.0.add(r0), rows) };
            kernel(order.batch(0))(n, wr, w.row_bytes, rows, a, a_row, 1, o, rows);
            return;
        }
        TILE_OUT.with(|buf| {
            let mut buf = buf.borrow_mut();
            buf.resize(n_tokens * rows, 0.0);
            order.runs(0, n_tokens, |ta, tb, b| {
                kernel(b)(n, wr, w.row_bytes, rows, &a[ta * a_row..], a_row, tb - ta, &mut buf[ta * rows..], rows);
            });
            for t in 0..n_tokens {
                // SAFETY: task c alone writes outputs (t, r0..r1); `matmul`'s assert bounds them.
                unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr().add(t * rows), op.0.add(t * n_out + r0), rows) };
            }
        });
    });
}

/// Types without a tile kernel: one `DotFn` (or `DotRowsFn`) call per output row and tokens.
fn matmul_dots(pool: &ThreadPool, w: &Weight, x: &[f32], n_tokens: usize, out: &mut [f32], scratch: &mut Scratch, order: Order) {
    let vt = quant::vec_dot_type(w.ty);
    let q_row = vt.row_bytes(w.n_in);
    scratch.q.clear();
    scratch.q.reserve(q_row * n_tokens);
    for t in 0..n_tokens {
        activation::quantize(vt, &x[t * w.n_in..(t + 1) * w.n_in], &mut scratch.row);
        scratch.q.extend_from_slice(&scratch.row);
    }
    let xq = &scratch.q[..];
    let n_out = w.n_out;
    let optr = SendPtr(out.as_mut_ptr());
    // Enough chunks for balance, each big enough to amortise scheduling.
    let n_threads = pool.n_threads();
    let min_rows = 16usize;
    let n_chunks = (n_out / min_rows).clamp(1, n_threads * 8);
    let rows_per = n_out.div_ceil(n_chunks);
    let n_chunks = n_out.div_ceil(rows_per);
    let dot = w.dot;
    let dot_rows = w.dot_rows;
    let n = w.n_in;
    let dot_batch = w.dot_batch.unwrap_or(dot);
    let any_batch = (0..n_tokens).any(|t| order.batch(t));
    let dot_batch_rows = w.dot_batch_rows;
    pool.run(n_chunks, |c| {
        #[allow(clippy::redundant_locals)]
        let optr = optr;
        let r0 = c * rows_per;
        let r1 = (r0 + rows_per).min(n_out);
        let mut tmp = [0f32; TOKEN_TILE];
        let mut t0 = 0;
        while t0 < n_tokens {
            let t1 = (t0 + TOKEN_TILE).min(n_tokens);
            for r in r0..r1 {
                let wr = w.row(r);
                // the weights decoded once for the whole token tile, in its one order
                let rows_fn = match (dot_rows, dot_batch_rows) {
                    (Some(f), _) if !any_batch => Some(f),
                    (_, Some(f)) if (t0..t1).all(|t| order.batch(t)) => Some(f),
                    _ => None,
                };
                match rows_fn {
                    Some(f) if t1 - t0 > 1 => {
                        // weights decoded once for the whole token tile (bit-identical to `dot`)
                        let o = &mut tmp[..t1 - t0];
                        f(n, wr, &xq[t0 * q_row..t1 * q_row], q_row, o);
                        for (i, &v) in o.iter().enumerate() {
                            // SAFETY: (t, r) is written by exactly one task; in bounds by the assert in `matmul`.
                            unsafe { *optr.0.add((t0 + i) * n_out + r) = v };
                        }
                    }
                    _ => {
                        prefetch_row(w, r + PREFETCH_ROWS, r1);
                        for t in t0..t1 {
                            let f = if order.batch(t) { dot_batch } else { dot };
                            let v = f(n, wr, &xq[t * q_row..(t + 1) * q_row]);
                            // SAFETY: (t, r) is written by exactly one task; in bounds by the assert in `matmul`.
                            unsafe { *optr.0.add(t * n_out + r) = v };
                        }
                    }
                }
            }
            t0 = t1;
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::scalar;

    /// splitmix64
    fn rng(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }

    /// A random weight matrix of `ty` with sane f16 scales: quantize random floats with the
    /// scalar reference quantizers where they exist, else random bytes through dequantize.
    fn random_matrix(ty: GgmlType, n_in: usize, n_out: usize, seed: &mut u64) -> Vec<u8> {
        let mut val = || (rng(seed) % 2001) as f32 / 1000.0 - 1.0;
        match ty {
            GgmlType::F32 => return (0..n_in * n_out).flat_map(|_| val().to_le_bytes()).collect(),
            GgmlType::F16 => return (0..n_in * n_out).flat_map(|_| crate::quant::f16::f32_to_f16(val()).to_le_bytes()).collect(),
            _ => {}
        }
        let (bs, ts) = ty.block();
        let mut v = vec![0u8; ty.row_bytes(n_in) * n_out];
        for b in v.chunks_exact_mut(ts) {
            for x in b.iter_mut() {
                *x = rng(seed) as u8;
            }
            // f16 scales at the offsets the block layouts use, kept small and finite
            let scale = |s: &mut u64| crate::quant::f16::f32_to_f16(1e-3 + (rng(s) % 1000) as f32 * 1e-4).to_le_bytes();
            let offs: &[usize] = match ty {
                GgmlType::Q6_K => &[208],
                GgmlType::Q3_K => &[108],
                GgmlType::Q4_K | GgmlType::Q4_1 | GgmlType::Q5_1 => &[0, 2],
                GgmlType::IQ2_XXS | GgmlType::IQ2_XS | GgmlType::IQ2_S | GgmlType::IQ3_XXS | GgmlType::IQ3_S | GgmlType::IQ1_S => &[0],
                _ if bs == 32 => &[0],
                _ => &[],
            };
            for &o in offs {
                b[o..o + 2].copy_from_slice(&scale(seed));
            }
            if ty == GgmlType::IQ1_M {
                // the block scale's top nibble (bits 12..15 of the f16 assembled from the four
                // scale words' top nibbles): a small positive exponent
                b[ts - 1] = (b[ts - 1] & 0x0F) | 0x10;
            }
        }
        v
    }

    /// matmul (every split: 1 token, a few, many; 1 and 2 threads) against a naive loop over
    /// the `DotFn` (bit-identical: tiles are its twins; the first `batch_tokens` tokens of Q4_K
    /// and Q6_K against the scalar batch-order dot, which the batch tiles reproduce), and the
    /// naive loop against the scalar reference on dequantized f32 weights within a tolerance.
    #[test]
    fn matmul_matches_naive_loop() {
        let mut seed = 11u64;
        // (Q4_0 with 40 rows: llama.cpp's repacked rows-of-8 order, `quant::row_chain` /
        // `quant::prefill_kernel`)
        let cases = [(GgmlType::Q5_0, 37), (GgmlType::Q8_0, 37), (GgmlType::Q4_K, 40), (GgmlType::Q6_K, 40), (GgmlType::Q4_0, 37), (GgmlType::Q4_0, 40), (GgmlType::IQ4_NL, 40), (GgmlType::Q5_1, 37), (GgmlType::Q3_K, 40), (GgmlType::IQ2_XXS, 19), (GgmlType::IQ2_XS, 19), (GgmlType::IQ2_S, 19), (GgmlType::IQ3_XXS, 19), (GgmlType::IQ3_S, 19), (GgmlType::IQ1_S, 19), (GgmlType::IQ1_M, 19), (GgmlType::F16, 40), (GgmlType::F32, 40)];
        for (ty, n_out) in cases {
            let n_in = if ty.block_size() == 256 { 512 } else { 96 };
            let data = random_matrix(ty, n_in, n_out, &mut seed);
            let Some(dot) = quant::dot_fn(ty) else { continue };
            // the default mode (or LLAMARS_EXACT's) and the fast mode
            for mode in [quant::Exactness::new(None), quant::Exactness::Fast] {
                // SAFETY: `data` outlives `w`.
                let w = unsafe { Weight::with_mode(ty, n_in, n_out, &data, dot, mode) };
                let vt = quant::vec_dot_type(ty);
                for n_tokens in [1usize, 2, 3, 9, 16, 17, 40] {
                    let x: Vec<f32> = (0..n_tokens * n_in).map(|_| (rng(&mut seed) % 2001) as f32 / 1000.0 - 1.0).collect();
                    // naive: out[t, r] = dot(w_r, quantize(x_t))
                    let mut want = vec![0f32; n_tokens * n_out];
                    let mut q = Vec::new();
                    let mut deq = vec![0f32; n_in];
                    let nb = quant::batch_tokens(ty, n_tokens);
                    // Q4_0 / IQ4_NL (and in the fast mode Q5_0 / Q8_0) from PANEL_TOKENS tokens:
                    // the chain order (`quant::prefill_kernel`)
                    let chain = quant::prefill_kernel(ty, n_out, mode).is_some() && !quant::row_chain(ty, n_out, mode) && n_tokens >= quant::PANEL_TOKENS;
                    // F32 / F16 in the fast mode on AVX-512 BF16 machines: every token in bf16
                    let bf16 = quant::fast_float_kernel(ty, n_in, mode).and(quant::bf16_dot::dot_fn(ty));
                    for t in 0..n_tokens {
                        activation::quantize(vt, &x[t * n_in..(t + 1) * n_in], &mut q);
                        // the weight's own one-token dot (`Weight::dot`: the repacked order where there is one)
                        let f = if let Some(f) = bf16 {
                            f
                        } else if chain {
                            scalar::dot_chain(ty).unwrap_or(w.dot)
                        } else if t < nb && w.dot_batch.is_some() {
                            scalar::dot_batch(ty).unwrap_or(w.dot)
                        } else {
                            w.dot
                        };
                        for r in 0..n_out {
                            want[t * n_out + r] = f(n_in, w.row(r), &q);
                            // the scalar reference agrees up to f32 accumulation order
                            let reference = scalar::dot(ty).unwrap_or(dot)(n_in, w.row(r), &q);
                            w.dequantize_row(r, &mut deq);
                            let mag: f32 = deq.iter().zip(&x[t * n_in..]).map(|(a, b)| (a * b).abs()).sum::<f32>() + 1e-6;
                            let tol = if bf16.is_some() { 1e-2 } else { 1e-4 }; // bf16: 8 significant bits
                            assert!((want[t * n_out + r] - reference).abs() <= tol * mag, "{} ({t}, {r})", ty.name());
                        }
                    }
                    for threads in [1usize, 2, 3] {
                        let pool = ThreadPool::new(threads);
                        let mut out = vec![f32::NAN; n_tokens * n_out + 5];
                        let mut scratch = Scratch::default();
                        matmul(&pool, &w, &x, n_tokens, &mut out, &mut scratch);
                        for i in 0..n_tokens * n_out {
                            assert_eq!(
                                out[i].to_bits(),
                                want[i].to_bits(),
                                "{} tokens={n_tokens} threads={threads} (t {}, r {}): {} vs {}",
                                ty.name(),
                                i / n_out,
                                i % n_out,
                                out[i],
                                want[i]
                            );
                        }
                        assert!(out[n_tokens * n_out..].iter().all(|v| v.is_nan()), "wrote past the output");
                    }
                }
            }
        }
    }

    /// Decode (one token) GB/s of whole matmuls on a 2-thread pool over matrices far larger
    /// than the caches, by type and shape (`-- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn decode_bandwidth_two_threads() {
        let mut seed = 5u64;
        let pool = ThreadPool::new(2);
        for (ty, n_in, n_out) in [(GgmlType::Q6_K, 2048, 128256), (GgmlType::Q4_K, 2048, 8192 * 24), (GgmlType::Q4_K, 8192, 2048 * 24), (GgmlType::Q6_K, 8192, 2048 * 12)] {
            let data = random_matrix(ty, n_in, n_out, &mut seed);
            let Some(dot) = quant::dot_fn(ty) else { continue };
            // SAFETY: `data` outlives `w`.
            let w = unsafe { Weight::new(ty, n_in, n_out, &data, dot) };
            let x: Vec<f32> = (0..n_in).map(|_| (rng(&mut seed) % 2001) as f32 / 1000.0 - 1.0).collect();
            let mut out = vec![0f32; n_out];
            let mut scratch = Scratch::default();
            let mut best = f64::MAX;
            for _ in 0..8 {
                let t = std::time::Instant::now();
                matmul(&pool, &w, &x, 1, &mut out, &mut scratch);
                best = best.min(t.elapsed().as_secs_f64());
            }
            eprintln!("{} {n_in}x{n_out}: {:.1} GB/s ({:.1} ms)", ty.name(), data.len() as f64 / best / 1e9, best * 1e3);
        }
    }
}