//! Transformer models built from GGUF (decoders, and BERT-family encoders): typed layers with their weights
//! bound in place (this file), the steps a layer runs (`plan.rs`, walked by the CPU
//! forward pass and by the GPU offload alike), KV cache in f16.
mod arch;
pub mod config;
pub mod cvec;
pub mod footprint;
mod forward;
mod kv;
pub mod lora;
mod moe;
pub mod orders;
pub mod plan;
mod probe;
mod weights;

pub use config::{Activation, Arch, Config, ExpertAct, Gating, MoeConfig, SUPPORTED_ARCHS};
use crate::error::Error;
pub use forward::{LogitRows, Span, State};

use crate::cpu::Weight;
use crate::error::Result;
use crate::gguf::Gguf;
use std::sync::Arc;
use weights::Loader;

/// The Q, K and V projections: three matrices, or one fused [q; k; v] matrix (Phi-3)
/// that both backends read as three row ranges.
pub enum Qkv {
    Split { q: Weight, k: Weight, v: Weight },
    Fused(Weight),
}

/// A normalisation: RMSNorm with a weight (decoders), or LayerNorm with a weight and
/// (encoders) a bias.
pub enum Norm {
    Rms(Vec<f32>),
    Layer { w: Vec<f32>, b: Option<Vec<f32>> },
}

/// Where a block's normalisations sit: `pre` on its input (decoders), `post` on its
/// output before the residual add (Gemma 3), `residual` on the sum after the add
/// (BERT's post-norm).
#[derive(Default)]
pub struct Norms {
    pub pre: Option<Norm>,
    pub post: Option<Norm>,
    pub residual: Option<Norm>,
}

/// The self-attention block of a layer: causal over the KV cache, or bidirectional
/// over the sequence (`Config::causal`).
pub struct Attention {
    pub qkv: Qkv,
    /// Biases added to q, k, v (Qwen 2, BERT).
    pub bias: [Option<Vec<f32>>; 3],
    /// RMS norms of q and k: per head (Gemma 3, Qwen 3), or over the whole projection
    /// when as long as it (OLMoE).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub wo: Weight,
    /// Bias of the output projection (BERT, gpt-oss).
    pub wo_bias: Option<Vec<f32>>,
    /// Per head, a logit every query's softmax also takes in and that reads no value
    /// (gpt-oss's attention sinks).
    pub sinks: Option<Vec<f32>>,
}

/// The feed-forward block: act(gate·h) ⊙ (up·h), then down, with gate and up as two
/// matrices or one fused [gate; up] matrix (Phi-3) read as two row ranges; or ungated,
/// down · act(up·h + b) + b (BERT).
pub enum Ffn {
    Gated { gate: Weight, up: Weight, down: Weight },
    GatedFused { gate_up: Weight, down: Weight },
    /// With biases (jina-bert-v2's GEGLU): `gate` absent means `up` is the fused [gate; up]
    /// projection (2·n_ff rows) and its bias covers both halves.
    GatedBiased { gate: Option<Weight>, up: Weight, up_bias: Option<Vec<f32>>, down: Weight, down_bias: Option<Vec<f32>> },
    Plain { up: Weight, up_bias: Option<Vec<f32>>, down: Weight, down_bias: Option<Vec<f32>> },
    /// A mixture of experts (`Config::moe`).
    Moe(Moe),
}

/// A stack of `n` matrices of one shape: a 3-D GGUF tensor [n_in, n_out, n], held as one
/// matrix of `n · n_out` rows; matrix `x` is rows `x·n_out .. (x+1)·n_out`.
#[derive(Clone, Copy)]
pub struct Experts {
    pub w: Weight,
    pub n: usize,
    pub n_out: usize,
}

impl Experts {
    /// Expert `x`'s matrix (the same bytes: its outputs are the bits the stack gives).
    pub fn expert(&self, x: usize) -> Weight {
        self.w.rows(x * self.n_out, (x + 1) * self.n_out)
    }
}

/// The dense FFN every token goes through beside the routed experts (Qwen2-MoE, Granite
/// MoE shared), its output optionally scaled by a per-token sigmoid gate (Qwen2-MoE).
pub struct SharedExpert {
    pub gate: Weight,
    pub up: Weight,
    pub down: Weight,
    /// `sigmoid(gate_inp · h)` multiplies the shared expert's output (one output row).
    pub gate_inp: Option<Weight>,
}

