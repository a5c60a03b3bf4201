//! Decoder-only transformer models built from GGUF: typed layers with their weights
//! bound in place (this file), the steps a layer runs (`plan.rs`, walked by the CPU
//! forward pass and by the GPU offload alike), KV cache in f16.
pub mod config;
mod forward;
mod kv;
pub mod orders;
pub mod plan;
mod probe;
mod weights;

pub use config::{Activation, Arch, Config, SUPPORTED_ARCHS};
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

/// The self-attention block of a layer (causal, over the KV cache).
pub struct Attention {
    pub qkv: Qkv,
    /// Biases added to q, k, v (Qwen 2).
    pub bias: [Option<Vec<f32>>; 3],
    /// Per-head RMS norms of q and k (Gemma 3, Qwen 3).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub wo: Weight,
}

/// The feed-forward block: act(gate·h) ⊙ (up·h), then down; gate and up as two
/// matrices, or one fused [gate; up] matrix (Phi-3) read as two row ranges.
pub enum Ffn {
    Gated { gate: Weight, up: Weight, down: Weight },
    GatedFused { gate_up: Weight, down: Weight },
}

/// One decoder layer: pre-norm attention and FFN blocks with residual adds, each with an
/// optional post-norm of its output (Gemma 3). All norms are RMSNorm.
pub struct Layer {
    pub attn_norm: Vec<f32>,
    pub attn: Attention,
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub ffn: Ffn,
    pub post_ffn_norm: Option<Vec<f32>>,
}

pub struct Model {
    /// Keeps the memory map alive for every `Weight` below.
    pub gguf: Arc<Gguf>,
    pub config: Config,
    pub tok_embd: Weight,
    pub output_norm: Vec<f32>,
    pub output: Weight,
    pub rope_freqs: Option<Vec<f32>>,
    pub layers: Vec<Layer>,
    /// The layers (and output layer) held by a GPU, when offloaded (`gpu::attach`).
    pub gpu: Option<crate::gpu::Offload>,
}

impl Model {
    pub fn load(gguf: Arc<Gguf>) -> Result<Model> {
        let config = Config::from_gguf(&gguf)?;
        let c = &config;
        let ld = Loader { g: &gguf };
        let (e, hd, vd) = (c.n_embd, c.head_dim, c.v_head_dim);
        let (q_dim, kv_dim, v_dim) = (c.n_head * hd, c.n_head_kv * hd, c.n_head_kv * vd);
        let tok_embd = ld.matrix("token_embd.weight", e, c.n_vocab)?;
        let output_norm = ld.vector("output_norm.weight", e)?;
        let output = match ld.opt_matrix("output.weight", e, c.n_vocab)? {
            Some(w) => w,
            // llama.cpp keeps the embedding table out of its repacked buffer
            None => tok_embd.as_plain(),
        };
        let rope_freqs = ld.opt_vector("rope_freqs.weight", c.n_rot / 2)?;
        let mut layers = Vec::with_capacity(c.n_layer);
        for il in 0..c.n_layer {
            let n = |s: &str| format!("blk.{il}.{s}.weight");
            let b = |s: &str| format!("blk.{il}.{s}.bias");
            let qkv = if ld.has(&n("attn_qkv")) {
                Qkv::Fused(ld.matrix(&n("attn_qkv"), e, q_dim + kv_dim + v_dim)?)
            } else {
                Qkv::Split { q: ld.matrix(&n("attn_q"), e, q_dim)?, k: ld.matrix(&n("attn_k"), e, kv_dim)?, v: ld.matrix(&n("attn_v"), e, v_dim)? }
            };
            let down = ld.matrix(&n("ffn_down"), c.n_ff, e)?;
            let ffn = match ld.opt_matrix(&n("ffn_gate"), e, c.n_ff)? {
                Some(gate) => Ffn::Gated { gate, up: ld.matrix(&n("ffn_up"), e, c.n_ff)?, down },
                None => Ffn::GatedFused { gate_up: ld.matrix(&n("ffn_up"), e, 2 * c.n_ff)?, down },
            };
            layers.push(Layer {
                attn_norm: ld.vector(&n("attn_norm"), e)?,
                attn: Attention {
                    qkv,
                    bias: [ld.opt_vector(&b("attn_q"), q_dim)?, ld.opt_vector(&b("attn_k"), kv_dim)?, ld.opt_vector(&b("attn_v"), v_dim)?],
                    q_norm: ld.opt_vector(&n("attn_q_norm"), hd)?,
                    k_norm: ld.opt_vector(&n("attn_k_norm"), hd)?,
                    wo: ld.matrix(&n("attn_output"), q_dim.max(c.n_head * vd), e)?,
                },
                post_attn_norm: ld.opt_vector(&n("post_attention_norm"), e)?,
                ffn_norm: ld.vector(&n("ffn_norm"), e)?,
                ffn,
                post_ffn_norm: ld.opt_vector(&n("post_ffw_norm"), e)?,
            });
        }
        Ok(Model { gguf, config, tok_embd, output_norm, output, rope_freqs, layers, gpu: None })
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
