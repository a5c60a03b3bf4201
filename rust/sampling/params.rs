//! Sampling parameters (llama.cpp's `common_params_sampling` defaults), their validation,
//! and the sampler-order names and letters (`--samplers` / `--sampling-seq`).

/// One stage of the sampler chain, in llama.cpp's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SamplerKind {
    Penalties,
    Dry,
    TopNSigma,
    TopK,
    TypicalP,
    TopP,
    MinP,
    Xtc,
    Temperature,
}

impl SamplerKind {
    /// llama.cpp's canonical names (`common_sampler_type_to_str`) and its alternative
    /// spellings (`top-k`, `nucleus`, `typical`, `temp`, ...). Case-sensitive, like llama.cpp.
    pub fn from_name(name: &str) -> Option<Self> {
        use SamplerKind::*;
        Some(match name {
            "penalties" => Penalties,
            "dry" => Dry,
            "top_n_sigma" | "top-n-sigma" => TopNSigma,
            "top_k" | "top-k" => TopK,
            "typ_p" | "typical_p" | "typical-p" | "typical" | "typ-p" | "typ" => TypicalP,
            "top_p" | "top-p" | "nucleus" => TopP,
            "min_p" | "min-p" => MinP,
            "xtc" => Xtc,
            "temperature" | "temp" => Temperature,
            _ => return None,
        })
    }

    /// llama.cpp's `--sampling-seq` letters.
    pub fn from_letter(c: char) -> Option<Self> {
        use SamplerKind::*;
        Some(match c {
            'e' => Penalties,
            'd' => Dry,
            's' => TopNSigma,
            'k' => TopK,
            'y' => TypicalP,
            'p' => TopP,
            'm' => MinP,
            'x' => Xtc,
            't' => Temperature,
            _ => return None,
        })
    }

    /// The canonical llama.cpp name.
    pub fn name(&self) -> &'static str {
        use SamplerKind::*;
        match self {
            Penalties => "penalties",
            Dry => "dry",
            TopNSigma => "top_n_sigma",
            TopK => "top_k",
            TypicalP => "typ_p",
            TopP => "top_p",
            MinP => "min_p",
            Xtc => "xtc",
            Temperature => "temperature",
        }
    }

    /// The `--sampling-seq` letter.
    pub fn letter(&self) -> char {
        use SamplerKind::*;
        match self {
            Penalties => 'e',
            Dry => 'd',
            TopNSigma => 's',
            TopK => 'k',
            TypicalP => 'y',
            TopP => 'p',
            MinP => 'm',
            Xtc => 'x',
            Temperature => 't',
        }
    }

    /// llama.cpp's default order: penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature.
    pub fn default_order() -> Vec<SamplerKind> {
        use SamplerKind::*;
        vec![Penalties, Dry, TopNSigma, TopK, TypicalP, TopP, MinP, Xtc, Temperature]
    }
}

/// Sampler names (as in llama.cpp's `samplers` request field / `--samplers a;b;c`).
/// Unknown names are an error naming the entry (llama.cpp only warns and drops them).
pub fn parse_sampler_names(list: &[String]) -> Result<Vec<SamplerKind>, String> {
    list.iter()
        .enumerate()
        .map(|(i, n)| {
            SamplerKind::from_name(n).ok_or_else(|| {
                format!(
                    "samplers[{i}]: unknown sampler name {n:?} (expected one of penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature)"
                )
            })
        })
        .collect()
}