/// A mixture-of-experts FFN: the router's logits pick `n_used` experts per token
/// (`MoeConfig`), each a gated FFN whose output is weighted and summed in the order chosen
/// (llama.cpp's `build_moe_ffn`); an optional shared expert is added.
pub struct Moe {
    /// [n_embd → n_expert] router logits (`ffn_gate_inp`).
    pub router: Weight,
    /// Gate and up projections [n_embd → n_ff_exp] per expert; a model without gate
    /// projections runs act(up) (Granite MoE allows it).
    pub gate: Option<Experts>,
    pub up: Experts,
    /// [n_ff_exp → n_embd] per expert.
    pub down: Experts,
    pub shared: Option<SharedExpert>,
    /// Biases (gpt-oss): of the router logits [n_expert], and per expert of its gate / up
    /// outputs [n_expert][n_ff_exp] and down output [n_expert][n_embd].
    pub router_bias: Option<Vec<f32>>,
    pub gate_bias: Option<Vec<f32>>,
    pub up_bias: Option<Vec<f32>>,
    pub down_bias: Option<Vec<f32>>,
}

/// How a layer's two blocks are wired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// attention, its residual add, then the FFN on the sum and its residual add
    Sequential,
    /// attention and FFN both on the attention block's normed input, x + ffn + attn
    /// (Cohere 2)
    Parallel,
}

/// One layer: an attention block and an FFN block, each with its norms and a residual add.
pub struct Layer {
    pub attn_norms: Norms,
    pub attn: Attention,
    pub ffn_norms: Norms,
    pub ffn: Ffn,
    pub topology: Topology,
}

/// What is added to the token embeddings before the first layer (BERT: absolute
/// positions, token type 0, then a LayerNorm).
#[derive(Default)]
pub struct InputExtras {
    pub pos_embd: Option<Weight>,
    pub token_type0: Option<Vec<f32>>,
    pub norm: Option<Norm>,
}

/// A sequence classifier (rerankers, llama.cpp's rank pooling): `out · act(dense · h + b)
/// + b`, either matrix optional, `h` the first token's hidden state — or, for ModernBERT
/// (`modern`), the mean of the sequence's when `{arch}.classifier.pooling_type` says mean,
/// the activation GELU and a weight-only LayerNorm (`cls.norm`) after it.
pub struct Classifier {
    pub dense: Option<(Weight, Option<Vec<f32>>)>,
    pub out: Option<(Weight, Option<Vec<f32>>)>,
    pub modern: Option<ModernHead>,
}

/// ModernBERT's prediction head before its classifier.
pub struct ModernHead {
    /// mean of the sequence's hidden states (else its first token's)
    pub mean: bool,
    pub norm: Option<Vec<f32>>,
}

/// What follows the last layer: a decoder's final norm and vocabulary projection, or an
/// encoder's hidden states, through its final norm if it has one (ModernBERT), and its
/// classifier, if it has one.
pub enum Head {
    Lm { norm: Norm, output: Weight },
    Encoder { classifier: Option<Classifier>, norm: Option<Norm> },
}

pub struct Model {
    /// Keeps the memory map alive for every `Weight` below.
    pub gguf: Arc<Gguf>,
    pub config: Config,
    pub tok_embd: Weight,
    pub inputs: InputExtras,
    pub head: Head,
    pub rope_freqs: Option<Vec<f32>>,
    pub layers: Vec<Layer>,
    /// The layers (and output layer) held by a GPU, when offloaded (`gpu::attach`).
    pub gpu: Option<crate::gpu::Offload>,
    /// LoRA adapters loaded beside the model (applied per sequence at its scales).
    pub adapters: Vec<lora::Adapter>,
    /// Control vectors (summed), added at the end of their layers for every sequence.
    pub cvec: Option<cvec::ControlVector>,
}

