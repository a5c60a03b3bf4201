//! Hyper-parameters read from GGUF metadata (`{arch}.*` keys).
use crate::error::{Error, Result};
use crate::gguf::Gguf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
    Phi3,
    /// BERT encoders (sentence embeddings): absolute positions, post-LayerNorm,
    /// bidirectional attention.
    Bert,
    /// nomic-bert (nomic-embed-text): BERT's post-LayerNorm layers with RoPE instead of a
    /// position table and a SwiGLU FFN.
    NomicBert,
    /// jina-bert-v2 (jina-embeddings-v2, jina-reranker-v1): BERT's post-LayerNorm layers
    /// with ALiBi instead of positions and a GEGLU FFN with biases.
    JinaBertV2,
    /// ModernBERT (and Granite Embedding R2): pre-LayerNorms without biases, RoPE with a
    /// local base on the sliding-window layers (a symmetric window, every 3rd layer global
    /// from the first), a fused GEGLU (or SwiGLU) FFN, a final norm.
    ModernBert,
    /// Qwen 3 with a mixture of experts in every layer (Qwen3-30B-A3B).
    Qwen3Moe,
    /// Qwen 1.5 / 2 MoE: routed experts plus a shared expert with a sigmoid gate.
    Qwen2Moe,
    /// OLMoE: q/k RMS norms over the whole projection, experts not renormalised.
    Olmoe,
    /// IBM Granite (3.x): embedding, attention, residual and logit multipliers.
    Granite,
    /// Granite MoE: Granite's multipliers with a mixture of experts (and an optional
    /// shared expert).
    GraniteMoe,
    /// Gemma 2: Gemma 3's block without QK-norm, every other layer local, soft-capped
    /// attention scores and logits.
    Gemma2,
    /// OLMo 2 / 3: norms on each block's output only (none before it), q/k RMS norms over
    /// the whole projection.
    Olmo2,
    /// EXAONE 4: OLMo 2's output norms with per-head q/k norms; in the 32B model RoPE on
    /// the local layers only.
    Exaone4,
    /// SmolLM3: llama with no RoPE on every 4th layer.
    Smollm3,
    /// GLM-4: norms before and after each block, a fused gate-up FFN, partial RoPE.
    Glm4,
    /// gpt-oss: attention sinks, every other layer local (window 128), biased experts with
    /// a clamped SwiGLU, softmax over the chosen experts' logits.
    GptOss,
    /// Ministral 3 (Mistral 3): llama with YaRN and Llama 4's attention temperature
    /// (Q scaled up with the position).
    Mistral3,
    /// Command R7B (Cohere 2): attention and FFN in parallel on one LayerNorm (no bias),
    /// three local layers of four with RoPE on those only, a logit scale.
    Cohere2,
}

pub const SUPPORTED_ARCHS: &[&str] = &[
    "llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3", "olmo2", "exaone4", "smollm3", "glm4", "granite", "qwen3moe", "qwen2moe", "olmoe",
    "granitemoe", "gpt-oss", "mistral3", "cohere2", "bert", "nomic-bert",
    "jina-bert-v2", "modern-bert",
];

impl Arch {
    pub fn from_name(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            "bert" => Arch::Bert,
            "nomic-bert" => Arch::NomicBert,
            "jina-bert-v2" => Arch::JinaBertV2,
            "modern-bert" => Arch::ModernBert,
            "qwen3moe" => Arch::Qwen3Moe,
            "qwen2moe" => Arch::Qwen2Moe,
            "olmoe" => Arch::Olmoe,
            "granite" => Arch::Granite,
            "granitemoe" => Arch::GraniteMoe,
            "gemma2" => Arch::Gemma2,
            "olmo2" => Arch::Olmo2,
            "exaone4" => Arch::Exaone4,
            "smollm3" => Arch::Smollm3,
            "glm4" => Arch::Glm4,
            "gpt-oss" => Arch::GptOss,
            "mistral3" => Arch::Mistral3,
            "cohere2" => Arch::Cohere2,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
            Arch::Phi3 => "phi3",
            Arch::Bert => "bert",
            Arch::NomicBert => "nomic-bert",
            Arch::JinaBertV2 => "jina-bert-v2",
            Arch::ModernBert => "modern-bert",
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen2Moe => "qwen2moe",
            Arch::Olmoe => "olmoe",
            Arch::Granite => "granite",
            Arch::GraniteMoe => "granitemoe",
            Arch::Gemma2 => "gemma2",
            Arch::Olmo2 => "olmo2",
            Arch::Exaone4 => "exaone4",
            Arch::Smollm3 => "smollm3",
            Arch::Glm4 => "glm4",
            Arch::GptOss => "gpt-oss",
            Arch::Mistral3 => "mistral3",
            Arch::Cohere2 => "cohere2",
        }
    }

    /// An encoder: hidden states out, no language-model head.
    pub fn is_encoder(self) -> bool {
        matches!(self, Arch::Bert | Arch::NomicBert | Arch::JinaBertV2 | Arch::ModernBert)
    }
}

