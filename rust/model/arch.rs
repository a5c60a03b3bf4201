//! What each architecture does differently, as data on `Config` (llama.cpp's
//! `load_arch_hparams` per model file): sliding-window patterns, RoPE bases and which layers
//! rotate, Q / KQ / embedding / residual / logit scales, soft-capping, activations, and the
//! mixture-of-experts settings.
use super::config::{key, Activation, Arch, AttnTemp, Config, ExpertAct, Gating, MoeConfig};
use crate::error::{Error, Result};
use crate::gguf::Gguf;

/// llama.cpp's `load_swa_pattern`: `attention.sliding_window_pattern` as a per-layer array
/// of flags, else as a period (default `period`): layer il is local when
/// `il % period < period - 1` (a period of 0: every layer).
fn swa_pattern(g: &Gguf, a: &str, n_layer: usize, period: usize) -> Result<Vec<bool>> {
    let k = key(a, "attention.sliding_window_pattern");
    let period = match g.get(&k) {
        None => period,
        Some(v) => match v.as_u64() {
            Some(p) => p as usize,
            None => {
                let arr = g.get_array(&k)?;
                if arr.len() < n_layer {
                    return Err(Error::MissingKey { path: g.path().to_path_buf(), key: k, what: format!("has {} entries for {n_layer} layers", arr.len()) });
                }
                return Ok(arr[..n_layer].iter().map(|v| v.as_bool().unwrap_or(false) || v.as_u64().is_some_and(|x| x != 0)).collect());
            }
        },
    };
    Ok((0..n_layer).map(|il| period == 0 || il % period < period - 1).collect())
}

