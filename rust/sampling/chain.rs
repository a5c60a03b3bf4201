//! The sampler chain (llama.cpp's common sampler): logit bias, then the samplers in
//! `params.samplers` order, then a categorical draw ("dist") with the seeded RNG; or, with
//! mirostat, logit bias -> temperature -> mirostat.
use super::candidates::{Candidates, TokenData};
use super::dry::{Dry, GreedyTokenizer};
use super::filters;
use super::logit_bias::apply_logit_bias;
use super::mirostat::Mirostat;
use super::params::{SamplerKind, SamplingParams};
use super::penalties::Penalties;
use super::rng::Rng;
use super::temperature::{apply_temp, apply_temp_ext};
use std::sync::Arc;

/// Seed offset of XTC's own RNG stream, so that XTC's coin flips do not shift the
/// final draws (llama.cpp also gives XTC its own generator).
const XTC_STREAM: u64 = 0x5854_435f_7374_7265;

pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    xtc_rng: Rng,
    cands: Candidates,
    penalties: Penalties,
    dry: Dry,
    mirostat: Option<Mirostat>,
    /// Index in `cands` of the last pick; None before the first `sample`.
    selected: Option<usize>,
    // scratch buffers, reused across calls
    bias_search: Vec<(u32, f32)>,
    typical: filters::TypicalScratch,
}

/// `-1` = the context size (unbounded when unknown), other negatives = off.
fn window(last_n: i32, n_ctx: usize) -> usize {
    match last_n {
        -1 if n_ctx == 0 => usize::MAX,
        -1 => n_ctx,
        n if n < 0 => 0,
        n => n as usize,
    }
}

impl Sampler {
    /// Never panics; parameters outside their range (see `SamplingParams::validate`) are
    /// used as llama.cpp would use them (e.g. mirostat other than 1 or 2 = off).
    pub fn new(params: SamplingParams) -> Sampler {
        let seed = params.seed.unwrap_or_else(Rng::time_seed);
        let p = &params;
        let penalties =
            Penalties::new(window(p.repeat_last_n, p.n_ctx), p.repeat_penalty, p.frequency_penalty, p.presence_penalty);
        let dry = Dry::new(
            p.dry_multiplier,
            p.dry_base,
            p.dry_allowed_length,
            p.dry_penalty_last_n,
            p.n_ctx,
            &p.dry_sequence_breakers,
        );
        let mirostat = match p.mirostat {
            1 | 2 => Some(Mirostat::new(p.mirostat, p.mirostat_tau, p.mirostat_eta)),
            _ => None,
        };
        Sampler {
            rng: Rng::new(seed),
            xtc_rng: Rng::new(seed ^ XTC_STREAM),
            cands: Candidates::default(),
            penalties,
            dry,
            mirostat,
            selected: None,
            bias_search: Vec::new(),
            typical: Default::default(),
            params,
        }
    }

    /// The seed in use (the drawn one when `params.seed` was None).
    pub fn seed(&self) -> u64 {
        self.rng.seed
    }

    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Token texts (`pieces[id]` = bytes of token `id`'s text, special tokens included), for
    /// DRY's sequence breakers; DRY is inactive until this is called. Tails of multi-token
    /// breakers are tokenized by greedy longest match over `pieces`; use
    /// `set_vocab_with_tokenizer` to give the model's tokenizer instead.
    pub fn set_vocab(&mut self, pieces: Arc<Vec<Vec<u8>>>) {
        let mut greedy = GreedyTokenizer::new(&pieces);
        self.dry.set_vocab(&pieces, &mut |t: &[u8]| greedy.tokenize(t));
    }

    /// As `set_vocab`, with `tokenize(text)` (no special tokens added or parsed, as
    /// llama.cpp's `tokenize(str, false, false)`) for the tails of multi-token breakers.
    pub fn set_vocab_with_tokenizer(&mut self, pieces: Arc<Vec<Vec<u8>>>, tokenize: &mut dyn FnMut(&[u8]) -> Vec<u32>) {
        self.dry.set_vocab(&pieces, tokenize);
    }

    /// Feed a token that is now part of the context (prompt tokens and every sampled
    /// token): the history behind the penalties and DRY. `sample` does not do it.
    pub fn accept(&mut self, token: u32) {
        self.penalties.accept(token);
        self.dry.accept(token);
    }

    /// Pick the next token from raw logits (one per vocabulary entry).
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        if logits.is_empty() {
            self.cands.data.clear();
            self.selected = None;
            return 0;
        }
        self.cands.fill(logits);
        apply_logit_bias(&mut self.cands, &self.params.logit_bias, &mut self.bias_search);
        let idx = if let Some(m) = self.mirostat.as_mut() {
            apply_temp(&mut self.cands, self.params.temperature);
            m.sample(&mut self.cands, logits.len(), &mut self.rng)
        } else {
            self.run_chain();
            if self.cands.data.is_empty() {
                // not reachable with the samplers above (each keeps at least one); be safe
                self.cands.fill(logits);
            }
            if self.params.temperature <= 0.0 {
                greedy(&mut self.cands)
            } else {
                dist(&mut self.cands, &mut self.rng)
            }
        };
        let idx = idx.min(self.cands.data.len() - 1);
        self.selected = Some(idx);
        self.cands.data[idx].id
    }

