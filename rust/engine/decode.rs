//! Per-request generation state: parameters, sampler, stop strings and streamed text.
use super::stop::{StopCheck, StopMatcher};
use crate::grammar::{Grammar, GrammarSpec};
use crate::sampling::{top_logprobs, Sampler, SamplingParams};
use crate::tokenizer::{StreamDecoder, Tokenizer};

#[derive(Debug, Clone)]
pub struct GenParams {
    /// None: until the context is full.
    pub max_tokens: Option<usize>,
    pub stop: Vec<String>,
    pub sampling: SamplingParams,
    pub ignore_eos: bool,
    /// Report this many top log-probabilities with each token (0 = none).
    pub n_probs: usize,
    /// llama.cpp `n_indent`: once a new line starts, a line indented by fewer spaces/tabs
    /// ends the generation (that line is cut). 0 = off.
    pub n_indent: usize,
    /// llama.cpp `t_max_predict_ms`: stop once generation has run this long (from the
    /// first token) and a new line has been generated. 0 = off.
    pub t_max_predict_ms: u64,
    /// Report probabilities after the sampler chain (llama.cpp `post_sampling_probs`)
    /// instead of log-probabilities of the raw logits.
    pub post_sampling_probs: bool,
    /// Constrain the output to a grammar or JSON schema.
    pub grammar: Option<GrammarSpec>,
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            max_tokens: Some(16),
            stop: Vec::new(),
            sampling: SamplingParams::default(),
            ignore_eos: false,
            n_probs: 0,
            n_indent: 0,
            t_max_predict_ms: 0,
            post_sampling_probs: false,
            grammar: None,
        }
    }
}

/// One generated token's probability report: (token, log-probability — or probability
/// with post_sampling_probs —, top candidates as (token, value)).
pub type TokenProbs = (u32, f32, Vec<(u32, f32)>);

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
    /// Prompt tokens evaluated (cached ones excluded) and the time it took.
    pub prompt_n: usize,
    pub prompt_ms: f64,
    pub predicted_n: usize,
    pub predicted_ms: f64,
}

/// Turns each step's logits into a token and the text that became safe to show:
/// sampling, EOS, max_tokens, stop strings (with hold-back) and UTF-8-safe pieces.
pub struct Decoder {
    pub params: GenParams,
    sampler: Sampler,
    matcher: StopMatcher,
    stream: StreamDecoder,
    pub tokens: Vec<u32>,
    pub text: String,
    sent: usize,
    pub stop_reason: Option<StopReason>,
    pub stopping_word: String,
    pub truncated: bool,
    /// (token, log-probability, top candidates) of every kept token when n_probs > 0.
    pub probs: Vec<TokenProbs>,
    /// Byte offset where the current line starts, once a new line was generated.
    line_start: Option<usize>,
    started: Option<std::time::Instant>,
    grammar: Option<Grammar>,
    masked: Vec<f32>,
}

impl Decoder {
    pub fn new(params: GenParams) -> Decoder {
        Decoder {
            sampler: Sampler::new(params.sampling.clone()),
            matcher: StopMatcher::new(params.stop.clone()),
            params,
            stream: StreamDecoder::new(),
            tokens: Vec::new(),
            text: String::new(),
            sent: 0,
            stop_reason: None,
            stopping_word: String::new(),
            truncated: false,
            probs: Vec::new(),
            line_start: None,
            started: None,
            grammar: None,
            masked: Vec::new(),
        }
    }

    pub fn seed(&self) -> u64 {
        self.sampler.seed()
    }

    /// Whether the sampler needs token texts (DRY's sequence breakers).
    pub fn needs_vocab(&self) -> bool {
        self.params.sampling.dry_multiplier > 0.0
    }

    pub fn set_vocab(&mut self, pieces: std::sync::Arc<Vec<Vec<u8>>>) {
        self.sampler.set_vocab(pieces);
    }

    /// Constrain what follows to a compiled grammar.
    pub fn set_grammar(&mut self, g: Option<Grammar>) {
        self.grammar = g;
    }

    /// Feed the prompt to the penalties and DRY history.
    pub fn prime(&mut self, prompt: &[u32]) {
        for &t in prompt {
            self.sampler.accept(t);
        }
    }

    pub fn is_done(&self) -> bool {
        self.stop_reason.is_some()
    }

    /// Whether max_tokens is already reached (no token may be sampled).
    pub fn at_limit(&self) -> bool {
        self.params.max_tokens.is_some_and(|m| self.tokens.len() >= m)
    }

    /// End the generation; returns the held-back text (if any) as a final event.
    pub fn finish(&mut self, reason: StopReason) -> Option<TokenEvent> {
        if self.stop_reason.is_some() {
            return None;
        }
        self.stop_reason = Some(reason);
        let tail = self.stream.flush();
        self.text.push_str(&tail);
        if self.sent < self.text.len() && reason != StopReason::Word {
            let rest = self.text[self.sent..].to_string();
            self.sent = self.text.len();
            return Some(TokenEvent { token: None, text: rest, logprob: None, top: Vec::new() });
        }
        None
    }

