//! The steps of one layer, in the order every backend runs them: built once from the
//! typed layer (`Layer`, `Qkv`, `Ffn`), walked by the CPU forward pass (`forward.rs`) and
//! by the GPU offload (`gpu/offload.rs`, which also uploads the weights the steps name).
//! What differs per backend is how a step runs, not which steps run.
use super::{Activation, Ffn, Model, Moe, Norm, Norms, Qkv, Topology};
use crate::cpu::Weight;

/// The activation buffers steps read and write, one row per token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    /// The residual stream [n, n_embd].
    X,
    /// The normalised input of a block [n, n_embd].
    H,
    Q,
    K,
    V,
    /// The attention output [n, n_head · v_head_dim].
    Attn,
    /// A block's output before the residual add [n, n_embd].
    O,
    Gate,
    Up,
    /// Router logits [n, n_expert] (mixture-of-experts layers), or a shared expert's gate
    /// logit [n, 1].
    Router,
}

pub const N_BUFS: usize = 10;

pub enum Step<'m> {
    /// `dst = RMSNorm(src) · w` over each of `groups` pieces of `width` values per token
    /// (`src == dst`: in place).
    Norm { src: Buf, dst: Buf, w: &'m [f32], width: usize, groups: usize, name: &'static str },
    /// `dst = LayerNorm(src) · w (+ b)` over each token's `width` values (`src == dst`: in
    /// place).
    LayerNorm { src: Buf, dst: Buf, w: &'m [f32], b: Option<&'m [f32]>, width: usize, name: &'static str },
    /// `dst = W[lo..hi] · src`: rows `lo..hi` of `w` (all of it, or one part of a fused
    /// projection).
    MatMul { w: &'m Weight, lo: usize, hi: usize, src: Buf, dst: Buf, name: &'static str },
    /// `dst += b` on every token's row.
    AddBias { dst: Buf, b: &'m [f32], name: &'static str },
    /// RoPE on Q and K at each token's position (the sliding-window base on SWA layers).
    Rope { swa: bool },
    /// `buf *= s` over `width` values per token.
    Scale { buf: Buf, s: f32, width: usize },
    /// Q of each token times its attention temperature (`Config::attn_temp`).
    AttnTemp,
    /// Store K and V in the layer's cache, then `Attn = softmax(Q·Kᵀ·scale) · V` over it
    /// (causal; a sliding window on SWA layers; per-head sink logits in the softmax).
    Attention { swa: bool, sinks: Option<&'m [f32]> },
    /// `X += src`.
    Residual { src: Buf },
    /// `Gate = act(Gate) ⊙ Up` over `width` values per token.
    GatedAct { act: Activation, width: usize },
    /// `buf *= sigmoid(gate)` row by row, `gate` holding one logit per token (Qwen2-MoE's
    /// shared-expert gate, computed as llama.cpp does: silu(g) / g).
    SigmoidGate { buf: Buf, gate: Buf, width: usize },
    /// The routed experts: from the router logits in `Router`, each token's chosen experts
    /// run on `src` and their weighted sum goes to `dst` (added to it with `add`).
    Moe { moe: &'m Moe, src: Buf, dst: Buf, add: bool },
    /// `buf = act(buf)` over `width` values per token (an ungated FFN).
    Act { buf: Buf, act: Activation, width: usize },
    /// An activation tap for op-by-op comparison with llama.cpp (`probe.rs`; the CPU's only).
    Tap { buf: Buf, width: usize, name: &'static str },
}

/// `dst = norm(src)` as one step, RMS or LayerNorm.
fn norm<'m>(n: &'m Norm, src: Buf, dst: Buf, e: usize, name: &'static str) -> Step<'m> {
    match n {
        Norm::Rms(w) => Step::Norm { src, dst, w, width: e, groups: 1, name },
        Norm::Layer { w, b } => Step::LayerNorm { src, dst, w, b: b.as_deref(), width: e, name },
    }
}

/// A block's input: its pre-norm of X into H, or X itself when it has none.
fn block_in<'m>(s: &mut Vec<Step<'m>>, norms: &'m Norms, e: usize, name: &'static str) -> Buf {
    match &norms.pre {
        Some(n) => {
            s.push(norm(n, Buf::X, Buf::H, e, name));
            s.push(Step::Tap { buf: Buf::H, width: e, name });
            Buf::H
        }
        None => Buf::X,
    }
}

/// A block's output O: its optional post-norm (Gemma 3), the residual add into X, then
/// the optional norm of the sum (BERT); `names`: the post-norm's tensor, the taps after
/// it and after the add, and the norm of the sum.
fn block_out<'m>(s: &mut Vec<Step<'m>>, norms: &'m Norms, e: usize, residual_scale: f32, names: [&'static str; 4]) {
    if let Some(n) = &norms.post {
        s.push(norm(n, Buf::O, Buf::O, e, names[0]));
    }
    if residual_scale != 1.0 {
        s.push(Step::Scale { buf: Buf::O, s: residual_scale, width: e });
    }
    s.push(Step::Tap { buf: Buf::O, width: e, name: names[1] });
    s.push(Step::Residual { src: Buf::O });
    s.push(Step::Tap { buf: Buf::X, width: e, name: names[2] });
    if let Some(n) = &norms.residual {
        s.push(norm(n, Buf::X, Buf::X, e, names[3]));
    }
}

