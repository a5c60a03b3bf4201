//! The CPU forward pass: token embeddings, each layer's steps (`plan.rs`, the same list
//! the GPU offload runs) executed with the CPU kernels, then the output layer. Shapes are
//! [rows, cols] row-major, one row per token.
use super::plan::{Buf, Step, N_BUFS};
use super::{Activation, Head, Model, Norm};
use crate::cpu::attention::{attention, attention_bidirectional, AttnShape, KvRows, QueryPos};
use crate::cpu::attention_fa::flash_attention;
use crate::cpu::ops::{add_inplace, geglu, gelu_inplace, layer_norm, rms_norm, rope_apply, rope_cache, silu, swiglu_ggml};
use crate::cpu::{matmul_masked, Scratch, ThreadPool};
use crate::error::{Error, Result};
use crate::gpu::StepIo;
use crate::kv_cache::types::{hadamard, rotation};
use crate::kv_cache::KvStore;
use super::moe::{moe_forward, MoeScratch};
use super::orders::{token_order, Masks};
use super::probe::tap as probe;
use super::lora::{add_delta, add_embd_delta, LoraScratch};
use std::sync::Arc;

/// A run of a batch's tokens under one LoRA scale list: (first token, count, scales).
type LoraRun = (usize, usize, Arc<[f32]>);

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
    /// The activations steps read and write, indexed by `Buf`.
    bufs: [Vec<f32>; N_BUFS],
    queries: Vec<QueryPos>,
    sel: Vec<usize>,
    cos: Vec<f32>,
    sin: Vec<f32>,
    pub logits: Vec<f32>,
    scratch: Scratch,
    /// Per-token kernel orders (`orders.rs`).
    masks: Masks,
    /// Per token, its sequence's prompt chunk (an id shared by the tokens llama.cpp would
    /// evaluate as one batch; mixture-of-experts orders depend on it).
    groups: Vec<u32>,
    moe: MoeScratch,
    /// Device activations when layers are offloaded.
    gpu: Option<crate::gpu::Acts>,
    /// Per slot, the LoRA scales its sequence runs under (one per loaded adapter; None or
    /// missing: none), set by the caller before a pass.
    pub lora: Vec<Option<Arc<[f32]>>>,
    lora_s: LoraScratch,
}

impl State {
    fn ensure(&mut self, m: &Model, n: usize) {
        if n <= self.cap {
            return;
        }
        let c = &m.config;
        let (e, qd, kd, vd) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim);
        let ad = c.n_head * c.v_head_dim;
        let (ff, n_router) = match &c.moe {
            Some(m) => (c.n_ff.max(m.n_ff_shexp), m.n_expert),
            None => (c.n_ff, 1),
        };
        for (b, width) in [
            (Buf::X, e),
            (Buf::H, e.max(ad)),
            (Buf::Q, qd),
            (Buf::K, kd),
            (Buf::V, vd),
            (Buf::Attn, ad.max(qd)),
            (Buf::O, e),
            (Buf::Gate, ff),
            (Buf::Up, ff),
            (Buf::Router, n_router),
        ] {
            self.bufs[b as usize] = vec![0.0; n * width];
        }
        self.cap = n;
    }

    fn buf(&mut self, b: Buf) -> &mut Vec<f32> {
        &mut self.bufs[b as usize]
    }
}