impl Config {
    /// The settings `self.arch` takes beyond the common keys; `window` is
    /// `attention.sliding_window` (0 when absent).
    pub(super) fn arch_settings(&mut self, g: &Gguf, window: usize) -> Result<()> {
        let a = self.arch.name();
        let opt_f = |k: &str| g.get(&key(a, k)).and_then(|v| v.as_f64()).map(|v| v as f32);
        let bad = |k: &str, what: String| Error::MissingKey { path: g.path().to_path_buf(), key: key(a, k), what };
        let n_layer = self.n_layer;
        // Gemma 2 / 3: Q pre-scaled by 1/sqrt(head size), or by 1/sqrt(n_embd / n_head) in the
        // 27B models (told apart by their layer count, as llama.cpp does)
        let gemma_q_scale = |c: &Config, layers_27b: usize| {
            let d = if c.n_layer == layers_27b { c.n_embd / c.n_head } else { c.head_dim };
            1.0 / (d as f32).sqrt()
        };
        match self.arch {
            Arch::Gemma3 => {
                // local layers only when the file has a window; the local RoPE base defaults to
                // 10000; embeddings scaled by sqrt(n_embd); GELU
                if window > 0 {
                    self.sliding_window = window;
                    self.swa_layers = swa_pattern(g, a, n_layer, 6)?;
                }
                self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(10000.0);
                self.rope_freq_scale_swa = 1.0;
                self.q_scale = gemma_q_scale(self, 62);
                self.kq_scale = 1.0;
                self.embd_scale = (self.n_embd as f32).sqrt();
                self.activation = Activation::GeluTanh;
                self.final_softcap = opt_f("final_logit_softcapping").unwrap_or(0.0);
            }
            Arch::Gemma2 => {
                // every other layer local (window 4096 unless the file says), soft-capped
                // attention scores (50) and logits (30)
                self.sliding_window = if window > 0 { window } else { 4096 };
                self.swa_layers = swa_pattern(g, a, n_layer, 2)?;
                self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                self.rope_freq_scale_swa = self.rope_freq_scale;
                self.q_scale = gemma_q_scale(self, 46);
                self.kq_scale = 1.0;
                self.embd_scale = (self.n_embd as f32).sqrt();
                self.activation = Activation::GeluTanh;
                self.attn_softcap = opt_f("attn_logit_softcapping").unwrap_or(50.0);
                self.final_softcap = opt_f("final_logit_softcapping").unwrap_or(30.0);
            }
            Arch::Olmo2 => {
                // OLMo 3: every 4th layer global when the file has a window; local layers
                // rotate without frequency scaling
                if window > 0 {
                    self.sliding_window = window;
                    self.swa_layers = swa_pattern(g, a, n_layer, 4)?;
                    self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                    self.rope_freq_scale_swa = 1.0;
                    self.swa_plain_rope = true;
                }
            }
            Arch::Exaone4 => {
                // the 64-layer (32B) model: every 4th layer global, and only the local layers
                // rotate; the smaller one has neither (llama.cpp reads the window but ignores it)
                if n_layer == 64 {
                    self.sliding_window = if window > 0 { window } else { 4096 };
                    self.swa_layers = swa_pattern(g, a, n_layer, 4)?;
                    self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                    self.rope_freq_scale_swa = self.rope_freq_scale;
                    self.rope_layers = self.swa_layers.clone();
                }
            }
            Arch::GptOss => {
                // every other layer local (the window is required), local RoPE as the global
                // one unless the file says
                self.sliding_window = window;
                if window == 0 {
                    return Err(bad("attention.sliding_window", "is required for gpt-oss".into()));
                }
                self.swa_layers = swa_pattern(g, a, n_layer, 2)?;
                self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                self.rope_freq_scale_swa = self.rope_freq_scale;
                self.kq_scale = 1.0 / (self.n_rot as f32).sqrt();
            }
            Arch::Cohere2 => {
                // every 4th layer global, only the local ones rotate; the window is required
                if window == 0 {
                    return Err(bad("attention.sliding_window", "is required for cohere2".into()));
                }
                self.sliding_window = window;
                self.swa_layers = swa_pattern(g, a, n_layer, 4)?;
                self.rope_layers = self.swa_layers.clone();
                self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                self.rope_freq_scale_swa = self.rope_freq_scale;
                // logits times logit_scale (required)
                self.logit_scale = opt_f("logit_scale").ok_or_else(|| bad("logit_scale", "is required for cohere2".into()))?;
            }
            Arch::Mistral3 => {
                // the temperature's floor is the original (pre-YaRN) context
                if let Some(scale) = opt_f("attention.temperature_scale").filter(|&v| v != 0.0) {
                    let floor = self.yarn.n_ctx_orig;
                    if floor == 0 {
                        return Err(bad("attention.temperature_scale", "needs an original context length (rope.scaling.original_context_length)".into()));
                    }
                    self.attn_temp = Some(AttnTemp { scale, floor: floor as f32 });
                }
            }
            // every 4th layer without RoPE (llama.cpp's n_no_rope_layer_step)
            Arch::Smollm3 => self.rope_layers = (0..n_layer).map(|il| (il + 1) % 4 != 0).collect(),
            Arch::Glm4 => {
                if let Some(v) = g.get(&key(a, "rope.dimension_sections")) {
                    let multi = v.as_u64().map_or_else(|| g.get_array(&key(a, "rope.dimension_sections")).map(|s| s.iter().any(|x| x.as_u64().unwrap_or(0) != 0)).unwrap_or(true), |x| x != 0);
                    if multi {
                        return Err(bad("rope.dimension_sections", "asks for multi-section RoPE (GLM-4.1V vision models), which llamars does not run".into()));
                    }
                }
            }
            Arch::Phi3 => {
                self.q_scale = 1.0 / (self.head_dim as f32).sqrt();
                self.kq_scale = 1.0;
                // llama.cpp disables Phi-3's sliding window (conversion metadata is unreliable).
            }
            // ggml_gelu (the tanh form) in the ungated FFN
            Arch::Bert | Arch::JinaBertV2 => self.activation = Activation::GeluTanh,
            Arch::ModernBert => {
                if window > 0 {
                    // global layers first in each period of 3 (llama.cpp's dense_first), or
                    // the file's per-layer list
                    self.sliding_window = window;
                    let k = key(a, "attention.sliding_window_pattern");
                    self.swa_layers = match g.get(&k) {
                        Some(v) if v.as_u64().is_none() => swa_pattern(g, a, n_layer, 3)?,
                        v => {
                            let p = v.and_then(|v| v.as_u64()).unwrap_or(3) as usize;
                            (0..n_layer).map(|il| p == 0 || il % p != 0).collect()
                        }
                    };
                    self.rope_base_swa = opt_f("rope.freq_base_swa").unwrap_or(self.rope_base);
                }
                let act = g.get(&key(a, "hidden_activation")).and_then(|v| v.as_str()).unwrap_or("gelu");
                self.activation = match act {
                    "gelu" | "geglu" => Activation::GeluTanh,
                    "silu" | "swish" | "swiglu" => Activation::Silu,
                    other => return Err(bad("hidden_activation", format!("= {other:?}; llamars runs gelu / geglu and silu / swiglu"))),
                };
            }
            Arch::Granite | Arch::GraniteMoe => {
                // llama.cpp reads logit_scale as required, the others as optional (0 = unset)
                let logit = opt_f("logit_scale").ok_or_else(|| bad("logit_scale", "is required for Granite models".into()))?;
                if logit == 0.0 || !logit.is_finite() {
                    return Err(bad("logit_scale", format!("= {logit} must be a finite non-zero number")));
                }
                self.logit_scale = 1.0 / logit;
                self.residual_scale = opt_f("residual_scale").filter(|&v| v != 0.0).unwrap_or(1.0);
                self.embd_scale = opt_f("embedding_scale").filter(|&v| v != 0.0).unwrap_or(1.0);
                if let Some(s) = opt_f("attention.scale").filter(|&v| v != 0.0) {
                    self.kq_scale = s;
                }
            }
            _ => {}
        }
        for (what, v) in [("attn_logit_softcapping", self.attn_softcap), ("final_logit_softcapping", self.final_softcap)] {
            if !v.is_finite() || v < 0.0 {
                return Err(bad(what, format!("= {v} must be a finite number >= 0")));
            }
        }
        Ok(())
    }
}