impl Model {
    /// The steps of layer `il`.
    pub fn layer_steps(&self, il: usize) -> Vec<Step<'_>> {
        use Buf::*;
        let c = &self.config;
        let l = &self.layers[il];
        let (e, hd, f) = (c.n_embd, c.head_dim, c.n_ff);
        let (qd, kd, vd) = (c.n_head * hd, c.n_head_kv * hd, c.n_head_kv * c.v_head_dim);
        let ad = c.n_head * c.v_head_dim;
        let swa = c.is_swa(il);
        let mut s = Vec::with_capacity(40);
        let tap = |buf, width, name| Step::Tap { buf, width, name };
        let x = block_in(&mut s, &l.attn_norms, e, "attn_norm");
        let a = &l.attn;
        let (wq, wk, wv, k0, v0) = match &a.qkv {
            Qkv::Split { q, k, v } => (q, k, v, 0, 0),
            Qkv::Fused(w) => (w, w, w, qd, qd + kd),
        };
        s.push(Step::MatMul { w: wq, lo: 0, hi: qd, src: x, dst: Q, name: "attn_q" });
        s.push(Step::MatMul { w: wk, lo: k0, hi: k0 + kd, src: x, dst: K, name: "attn_k" });
        s.push(Step::MatMul { w: wv, lo: v0, hi: v0 + vd, src: x, dst: V, name: "attn_v" });
        s.extend([tap(Q, qd, "Qcur"), tap(K, kd, "Kcur"), tap(V, vd, "Vcur")]);
        for (b, dst, name) in [(&a.bias[0], Q, "attn_q.bias"), (&a.bias[1], K, "attn_k.bias"), (&a.bias[2], V, "attn_v.bias")] {
            if let Some(b) = b {
                s.push(Step::AddBias { dst, b, name });
            }
        }
        // per head, or over the whole projection (a norm as long as it)
        if let Some(w) = &a.q_norm {
            s.push(Step::Norm { src: Q, dst: Q, w, width: w.len(), groups: qd / w.len().max(1), name: "attn_q_norm" });
        }
        if let Some(w) = &a.k_norm {
            s.push(Step::Norm { src: K, dst: K, w, width: w.len(), groups: kd / w.len().max(1), name: "attn_k_norm" });
        }
        s.extend([tap(Q, qd, "Qcur_normed"), tap(K, kd, "Kcur_normed")]);
        if c.has_rope(il) {
            s.push(Step::Rope { swa });
        }
        if c.attn_temp.is_some() {
            s.push(Step::AttnTemp);
        }
        if c.q_scale != 1.0 {
            s.push(Step::Scale { buf: Q, s: c.q_scale, width: qd });
        }
        s.extend([tap(Q, qd, "Qrope"), tap(K, kd, "Krope")]);
        s.push(Step::Attention { swa, sinks: a.sinks.as_deref() });
        s.push(tap(Attn, ad, "kqv_out"));
        s.push(Step::MatMul { w: &a.wo, lo: 0, hi: a.wo.n_out, src: Attn, dst: O, name: "attn_output" });
        if let Some(b) = &a.wo_bias {
            s.push(Step::AddBias { dst: O, b, name: "attn_output.bias" });
        }
        s.push(tap(O, e, "attn_o"));
        if let (Topology::Parallel, Ffn::Gated { gate, up, down }) = (l.topology, &l.ffn) {
            // the FFN reads the attention block's normed input too; its output replaces that
            // input in H, then x + ffn + attn, in that order
            s.push(Step::MatMul { w: gate, lo: 0, hi: f, src: x, dst: Gate, name: "ffn_gate" });
            s.push(Step::MatMul { w: up, lo: 0, hi: f, src: x, dst: Up, name: "ffn_up" });
            s.push(Step::GatedAct { act: c.activation, width: f });
            s.push(Step::MatMul { w: down, lo: 0, hi: e, src: Gate, dst: H, name: "ffn_down" });
            s.push(tap(H, e, "ffn_out"));
            s.push(Step::Residual { src: H });
            s.push(Step::Residual { src: O });
            s.push(tap(X, e, "l_out"));
            return s;
        }
        let rs = c.residual_scale;
        block_out(&mut s, &l.attn_norms, e, rs, ["post_attention_norm", "attn_post_norm", "sa_out", "attn_output_norm"]);