/// How router logits become expert probabilities (`{arch}.expert_gating_func`, llama.cpp's
/// `llama_expert_gating_func_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gating {
    /// softmax over all experts, then the top k
    Softmax,
    /// sigmoid of each logit, then the top k
    Sigmoid,
    /// the top k logits, then softmax over those k (gpt-oss)
    SoftmaxWeight,
}

/// An expert's activation of gate and up (`build_moe_ffn`'s `type_op`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ExpertAct {
    /// silu(gate) · up (ggml_swiglu_split)
    Swiglu,
    /// gpt-oss: x = min(gate, limit), y = clamp(up, ±limit), x·σ(αx)·(y + 1)
    /// (ggml_swiglu_oai)
    SwigluOai { alpha: f32, limit: f32 },
}

/// A mixture-of-experts FFN's hyper-parameters (`{arch}.expert_*`), as llama.cpp's
/// `build_moe_ffn` takes them per architecture.
#[derive(Debug, Clone)]
pub struct MoeConfig {
    pub n_expert: usize,
    /// Experts each token is routed to (top k).
    pub n_used: usize,
    /// Hidden size of one expert.
    pub n_ff_exp: usize,
    /// Hidden size of the shared expert (0: none).
    pub n_ff_shexp: usize,
    pub gating: Gating,
    /// The k chosen weights are divided by their sum.
    pub norm_w: bool,
    /// The chosen weights are multiplied by this (1: none).
    pub w_scale: f32,
    pub act: ExpertAct,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluTanh,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttnTemp {
    pub scale: f32,
    pub floor: f32,
}

impl AttnTemp {
    /// The factor of the token at `pos`, as llama.cpp's `llm_graph_input_attn_temp` computes
    /// it (the log and the sum in f64).
    pub fn at(&self, pos: usize) -> f32 {
        (((pos as f32 / self.floor).floor() as f64 + 1.0).ln() * self.scale as f64 + 1.0) as f32
    }
}

/// ggml_rope_ext's YaRN inputs as llama.cpp's context derives them from the metadata.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Yarn {
    /// 1 with YaRN, else 0 (no blend, no magnitude term).
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    /// The context the model was trained with before scaling (correction dims).
    pub n_ctx_orig: usize,
}

impl Yarn {
    pub fn off(n_ctx_orig: usize) -> Yarn {
        Yarn { ext_factor: 0.0, attn_factor: 1.0, beta_fast: 32.0, beta_slow: 1.0, n_ctx_orig }
    }
}

#[derive(Debug, Clone)]
pub struct Config {
    pub arch: Arch,
    pub n_vocab: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    pub n_rot: usize,
    pub rms_eps: f32,
    /// LayerNorm epsilon (`attention.layer_norm_epsilon`; BERT).
    pub norm_eps: f32,
    /// Whether a token attends only to earlier positions (`attention.causal`).
    pub causal: bool,
    /// Whether positions enter through RoPE on Q and K (else a position embedding table,
    /// or ALiBi when `alibi_max_bias` > 0).
    pub rope: bool,
    /// ALiBi's maximum bias (0 = none; jina-bert-v2: 8): head h adds slope_h · -|i - j| to
    /// its scores, slopes as ggml's soft_max computes them.
    pub alibi_max_bias: f32,
    pub rope_base: f32,
    pub rope_freq_scale: f32,
    /// RoPE base / scale on sliding-window layers (Gemma 3: 10000, 1).
    pub rope_base_swa: f32,
    pub rope_freq_scale_swa: f32,
    pub rope_neox: bool,
    /// Sliding window size (0 = none) and which layers use it.
    pub sliding_window: usize,
    pub swa_layers: Vec<bool>,
    /// Q is multiplied by this before attention (Gemma 3, Phi-3).
    pub q_scale: f32,
    /// QK^T is multiplied by this inside the softmax.
    pub kq_scale: f32,
    /// Token embeddings are multiplied by this (Gemma: √n_embd).
    pub embd_scale: f32,
    /// A block's output is multiplied by this before its residual add (Granite).
    pub residual_scale: f32,
    /// YaRN's terms of RoPE (`ext_factor` 0 unless `rope.scaling.type = yarn`).
    pub yarn: Yarn,
    /// Local layers rotate without YaRN or frequency scaling (OLMo 3).
    pub swa_plain_rope: bool,
    /// Llama 4's attention temperature (Mistral 3): after RoPE, Q of the token at `pos` is
    /// multiplied by `ln(floor(pos / floor) + 1) · scale + 1`.
    pub attn_temp: Option<AttnTemp>,
    /// Logits are multiplied by this (Granite: 1 / logit_scale).
    pub logit_scale: f32,
    /// Soft-capping (`cap · tanh(x / cap)`) of attention scores and of the final logits
    /// (Gemma 2: 50 and 30; 0 = off).
    pub attn_softcap: f32,
    pub final_softcap: f32,
    /// Layers whose Q and K are rotated (every layer unless the architecture leaves some
    /// out: SmolLM3's every 4th, EXAONE 4 32B's global ones).
    pub rope_layers: Vec<bool>,
    pub activation: Activation,
    /// Mixture-of-experts FFNs (every layer), when the model has experts.
    pub moe: Option<MoeConfig>,
}