    fn run_chain(&mut self) {
        let p = &self.params;
        let c = &mut self.cands;
        for kind in p.samplers.iter() {
            match kind {
                SamplerKind::Penalties => self.penalties.apply(c),
                SamplerKind::Dry => self.dry.apply(c),
                SamplerKind::TopNSigma => filters::top_n_sigma(c, p.top_n_sigma),
                SamplerKind::TopK => filters::top_k(c, p.top_k),
                SamplerKind::TypicalP => filters::typical(c, p.typical_p, p.min_keep, &mut self.typical),
                SamplerKind::TopP => filters::top_p(c, p.top_p, p.min_keep),
                SamplerKind::MinP => filters::min_p(c, p.min_p, p.min_keep),
                SamplerKind::Xtc => filters::xtc(c, p.xtc_probability, p.xtc_threshold, p.min_keep, &mut self.xtc_rng),
                SamplerKind::Temperature => {
                    apply_temp_ext(c, p.temperature, p.dynatemp_range, p.dynatemp_exponent);
                }
            }
        }
    }

    /// After `sample`: the candidates that survived the chain with their final
    /// probabilities, most likely first (llama.cpp's post-sampling probabilities), at most `n`.
    /// With temperature <= 0 the pick has probability 1 and the other survivors 0.
    pub fn last_probs(&self, n: usize) -> Vec<(u32, f32)> {
        if self.selected.is_none() || n == 0 {
            return Vec::new();
        }
        let mut v: Vec<TokenData> = self.cands.data.clone();
        let by_p = |a: &TokenData, b: &TokenData| {
            b.p.total_cmp(&a.p).then(b.logit.total_cmp(&a.logit)).then(a.id.cmp(&b.id))
        };
        if n < v.len() {
            v.select_nth_unstable_by(n - 1, by_p);
            v.truncate(n);
        }
        v.sort_unstable_by(by_p);
        v.into_iter().map(|t| (t.id, t.p)).collect()
    }

    /// After `sample()`: the final probability of `id` (0 when it did not survive the chain).
    pub fn prob_of(&self, id: u32) -> f32 {
        if self.selected.is_none() {
            return 0.0;
        }
        self.cands.data.iter().find(|t| t.id == id).map(|t| t.p).unwrap_or(0.0)
    }

    /// Mirostat's current `mu` (None without mirostat).
    pub fn mirostat_mu(&self) -> Option<f32> {
        self.mirostat.as_ref().map(|m| m.mu)
    }
}

/// The first candidate with the largest logit; probability 1 for it, 0 for the rest
/// (what llama.cpp's temperature <= 0 followed by its dist sampler gives).
fn greedy(c: &mut Candidates) -> usize {
    let mut best = 0;
    for i in 1..c.data.len() {
        if c.data[i].logit > c.data[best].logit {
            best = i;
        }
    }
    for (i, t) in c.data.iter_mut().enumerate() {
        t.p = if i == best { 1.0 } else { 0.0 };
    }
    best
}

/// llama.cpp's dist sampler: softmax over the candidates (f64 sum), one uniform draw,
/// the first candidate whose cumulative probability passes it. A single candidate is
/// taken without a draw.
fn dist(c: &mut Candidates, rng: &mut Rng) -> usize {
    if c.data.len() == 1 {
        c.data[0].p = 1.0;
        return 0;
    }
    let max = c.max_logit();
    let mut sum = 0.0f64;
    for t in c.data.iter_mut() {
        t.p = (t.logit - max).exp();
        sum += t.p as f64;
    }
    let idx = c.draw(rng.next_f32());
    for t in c.data.iter_mut() {
        t.p = (t.p as f64 / sum) as f32;
    }
    idx
}