        let x = block_in(&mut s, &l.ffn_norms, e, "ffn_norm");
        let (down, down_bias) = match &l.ffn {
            Ffn::Gated { gate, up, down } => {
                s.push(Step::MatMul { w: gate, lo: 0, hi: f, src: x, dst: Gate, name: "ffn_gate" });
                s.push(Step::MatMul { w: up, lo: 0, hi: f, src: x, dst: Up, name: "ffn_up" });
                (down, None)
            }
            Ffn::GatedFused { gate_up, down } => {
                s.push(Step::MatMul { w: gate_up, lo: 0, hi: f, src: x, dst: Gate, name: "ffn_gate" });
                s.push(Step::MatMul { w: gate_up, lo: f, hi: 2 * f, src: x, dst: Up, name: "ffn_up" });
                (down, None)
            }
            Ffn::GatedBiased { gate, up, up_bias, down, down_bias } => {
                match gate {
                    Some(g) => {
                        s.push(Step::MatMul { w: g, lo: 0, hi: f, src: x, dst: Gate, name: "ffn_gate" });
                        s.push(Step::MatMul { w: up, lo: 0, hi: f, src: x, dst: Up, name: "ffn_up" });
                        if let Some(b) = up_bias {
                            s.push(Step::AddBias { dst: Up, b, name: "ffn_up.bias" });
                        }
                    }
                    None => {
                        // one [gate; up] projection whose bias covers both halves
                        s.push(Step::MatMul { w: up, lo: 0, hi: f, src: x, dst: Gate, name: "ffn_gate" });
                        s.push(Step::MatMul { w: up, lo: f, hi: 2 * f, src: x, dst: Up, name: "ffn_up" });
                        if let Some(b) = up_bias {
                            s.push(Step::AddBias { dst: Gate, b: &b[..f], name: "ffn_up.bias" });
                            s.push(Step::AddBias { dst: Up, b: &b[f..], name: "ffn_up.bias" });
                        }
                    }
                }
                (down, down_bias.as_deref())
            }
            Ffn::Plain { up, up_bias, down, down_bias } => {
                s.push(Step::MatMul { w: up, lo: 0, hi: f, src: x, dst: Up, name: "ffn_up" });
                if let Some(b) = up_bias {
                    s.push(Step::AddBias { dst: Up, b, name: "ffn_up.bias" });
                }
                s.push(tap(Up, f, "ffn_up"));
                s.push(Step::Act { buf: Up, act: c.activation, width: f });
                s.push(tap(Up, f, "ffn_gelu"));
                s.push(Step::MatMul { w: down, lo: 0, hi: down.n_out, src: Up, dst: O, name: "ffn_down" });
                if let Some(b) = down_bias {
                    s.push(Step::AddBias { dst: O, b, name: "ffn_down.bias" });
                }
                s.push(tap(O, e, "ffn_out"));
                block_out(&mut s, &l.ffn_norms, e, rs, ["post_ffw_norm", "ffn_post_norm", "l_out", "layer_output_norm"]);
                return s;
            }
            Ffn::Moe(moe) => {
                // the shared expert first, into O (a sum's bits do not depend on its order)
                if let Some(sh) = &moe.shared {
                    let fs = sh.gate.n_out;
                    s.push(Step::MatMul { w: &sh.gate, lo: 0, hi: fs, src: x, dst: Gate, name: "ffn_gate_shexp" });
                    s.push(Step::MatMul { w: &sh.up, lo: 0, hi: fs, src: x, dst: Up, name: "ffn_up_shexp" });
                    s.push(Step::GatedAct { act: Activation::Silu, width: fs });
                    s.push(Step::MatMul { w: &sh.down, lo: 0, hi: e, src: Gate, dst: O, name: "ffn_down_shexp" });
                    s.push(tap(O, e, "ffn_shexp"));
                    if let Some(g) = &sh.gate_inp {
                        s.push(Step::MatMul { w: g, lo: 0, hi: 1, src: x, dst: Router, name: "ffn_gate_inp_shexp" });
                        s.push(Step::SigmoidGate { buf: O, gate: Router, width: e });
                        s.push(tap(O, e, "ffn_shexp_out"));
                    }
                }
                s.push(Step::MatMul { w: &moe.router, lo: 0, hi: moe.router.n_out, src: x, dst: Router, name: "ffn_gate_inp" });
                if let Some(b) = &moe.router_bias {
                    s.push(Step::AddBias { dst: Router, b, name: "ffn_gate_inp.bias" });
                }
                s.push(tap(Router, moe.router.n_out, "ffn_moe_logits"));
                s.push(Step::Moe { moe, src: x, dst: O, add: moe.shared.is_some() });
                s.push(tap(O, e, "ffn_out"));
                block_out(&mut s, &l.ffn_norms, e, rs, ["post_ffw_norm", "ffn_post_norm", "l_out", "layer_output_norm"]);
                return s;
            }
        };
        s.extend([tap(Gate, f, "ffn_gate"), tap(Up, f, "ffn_up")]);
        s.push(Step::GatedAct { act: c.activation, width: f });
        s.push(tap(Gate, f, "ffn_geglu"));
        s.push(Step::MatMul { w: down, lo: 0, hi: down.n_out, src: Gate, dst: O, name: "ffn_down" });
        if let Some(b) = down_bias {
            s.push(Step::AddBias { dst: O, b, name: "ffn_down.bias" });
        }
        s.push(tap(O, e, "ffn_out"));
        block_out(&mut s, &l.ffn_norms, e, rs, ["post_ffw_norm", "ffn_post_norm", "l_out", "layer_output_norm"]);
        s
    }

    /// Bytes of the matrices layer `il`'s steps read (what an offload uploads for it).
    pub fn layer_weight_bytes(&self, il: usize) -> u64 {
        self.layer_steps(il)
            .iter()
            .map(|s| match s {
                Step::MatMul { w, lo, hi, .. } => ((hi - lo) * w.row_bytes) as u64,
                Step::Moe { moe, .. } => moe.gate.map_or(0, |g| g.w.bytes().len() as u64) + (moe.up.w.bytes().len() + moe.down.w.bytes().len()) as u64,
                _ => 0,
            })
            .sum()
    }
}
