//! Causal self-attention over the KV cache without flash attention: GQA/MQA, optional
//! sliding window. Numerics follow ggml's non-fused path bit for bit: Q converted to K's dot
//! type, QK^T and P·V in the lane order of the matmul llama.cpp runs (tinyBLAS for a chunk of
//! two or more tokens, the type's `ggml_vec_dot_*` for one: the query's `batch_order`;
//! `f16vec.rs`), softmax with ggml's exponential and 16-wide partial sums by key position,
//! probabilities converted to V's type (f16, bf16; f32 as they are) before the V product
//! (ggml's `mul_mat` of the transposed V by them). One task handles one token and one KV head with all the query heads that
//! share it, so each K/V row is read and widened once per group, not once per head. On
//! AVX-512 an f16 cache's batch order runs through `attn_avx512.rs` (the same bits).
use super::f16vec::{dot_f16_rows, softmax_ggml, Lanes, Order};
use super::pool::ThreadPool;
use crate::quant::f16::{bf16_to_f32, f16_to_f32, f32_to_bf16, round_f16_slice};
use crate::quant::{activation, vec_dot_type};
use crate::kv_cache::types::{as_bytes, k_dot, k_dot_batch, load_row, KvType};
#[cfg(target_arch = "x86_64")]
use super::attn_avx512::VCols as Columns;
pub use super::attention_bidir::attention_bidirectional;
pub use super::attention_fa::KvRows;

pub struct AttnShape<'a> {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    /// Multiplier applied to QK^T before the softmax.
    pub scale: f32,
    /// Sliding window: keys with pos_q - pos_k >= window are masked.
    pub window: Option<usize>,
    /// Gemma-2 style soft-capping of scores (0 = off).
    pub softcap: f32,
    /// Per query head, a sink logit the softmax takes in (gpt-oss), reading no value.
    pub sinks: Option<&'a [f32]>,
}

impl AttnShape<'_> {
    /// A score from its dot product as llama.cpp's graph computes it: soft-capped
    /// (`ggml_scale` by 1/cap, `tanh`, `ggml_scale` by cap), then scaled inside the softmax.
    #[inline]
    pub(super) fn score(&self, dot: f32) -> f32 {
        let x = if self.softcap > 0.0 { (dot * (1.0 / self.softcap)).tanh() * self.softcap } else { dot };
        x * self.scale
    }
}

#[derive(Clone, Copy)]
pub(super) struct SendPtr(pub(super) *mut f32);
// SAFETY: each task writes its own (token, head) slices of the output.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// Where one query token's keys live: its sequence's slot and its absolute position.
#[derive(Clone, Copy, Debug)]
pub struct QueryPos {
    pub slot: usize,
    pub pos: usize,
    /// Lowest key position a sliding-window ring still holds for this sequence (keys
    /// below it were overwritten, e.g. after a context shift); ignored for full layers.
    pub ring_lo: usize,
    /// llama.cpp's batch order (tinyBLAS) for this token's QK^T and P·V, else its one-token
    /// order (`ggml_vec_dot_f16`); see `model/orders.rs`.
    pub batch_order: bool,
}

