//! DRY ("don't repeat yourself"), after llama.cpp's port of Koboldcpp's sampler: a token
//! that would extend a sequence already seen in the context gets
//! `multiplier * base^(repeat_len - allowed_length)` subtracted from its logit. Sequence
//! breakers (strings, matched against the token texts) cut the repeat length: a repeat
//! never reaches back across the most recent breaker.
use super::candidates::Candidates;
use std::collections::{HashMap, VecDeque};

/// Breakers longer than this many bytes are truncated (llama.cpp's MAX_CHAR_LEN).
const MAX_BREAKER_BYTES: usize = 40;
/// At most this many tail tokens per restart sequence (llama.cpp's MAX_SEQ_LEN).
const MAX_TAIL_TOKENS: usize = 20;

pub(crate) struct Dry {
    multiplier: f32,
    base: f32,
    allowed_length: usize,
    /// Resolved window (`-1` -> context size); usize::MAX = unbounded.
    window: usize,
    /// The context size cap; usize::MAX = unknown.
    total_ctx: usize,
    enabled: bool,
    breakers: Vec<String>,
    /// Restart sequences: head token -> tails (empty tail = the head alone is a breaker).
    restart: HashMap<u32, Vec<Vec<u32>>>,
    has_vocab: bool,
    last_tokens: VecDeque<u32>,
    // scratch
    rev: Vec<u32>,
    z: Vec<usize>,
    max_token_repeat: HashMap<u32, usize>,
}

impl Dry {
    pub fn new(multiplier: f32, base: f32, allowed_length: usize, penalty_last_n: i32, n_ctx: usize, breakers: &[String]) -> Dry {
        let total_ctx = if n_ctx == 0 { usize::MAX } else { n_ctx };
        let window = match penalty_last_n {
            -1 => total_ctx,
            n if n < 0 => 0,
            n => n as usize,
        };
        Dry {
            multiplier,
            base,
            allowed_length,
            window,
            total_ctx,
            enabled: multiplier != 0.0 && base >= 1.0 && penalty_last_n != 0,
            breakers: breakers.to_vec(),
            restart: HashMap::new(),
            has_vocab: false,
            last_tokens: VecDeque::new(),
            rev: Vec::new(),
            z: Vec::new(),
            max_token_repeat: HashMap::new(),
        }
    }

    /// Turn the breaker strings into restart sequences over the vocabulary
    /// (`pieces[id]` = the token's text). A token whose text contains a breaker is a
    /// breaker by itself; a token whose text ends with a proper prefix of a breaker heads a
    /// sequence whose tail is `tokenize(rest of the breaker)`.
    pub fn set_vocab(&mut self, pieces: &[Vec<u8>], tokenize: &mut dyn FnMut(&[u8]) -> Vec<u32>) {
        self.restart.clear();
        self.has_vocab = true;
        if !self.enabled {
            return;
        }
        for b in self.breakers.iter() {
            let mut s = b.as_bytes();
            if s.is_empty() {
                continue;
            }
            if s.len() > MAX_BREAKER_BYTES {
                s = &s[..MAX_BREAKER_BYTES];
            }
            // tails depend only on where the breaker is cut: tokenize each at most once
            let mut tails_by_cut: HashMap<usize, Vec<u32>> = HashMap::new();
            for (id, word) in pieces.iter().enumerate() {
                let id = id as u32;
                if contains(word, s) {
                    self.restart.entry(id).or_default().push(Vec::new());
                    continue;
                }
                // suffixes of the word that are prefixes of the breaker
                for pos in 0..word.len() {
                    if word[pos] != s[0] {
                        continue;
                    }
                    let mut i = 1;
                    let mut matched = true;
                    while i < s.len() && pos + i < word.len() {
                        if word[pos + i] != s[i] {
                            matched = false;
                            break;
                        }
                        i += 1;
                    }
                    if !matched {
                        continue;
                    }
                    let tail = tails_by_cut
                        .entry(i)
                        .or_insert_with(|| {
                            let mut t = tokenize(&s[i..]);
                            t.truncate(MAX_TAIL_TOKENS);
                            t
                        })
                        .clone();
                    let tails = self.restart.entry(id).or_default();
                    if !tails.contains(&tail) {
                        tails.push(tail);
                    }
                }
            }
        }
    }

    pub fn accept(&mut self, token: u32) {
        if !self.enabled || self.window == 0 {
            return;
        }
        self.last_tokens.push_back(token);
        if self.last_tokens.len() > self.window {
            self.last_tokens.pop_front();
        }
    }

    /// `i` tokens back from the most recent one.
    #[inline]
    fn rat(&self, i: usize) -> u32 {
        self.last_tokens[self.last_tokens.len() - 1 - i]
    }