/// Two different buffers at once: `a` to read (or write), `b` to write.
fn two(bufs: &mut [Vec<f32>; N_BUFS], a: Buf, b: Buf) -> (&mut Vec<f32>, &mut Vec<f32>) {
    let (i, j) = (a as usize, b as usize);
    debug_assert_ne!(i, j);
    if i < j {
        let (lo, hi) = bufs.split_at_mut(j);
        (&mut lo[i], &mut hi[0])
    } else {
        let (lo, hi) = bufs.split_at_mut(i);
        (&mut hi[0], &mut lo[j])
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
        st.groups.clear();
        let mut group = 0u32;
        for sp in spans {
            let t0 = st.queries.len();
            let mut chunk = None;
            for pos in sp.pos0..sp.pos0 + sp.n {
                let c = if pos < sp.prompt_end { pos / sp.ubatch.max(1) } else { pos };
                if chunk.is_some_and(|k| k != c) {
                    group += 1;
                }
                chunk = Some(c);
                st.groups.push(group);
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
            group += 1;
        }

        // the spans that run under adapters: their tokens and scales
        let mut runs: Vec<LoraRun> = Vec::new();
        if !self.adapters.is_empty() {
            let mut t0 = 0;
            for sp in spans {
                if let Some(Some(sc)) = st.lora.get(sp.slot) {
                    if sc.iter().any(|&x| x != 0.0) {
                        runs.push((t0, sp.n, sc.clone()));
                    }
                }
                t0 += sp.n;
            }
        }
        let dev_embed = self.gpu.as_ref().is_some_and(|g| g.embeds_on_device());
        let first_gpu = self.gpu.as_ref().map(|g| g.first_layer()).unwrap_or(c.n_layer);
        // [n, n_embd] token embeddings
        if !dev_embed {
            let x = &mut st.bufs[Buf::X as usize];
            for (t, &tok) in tokens.iter().enumerate() {
                self.tok_embd.dequantize_row(tok as usize, &mut x[t * e..(t + 1) * e]);
            }
            for (t0, k, sc) in &runs {
                add_embd_delta(pool, &self.adapters, sc, &tokens[*t0..t0 + k], &mut x[t0 * e..(t0 + k) * e], &mut st.lora_s);
            }
            if c.embd_scale != 1.0 {
                x[..n * e].iter_mut().for_each(|v| *v *= c.embd_scale);
            }
            self.input_extras(st, n)?;
            probe("inp_scaled", None, &mut st.buf(Buf::X)[..n * e]);
        }
        for il in 0..first_gpu.min(self.layers.len()) {
            self.layer(pool, st, kv, il, n, spans, &runs)?;
            if let Some(d) = self.cvec.as_ref().and_then(|cv| cv.layer(il)) {
                // ggml_add(cur, layer_dir) on every token's row
                st.buf(Buf::X)[..n * e].chunks_exact_mut(e).for_each(|r| add_inplace(r, d));
            }
        }
        if let Some(g) = &self.gpu {
            // the rest of the layers and the output layer on the device
            let input = if dev_embed { StepIo::Tokens } else { StepIo::Hidden(&st.bufs[Buf::X as usize][..n * e]) };
            let mut out = std::mem::take(&mut st.logits);
            let r = g.forward(self, &mut st.gpu, kv, tokens, &st.queries, &st.masks, &st.sel, input, hidden, &mut out);
            st.logits = out;
            r?;
            let width = if hidden { e } else { c.n_vocab };
            let rows = &mut st.logits[..st.sel.len() * width];
            if !hidden {
                c.finish_logits(rows);
            }
            return Ok(rows);
        }
        // final norm over the selected rows (gathered into h), then logits   [nr, n_vocab]
        let nr = st.sel.len();
        if nr == 0 {
            return Ok(&st.logits[..0]);
        }
        let out_norm = match &self.head {
            Head::Lm { norm, .. } => Some(norm),
            Head::Encoder { norm, .. } if hidden => norm.as_ref(),
            Head::Encoder { .. } => return Err(self.lm_head().err().unwrap_or_else(|| Error::Internal("encoder without a head".into()))),
        };
        let x = &mut st.bufs[Buf::X as usize];
        for (i, &t) in st.sel.iter().enumerate() {
            let (src, dst) = (t * e, i * e);
            if src != dst {
                x.copy_within(src..src + e, dst);
            }
            match out_norm {
                Some(Norm::Rms(w)) => rms_norm(&mut x[dst..dst + e], w, c.rms_eps),
                Some(Norm::Layer { w, b }) => layer_norm(&mut x[dst..dst + e], w, b.as_deref(), c.norm_eps),
                None => {}
            }
        }
        probe("result_norm", None, &mut x[..nr * e]);
        if hidden {
            return Ok(&st.bufs[Buf::X as usize][..nr * e]);
        }
        let (_, output) = self.lm_head()?;
        st.logits.resize(nr * c.n_vocab, 0.0);
        matmul_masked(pool, output, &st.bufs[Buf::X as usize][..nr * e], nr, &mut st.logits, &mut st.scratch, st.masks.outputs(output.ty));
        if !runs.is_empty() {
            // the selected rows, grouped by the run (sequence) they come from
            let run_of = |t: usize| runs.iter().position(|(t0, k, _)| (*t0..t0 + k).contains(&t));
            let mut i = 0;
            while i < nr {
                let r = run_of(st.sel[i]);
                let j = (i..nr).find(|&j| run_of(st.sel[j]) != r).unwrap_or(nr);
                if let Some(r) = r {
                    let (x, y) = (&st.bufs[Buf::X as usize][i * e..j * e], &mut st.logits[i * c.n_vocab..j * c.n_vocab]);
                    add_delta(pool, &self.adapters, &runs[r].2, output, 0, output.n_out, x, y, j - i, &mut st.lora_s);
                }
                i = j;
            }
        }
        c.finish_logits(&mut st.logits[..nr * c.n_vocab]);
        probe("result_output", None, &mut st.logits[..nr * c.n_vocab]);
        Ok(&st.logits[..nr * c.n_vocab])
    }

    /// An encoder's classifier scores of a sequence from its hidden states [n, n_embd]
    /// (rerankers: the first token, or ModernBERT's mean, as llama.cpp's rank pooling).
    pub fn classify(&self, pool: &ThreadPool, hidden: &[f32]) -> Result<Vec<f32>> {
        let cls = self.classifier()?;
        let e = self.config.n_embd;
        if hidden.len() < e {
            return Err(Error::InvalidRequest("classify: no hidden state to score".into()));
        }
        let mut scratch = crate::cpu::Scratch::default();
        let mut cur = match &cls.modern {
            Some(m) if m.mean => {
                let rows = hidden.len() / e;
                let mut sum = vec![0f32; e];
                for r in hidden.chunks_exact(e) {
                    add_inplace(&mut sum, r);
                }
                sum.iter_mut().for_each(|v| *v /= rows as f32);
                sum
            }
            _ => hidden[..e].to_vec(),
        };
        if let Some((w, b)) = &cls.dense {
            let mut y = vec![0f32; w.n_out];
            crate::cpu::matmul(pool, w, &cur, 1, &mut y, &mut scratch);
            if let Some(b) = b {
                add_inplace(&mut y, b);
            }
            match &cls.modern {
                Some(m) => {
                    crate::cpu::ops::gelu_inplace(&mut y);
                    if let Some(nw) = &m.norm {
                        crate::cpu::ops::layer_norm(&mut y, nw, None, self.config.norm_eps);
                    }
                }
                None => y.iter_mut().for_each(|v| *v = v.tanh()),
            }
            cur = y;
        }
        if let Some((w, b)) = &cls.out {
            let mut y = vec![0f32; w.n_out];
            crate::cpu::matmul(pool, w, &cur, 1, &mut y, &mut scratch);
            if let Some(b) = b {
                add_inplace(&mut y, b);
            }
            cur = y;
        }
        Ok(cur)
    }

    /// Position and token-type embeddings and the embedding norm (encoders) on X.
    fn input_extras(&self, st: &mut State, n: usize) -> Result<()> {
        let x = &self.inputs;
        if x.pos_embd.is_none() && x.token_type0.is_none() && x.norm.is_none() {
            return Ok(());
        }
        let c = &self.config;
        let e = c.n_embd;
        let mut row_buf = vec![0f32; e];
        for t in 0..n {
            let pos = st.queries[t].pos;
            let row = &mut st.bufs[Buf::X as usize][t * e..(t + 1) * e];
            if let Some(tt) = &x.token_type0 {
                add_inplace(row, tt);
            }
            if let Some(p) = &x.pos_embd {
                if pos >= p.n_out {
                    return Err(Error::ContextOverflow { n_tokens: pos + 1, n_ctx: p.n_out });
                }
                p.dequantize_row(pos, &mut row_buf);
                // ggml_add(pos, inp): the position row first
                for (v, &pv) in row.iter_mut().zip(&row_buf) {
                    *v = pv + *v;
                }
            }
            match &x.norm {
                Some(Norm::Layer { w, b }) => layer_norm(row, w, b.as_deref(), c.norm_eps),
                Some(Norm::Rms(w)) => rms_norm(row, w, c.rms_eps),
                None => {}
            }
        }
        Ok(())
    }

    /// Layer `il`'s steps on the CPU.
    #[allow(clippy::too_many_arguments)]
    fn layer(&self, pool: &ThreadPool, st: &mut State, kv: &mut KvStore, il: usize, n: usize, spans: &[Span], runs: &[LoraRun]) -> Result<()> {
        let c = &self.config;
        let (e, hd, vd) = (c.n_embd, c.head_dim, c.v_head_dim);
        let (qd, kd, vdim) = (c.n_head * hd, c.n_head_kv * hd, c.n_head_kv * vd);
        for step in self.layer_steps(il) {
            match step {
                Step::Norm { src, dst, w, width, groups, .. } => {
                    let len = n * width * groups;
                    if src != dst {
                        let (s, d) = two(&mut st.bufs, src, dst);
                        d[..len].copy_from_slice(&s[..len]);
                    }
                    st.buf(dst)[..len].chunks_exact_mut(width).for_each(|r| rms_norm(r, w, c.rms_eps));
                }
                Step::LayerNorm { src, dst, w, b, width, .. } => {
                    let len = n * width;
                    if src != dst {
                        let (s, d) = two(&mut st.bufs, src, dst);
                        d[..len].copy_from_slice(&s[..len]);
                    }
                    pool.rows_mut(&mut st.buf(dst)[..len], width, |r| layer_norm(r, w, b, c.norm_eps));
                }
                Step::Act { buf, act, width } => {
                    let v = &mut st.buf(buf)[..n * width];
                    match act {
                        Activation::GeluTanh => pool.rows_mut(v, width, gelu_inplace),
                        Activation::Silu => pool.rows_mut(v, width, |r| r.iter_mut().for_each(|x| *x = silu(*x))),
                    }
                }
                Step::MatMul { w: full, lo, hi, src, dst, .. } => {
                    let w = if lo == 0 && hi == full.n_out { *full } else { full.rows(lo, hi) };
                    let (x, y) = two(&mut st.bufs, src, dst);
                    matmul_masked(pool, &w, &x[..n * w.n_in], n, &mut y[..n * w.n_out], &mut st.scratch, st.masks.tokens(w.ty));
                    for (t0, k, sc) in runs {
                        let (xs, ys) = (&x[t0 * w.n_in..(t0 + k) * w.n_in], &mut y[t0 * w.n_out..(t0 + k) * w.n_out]);
                        add_delta(pool, &self.adapters, sc, full, lo, hi, xs, ys, *k, &mut st.lora_s);
                    }
                }
                Step::AddBias { dst, b, .. } => {
                    let d = b.len();
                    st.buf(dst)[..n * d].chunks_exact_mut(d).for_each(|r| add_inplace(r, b));
                }
                Step::Rope { swa } => {
                    let rp = c.rope_params(swa, self.rope_freqs.as_deref());
                    let half = c.n_rot / 2;
                    st.cos.resize(half, 0.0);
                    st.sin.resize(half, 0.0);
                    let (q, k) = two(&mut st.bufs, Buf::Q, Buf::K);
                    for t in 0..n {
                        rope_cache(st.queries[t].pos, &rp, &mut st.cos, &mut st.sin);
                        for h in q[t * qd..(t + 1) * qd].chunks_exact_mut(hd) {
                            rope_apply(h, c.n_rot, c.rope_neox, &st.cos, &st.sin);
                        }
                        for h in k[t * kd..(t + 1) * kd].chunks_exact_mut(hd) {
                            rope_apply(h, c.n_rot, c.rope_neox, &st.cos, &st.sin);
                        }
                    }
                }
                Step::Scale { buf, s, width } => st.buf(buf)[..n * width].iter_mut().for_each(|v| *v *= s),
                Step::AttnTemp => {
                    if let Some(t) = &c.attn_temp {
                        let q = &mut st.bufs[Buf::Q as usize];
                        for (row, qp) in q[..n * qd].chunks_exact_mut(qd).zip(&st.queries) {
                            let f = t.at(qp.pos);
                            row.iter_mut().for_each(|v| *v *= f);
                        }
                    }
                }
                Step::Attention { swa, .. } if !c.causal => {
                    // ModernBERT's local layers: a symmetric window
                    let window = if swa && c.sliding_window > 0 { Some(c.sliding_window) } else { None };
                    let shape = AttnShape { n_head: c.n_head, n_head_kv: c.n_head_kv, head_dim: hd, v_head_dim: vd, scale: c.kq_scale, window, softcap: c.attn_softcap, sinks: None };
                    let mut seqs = Vec::with_capacity(spans.len());
                    let mut t0 = 0;
                    for sp in spans {
                        if sp.pos0 != 0 {
                            return Err(Error::InvalidRequest(format!("an encoder reads a whole sequence in one batch (this one starts at position {})", sp.pos0)));
                        }
                        seqs.push((t0, sp.n));
                        t0 += sp.n;
                    }
                    let b = &mut st.bufs;
                    let mut out = std::mem::take(&mut b[Buf::Attn as usize]);
                    let slopes = c.alibi_slopes();
                    attention_bidirectional(pool, &shape, &b[Buf::Q as usize][..n * qd], &b[Buf::K as usize][..n * kd], &b[Buf::V as usize][..n * vdim], &seqs, &slopes, &mut out);
                    b[Buf::Attn as usize] = out;
                }
                Step::Attention { swa, sinks } => {
                    // llama.cpp's Walsh-Hadamard rotations around a quantized cache
                    let (rot_k, rot_v) = (rotation(kv.k_type, hd, true), rotation(kv.v_type, vd, false));
                    if let Some(r) = rot_k {
                        hadamard(&mut st.bufs[Buf::Q as usize][..n * qd], r);
                        hadamard(&mut st.bufs[Buf::K as usize][..n * kd], r);
                    }
                    if let Some(r) = rot_v {
                        hadamard(&mut st.bufs[Buf::V as usize][..n * vdim], r);
                    }
                    let mut t0 = 0;
                    for sp in spans {
                        kv.store(il, sp.slot, sp.pos0, &st.bufs[Buf::K as usize][t0 * kd..], &st.bufs[Buf::V as usize][t0 * vdim..], sp.n);
                        t0 += sp.n;
                    }
                    let shape = AttnShape {
                        n_head: c.n_head,
                        n_head_kv: c.n_head_kv,
                        head_dim: hd,
                        v_head_dim: vd,
                        scale: c.kq_scale,
                        window: if swa { Some(c.sliding_window) } else { None },
                        softcap: c.attn_softcap,
                        sinks,
                    };
                    let lkv = &kv.layers[il];
                    let rows = KvRows { k: &lkv.k, v: &lkv.v, k_type: kv.k_type, v_type: kv.v_type, k_units: kv.k_units, v_units: kv.v_units, cap: lkv.cap, ring: !kv.is_full(il) };
                    let (q, out) = two(&mut st.bufs, Buf::Q, Buf::Attn);
                    if kv.flash_attn {
                        flash_attention(pool, &shape, &q[..n * qd], &rows, &st.queries, out);
                    } else {
                        attention(pool, &shape, &q[..n * qd], &rows, &st.queries, out);
                    }
                    if let Some(r) = rot_v {
                        hadamard(&mut out[..n * c.n_head * vd], r);
                    }
                }
                Step::Residual { src } => {
                    let (o, x) = two(&mut st.bufs, src, Buf::X);
                    add_inplace(&mut x[..n * e], &o[..n * e]);
                }
                Step::GatedAct { act, width: f } => {
                    let (up, gate) = two(&mut st.bufs, Buf::Up, Buf::Gate);
                    match act {
                        Activation::GeluTanh => geglu(&mut gate[..n * f], &up[..n * f]),
                        Activation::Silu => swiglu_ggml(&mut gate[..n * f], &up[..n * f], f),
                    }
                }
                Step::SigmoidGate { buf, gate, width } => {
                    let (g, b) = two(&mut st.bufs, gate, buf);
                    for (row, &x) in b[..n * width].chunks_exact_mut(width).zip(&g[..n]) {
                        // ggml_div(ggml_silu(x), x)
                        let sig = silu(x) / x;
                        row.iter_mut().for_each(|v| *v *= sig);
                    }
                }
                Step::Moe { moe, src, dst, add } => {
                    let Some(mc) = &c.moe else {
                        return Err(Error::Internal(format!("blk.{il}: an expert layer in a model without expert settings")));
                    };
                    let logits = std::mem::take(&mut st.bufs[Buf::Router as usize]);
                    let (x, y) = two(&mut st.bufs, src, dst);
                    moe_forward(pool, mc, moe, &logits[..n * mc.n_expert], &x[..n * e], &mut y[..n * e], n, add, &st.groups, &st.masks.tiled, &mut st.moe);
                    st.bufs[Buf::Router as usize] = logits;
                }
                Step::Tap { buf, width, name } => probe(name, Some(il), &mut st.buf(buf)[..n * width]),
            }
        }
        Ok(())
    }
}