/// q: [n_tokens, n_head*head_dim]; k, v: cache rows (f16) [n_slots*cap, n_head_kv*head_dim]
/// where key position j of slot s sits in row s*cap + j % cap (cap = slot size for full
/// layers, the ring size for sliding-window ones); query t sees its slot's keys up to
/// queries[t].pos (from queries[t].ring_lo on when `ring`); out: [n_tokens, n_head*v_head_dim].
/// K may be of any cache type (its scores then come from the type's dot against Q converted
/// to the type's dot format, ggml's `mul_mat(k, q)`); V is f16, bf16 or f32 (a quantized V
/// needs flash attention).
pub fn attention(pool: &ThreadPool, s: &AttnShape, q: &[f32], kv: &KvRows, queries: &[QueryPos], out: &mut [f32]) {
    let n_tokens = queries.len();
    let (hd, vd) = (s.head_dim, s.v_head_dim);
    let (k, v, cap, ring) = (kv.k, kv.v, kv.cap, kv.ring);
    let (kdim, vdim) = (kv.k_units, kv.v_units);
    let kt = kv.k_type;
    let k_head = kt.ggml().row_bytes(hd);
    let vt = kv.v_type;
    let qt = vec_dot_type(kt.ggml());
    let group = s.n_head / s.n_head_kv;
    let wide = tiny16_wide();
    let cols = if vt == KvType::F16 && wide && vd % 16 == 0 { value_columns(s, kv, queries) } else { Vec::new() };
    let optr = SendPtr(out.as_mut_ptr());
    pool.run(n_tokens * s.n_head_kv, |task| {
        // the whole wrapper (Sync), not its raw pointer field (edition-2021 closures capture fields)
        #[allow(clippy::redundant_locals)]
        let optr = optr;
        let (t, g) = (task / s.n_head_kv, task % s.n_head_kv);
        let QueryPos { slot, pos, batch_order, .. } = queries[t];
        // the orders of ggml's two f16 matmuls (tinyBLAS needs k % 16 == 0 and m % 4 == 0)
        let kq_order = if batch_order && hd % 16 == 0 { Order::Tiny16 } else { Order::Vec64 };
        let kqv_order = match (batch_order && vd % 4 == 0, vt) {
            (true, _) => Order::Tiny16,
            (false, KvType::BF16) => Order::Bf16x32,
            (false, _) => Order::Vec64,
        };
        let kdot = if kq_order == Order::Tiny16 { k_dot_batch(kt) } else { k_dot(kt) };
        let row = |j: usize| slot * cap + j % cap;
        let start = key_start(s, &queries[t], ring);
        let n_keys = pos + 1 - start;
        // Q of the group's heads, rounded to f16 (ggml converts Q to K's type)   [group, hd]
        let h0 = g * group;
        let qrow = &q[t * s.n_head * hd + h0 * hd..][..group * hd];
        // scores [group, n_keys]
        let mut scores = vec![0f32; group * n_keys];
        let mut dots = vec![0f32; group];
        if kt == KvType::F16 {
            let mut qh = qrow.to_vec();
            round_f16_slice(&mut qh);
            let fast = kq_order == Order::Tiny16 && wide && hd % 16 == 0 && {
                let keys: Vec<&[u16]> = (start..=pos).map(|j| &k[row(j) * kdim + g * hd..][..hd]).collect();
                tiny16_keys(&qh, group, hd, &keys, &mut scores)
            };
            if fast {
                scores.iter_mut().for_each(|x| *x = s.score(*x));
            } else {
                for (idx, j) in (start..=pos).enumerate() {
                    let kj = &k[row(j) * kdim + g * hd..][..hd];
                    dot_f16_rows(&qh, kj, hd, kq_order, &mut dots);
                    for (hh, &dt) in dots.iter().enumerate() {
                        scores[hh * n_keys + idx] = s.score(dt);
                    }
                }
            }
        } else if let Some(kdot) = kdot {
            let qq: Vec<Vec<u8>> = qrow.chunks_exact(hd).map(|x| { let mut b = Vec::new(); activation::quantize(qt, x, &mut b); b }).collect();
            for (idx, j) in (start..=pos).enumerate() {
                let kj = &as_bytes(&k[row(j) * kdim..(row(j) + 1) * kdim])[g * k_head..(g + 1) * k_head];
                for (hh, qb) in qq.iter().enumerate() {
                    scores[hh * n_keys + idx] = s.score(kdot(hd, kj, qb));
                }
            }
        }
        for hh in 0..group {
            let sc = &mut scores[hh * n_keys..(hh + 1) * n_keys];
            softmax_ggml(sc, start, s.sinks.map(|k| k[h0 + hh]));
            match vt {
                KvType::F16 => round_f16_slice(sc),
                KvType::BF16 => sc.iter_mut().for_each(|p| *p = bf16_to_f32(f32_to_bf16(*p))),
                _ => {}
            }
        }
        let (v_off, v_len) = (vt.units(g * vd), vt.units(vd));
        let mut vf = vec![0f32; if vt == KvType::F16 { 0 } else { vd }];
        // SAFETY: the output slices of (t, heads h0..h0+group) are written only by this task.
        let o = unsafe { std::slice::from_raw_parts_mut(optr.0.add(t * s.n_head * vd + h0 * vd), group * vd) };
        if kqv_order == Order::Tiny16 {
            // the batch's V columns of this slot and group (`value_columns`)
            if let Some((_, c)) = cols.iter().find(|(sl, _)| *sl == slot) {
                let mut pg = Vec::new();
                if (0..group).all(|hh| pv_columns(&scores[hh * n_keys..(hh + 1) * n_keys], start, &c[g], vd, &mut o[hh * vd..(hh + 1) * vd], &mut pg)) {
                    return;
                }
            }
        }
        if vt == KvType::F16 && kqv_order == Order::Tiny16 && wide && vd % 16 == 0 {
            // the group's V rows, gathered once for all its heads
            let rows: Vec<&[u16]> = (start..=pos).map(|j| &v[row(j) * vdim + v_off..][..v_len]).collect();
            if (0..group).all(|hh| tiny16_values(&scores[hh * n_keys..(hh + 1) * n_keys], start, &rows, vd, &mut o[hh * vd..(hh + 1) * vd])) {
                return;
            }
        }
        Lanes::with(kqv_order, vd, |lanes| {
            for hh in 0..group {
                lanes.reset();
                for (idx, j) in (start..=pos).enumerate() {
                    let p = scores[hh * n_keys + idx];
                    if p == 0.0 {
                        continue;
                    }
                    let vj = &v[row(j) * vdim + v_off..][..v_len];
                    if vt == KvType::F16 {
                        lanes.add(j, p, vj);
                    } else {
                        load_row(vt, vj, &mut vf);
                        lanes.add_f32(j, p, &vf);
                    }
                }
                lanes.reduce_into(&mut o[hh * vd..(hh + 1) * vd]);
            }
        });
    });
}