pub(super) fn key(arch: &str, k: &str) -> String {
    format!("{arch}.{k}")
}

impl Config {
    pub fn from_gguf(g: &Gguf) -> Result<Config> {
        let arch_name = g.get_str("general.architecture")?;
        let arch = Arch::from_name(arch_name)
            .ok_or_else(|| Error::UnsupportedArch {
                path: g.path().to_path_buf(),
                arch: arch_name.to_string(),
                supported: SUPPORTED_ARCHS,
            })?;
        let a = arch_name;
        let u = |k: &str| -> Result<usize> { Ok(g.get_u64(&key(a, k))? as usize) };
        let opt_u = |k: &str| g.get(&key(a, k)).and_then(|v| v.as_u64()).map(|v| v as usize);
        let opt_f = |k: &str| g.get(&key(a, k)).and_then(|v| v.as_f64()).map(|v| v as f32);
        let n_embd = u("embedding_length")?;
        let n_layer = u("block_count")?;
        let n_head = u("attention.head_count")?;
        let n_ff = u("feed_forward_length")?;
        let n_ctx_train = u("context_length")?;
        let n_head_kv = opt_u("attention.head_count_kv").unwrap_or(n_head);
        let bad = |k: &str, what: String| Error::MissingKey { path: g.path().to_path_buf(), key: key(a, k), what };
        // Bound every size by what the file can hold before anything is allocated from it.
        let n_tensors = g.tensors.len();
        if n_layer > n_tensors {
            return Err(bad("block_count", format!("= {n_layer} but the file holds only {n_tensors} tensors")));
        }
        for (k, v) in [("embedding_length", n_embd), ("attention.head_count", n_head), ("feed_forward_length", n_ff)] {
            if v > 1 << 24 {
                return Err(bad(k, format!("= {v} is out of range")));
            }
        }
        // layers past block_count - nextn_predict_layers are multi-token-prediction heads
        // (GLM-4.5, EXAONE 4), kept in the file but not run, as in llama.cpp
        let n_nextn = opt_u("nextn_predict_layers").unwrap_or(0);
        if n_nextn >= n_layer && n_nextn > 0 {
            return Err(bad("nextn_predict_layers", format!("= {n_nextn} leaves no layer of block_count = {n_layer}")));
        }
        let n_layer = n_layer - n_nextn;
        if n_head == 0 || n_embd == 0 || n_layer == 0 {
            return Err(bad("attention.head_count", "and embedding_length/block_count must be positive".into()));
        }
        if n_head_kv == 0 || n_head % n_head_kv != 0 {
            return Err(bad("attention.head_count_kv", format!("= {n_head_kv} must divide head_count = {n_head}")));
        }
        let head_dim = opt_u("attention.key_length").unwrap_or(n_embd / n_head);
        let v_head_dim = opt_u("attention.value_length").unwrap_or(head_dim);
        if head_dim == 0 || head_dim > 1 << 16 || v_head_dim == 0 || v_head_dim > 1 << 16 {
            return Err(bad("attention.key_length", format!("head size {head_dim} / {v_head_dim} is out of range")));
        }
        let n_rot = opt_u("rope.dimension_count").unwrap_or(head_dim);
        if n_rot > head_dim || n_rot % 2 != 0 {
            return Err(bad("rope.dimension_count", format!("= {n_rot} must be even and at most the head size {head_dim}")));
        }
        let rms_eps = opt_f("attention.layer_norm_rms_epsilon").unwrap_or(1e-5);
        let rope_base = opt_f("rope.freq_base").unwrap_or(10000.0);
        // llama.cpp: rope.scaling.type (default linear) and rope.scaling.factor (or the old
        // rope.scale_linear) give freq_scale = 1 / factor, 1 for type none; yarn adds its
        // extrapolation blend and magnitude factor
        let scaling = g.get(&key(a, "rope.scaling.type")).and_then(|v| v.as_str()).unwrap_or("linear");
        let factor = opt_f("rope.scaling.factor").or_else(|| opt_f("rope.scale_linear")).unwrap_or(0.0);
        let rope_freq_scale = if factor == 0.0 || scaling == "none" { 1.0 } else { 1.0 / factor };
        if !rope_freq_scale.is_finite() || rope_freq_scale <= 0.0 {
            return Err(bad("rope.scaling.factor", format!("= {factor} must be a positive number")));
        }
        let rope_attn_factor = opt_f("rope.scaling.attn_factor").unwrap_or(1.0);
        let yarn = match scaling {
            "none" | "linear" => Yarn { attn_factor: rope_attn_factor, ..Yarn::off(n_ctx_train) },
            "yarn" => {
                // llama_context: attn_factor = get_mscale(factor, 1) (or, with a
                // yarn_log_multiplier, get_mscale(factor, 1) / get_mscale(factor, it)) over
                // (1 + 0.1 ln factor), which cancels rope_yarn's own magnitude term unless the
                // model says otherwise; times rope.scaling.attn_factor. Only Mistral 3 (of the
                // architectures here) reads the log multiplier and the betas.
                let f = 1.0 / rope_freq_scale;
                let mscale = |m: f32| if f <= 1.0 { 1.0 } else { 0.1 * m * f.ln() + 1.0 };
                let reads = arch == Arch::Mistral3;
                let log_mul = if reads { opt_f("rope.scaling.yarn_log_multiplier").unwrap_or(0.0) } else { 0.0 };
                let attn = if log_mul != 0.0 { mscale(1.0) / mscale(log_mul) } else { mscale(1.0) };
                let off = Yarn::off(n_ctx_train);
                Yarn {
                    ext_factor: 1.0,
                    attn_factor: attn * (1.0 / (1.0 + 0.1 * f.ln())) * rope_attn_factor,
                    beta_fast: if reads { opt_f("rope.scaling.yarn_beta_fast").unwrap_or(off.beta_fast) } else { off.beta_fast },
                    beta_slow: if reads { opt_f("rope.scaling.yarn_beta_slow").unwrap_or(off.beta_slow) } else { off.beta_slow },
                    n_ctx_orig: opt_u("rope.scaling.original_context_length").filter(|&v| v > 0).unwrap_or(n_ctx_train),
                }
            }
            other => {
                return Err(Error::NotSupported(format!(
                    "{}: {a}.rope.scaling.type = {other:?} is not supported (llamars runs none, linear and yarn)",
                    g.path().display()
                )))
            }
        };
        let n_vocab = g.get_array("tokenizer.ggml.tokens").map(|t| t.len()).or_else(|_| u("vocab_size"))?;
        let sliding_window = opt_u("attention.sliding_window").unwrap_or(0);
        let mut cfg = Config {
            arch,
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            v_head_dim,
            n_rot,
            rms_eps,
            norm_eps: opt_f("attention.layer_norm_epsilon").unwrap_or(1e-5),
            causal: g.get(&key(a, "attention.causal")).and_then(|v| v.as_bool()).unwrap_or(!arch.is_encoder()),
            rope: !matches!(arch, Arch::Bert | Arch::JinaBertV2),
            alibi_max_bias: if arch == Arch::JinaBertV2 { 8.0 } else { 0.0 },
            rope_base,
            rope_freq_scale,
            rope_base_swa: rope_base,
            rope_freq_scale_swa: rope_freq_scale,
            // llama.cpp's LLAMA_ROPE_TYPE_NORM architectures; the others rotate NeoX-style
            rope_neox: !matches!(arch, Arch::Llama | Arch::Granite | Arch::GraniteMoe | Arch::Smollm3 | Arch::Glm4 | Arch::Mistral3 | Arch::Cohere2),
            sliding_window: 0,
            swa_layers: vec![false; n_layer],
            q_scale: 1.0,
            kq_scale: 1.0 / (head_dim as f32).sqrt(),
            embd_scale: 1.0,
            residual_scale: 1.0,
            logit_scale: 1.0,
            yarn,
            swa_plain_rope: false,
            attn_temp: None,
            attn_softcap: 0.0,
            final_softcap: 0.0,
            rope_layers: vec![true; n_layer],
            activation: Activation::Silu,
            moe: None,
        };
        cfg.arch_settings(g, sliding_window)?;
        cfg.moe = super::arch::moe_config(g, arch, n_ff, n_layer)?;
        Ok(cfg)
    }