    pub fn apply(&mut self, c: &mut Candidates) {
        if !self.enabled || !self.has_vocab {
            return;
        }
        let n = self.last_tokens.len().min(self.window).min(self.total_ctx);
        if n <= self.allowed_length {
            return;
        }
        // 1. the most recent restart sequence limits how far back a repeat may reach
        let mut rep_limit = n;
        for i in 0..n {
            let Some(tails) = self.restart.get(&self.rat(i)) else { continue };
            let mut longest: Option<usize> = None;
            for tail in tails {
                let len = tail.len();
                if longest.is_none_or(|l| len > l) && len <= i && tail.iter().enumerate().all(|(o, &t)| t == self.rat(i - o - 1)) {
                    longest = Some(len);
                }
            }
            if let Some(l) = longest {
                rep_limit = i - l;
                break;
            }
        }
        if rep_limit < self.allowed_length {
            return;
        }
        // 2. for each position k back from the end, the length of the longest suffix of the
        //    context that also ends k tokens back (Z-function of the reversed window), capped
        self.rev.clear();
        self.rev.extend((0..n).map(|i| self.last_tokens[self.last_tokens.len() - 1 - i]));
        z_function(&self.rev, &mut self.z);
        // 3. the token following each such repeat would extend it: remember the longest
        self.max_token_repeat.clear();
        for k in 1..n {
            let len = self.z[k].min(rep_limit);
            if len >= self.allowed_length {
                let next = self.rev[k - 1];
                let e = self.max_token_repeat.entry(next).or_insert(len);
                if *e < len {
                    *e = len;
                }
            }
        }
        // 4. penalise them (tokens that are breakers by themselves are exempt)
        const FLOAT_MAX_LOG: f32 = 88.722_84;
        let max_exponent: i64 = if self.base > 1.000_001 { (FLOAT_MAX_LOG / self.base.ln()) as i64 } else { 0 };
        let (mult, base, allowed) = (self.multiplier, self.base, self.allowed_length as i64);
        let restart = &self.restart;
        c.for_each_in_map(&self.max_token_repeat, |t, len| {
            let single = restart.get(&t.id).is_some_and(|tails| tails.iter().any(|tl| tl.is_empty()));
            if single {
                return;
            }
            let mut exp = len as i64 - allowed;
            if max_exponent > 0 && exp > max_exponent {
                exp = max_exponent;
            }
            let penalty = (mult as f64 * (base as f64).powi(exp.clamp(i32::MIN as i64, i32::MAX as i64) as i32)) as f32;
            t.logit -= penalty;
        });
        c.sorted = false;
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// z[k] = length of the longest common prefix of `s` and `s[k..]` (z[0] = 0).
fn z_function(s: &[u32], z: &mut Vec<usize>) {
    let n = s.len();
    z.clear();
    z.resize(n, 0);
    let (mut l, mut r) = (0usize, 0usize);
    for i in 1..n {
        let mut v = if i < r { (r - i).min(z[i - l]) } else { 0 };
        while i + v < n && s[v] == s[i + v] {
            v += 1;
        }
        z[i] = v;
        if i + v > r {
            l = i;
            r = i + v;
        }
    }
}

/// Greedy longest-match tokenization against the token texts: the stand-in for the
/// model tokenizer when tokenizing the tails of multi-token breakers. The lookup table is
/// built on first use (never, with single-character breakers).
pub(crate) struct GreedyTokenizer<'a> {
    pieces: &'a [Vec<u8>],
    by_text: Option<HashMap<&'a [u8], u32>>,
}

impl<'a> GreedyTokenizer<'a> {
    pub fn new(pieces: &'a [Vec<u8>]) -> Self {
        GreedyTokenizer { pieces, by_text: None }
    }

    pub fn tokenize(&mut self, text: &[u8]) -> Vec<u32> {
        let pieces = self.pieces;
        let by_text = self.by_text.get_or_insert_with(|| {
            let mut m = HashMap::new();
            for (id, p) in pieces.iter().enumerate() {
                if !p.is_empty() && p.len() <= MAX_BREAKER_BYTES {
                    m.entry(p.as_slice()).or_insert(id as u32);
                }
            }
            m
        });
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < text.len() {
            let longest = (text.len() - pos).min(MAX_BREAKER_BYTES);
            let found = (1..=longest).rev().find_map(|l| by_text.get(&text[pos..pos + l]).map(|&id| (id, l)));
            match found {
                Some((id, l)) => {
                    out.push(id);
                    pos += l;
                }
                None => break,
            }
        }
        out
    }
}
