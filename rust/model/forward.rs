//! The forward pass shared by every architecture; per-arch differences are data
//! in `Config` and optional tensors in `Layer` (biases, QK-norm, post-norms, fused
//! projections). Shapes are noted as [rows, cols] row-major, one row per token.
use super::{Activation, Layer, Model};
use crate::cpu::attention::{attention, AttnShape, QueryPos};
use crate::cpu::ops::{add_inplace, geglu, rms_norm, rope_apply, rope_cache, swiglu};
use crate::cpu::{matmul_masked, Scratch, ThreadPool};
use crate::error::{Error, Result};
use crate::gpu::StepIo;
use crate::kv_cache::KvStore;
use super::orders::{token_order, Masks};
use super::probe::tap as probe;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogitRows {
    None,
    Last,
    All,
}

/// One sequence's share of a batch: `n` consecutive tokens of `slot` from position `pos0`.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    pub slot: usize,
    pub pos0: usize,
    pub n: usize,
    pub logits: LogitRows,
    /// The slot's `SeqCells::ring_lo` (0 when every key is held).
    pub ring_lo: usize,
    /// Where the sequence's prompt ends (positions from there on are generated tokens) and
    /// the chunk size of prompt evaluation: they pick llama.cpp's kernel orders (`orders.rs`).
    pub prompt_end: usize,
    pub ubatch: usize,
}

/// Preallocated activations for up to `cap` tokens; grows only when a larger batch arrives.
#[derive(Default)]
pub struct State {
    cap: usize,
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    qkv: Vec<f32>,
    attn: Vec<f32>,
    o: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    queries: Vec<QueryPos>,
    sel: Vec<usize>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    pub logits: Vec<f32>,
    scratch: Scratch,
    /// Per-token kernel orders (`orders.rs`).
    masks: Masks,
    /// Device activations when layers are offloaded.
    gpu: Option<crate::gpu::Acts>,
}

impl State {
    fn ensure(&mut self, m: &Model, n: usize) {
        if n <= self.cap {
            return;
        }
        let c = &m.config;
        let (e, qd, kd, vd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim);
        let ad = c.n_head * c.v_head_dim;
        self.x = vec![0.0; n * e];
        self.h = vec![0.0; n * e.max(ad)];
        self.q = vec![0.0; n * qd];
        self.k = vec![0.0; n * kd];
        self.v = vec![0.0; n * vd];
        self.qkv = if m.layers.iter().any(|l| l.wqkv.is_some()) { vec![0.0; n * (qd + kd + vd)] } else { Vec::new() };
        self.attn = vec![0.0; n * ad];
        self.o = vec![0.0; n * e];
        self.gate = vec![0.0; n * c.n_ff];
        self.up = vec![0.0; n * 2 * c.n_ff];
        self.cap = n;
    }
}