    /// ALiBi's slope of each head (ggml_soft_max_ext's m0 / m1 powers), empty without ALiBi.
    pub fn alibi_slopes(&self) -> Vec<f32> {
        if self.alibi_max_bias <= 0.0 {
            return Vec::new();
        }
        let n_head_log2 = 1u32 << (self.n_head as f32).log2().floor() as u32;
        let m0 = 2f32.powf(-self.alibi_max_bias / n_head_log2 as f32);
        let m1 = 2f32.powf(-(self.alibi_max_bias / 2.0) / n_head_log2 as f32);
        (0..self.n_head as u32)
            .map(|h| if h < n_head_log2 { m0.powf((h + 1) as f32) } else { m1.powf((2 * (h - n_head_log2) + 1) as f32) })
            .collect()
    }

    /// What follows the output matmul: Granite's scale, then Gemma 2's soft-capping
    /// (`ggml_scale` by 1/cap, `tanh`, `ggml_scale` by cap).
    pub fn finish_logits(&self, logits: &mut [f32]) {
        if self.logit_scale != 1.0 {
            logits.iter_mut().for_each(|v| *v *= self.logit_scale);
        }
        if self.final_softcap > 0.0 {
            let (inv, cap) = (1.0 / self.final_softcap, self.final_softcap);
            logits.iter_mut().for_each(|v| *v = (*v * inv).tanh() * cap);
        }
    }