/// A `--sampling-seq` string such as `edskypmxt`. Unknown letters are an error naming the letter.
pub fn parse_sampling_seq(s: &str) -> Result<Vec<SamplerKind>, String> {
    s.chars()
        .enumerate()
        .map(|(i, c)| {
            SamplerKind::from_letter(c).ok_or_else(|| {
                format!("sampling_seq: unknown sampler letter {c:?} at position {i} (expected letters from \"edskypmxt\")")
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct SamplingParams {
    /// <= 0: greedy (the most likely of the candidates that survive the chain).
    pub temperature: f32,
    /// Dynamic temperature: > 0 maps the candidates' entropy into
    /// [max(0, temperature - range), temperature + range].
    pub dynatemp_range: f32,
    pub dynatemp_exponent: f32,
    /// 0 = off.
    pub top_k: usize,
    /// 1.0 = off.
    pub top_p: f32,
    /// 0.0 = off.
    pub min_p: f32,
    /// 1.0 = off.
    pub typical_p: f32,
    /// <= 0 = off.
    pub top_n_sigma: f32,
    /// 0.0 = off.
    pub xtc_probability: f32,
    /// > 0.5 = off.
    pub xtc_threshold: f32,
    /// 1.0 = off.
    pub repeat_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// Window of accepted tokens the penalties look at: -1 = context size (`n_ctx`), 0 = off.
    pub repeat_last_n: i32,
    /// 0.0 = DRY off.
    pub dry_multiplier: f32,
    pub dry_base: f32,
    pub dry_allowed_length: usize,
    /// -1 = context size (`n_ctx`), 0 = off.
    pub dry_penalty_last_n: i32,
    pub dry_sequence_breakers: Vec<String>,
    /// 0 = off, 1 = Mirostat, 2 = Mirostat 2.0 (these replace the sampler chain).
    pub mirostat: u8,
    pub mirostat_tau: f32,
    pub mirostat_eta: f32,
    /// Minimum number of candidates top_p / min_p / typical_p / xtc leave.
    pub min_keep: usize,
    /// Added to the logits before anything else; `f32::NEG_INFINITY` bans the token.
    pub logit_bias: Vec<(u32, f32)>,
    /// Order of the chain (used when `mirostat == 0`).
    pub samplers: Vec<SamplerKind>,
    /// None: random seed (time based), reported by `Sampler::seed()`.
    pub seed: Option<u64>,
    /// Context size, for the `-1` windows. 0 = unknown: those windows then cover every
    /// accepted token.
    pub n_ctx: usize,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams {
            temperature: 0.8,
            dynatemp_range: 0.0,
            dynatemp_exponent: 1.0,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            top_n_sigma: -1.0,
            xtc_probability: 0.0,
            xtc_threshold: 0.1,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            repeat_last_n: 64,
            dry_multiplier: 0.0,
            dry_base: 1.75,
            dry_allowed_length: 2,
            dry_penalty_last_n: -1,
            dry_sequence_breakers: ["\n", ":", "\"", "*"].iter().map(|s| s.to_string()).collect(),
            mirostat: 0,
            mirostat_tau: 5.0,
            mirostat_eta: 0.1,
            min_keep: 0,
            logit_bias: Vec::new(),
            samplers: SamplerKind::default_order(),
            seed: None,
            n_ctx: 0,
        }
    }
}

fn finite(name: &str, v: f32) -> Result<(), String> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(format!("{name} must be a finite number, got {v}"))
    }
}

fn in_range(name: &str, v: f32, lo: f32, hi: f32) -> Result<(), String> {
    finite(name, v)?;
    if v < lo || v > hi {
        return Err(format!("{name} must be in [{lo}, {hi}], got {v}"));
    }
    Ok(())
}

fn at_least(name: &str, v: f32, lo: f32) -> Result<(), String> {
    finite(name, v)?;
    if v < lo {
        return Err(format!("{name} must be >= {lo}, got {v}"));
    }
    Ok(())
}

impl SamplingParams {
    /// Checks every field; the error names the offending field and value.
    pub fn validate(&self) -> Result<(), String> {
        finite("temperature", self.temperature)?;
        at_least("dynatemp_range", self.dynatemp_range, 0.0)?;
        at_least("dynatemp_exponent", self.dynatemp_exponent, 0.0)?;
        in_range("top_p", self.top_p, 0.0, 1.0)?;
        in_range("min_p", self.min_p, 0.0, 1.0)?;
        finite("typical_p", self.typical_p)?;
        if !(self.typical_p > 0.0 && self.typical_p <= 1.0) {
            return Err(format!("typical_p must be in (0, 1], got {}", self.typical_p));
        }
        finite("top_n_sigma", self.top_n_sigma)?;
        in_range("xtc_probability", self.xtc_probability, 0.0, 1.0)?;
        in_range("xtc_threshold", self.xtc_threshold, 0.0, 1.0)?;
        finite("repeat_penalty", self.repeat_penalty)?;
        if self.repeat_penalty <= 0.0 {
            return Err(format!("repeat_penalty must be > 0, got {}", self.repeat_penalty));
        }
        finite("presence_penalty", self.presence_penalty)?;
        finite("frequency_penalty", self.frequency_penalty)?;
        if self.repeat_last_n < -1 {
            return Err(format!("repeat_last_n must be >= -1, got {}", self.repeat_last_n));
        }
        at_least("dry_multiplier", self.dry_multiplier, 0.0)?;
        finite("dry_base", self.dry_base)?;
        if self.dry_multiplier > 0.0 && self.dry_base < 1.0 {
            return Err(format!("dry_base must be >= 1 when dry_multiplier > 0, got {}", self.dry_base));
        }
        if self.dry_penalty_last_n < -1 {
            return Err(format!("dry_penalty_last_n must be >= -1, got {}", self.dry_penalty_last_n));
        }
        if self.mirostat > 2 {
            return Err(format!("mirostat must be 0, 1 or 2, got {}", self.mirostat));
        }
        at_least("mirostat_tau", self.mirostat_tau, 0.0)?;
        at_least("mirostat_eta", self.mirostat_eta, 0.0)?;
        for (i, &(tok, bias)) in self.logit_bias.iter().enumerate() {
            if bias.is_nan() || bias == f32::INFINITY {
                return Err(format!(
                    "logit_bias[{i}] (token {tok}): bias must be a finite number or -inf, got {bias}"
                ));
            }
        }
        Ok(())
    }
}