impl Model {
    /// Run a batch through the model: `tokens` is the concatenation of the spans' tokens
    /// (each span one sequence, every row independent of the others, so a sequence's
    /// results do not depend on what it is batched with). K/V go into `kv`.
    /// Returns logits [rows, n_vocab] for the rows the spans ask for, in span order.
    pub fn forward<'s>(&self, pool: &ThreadPool, st: &'s mut State, kv: &mut KvStore, tokens: &[u32], spans: &[Span]) -> Result<&'s [f32]> {
        self.run(pool, st, kv, tokens, spans, false)
    }

    /// Like `forward`, but returns the final-normed hidden states [rows, n_embd] of the
    /// requested rows instead of logits (embeddings).
    pub fn forward_hidden<'s>(&self, pool: &ThreadPool, st: &'s mut State, kv: &mut KvStore, tokens: &[u32], spans: &[Span]) -> Result<&'s [f32]> {
        self.run(pool, st, kv, tokens, spans, true)
    }

    fn run<'s>(&self, pool: &ThreadPool, st: &'s mut State, kv: &mut KvStore, tokens: &[u32], spans: &[Span], hidden: bool) -> Result<&'s [f32]> {
        let c = &self.config;
        let n = tokens.len();
        if n == 0 {
            return Err(Error::InvalidRequest("empty batch: no tokens to evaluate".into()));
        }
        if spans.iter().map(|s| s.n).sum::<usize>() != n {
            return Err(Error::InvalidRequest("batch spans do not cover the tokens".into()));
        }
        for sp in spans {
            if sp.slot >= kv.n_slots {
                return Err(Error::InvalidRequest(format!("slot {} does not exist ({} slots)", sp.slot, kv.n_slots)));
            }
            if sp.pos0 + sp.n > kv.slot_ctx {
                return Err(Error::ContextOverflow { n_tokens: sp.pos0 + sp.n, n_ctx: kv.slot_ctx });
            }
            for (il, l) in kv.layers.iter().enumerate() {
                if l.cap < kv.slot_ctx && c.is_swa(il) && sp.n + c.sliding_window > l.cap + 1 {
                    return Err(Error::InvalidRequest(format!(
                        "{} tokens of one sequence in a batch do not fit the sliding-window cache of {} rows",
                        sp.n, l.cap
                    )));
                }
            }
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= c.n_vocab) {
            return Err(Error::InvalidRequest(format!("token id {bad} is out of range (n_vocab = {})", c.n_vocab)));
        }
        st.ensure(self, n);
        let e = c.n_embd;
        st.queries.clear();
        st.sel.clear();
        st.masks.clear();
        for sp in spans {
            let t0 = st.queries.len();
            for pos in sp.pos0..sp.pos0 + sp.n {
                let o = token_order(pos, sp.prompt_end, sp.ubatch);
                st.queries.push(QueryPos { slot: sp.slot, pos, ring_lo: sp.ring_lo, batch_order: o.attn });
                st.masks.push(o);
                if sp.logits == LogitRows::All {
                    st.masks.push_out(o);
                }
            }
            match sp.logits {
                LogitRows::None => {}
                // a row asked for alone is a one-row output matmul in llama.cpp
                LogitRows::Last => {
                    st.sel.push(t0 + sp.n - 1);
                    st.masks.push_out(Default::default());
                }
                LogitRows::All => st.sel.extend(t0..t0 + sp.n),
            }
        }

        let dev_embed = self.gpu.as_ref().is_some_and(|g| g.embeds_on_device());
        let first_gpu = self.gpu.as_ref().map(|g| g.first_layer()).unwrap_or(c.n_layer);
        // [n, n_embd] token embeddings
        if !dev_embed {
            for (t, &tok) in tokens.iter().enumerate() {
                let row = &mut st.x[t * e..(t + 1) * e];
                self.tok_embd.dequantize_row(tok as usize, row);
                if c.embd_scale != 1.0 {
                    row.iter_mut().for_each(|v| *v *= c.embd_scale);
                }
            }
            probe("inp_scaled", None, &mut st.x[..n * e]);
        }
        for (il, layer) in self.layers.iter().enumerate().take(first_gpu) {
            self.layer(pool, st, kv, il, layer, n, spans)?;
        }
        if let Some(g) = &self.gpu {
            // the rest of the layers and the output layer on the device
            let input = if dev_embed { StepIo::Tokens } else { StepIo::Hidden(&st.x[..n * e]) };
            let mut out = std::mem::take(&mut st.logits);
            let r = g.forward(self, &mut st.gpu, kv, tokens, &st.queries, &st.masks, &st.sel, input, hidden, &mut out);
            st.logits = out;
            r?;
            let width = if hidden { e } else { c.n_vocab };
            return Ok(&st.logits[..st.sel.len() * width]);
        }
        // final norm over the selected rows (gathered into h), then logits   [nr, n_vocab]
        let nr = st.sel.len();
        if nr == 0 {
            return Ok(&st.logits[..0]);
        }
        for (i, &t) in st.sel.iter().enumerate() {
            let (src, dst) = (t * e, i * e);
            if src != dst {
                st.x.copy_within(src..src + e, dst);
            }
            rms_norm(&mut st.x[dst..dst + e], &self.output_norm, c.rms_eps);
        }
        probe("result_norm", None, &mut st.x[..nr * e]);
        if hidden {
            return Ok(&st.x[..nr * e]);
        }
        st.logits.resize(nr * c.n_vocab, 0.0);
        matmul_masked(pool, &self.output, &st.x[..nr * e], nr, &mut st.logits, &mut st.scratch, st.masks.outputs(self.output.ty));
        probe("result_output", None, &mut st.logits[..nr * c.n_vocab]);
        Ok(&st.logits[..nr * c.n_vocab])
    }

    #[allow(clippy::too_many_arguments)]
    fn layer(&self, pool: &ThreadPool, st: &mut State, kv: &mut KvStore, il: usize, l: &Layer, n: usize, spans: &[Span]) -> Result<()> {
        let c = &self.config;
        let (e, hd, vd) = (c.n_embd, c.head_dim, c.v_head_dim);
        let (qd, kd, vdim) = (c.n_head * hd, c.n_head_kv * hd, c.n_head_kv * vd);

        // h = RMSNorm(x) · attn_norm                                   [n, e]
        st.h[..n * e].copy_from_slice(&st.x[..n * e]);
        for t in 0..n {
            rms_norm(&mut st.h[t * e..(t + 1) * e], &l.attn_norm, c.rms_eps);
        }
        probe("attn_norm", Some(il), &mut st.h[..n * e]);
        // q, k, v projections                                          [n, qd] [n, kd] [n, vdim]
        if let Some(wqkv) = &l.wqkv {
            matmul_masked(pool, wqkv, &st.h[..n * e], n, &mut st.qkv, &mut st.scratch, st.masks.tokens(wqkv.ty));
            let w = qd + kd + vdim;
            for t in 0..n {
                let r = &st.qkv[t * w..(t + 1) * w];
                st.q[t * qd..(t + 1) * qd].copy_from_slice(&r[..qd]);
                st.k[t * kd..(t + 1) * kd].copy_from_slice(&r[qd..qd + kd]);
                st.v[t * vdim..(t + 1) * vdim].copy_from_slice(&r[qd + kd..]);
            }
        } else if let (Some(wq), Some(wk), Some(wv)) = (&l.wq, &l.wk, &l.wv) {
            matmul_masked(pool, wq, &st.h[..n * e], n, &mut st.q, &mut st.scratch, st.masks.tokens(wq.ty));
            matmul_masked(pool, wk, &st.h[..n * e], n, &mut st.k, &mut st.scratch, st.masks.tokens(wk.ty));
            matmul_masked(pool, wv, &st.h[..n * e], n, &mut st.v, &mut st.scratch, st.masks.tokens(wv.ty));
            probe("Qcur", Some(il), &mut st.q[..n * qd]);
            probe("Kcur", Some(il), &mut st.k[..n * kd]);
            probe("Vcur", Some(il), &mut st.v[..n * vdim]);
        }
        for (buf, bias, dim) in [(&mut st.q, &l.bq, qd), (&mut st.k, &l.bk, kd), (&mut st.v, &l.bv, vdim)] {
            if let Some(b) = bias {
                for t in 0..n {
                    add_inplace(&mut buf[t * dim..(t + 1) * dim], b);
                }
            }
        }
        // per-head QK-norm (Gemma 3, Qwen 3)
        if let Some(w) = &l.q_norm {
            st.q[..n * qd].chunks_exact_mut(hd).for_each(|h| rms_norm(h, w, c.rms_eps));
        }
        if let Some(w) = &l.k_norm {
            st.k[..n * kd].chunks_exact_mut(hd).for_each(|h| rms_norm(h, w, c.rms_eps));
        }
        probe("Qcur_normed", Some(il), &mut st.q[..n * qd]);
        probe("Kcur_normed", Some(il), &mut st.k[..n * kd]);
        // RoPE on q and k, per token position
        let swa = c.is_swa(il);
        let (base, scale) = if swa { (c.rope_base_swa, c.rope_freq_scale_swa) } else { (c.rope_base, c.rope_freq_scale) };
        let half = c.n_rot / 2;
        st.cos.resize(half, 0.0);
        st.sin.resize(half, 0.0);
        for t in 0..n {
            rope_cache(st.queries[t].pos, c.n_rot, base, scale, self.rope_freqs.as_deref(), &mut st.cos, &mut st.sin);
            for h in st.q[t * qd..(t + 1) * qd].chunks_exact_mut(hd) {
                rope_apply(h, c.n_rot, c.rope_neox, &st.cos, &st.sin);
            }
            for h in st.k[t * kd..(t + 1) * kd].chunks_exact_mut(hd) {
                rope_apply(h, c.n_rot, c.rope_neox, &st.cos, &st.sin);
            }
        }
        if c.q_scale != 1.0 {
            st.q[..n * qd].iter_mut().for_each(|v| *v *= c.q_scale);
        }
        probe("Qrope", Some(il), &mut st.q[..n * qd]);
        probe("Krope", Some(il), &mut st.k[..n * kd]);
        let mut t0 = 0;
        for sp in spans {
            kv.store(il, sp.slot, sp.pos0, &st.k[t0 * kd..], &st.v[t0 * vdim..], sp.n);
            t0 += sp.n;
        }
        let shape = AttnShape {
            n_head: c.n_head,
            n_head_kv: c.n_head_kv,
            head_dim: hd,
            v_head_dim: vd,
            scale: c.kq_scale,
            window: if swa { Some(c.sliding_window) } else { None },
            softcap: 0.0,
        };
        let lkv = &kv.layers[il];
        let ring = !kv.is_full(il);
        attention(pool, &shape, &st.q[..n * qd], &lkv.k, &lkv.v, lkv.cap, ring, &st.queries, &mut st.attn);
        probe("kqv_out", Some(il), &mut st.attn[..n * c.n_head * vd]);
        // o = Wo · attn                                                  [n, e]
        let ad = c.n_head * vd;
        matmul_masked(pool, &l.wo, &st.attn[..n * ad], n, &mut st.o, &mut st.scratch, st.masks.tokens(l.wo.ty));
        probe("attn_o", Some(il), &mut st.o[..n * e]);
        if let Some(w) = &l.post_attn_norm {
            st.o[..n * e].chunks_exact_mut(e).for_each(|r| rms_norm(r, w, c.rms_eps));
        }
        probe("attn_post_norm", Some(il), &mut st.o[..n * e]);
        add_inplace(&mut st.x[..n * e], &st.o[..n * e]);
        probe("sa_out", Some(il), &mut st.x[..n * e]);

        // FFN: h = RMSNorm(x) · ffn_norm; act(gate·h) ⊙ (up·h); down
        st.h[..n * e].copy_from_slice(&st.x[..n * e]);
        for t in 0..n {
            rms_norm(&mut st.h[t * e..(t + 1) * e], &l.ffn_norm, c.rms_eps);
        }
        probe("ffn_norm", Some(il), &mut st.h[..n * e]);
        let f = c.n_ff;
        if let Some(gate) = &l.gate {
            matmul_masked(pool, gate, &st.h[..n * e], n, &mut st.gate, &mut st.scratch, st.masks.tokens(gate.ty));
            matmul_masked(pool, &l.up, &st.h[..n * e], n, &mut st.up, &mut st.scratch, st.masks.tokens(l.up.ty));
        } else {
            // fused [gate; up] rows (Phi-3): split each token's [2f] output in halves,
            // compacting up in place front to back (row t's destination [t·f, (t+1)·f) lies
            // before its own source [2t·f + f, ..) and after every earlier row's source).
            matmul_masked(pool, &l.up, &st.h[..n * e], n, &mut st.up, &mut st.scratch, st.masks.tokens(l.up.ty));
            for t in 0..n {
                st.gate[t * f..(t + 1) * f].copy_from_slice(&st.up[t * 2 * f..t * 2 * f + f]);
                st.up.copy_within(t * 2 * f + f..(t + 1) * 2 * f, t * f);
            }
        }
        probe("ffn_gate", Some(il), &mut st.gate[..n * f]);
        probe("ffn_up", Some(il), &mut st.up[..n * f]);
        match c.activation {
            Activation::GeluTanh => geglu(&mut st.gate[..n * f], &st.up[..n * f]),
            Activation::Silu => swiglu(&mut st.gate[..n * f], &st.up[..n * f]),
        }
        probe("ffn_geglu", Some(il), &mut st.gate[..n * f]);
        matmul_masked(pool, &l.down, &st.gate[..n * f], n, &mut st.o, &mut st.scratch, st.masks.tokens(l.down.ty));
        probe("ffn_out", Some(il), &mut st.o[..n * e]);
        if let Some(w) = &l.post_ffn_norm {
            st.o[..n * e].chunks_exact_mut(e).for_each(|r| rms_norm(r, w, c.rms_eps));
        }
        probe("ffn_post_norm", Some(il), &mut st.o[..n * e]);
        add_inplace(&mut st.x[..n * e], &st.o[..n * e]);
        probe("l_out", Some(il), &mut st.x[..n * e]);
        Ok(())
    }
}