    /// ggml_rope_ext's parameters for the local (`swa`) or global layers.
    pub fn rope_params<'a>(&self, swa: bool, factors: Option<&'a [f32]>) -> crate::cpu::ops::RopeParams<'a> {
        let y = if swa && self.swa_plain_rope { Yarn::off(self.yarn.n_ctx_orig) } else { self.yarn };
        let (base, freq_scale) = if swa { (self.rope_base_swa, self.rope_freq_scale_swa) } else { (self.rope_base, self.rope_freq_scale) };
        crate::cpu::ops::RopeParams {
            n_rot: self.n_rot,
            base,
            freq_scale,
            factors,
            ext_factor: y.ext_factor,
            attn_factor: y.attn_factor,
            beta_fast: y.beta_fast,
            beta_slow: y.beta_slow,
            n_ctx_orig: y.n_ctx_orig,
            rotation_only: false,
        }
    }

    /// Whether layer `il` rotates Q and K.
    pub fn has_rope(&self, il: usize) -> bool {
        self.rope && self.rope_layers.get(il).copied().unwrap_or(true)
    }

    pub fn is_swa(&self, il: usize) -> bool {
        self.swa_layers.get(il).copied().unwrap_or(false)
    }

    /// KV rows per slot for each layer: every position for full attention; for
    /// sliding-window layers a ring of window + n_ubatch - 1 rows (unless `swa_full`).
    pub fn kv_caps(&self, slot_ctx: usize, n_ubatch: usize, swa_full: bool) -> Vec<usize> {
        (0..self.n_layer)
            .map(|il| {
                if !swa_full && self.is_swa(il) && self.sliding_window > 0 {
                    (self.sliding_window + n_ubatch.max(1) - 1).min(slot_ctx)
                } else {
                    slot_ctx
                }
            })
            .collect()
    }

    /// Bytes of the f16 KV cache the engine allocates for `n_parallel` slots of `slot_ctx`.
    pub fn kv_bytes(&self, n_parallel: usize, slot_ctx: usize, n_ubatch: usize, swa_full: bool) -> u128 {
        let per_row = (self.n_head_kv * (self.head_dim + self.v_head_dim)) as u128 * 2;
        self.kv_caps(slot_ctx, n_ubatch, swa_full).iter().map(|&c| c as u128).sum::<u128>() * n_parallel as u128 * per_row
    }
}