/// The expert settings of `arch` (None: a dense model), with the rules llama.cpp applies per
/// architecture: which keys it reads, the expert hidden size's fallback, and whether the
/// chosen weights are renormalised.
pub(super) fn moe_config(g: &Gguf, arch: Arch, n_ff: usize, n_layer: usize) -> Result<Option<MoeConfig>> {
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
    let moe_arch = matches!(arch, Arch::Qwen3Moe | Arch::Qwen2Moe | Arch::Olmoe | Arch::GraniteMoe | Arch::GptOss);
    if n_expert == 0 {
        if moe_arch {
            return Err(bad("expert_count", format!("must be > 0 for {a}")));
        }
        return Ok(None);
    }
    if !moe_arch && !matches!(arch, Arch::Llama | Arch::Mistral3) {
        return Err(bad("expert_count", format!("= {n_expert}: llamars runs experts in qwen3moe, qwen2moe, olmoe, granitemoe, gpt-oss, mistral3 and llama (Mixtral) models, not {a}")));
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
        // required
        Arch::GptOss => opt_u("expert_feed_forward_length").ok_or_else(|| bad("expert_feed_forward_length", "is required for gpt-oss".into()))?,
        _ => n_ff,
    };
    let n_ff_shexp = match arch {
        Arch::Qwen2Moe => opt_u("expert_shared_feed_forward_length").filter(|&v| v > 0).unwrap_or(n_ff),
        // (llama.cpp's llama graph loads a shared expert only when Granite set its size)
        Arch::GraniteMoe => opt_u("expert_shared_feed_forward_length").unwrap_or(0),
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
        // gpt-oss: the top k by logit, then a softmax over those k
        gating: if arch == Arch::GptOss { Gating::SoftmaxWeight } else { Gating::Softmax },
        // build_moe_ffn's norm_w as each architecture's graph passes it
        norm_w: matches!(arch, Arch::Qwen3Moe | Arch::Llama | Arch::GraniteMoe | Arch::Mistral3),
        w_scale: 1.0,
        // llama.cpp's LLM_FFN_SWIGLU_OAI_MOE constants
        act: if arch == Arch::GptOss { ExpertAct::SwigluOai { alpha: 1.702, limit: 7.0 } } else { ExpertAct::Swiglu },
    }))
}

