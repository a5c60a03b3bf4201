//! Products of quantized weight matrices with f32 activations. Activations are
//! quantized once per row into the weight type's `vec_dot_type`, then every output
//! element is one integer dot product; output rows are split across the pool.
use super::pool::ThreadPool;
use crate::quant::{self, activation, DotFn, DotRowsFn, GgmlType};

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
}

// SAFETY: `Weight` only reads immutable mapped memory that the model keeps alive.
unsafe impl Send for Weight {}
unsafe impl Sync for Weight {}

impl Weight {
    /// # Safety
    /// `data` must stay valid (and unmodified) for as long as the `Weight` is used.
    pub unsafe fn new(ty: GgmlType, n_in: usize, n_out: usize, data: &[u8], dot: DotFn) -> Weight {
        let dot_rows = quant::dot_rows_fn(ty);
        Weight { ty, n_in, n_out, row_bytes: ty.row_bytes(n_in), ptr: data.as_ptr(), len: data.len(), dot, dot_rows }
    }

    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: constructed from a slice the owner keeps alive (see `new`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
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

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: tasks write disjoint elements (distinct output rows).
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Reusable buffer for quantized activations.
#[derive(Default)]
pub struct Scratch {
    q: Vec<u8>,
    row: Vec<u8>,
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

/// out[t, r] = Σ_k w[r, k] · x[t, k]   for t < n_tokens, r < n_out
/// x: [n_tokens, n_in] row-major, out: [n_tokens, n_out] row-major.
pub fn matmul(pool: &ThreadPool, w: &Weight, x: &[f32], n_tokens: usize, out: &mut [f32], scratch: &mut Scratch) {
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
    assert!(out.len() >= n_tokens * n_out);
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
    pool.run(n_chunks, |c| {
        let optr = optr;
        let r0 = c * rows_per;
        let r1 = (r0 + rows_per).min(n_out);
        let mut tmp = [0f32; TOKEN_TILE];
        let mut t0 = 0;
        while t0 < n_tokens {
            let t1 = (t0 + TOKEN_TILE).min(n_tokens);
            for r in r0..r1 {
                let wr = w.row(r);
                match dot_rows {
                    Some(f) if t1 - t0 > 1 => {
                        // weights decoded once for the whole token tile (bit-identical to `dot`)
                        let o = &mut tmp[..t1 - t0];
                        f(n, wr, &xq[t0 * q_row..t1 * q_row], q_row, o);
                        for (i, &v) in o.iter().enumerate() {
                            // SAFETY: (t, r) is written by exactly one task; in bounds by the assert above.
                            unsafe { *optr.0.add((t0 + i) * n_out + r) = v };
                        }
                    }
                    _ => {
                        prefetch_row(w, r + PREFETCH_ROWS, r1);
                        for t in t0..t1 {
                            let v = dot(n, wr, &xq[t * q_row..(t + 1) * q_row]);
                            // SAFETY: (t, r) is written by exactly one task; in bounds by the assert above.
                            unsafe { *optr.0.add(t * n_out + r) = v };
                        }
                    }
                }
            }
            t0 = t1;
        }
    });
}
