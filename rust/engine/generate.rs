//! One generation as a pull-based stream: each `next()` evaluates what is pending,
//! samples one token and returns the text that became safe to show.
use super::stop::{StopCheck, StopMatcher};
use super::{Engine, Session};
use crate::error::{Error, Result};
use crate::model::LogitRows;
use crate::sampling::{top_logprobs, Sampler, SamplingParams};
use crate::tokenizer::StreamDecoder;
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Clone)]
pub struct GenParams {
    /// None: until the context is full.
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    pub sampling: SamplingParams,
    pub ignore_eos: bool,
    /// Report this many top log-probabilities with each token (0 = none).
    pub n_probs: usize,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams { max_tokens: Some(16), stop: Vec::new(), sampling: SamplingParams::default(), ignore_eos: false, n_probs: 0 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// An end-of-generation token was sampled.
    Eos,
    /// max_tokens reached (or the context filled up).
    Limit,
    /// A stop string matched.
    Word,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::Eos => "eos",
            StopReason::Limit => "limit",
            StopReason::Word => "word",
        }
    }
}

#[derive(Debug, Clone)]
pub struct TokenEvent {
    /// The sampled token (None for a final event that only flushes held-back text).
    pub token: Option<u32>,
    /// Text that became safe to show with this event (may be empty).
    pub text: String,
    /// Log-probability of the sampled token and the top candidates, when asked.
    pub logprob: Option<f32>,
    pub top: Vec<(u32, f32)>,
}

#[derive(Debug, Clone, Default)]
pub struct Timings {
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
}

pub struct Generation {
    engine: Arc<Engine>,
    session: Session,
    prompt: Vec<u32>,
    params: GenParams,
    sampler: Sampler,
    matcher: StopMatcher,
    decoder: StreamDecoder,
    logits: Vec<f32>,
    /// Token whose logits are still to be computed.
    pending: Option<u32>,
    started: bool,
    pub tokens: Vec<u32>,
    pub text: String,
    sent: usize,
    pub stop_reason: Option<StopReason>,
    pub stopping_word: String,
    pub truncated: bool,
    pub timings: Timings,
}

impl Generation {
    pub fn new(engine: Arc<Engine>, prompt: Vec<u32>, params: GenParams) -> Result<Generation> {
        if prompt.is_empty() {
            return Err(Error::InvalidRequest("prompt: at least one token is required".into()));
        }
        let n_ctx = engine.config.n_ctx;
        if prompt.len() >= n_ctx {
            return Err(Error::ContextOverflow { n_tokens: prompt.len() + 1, n_ctx });
        }
        let n_vocab = engine.model.config.n_vocab;
        if let Some(&bad) = prompt.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidRequest(format!("prompt: token id {bad} is out of range (n_vocab = {n_vocab})")));
        }
        let session = engine.new_session()?;
        Ok(Generation {
            sampler: Sampler::new(params.sampling.clone()),
            matcher: StopMatcher::new(params.stop.clone()),
            engine,
            session,
            prompt,
            params,
            decoder: StreamDecoder::new(),
            logits: Vec::new(),
            pending: None,
            started: false,
            tokens: Vec::new(),
            text: String::new(),
            sent: 0,
            stop_reason: None,
            stopping_word: String::new(),
            truncated: false,
            timings: Timings::default(),
        })
    }

    pub fn prompt(&self) -> &[u32] {
        &self.prompt
    }

    pub fn seed(&self) -> u64 {
        self.sampler.seed()
    }

    pub fn is_done(&self) -> bool {
        self.stop_reason.is_some()
    }

    fn finish(&mut self, reason: StopReason) -> Option<TokenEvent> {
        self.stop_reason = Some(reason);
        let tail = self.decoder.flush();
        self.text.push_str(&tail);
        if self.sent < self.text.len() && reason != StopReason::Word {
            let rest = self.text[self.sent..].to_string();
            self.sent = self.text.len();
            return Some(TokenEvent { token: None, text: rest, logprob: None, top: Vec::new() });
        }
        None
    }

    /// Advance by one token. Returns None once the generation has finished.
    pub fn next_event(&mut self) -> Result<Option<TokenEvent>> {
        if self.stop_reason.is_some() {
            return Ok(None);
        }
        let e = self.engine.clone();
        if !self.started {
            let t = Instant::now();
            let prompt = std::mem::take(&mut self.prompt);
            let r = e.eval(&mut self.session, &prompt, LogitRows::Last, &mut self.logits);
            self.prompt = prompt;
            r?;
            self.timings.prompt_n = self.prompt.len();
            self.timings.prompt_ms = t.elapsed().as_secs_f64() * 1e3;
            self.started = true;
        }
        let t = Instant::now();
        if let Some(tok) = self.pending.take() {
            if self.session.kv.n_past + 1 > self.session.kv.n_ctx {
                self.truncated = true;
                return Ok(self.finish(StopReason::Limit));
            }
            e.eval(&mut self.session, &[tok], LogitRows::Last, &mut self.logits)?;
        }
        if let Some(max) = self.params.max_tokens {
            if self.tokens.len() >= max {
                return Ok(self.finish(StopReason::Limit));
            }
        }
        let top = if self.params.n_probs > 0 { top_logprobs(&self.logits, self.params.n_probs) } else { Vec::new() };
        let tok = self.sampler.sample(&self.logits);
        let logprob = if self.params.n_probs > 0 { Some(log_softmax_at(&self.logits, tok as usize)) } else { None };
        self.timings.predicted_ms += t.elapsed().as_secs_f64() * 1e3;
        if e.tokenizer.vocab.is_eog(tok) && !self.params.ignore_eos {
            return Ok(self.finish(StopReason::Eos));
        }
        self.tokens.push(tok);
        self.timings.predicted_n = self.tokens.len();
        let piece = e.tokenizer.token_to_piece(tok, false);
        let fresh = self.decoder.push(&piece);
        self.text.push_str(&fresh);
        let mut out = TokenEvent { token: Some(tok), text: String::new(), logprob, top };
        match self.matcher.check(&self.text, self.sent) {
            StopCheck::Matched { at, word } => {
                out.text = self.text[self.sent..at.max(self.sent)].to_string();
                self.text.truncate(at);
                self.sent = self.text.len();
                self.stopping_word = word;
                self.stop_reason = Some(StopReason::Word);
                return Ok(Some(out));
            }
            StopCheck::SafeUpTo(u) => {
                out.text = self.text[self.sent..u].to_string();
                self.sent = u;
            }
        }
        self.pending = Some(tok);
        if let Some(max) = self.params.max_tokens {
            if self.tokens.len() >= max {
                if let Some(rest) = self.finish(StopReason::Limit) {
                    out.text.push_str(&rest.text);
                }
            }
        }
        Ok(Some(out))
    }
}

fn log_softmax_at(logits: &[f32], i: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max as f64 + logits.iter().map(|&l| ((l - max) as f64).exp()).sum::<f64>().ln();
    (logits[i] as f64 - lse) as f32
}
