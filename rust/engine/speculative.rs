//! Speculative decoding: drafts of the next tokens, verified by the target model in one
//! forward pass with the other slots' work.
//!
//! A generating sequence with a draft evaluates its pending token and the drafted ones as
//! one span of generated tokens (`prompt_end` 0: every token in the one-token kernel orders
//! of `model/orders.rs`), so each row's logits are the bits one-token decoding computes.
//! The commit samples row by row with the request's own sampler and keeps going while the
//! sampled token equals the draft's: every committed token is the sampler's draw from the
//! target's logits for exactly the prefix one-token decoding would have had, with the same
//! random numbers in the same order. Greedy and seeded outputs are therefore identical with
//! and without speculation; only the rows of rejected drafts are wasted work, and the KV
//! cache is cut back to the accepted prefix (positions are written by index; a
//! sliding-window ring keeps `n_ubatch` spare rows, so a draft never evicts what the
//! accepted prefix still attends to).
//!
//! Draft sources: llama.cpp's `ngram-simple` (the last `size_n` tokens of the sequence
//! found earlier in the prompt or the output; the up to `size_m` tokens that followed
//! the most recent earlier occurrence are the draft).

/// A draft source (llama-server's `--spec-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpecKind {
    #[default]
    None,
    NgramSimple,
}

impl SpecKind {
    /// llama-server's names; the draft sources llamars runs.
    pub fn parse(name: &str) -> Option<SpecKind> {
        match name {
            "none" => Some(SpecKind::None),
            "ngram-simple" => Some(SpecKind::NgramSimple),
            _ => None,
        }
    }

    /// `--spec-type`'s comma-separated list: the draft source it names (at most one of
    /// those llamars runs), or what is wrong with it.
    pub fn parse_list(list: &str) -> std::result::Result<SpecKind, String> {
        let mut kind = SpecKind::None;
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let k = SpecKind::parse(name).ok_or_else(|| match name {
                "draft-simple" | "draft-eagle3" | "draft-mtp" | "draft-dflash" | "draft-dspark" => {
                    format!("speculative decoding type '{name}' needs a draft model, which llamars does not run yet; use ngram-simple")
                }
                "ngram-map-k" | "ngram-map-k4v" | "ngram-mod" | "ngram-cache" => {
                    format!("speculative decoding type '{name}' is not built yet; use ngram-simple")
                }
                _ => format!("unknown speculative decoding type '{name}' (types: none, ngram-simple)"),
            })?;
            if k != SpecKind::None {
                kind = k;
            }
        }
        Ok(kind)
    }

    pub fn name(self) -> &'static str {
        match self {
            SpecKind::None => "none",
            SpecKind::NgramSimple => "ngram-simple",
        }
    }
}

/// The engine's speculative decoding (server-wide: `--spec-type` and its parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpecConfig {
    pub kind: SpecKind,
    /// Length of the lookup n-gram (`--spec-ngram-simple-size-n`).
    pub size_n: usize,
    /// Most tokens drafted from one match (`--spec-ngram-simple-size-m`).
    pub size_m: usize,
    /// Occurrences of the n-gram needed before drafting (`--spec-ngram-simple-min-hits`).
    pub min_hits: usize,
}

impl Default for SpecConfig {
    fn default() -> Self {
        SpecConfig { kind: SpecKind::None, size_n: 12, size_m: 48, min_hits: 1 }
    }
}

/// A request's share of it (llama-server's `speculative.n_max`, `.n_min`, `.p_min`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecParams {
    /// Most drafted tokens verified in one step (0: no speculation for this request).
    pub n_max: usize,
    /// Drafts shorter than this are not verified.
    pub n_min: usize,
    /// A draft model's least probability for a drafted token (n-gram drafts have none).
    pub p_min: f32,
}

impl Default for SpecParams {
    fn default() -> Self {
        // llama-server 2026's generation settings
        SpecParams { n_max: 16, n_min: 0, p_min: 0.75 }
    }
}

/// Most tokens one request may ask to draft per step.
pub const MAX_DRAFT: usize = 256;