impl Model {
    /// The model in `gguf`, its matmuls in the orders `mode` says.
    pub fn load(gguf: Arc<Gguf>, mode: crate::quant::Exactness) -> Result<Model> {
        let config = Config::from_gguf(&gguf)?;
        let c = &config;
        let ld = Loader { g: &gguf, mode };
        let (e, hd, vd) = (c.n_embd, c.head_dim, c.v_head_dim);
        let (q_dim, kv_dim, v_dim) = (c.n_head * hd, c.n_head_kv * hd, c.n_head_kv * vd);
        let tok_embd = ld.matrix("token_embd.weight", e, c.n_vocab)?;
        let layer_norm = |name: &str| -> Result<Option<Norm>> {
            match ld.opt_vector(&format!("{name}.weight"), e)? {
                Some(w) => Ok(Some(Norm::Layer { w, b: Some(ld.vector(&format!("{name}.bias"), e)?) })),
                None => Ok(None),
            }
        };
        let rms = |name: &str| -> Result<Option<Norm>> { Ok(ld.opt_vector(name, e)?.map(Norm::Rms)) };
        // ModernBERT's LayerNorms carry no bias
        let modern = c.arch == Arch::ModernBert;
        let ln_weight_only = |name: &str| -> Result<Option<Norm>> { Ok(ld.opt_vector(name, e)?.map(|w| Norm::Layer { w, b: None })) };
        let (inputs, head) = if c.arch.is_encoder() {
            let inputs = InputExtras {
                // BERT's absolute positions (RoPE in the others)
                pos_embd: if c.rope || c.alibi_max_bias > 0.0 { None } else { Some(ld.matrix("position_embd.weight", e, c.n_ctx_train)?) },
                token_type0: ld.opt_first_row("token_types.weight", e)?,
                norm: if modern { ln_weight_only("token_embd_norm.weight")? } else { layer_norm("token_embd_norm")? },
            };
            // [n_embd → n_embd] before an output projection; jina-reranker-v1's single
            // [n_embd → 1] layer (still followed by tanh in llama.cpp's rank pooling)
            let dense = match ld.has("cls.weight") {
                true => {
                    let n_out = ld.info("cls.weight")?.n_rows();
                    Some((ld.matrix("cls.weight", e, n_out)?, ld.opt_vector("cls.bias", n_out)?))
                }
                false => None,
            };
            let out = match ld.has("cls.output.weight") {
                true => {
                    let n_out = ld.info("cls.output.weight")?.n_rows();
                    Some((ld.matrix("cls.output.weight", e, n_out)?, ld.opt_vector("cls.output.bias", n_out)?))
                }
                false => None,
            };
            let classifier = if dense.is_some() || out.is_some() {
                let modern = match modern {
                    // llama.cpp's classifier.pooling_type: 1 mean, else the first token
                    true => Some(ModernHead {
                        mean: ld.g.get(&format!("{}.classifier.pooling_type", c.arch.name())).and_then(|v| v.as_u64()) == Some(1),
                        norm: ld.opt_vector("cls.norm.weight", dense.as_ref().map_or(e, |(w, _)| w.n_out))?,
                    }),
                    false => None,
                };
                Some(Classifier { dense, out, modern })
            } else {
                None
            };
            let norm = if modern { Some(ln_weight_only("output_norm.weight")?.ok_or_else(|| ld.missing("output_norm.weight"))?) } else { None };
            (inputs, Head::Encoder { classifier, norm })
        } else {
            let norm = match c.arch {
                // Cohere 2: LayerNorm without a bias
                Arch::Cohere2 => Norm::Layer { w: ld.vector("output_norm.weight", e)?, b: None },
                _ => Norm::Rms(ld.vector("output_norm.weight", e)?),
            };
            let output = match ld.opt_matrix("output.weight", e, c.n_vocab)? {
                Some(w) => w,
                // tied: llama.cpp loads the table a second time for the output matmul
                // (TENSOR_DUPLICATED), into its repacked buffer where the type and rows allow,
                // as any matmul weight (`Weight::new`'s rule)
                None => tok_embd,
            };
            (InputExtras::default(), Head::Lm { norm, output })
        };
        let rope_freqs = ld.opt_vector("rope_freqs.weight", c.n_rot / 2)?;
        let whole_qk_norm = matches!(c.arch, Arch::Olmoe | Arch::Olmo2);
        let mut layers = Vec::with_capacity(c.n_layer);
        for il in 0..c.n_layer {
            let n = |s: &str| format!("blk.{il}.{s}.weight");
            let b = |s: &str| format!("blk.{il}.{s}.bias");
            let t = |s: &str| format!("blk.{il}.{s}");
            let qkv = if ld.has(&n("attn_qkv")) {
                Qkv::Fused(ld.matrix(&n("attn_qkv"), e, q_dim + kv_dim + v_dim)?)
            } else {
                Qkv::Split { q: ld.matrix(&n("attn_q"), e, q_dim)?, k: ld.matrix(&n("attn_k"), e, kv_dim)?, v: ld.matrix(&n("attn_v"), e, v_dim)? }
            };
            let ffn = if let Some(mc) = &c.moe {
                let (ne, fe) = (mc.n_expert, mc.n_ff_exp);
                let shared = match mc.n_ff_shexp {
                    0 => None,
                    fs => Some(SharedExpert {
                        gate: ld.matrix(&n("ffn_gate_shexp"), e, fs)?,
                        up: ld.matrix(&n("ffn_up_shexp"), e, fs)?,
                        down: ld.matrix(&n("ffn_down_shexp"), fs, e)?,
                        gate_inp: ld.opt_row_matrix(&n("ffn_gate_inp_shexp"), e)?,
                    }),
                };
                Ffn::Moe(Moe {
                    router: ld.matrix(&n("ffn_gate_inp"), e, ne)?,
                    gate: ld.opt_experts(&n("ffn_gate_exps"), e, fe, ne)?,
                    up: ld.experts(&n("ffn_up_exps"), e, fe, ne)?,
                    down: ld.experts(&n("ffn_down_exps"), fe, e, ne)?,
                    shared,
                    router_bias: ld.opt_floats(&b("ffn_gate_inp"), &[ne])?,
                    gate_bias: ld.opt_floats(&b("ffn_gate_exps"), &[fe, ne])?,
                    up_bias: ld.opt_floats(&b("ffn_up_exps"), &[fe, ne])?,
                    down_bias: ld.opt_floats(&b("ffn_down_exps"), &[e, ne])?,
                })
            } else if c.arch == Arch::Bert {
                let down = ld.matrix(&n("ffn_down"), c.n_ff, e)?;
                let up = ld.matrix(&n("ffn_up"), e, c.n_ff)?;
                Ffn::Plain { up, up_bias: ld.opt_vector(&b("ffn_up"), c.n_ff)?, down, down_bias: ld.opt_vector(&b("ffn_down"), e)? }
            } else if modern {
                // one [gate; up] projection, GEGLU or SwiGLU (`hidden_activation`), no biases
                Ffn::GatedFused { gate_up: ld.matrix(&n("ffn_up"), e, 2 * c.n_ff)?, down: ld.matrix(&n("ffn_down"), c.n_ff, e)? }
            } else if c.arch == Arch::JinaBertV2 {
                for extra in ["attn_q_norm", "attn_k_norm", "attn_norm_2"] {
                    if ld.has(&n(extra)) {
                        let why = "is a jina-bert-v2 LayerNorm on Q / K or after the attention (jina-embeddings-v2-base-code's), which llamars does not run yet";
                        return Err(ld.err(&n(extra), why.into()));
                    }
                }
                let gate = ld.opt_matrix(&n("ffn_gate"), e, c.n_ff)?;
                let f_up = if gate.is_some() { c.n_ff } else { 2 * c.n_ff };
                Ffn::GatedBiased {
                    gate,
                    up: ld.matrix(&n("ffn_up"), e, f_up)?,
                    up_bias: ld.opt_vector(&b("ffn_up"), f_up)?,
                    down: ld.matrix(&n("ffn_down"), c.n_ff, e)?,
                    down_bias: ld.opt_vector(&b("ffn_down"), e)?,
                }
            } else if c.arch.is_encoder() {
                let down = ld.matrix(&n("ffn_down"), c.n_ff, e)?;
                // nomic-bert: SwiGLU, and llama.cpp's graph adds no FFN biases
                Ffn::Gated { gate: ld.matrix(&n("ffn_gate"), e, c.n_ff)?, up: ld.matrix(&n("ffn_up"), e, c.n_ff)?, down }
            } else {
                let down = ld.matrix(&n("ffn_down"), c.n_ff, e)?;
                match ld.opt_matrix(&n("ffn_gate"), e, c.n_ff)? {
                    Some(gate) => Ffn::Gated { gate, up: ld.matrix(&n("ffn_up"), e, c.n_ff)?, down },
                    None => Ffn::GatedFused { gate_up: ld.matrix(&n("ffn_up"), e, 2 * c.n_ff)?, down },
                }
            };
            let (attn_norms, ffn_norms) = if modern {
                // pre-norms; the first layer's attention reads its input as it is
                let ffn = ln_weight_only(&n("ffn_norm"))?.ok_or_else(|| ld.missing(&n("ffn_norm")))?;
                (Norms { pre: ln_weight_only(&n("attn_norm"))?, ..Default::default() }, Norms { pre: Some(ffn), ..Default::default() })
            } else if c.arch.is_encoder() {
                let need = |name: &str| -> Result<Option<Norm>> {
                    match layer_norm(&t(name))? {
                        Some(x) => Ok(Some(x)),
                        None => Err(ld.missing(&n(name))),
                    }
                };
                (Norms { residual: need("attn_output_norm")?, ..Default::default() }, Norms { residual: need("layer_output_norm")?, ..Default::default() })
            } else {
                // OLMo 2 and EXAONE 4 norm only each block's output
                let pre = |name: &str| -> Result<Option<Norm>> {
                    match c.arch {
                        Arch::Olmo2 | Arch::Exaone4 => rms(&n(name)),
                        _ => Ok(Some(Norm::Rms(ld.vector(&n(name), e)?))),
                    }
                };
                if c.arch == Arch::Cohere2 {
                    // one LayerNorm (no bias) feeds both blocks
                    (Norms { pre: Some(Norm::Layer { w: ld.vector(&n("attn_norm"), e)?, b: None }), ..Default::default() }, Norms::default())
                } else if c.arch == Arch::GptOss {
                    // gpt-oss names its FFN's input norm post_attention_norm
                    (Norms { pre: pre("attn_norm")?, ..Default::default() }, Norms { pre: pre("post_attention_norm")?, ..Default::default() })
                } else {
                    (
                        Norms { pre: pre("attn_norm")?, post: rms(&n("post_attention_norm"))?, residual: None },
                        Norms { pre: pre("ffn_norm")?, post: rms(&n("post_ffw_norm"))?, residual: None },
                    )
                }
            };
            // a fused projection's bias [q; k; v] is read as the three parts' biases
            let bias = match ld.opt_vector(&b("attn_qkv"), q_dim + kv_dim + v_dim)? {
                Some(f) => [Some(f[..q_dim].to_vec()), Some(f[q_dim..q_dim + kv_dim].to_vec()), Some(f[q_dim + kv_dim..].to_vec())],
                None => [ld.opt_vector(&b("attn_q"), q_dim)?, ld.opt_vector(&b("attn_k"), kv_dim)?, ld.opt_vector(&b("attn_v"), v_dim)?],
            };
            layers.push(Layer {
                attn_norms,
                attn: Attention {
                    qkv,
                    bias,
                    // per head, or (OLMoE, OLMo 2) over the whole projection
                    q_norm: ld.opt_vector(&n("attn_q_norm"), if whole_qk_norm { q_dim } else { hd })?,
                    k_norm: ld.opt_vector(&n("attn_k_norm"), if whole_qk_norm { kv_dim } else { hd })?,
                    wo: ld.matrix(&n("attn_output"), q_dim.max(c.n_head * vd), e)?,
                    wo_bias: ld.opt_vector(&b("attn_output"), e)?,
                    sinks: ld.opt_vector(&n("attn_sinks"), c.n_head)?,
                },
                ffn_norms,
                ffn,
                topology: if c.arch == Arch::Cohere2 { Topology::Parallel } else { Topology::Sequential },
            });
        }
        Ok(Model { gguf, config, tok_embd, inputs, head, rope_freqs, layers, gpu: None, adapters: Vec::new(), cvec: None })
    }