/// The first key position query `q` sees (its window, and on a ring what the ring still holds).
fn key_start(s: &AttnShape, q: &QueryPos, ring: bool) -> usize {
    let start = match s.window {
        Some(w) if w > 0 => (q.pos + 1).saturating_sub(w),
        _ => 0,
    };
    if ring {
        start.max(q.ring_lo.min(q.pos))
    } else {
        start
    }
}

/// Most bytes of f32 value columns one attention call builds (past it, P·V widens the f16
/// rows per query as before).
const COLUMN_BYTES: usize = 64 << 20;

/// For each slot with at least two batch-order queries (an f16 V cache, AVX-512): its KV
/// groups' V rows over the keys those queries see, widened to f32 and transposed once
/// (`attn_avx512::VCols`) for all of them, instead of once per query and head.
fn value_columns(s: &AttnShape, kv: &KvRows, queries: &[QueryPos]) -> Vec<(usize, Vec<Columns>)> {
    let mut spans: Vec<(usize, usize, usize, usize)> = Vec::new(); // slot, lowest key, highest, queries
    for q in queries.iter().filter(|q| q.batch_order && s.v_head_dim % 4 == 0) {
        let lo = key_start(s, q, kv.ring);
        match spans.iter_mut().find(|x| x.0 == q.slot) {
            Some(x) => *x = (x.0, x.1.min(lo), x.2.max(q.pos), x.3 + 1),
            None => spans.push((q.slot, lo, q.pos, 1)),
        }
    }
    let vd = s.v_head_dim;
    let mut out = Vec::new();
    let mut bytes = 0;
    for (slot, lo, hi, n) in spans {
        let j0 = lo - lo % 16;
        let width = (hi + 1 - j0).next_multiple_of(16);
        if n < 2 || bytes + width * vd * s.n_head_kv * 4 > COLUMN_BYTES {
            continue;
        }
        bytes += width * vd * s.n_head_kv * 4;
        let groups = (0..s.n_head_kv)
            .map(|g| {
                let mut data = vec![0f32; vd * width];
                for j in lo..=hi {
                    let r = &kv.v[(slot * kv.cap + j % kv.cap) * kv.v_units + g * vd..][..vd];
                    for (e, &h) in r.iter().enumerate() {
                        data[e * width + j - j0] = f16_to_f32(h);
                    }
                }
                Columns::new(j0, width, data)
            })
            .collect();
        out.push((slot, groups));
    }
    out
}

/// Without the AVX-512 kernels no columns are built; the type only keeps the signatures.
#[cfg(not(target_arch = "x86_64"))]
struct Columns;
#[cfg(not(target_arch = "x86_64"))]
impl Columns {
    fn new(_: usize, _: usize, _: Vec<f32>) -> Columns {
        Columns
    }
}

/// P·V of one head from the batch's value columns (false: not applicable, nothing written).
fn pv_columns(p: &[f32], pos0: usize, cols: &Columns, vd: usize, out: &mut [f32], scratch: &mut Vec<f32>) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::attn_avx512::pv_cols(p, pos0, cols, vd, out, scratch);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, pos0, cols, vd, out, scratch);
        false
    }
}

/// Whether the batch order's AVX-512 kernels (`attn_avx512.rs`) run on this machine.
fn tiny16_wide() -> bool {
    cfg!(target_arch = "x86_64") && crate::quant::isa() == crate::quant::Isa::Avx512
}

/// The AVX-512 QK^T kernel of the batch order (false: not applicable, nothing written).
fn tiny16_keys(q: &[f32], heads: usize, d: usize, keys: &[&[u16]], scores: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::attn_avx512::qk_tiny16(q, heads, d, keys, scores);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (q, heads, d, keys, scores);
        false
    }
}

/// The AVX-512 P·V kernel of the batch order (false: not applicable, nothing written).
fn tiny16_values(p: &[f32], pos0: usize, rows: &[&[u16]], vd: usize, out: &mut [f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    return super::attn_avx512::pv_tiny16(p, pos0, rows, vd, out);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, pos0, rows, vd, out);
        false
    }
}
