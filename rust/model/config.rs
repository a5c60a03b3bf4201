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
}

pub const SUPPORTED_ARCHS: &[&str] =
    &["llama", "qwen2", "qwen3", "gemma3", "phi3", "bert", "nomic-bert", "qwen3moe", "qwen2moe", "olmoe", "granite", "granitemoe"];

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
            "qwen3moe" => Arch::Qwen3Moe,
            "qwen2moe" => Arch::Qwen2Moe,
            "olmoe" => Arch::Olmoe,
            "granite" => Arch::Granite,
            "granitemoe" => Arch::GraniteMoe,
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
            Arch::Qwen3Moe => "qwen3moe",
            Arch::Qwen2Moe => "qwen2moe",
            Arch::Olmoe => "olmoe",
            Arch::Granite => "granite",
            Arch::GraniteMoe => "granitemoe",
        }
    }

    /// An encoder: hidden states out, no language-model head.
    pub fn is_encoder(self) -> bool {
        matches!(self, Arch::Bert | Arch::NomicBert)
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activation {
    Silu,
    GeluTanh,
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
    /// Whether positions enter through RoPE on Q and K (else a position embedding table).
    pub rope: bool,
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
    /// Logits are multiplied by this (Granite: 1 / logit_scale).
    pub logit_scale: f32,
    pub activation: Activation,
    /// Mixture-of-experts FFNs (every layer), when the model has experts.
    pub moe: Option<MoeConfig>,
}

fn key(arch: &str, k: &str) -> String {
    format!("{arch}.{k}")
}

/// The expert settings of `arch` (None: a dense model), with the rules llama.cpp applies per
/// architecture: which keys it reads, the expert hidden size's fallback, and whether the
/// chosen weights are renormalised.
fn moe_config(g: &Gguf, arch: Arch, n_ff: usize, n_layer: usize) -> Result<Option<MoeConfig>> {
    let a = arch.name();
    let opt_u = |k: &str| g.get(&key(a, k)).and_then(|v| v.as_u64()).map(|v| v as usize);
    let bad = |k: &str, what: String| Error::MissingKey { path: g.path().to_path_buf(), key: key(a, k), what };
    let n_expert = opt_u("expert_count").unwrap_or(0);
    // a per-layer array is accepted when every layer routes the same number of experts
    let n_used = match g.get(&key(a, "expert_used_count")) {
        Some(v) => match v.as_u64() {
            Some(n) => n as usize,
            None => {
                let arr = g.get_array(&key(a, "expert_used_count"))?;
                let vals: Vec<u64> = arr.iter().filter_map(|v| v.as_u64()).collect();
                match vals.first() {
                    Some(&f) if vals.len() == n_layer && vals.iter().all(|&x| x == f) => f as usize,
                    _ => return Err(bad("expert_used_count", "differs between layers; llamars routes every layer alike".into())),
                }
            }
        },
        None => 0,
    };
    let moe_arch = matches!(arch, Arch::Qwen3Moe | Arch::Qwen2Moe | Arch::Olmoe | Arch::GraniteMoe);
    if n_expert == 0 {
        if moe_arch {
            return Err(bad("expert_count", format!("must be > 0 for {a}")));
        }
        return Ok(None);
    }
    if !moe_arch && arch != Arch::Llama {
        return Err(bad("expert_count", format!("= {n_expert}: llamars runs experts in qwen3moe, qwen2moe, olmoe, granitemoe and llama (Mixtral) models, not {a}")));
    }
    // llama.cpp: LLAMA_MAX_EXPERTS 512, 0 < n_expert_used <= n_expert
    if n_expert > 512 {
        return Err(bad("expert_count", format!("= {n_expert} is more than llama.cpp's limit of 512")));
    }
    if n_used == 0 || n_used > n_expert {
        return Err(bad("expert_used_count", format!("= {n_used} must be between 1 and expert_count = {n_expert}")));
    }
    let n_ff_exp = match arch {
        // expert_feed_forward_length, else feed_forward_length / n_expert_used
        Arch::Qwen3Moe | Arch::Qwen2Moe => opt_u("expert_feed_forward_length").filter(|&v| v > 0).unwrap_or(n_ff / n_used),
        _ => n_ff,
    };
    let n_ff_shexp = match arch {
        Arch::Qwen2Moe => opt_u("expert_shared_feed_forward_length").filter(|&v| v > 0).unwrap_or(n_ff),
        Arch::GraniteMoe | Arch::Llama => opt_u("expert_shared_feed_forward_length").unwrap_or(0),
        _ => 0,
    };
    if n_ff_exp == 0 || n_ff_exp > 1 << 24 || n_ff_shexp > 1 << 24 {
        return Err(bad("expert_feed_forward_length", format!("expert hidden size {n_ff_exp} / shared {n_ff_shexp} is out of range")));
    }
    Ok(Some(MoeConfig {
        n_expert,
        n_used,
        n_ff_exp,
        n_ff_shexp,
        gating: Gating::Softmax,
        // build_moe_ffn's norm_w as each architecture's graph passes it
        norm_w: matches!(arch, Arch::Qwen3Moe | Arch::Llama | Arch::GraniteMoe),
        w_scale: 1.0,
    }))
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
        let mut rope_freq_scale = 1.0;
        let scaling = g.get(&key(a, "rope.scaling.type")).and_then(|v| v.as_str());
        if let Some(f) = opt_f("rope.scaling.factor") {
            if f > 0.0 && scaling != Some("none") {
                rope_freq_scale = 1.0 / f;
            }
        } else if let Some(s) = opt_f("rope.scale_linear") {
            if s > 0.0 {
                rope_freq_scale = 1.0 / s;
            }
        }
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
            rope: arch != Arch::Bert,
            rope_base,
            rope_freq_scale,
            rope_base_swa: rope_base,
            rope_freq_scale_swa: rope_freq_scale,
            // llama.cpp's LLAMA_ROPE_TYPE_NORM architectures; the others rotate NeoX-style
            rope_neox: !matches!(arch, Arch::Llama | Arch::Granite | Arch::GraniteMoe),
            sliding_window: 0,
            swa_layers: vec![false; n_layer],
            q_scale: 1.0,
            kq_scale: 1.0 / (head_dim as f32).sqrt(),
            embd_scale: 1.0,
            residual_scale: 1.0,
            logit_scale: 1.0,
            activation: Activation::Silu,
            moe: None,
        };
        match arch {
            Arch::Gemma3 => {
                // llama.cpp: LLAMA_SWA_TYPE_STANDARD, pattern 6 (every 6th layer global),
                // local RoPE base 10000, Q pre-scaled by 1/sqrt(head_dim), embeddings by sqrt(n_embd).
                cfg.sliding_window = sliding_window;
                cfg.swa_layers = (0..n_layer).map(|il| sliding_window > 0 && il % 6 < 5).collect();
                cfg.rope_base_swa = 10000.0;
                cfg.rope_freq_scale_swa = 1.0;
                cfg.q_scale = 1.0 / (head_dim as f32).sqrt();
                cfg.kq_scale = 1.0;
                cfg.embd_scale = (n_embd as f32).sqrt();
                cfg.activation = Activation::GeluTanh;
            }
            Arch::Phi3 => {
                cfg.q_scale = 1.0 / (head_dim as f32).sqrt();
                cfg.kq_scale = 1.0;
                // llama.cpp disables Phi-3's sliding window (conversion metadata is unreliable).
            }
            // ggml_gelu (the tanh form) in the ungated FFN
            Arch::Bert => cfg.activation = Activation::GeluTanh,
            Arch::Granite | Arch::GraniteMoe => {
                // llama.cpp reads logit_scale as required, the others as optional (0 = unset)
                let logit = opt_f("logit_scale").ok_or_else(|| bad("logit_scale", "is required for Granite models".into()))?;
                if logit == 0.0 || !logit.is_finite() {
                    return Err(bad("logit_scale", format!("= {logit} must be a finite non-zero number")));
                }
                cfg.logit_scale = 1.0 / logit;
                cfg.residual_scale = opt_f("residual_scale").filter(|&v| v != 0.0).unwrap_or(1.0);
                cfg.embd_scale = opt_f("embedding_scale").filter(|&v| v != 0.0).unwrap_or(1.0);
                if let Some(s) = opt_f("attention.scale").filter(|&v| v != 0.0) {
                    cfg.kq_scale = s;
                }
            }
            _ => {}
        }
        cfg.moe = moe_config(g, arch, n_ff, n_layer)?;
        Ok(cfg)
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