    /// An encoder's classification head (rerankers); other models have none.
    pub fn classifier(&self) -> Result<&Classifier> {
        match &self.head {
            Head::Encoder { classifier: Some(c), .. } => Ok(c),
            _ => Err(Error::NotSupported(format!(
                "{} has no classification head (cls.weight / cls.output.weight): it is not a reranker",
                self.gguf.path().display()
            ))),
        }
    }

    /// The final norm and output matrix of a decoder; an encoder has none.
    pub fn lm_head(&self) -> Result<(&Norm, &Weight)> {
        match &self.head {
            Head::Lm { norm, output } => Ok((norm, output)),
            Head::Encoder { .. } => Err(Error::NotSupported(format!(
                "{} is an encoder ({}): it computes embeddings (/v1/embeddings, Engine.embed; rerankers /rerank), not text",
                self.gguf.path().display(),
                self.config.arch.name()
            ))),
        }
    }

    /// Move the layers `cfg` asks for to a GPU; returns the line to log about it.
    pub fn offload(&mut self, cfg: &crate::gpu::GpuConfig, progress: &mut dyn FnMut(usize, usize)) -> Result<String> {
        self.gpu = None;
        let (off, note) = crate::gpu::attach(self, cfg, progress)?;
        self.gpu = off;
        Ok(note)
    }

    /// Layers on the GPU, counted as llama.cpp does (the output layer is one).
    pub fn n_gpu_layers_offloaded(&self) -> usize {
        self.gpu.as_ref().map(|g| g.n_offloaded()).unwrap_or(0)
    }

    /// Parameter count (elements of all tensors).
    pub fn n_params(&self) -> u64 {
        self.gguf.tensors.iter().map(|t| t.n_elements()).sum()
    }
}