    /// Sample from `logits` and advance. Returns the event to emit (None when the
    /// generation ended without new text). `is_done()` tells whether it finished.
    pub fn step(&mut self, tok: &Tokenizer, logits: &[f32]) -> Option<TokenEvent> {
        if self.is_done() {
            return None;
        }
        if self.at_limit() {
            return self.finish(StopReason::Limit);
        }
        let n_probs = self.params.n_probs;
        let post = self.params.post_sampling_probs;
        let mut top = if n_probs > 0 && !post { top_logprobs(logits, n_probs) } else { Vec::new() };
        // With a grammar: sample as usual and keep the token when the grammar allows it
        // (cheap); only on a rejection build the full mask and sample again (llama.cpp's
        // approach). Mirostat adapts on every draw, so it always samples masked.
        let id = match self.grammar.as_mut() {
            None => self.sampler.sample(logits),
            Some(g) => {
                let first = if self.params.sampling.mirostat == 0 { Some(self.sampler.sample(logits)) } else { None };
                match first {
                    Some(t) if g.allows(t) => t,
                    _ => {
                        self.masked.clear();
                        self.masked.extend_from_slice(logits);
                        if g.mask(&mut self.masked).is_err() {
                            return self.finish(StopReason::Eos);
                        }
                        self.sampler.sample(&self.masked)
                    }
                }
            }
        };
        self.sampler.accept(id);
        let grammar_done = match self.grammar.as_mut() {
            Some(g) => {
                let was_stopped = g.is_stopped();
                was_stopped || g.accept(id).is_err()
            }
            None => false,
        };
        if grammar_done {
            return self.finish(StopReason::Eos);
        }
        // log-probability of the raw logits, or (post_sampling_probs) the probability after the chain
        let logprob = match (n_probs > 0, post) {
            (false, _) => None,
            (true, false) => Some(log_softmax_at(logits, id as usize)),
            (true, true) => {
                top = self.sampler.last_probs(n_probs);
                Some(self.sampler.prob_of(id))
            }
        };
        if tok.vocab.is_eog(id) && !self.params.ignore_eos {
            return self.finish(StopReason::Eos);
        }
        self.tokens.push(id);
        if let Some(lp) = logprob {
            self.probs.push((id, lp, top.clone()));
        }
        let piece = tok.token_to_piece(id, false);
        let fresh = self.stream.push(&piece);
        self.text.push_str(&fresh);
        let mut out = TokenEvent { token: Some(id), text: String::new(), logprob, top };
        let started = *self.started.get_or_insert_with(std::time::Instant::now);
        if let Some(cut) = self.indent_cut() {
            self.text.truncate(cut.max(self.sent));
            out.text = self.text[self.sent..].to_string();
            self.sent = self.text.len();
            self.stop_reason = Some(StopReason::Limit);
            return Some(out);
        }
        match self.matcher.check(&self.text, self.sent) {
            StopCheck::Matched { at, word } => {
                out.text = self.text[self.sent..at.max(self.sent)].to_string();
                self.text.truncate(at);
                self.sent = self.text.len();
                self.stopping_word = word;
                self.stop_reason = Some(StopReason::Word);
                return Some(out);
            }
            StopCheck::SafeUpTo(u) => {
                out.text = self.text[self.sent..u].to_string();
                self.sent = u;
            }
        }
        let timed_out = self.params.t_max_predict_ms > 0
            && self.text.contains('\n')
            && started.elapsed().as_millis() as u64 >= self.params.t_max_predict_ms;
        if self.at_limit() || timed_out {
            if let Some(rest) = self.finish(StopReason::Limit) {
                out.text.push_str(&rest.text);
            }
        }
        Some(out)
    }

    /// n_indent (llama.cpp): when the current line has begun with less indentation than
    /// asked, the byte offset to cut the text at. Also advances to the next line start.
    fn indent_cut(&mut self) -> Option<usize> {
        let want = self.params.n_indent;
        if want == 0 {
            return None;
        }
        if let Some(ls) = self.line_start {
            let ind = self.text.as_bytes()[ls..].iter().take_while(|&&b| b == b' ' || b == b'\t').count();
            if ls + ind < self.text.len() && ind < want {
                return Some(ls + ind);
            }
        }
        let from = self.line_start.unwrap_or(0);
        if let Some(p) = self.text[from..].find('\n') {
            self.line_start = Some(from + p + 1);
        }
        None
    }
}

fn log_softmax_at(logits: &[f32], i: usize) -> f32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max as f64 + logits.iter().map(|&l| ((l - max) as f64).exp()).sum::<f64>().ln();
    (logits[i] as f64 - lse) as f32
}