/// Counters of one request (llama-server's `timings.draft_n` / `draft_n_accepted`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DraftStats {
    pub drafted: usize,
    pub accepted: usize,
}

/// `ngram-simple`: the tokens that followed the most recent earlier occurrence of the last
/// `n` tokens of `history`, at most `max` of them; empty when the n-gram occurred fewer than
/// `min_hits` times before (or `history` is shorter than n + 1).
pub fn ngram_simple(history: &[u32], n: usize, max: usize, min_hits: usize) -> Vec<u32> {
    let len = history.len();
    if n == 0 || max == 0 || len <= n {
        return Vec::new();
    }
    let key = &history[len - n..];
    let mut hits = 0;
    let mut best = None;
    // earlier occurrences end before the key itself; the most recent one drafts
    for start in (0..len - n).rev() {
        if &history[start..start + n] == key {
            hits += 1;
            best.get_or_insert(start + n);
            if hits >= min_hits.max(1) {
                break;
            }
        }
    }
    match best {
        Some(from) if hits >= min_hits.max(1) => history[from..len.min(from + max)].to_vec(),
        _ => Vec::new(),
    }
}

impl SpecConfig {
    /// The draft for a sequence whose prompt and output so far are `prompt` and `output`
    /// (its last token not evaluated yet), at most `max` tokens.
    pub fn draft(&self, prompt: &[u32], output: &[u32], max: usize) -> Vec<u32> {
        match self.kind {
            SpecKind::None => Vec::new(),
            SpecKind::NgramSimple => {
                let mut h = Vec::with_capacity(prompt.len() + output.len());
                h.extend_from_slice(prompt);
                h.extend_from_slice(output);
                ngram_simple(&h, self.size_n, max.min(self.size_m), self.min_hits)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngram_simple_drafts_what_followed_the_last_occurrence() {
        // "1 2 3" occurred twice; the most recent earlier one is followed by 7 8
        let h = [1, 2, 3, 4, 5, 1, 2, 3, 7, 8, 9, 1, 2, 3];
        assert_eq!(ngram_simple(&h, 3, 2, 1), vec![7, 8]);
        assert_eq!(ngram_simple(&h, 3, 10, 1), vec![7, 8, 9, 1, 2, 3]);
        // two earlier hits needed: still the most recent one drafts
        assert_eq!(ngram_simple(&h, 3, 2, 2), vec![7, 8]);
        assert_eq!(ngram_simple(&h, 3, 2, 3), Vec::<u32>::new());
        // no earlier occurrence, too short a history, nothing asked
        assert!(ngram_simple(&[1, 2, 3, 4], 2, 5, 1).is_empty());
        assert!(ngram_simple(&[1, 2], 2, 5, 1).is_empty());
        assert!(ngram_simple(&h, 3, 0, 1).is_empty());
        // the draft may run up to the key itself
        assert_eq!(ngram_simple(&[5, 5, 5], 1, 4, 1), vec![5]);
    }

    #[test]
    fn config_drafts_over_prompt_and_output() {
        let c = SpecConfig { kind: SpecKind::NgramSimple, size_n: 2, size_m: 3, min_hits: 1 };
        assert_eq!(c.draft(&[10, 11, 12, 13, 14], &[10, 11], 8), vec![12, 13, 14]);
        assert_eq!(c.draft(&[10, 11, 12, 13, 14], &[10, 11], 2), vec![12, 13]);
        assert!(SpecConfig::default().draft(&[1, 1, 1], &[1], 4).is_empty());
        assert_eq!(SpecKind::parse("ngram-simple"), Some(SpecKind::NgramSimple));
        assert_eq!(SpecKind::parse("draft-mtp"), None);
        assert_eq!(SpecKind::parse_list("none,ngram-simple"), Ok(SpecKind::NgramSimple));
        assert_eq!(SpecKind::parse_list(""), Ok(SpecKind::None));
        assert!(SpecKind::parse_list("ngram-simple,draft-mtp").unwrap_err().contains("'draft-mtp' needs a draft model"));
        assert!(SpecKind::parse_list("bogus").unwrap_err().contains("unknown speculative decoding type 'bogus'"));
    }
}
