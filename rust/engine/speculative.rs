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

/// `ngram-simple`, as llama.cpp's `common_ngram_simple_draft`: `history` is the sequence so
/// far with its sampled, not yet evaluated token last; its last `n` tokens (the key) are
/// looked up earlier in the sequence (most recent occurrence first, ending at least one
/// token before the key starts, position 0 excluded), and up to `m` of the tokens that
/// followed it (and precede the sampled one) are the draft. Nothing while the sequence
/// holds n + m + 1 tokens or fewer before the sampled one, and nothing shorter than `n`.
/// `min_hits` occurrences are needed (llama.cpp's simple mode takes the first: 1).
pub fn ngram_simple(history: &[u32], n: usize, m: usize, min_hits: usize) -> Vec<u32> {
    let Some(cur) = history.len().checked_sub(1) else { return Vec::new() };
    if n == 0 || cur <= n + m + 1 {
        return Vec::new();
    }
    let key = &history[history.len() - n..];
    let mut hits = 0;
    let mut first = None;
    for j in (1..cur - n).rev() {
        if &history[j..j + n] == key {
            hits += 1;
            first.get_or_insert(j);
            if hits >= min_hits.max(1) {
                break;
            }
        }
    }
    let Some(j) = first.filter(|_| hits >= min_hits.max(1)) else { return Vec::new() };
    let copy = m.min(cur - (j + n));
    if copy < n {
        return Vec::new();
    }
    history[j + n..j + n + copy].to_vec()
}

impl SpecConfig {
    /// The draft for a sequence whose prompt and output so far are `prompt` and `output`
    /// (its last token not evaluated yet), cut to at most `max` tokens (llama-server cuts a
    /// draft to the request's `speculative.n_max`).
    pub fn draft(&self, prompt: &[u32], output: &[u32], max: usize) -> Vec<u32> {
        match self.kind {
            SpecKind::None => Vec::new(),
            SpecKind::NgramSimple => {
                let mut h = Vec::with_capacity(prompt.len() + output.len());
                h.extend_from_slice(prompt);
                h.extend_from_slice(output);
                let mut d = ngram_simple(&h, self.size_n, self.size_m, self.min_hits);
                d.truncate(max);
                d
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ngram_simple_drafts_what_followed_the_last_occurrence() {
        // key "1 2 3" (the sampled 3 last); its most recent earlier occurrence (at 5) is
        // followed by 7 8 9 4 4 before the key
        let h = [0, 1, 2, 3, 4, 1, 2, 3, 7, 8, 9, 4, 4, 1, 2, 3];
        assert_eq!(ngram_simple(&h, 3, 4, 1), vec![7, 8, 9, 4]);
        assert_eq!(ngram_simple(&h, 3, 8, 1), vec![7, 8, 9, 4, 4, 1, 2], "up to the token before the sampled one");
        assert!(ngram_simple(&h, 3, 12, 1).is_empty(), "15 tokens before the sampled one: not more than 3 + 12 + 1");
        assert_eq!(ngram_simple(&h, 3, 5, 1), vec![7, 8, 9, 4, 4]);
        // two hits needed: the earlier one at 1 is counted, the most recent one drafts
        assert_eq!(ngram_simple(&h, 3, 4, 2), vec![7, 8, 9, 4]);
        assert!(ngram_simple(&h, 3, 4, 3).is_empty());
        // a draft shorter than the key is none: "4 4" last occurs at 7, one token follows it
        assert!(ngram_simple(&[0, 5, 6, 7, 8, 9, 9, 4, 4, 4, 4], 2, 3, 1).is_empty());
        // position 0 is not searched, nor a match overlapping the key by n - 1
        assert!(ngram_simple(&[1, 2, 5, 6, 7, 8, 9, 9, 1, 2], 2, 2, 1).is_empty());
        assert!(ngram_simple(&[], 2, 2, 1).is_empty() && ngram_simple(&h, 0, 2, 1).is_empty());
    }

    #[test]
    fn config_drafts_over_prompt_and_output() {
        let c = SpecConfig { kind: SpecKind::NgramSimple, size_n: 2, size_m: 3, min_hits: 1 };
        let prompt = [0, 10, 11, 12, 13, 14, 15];
        assert_eq!(c.draft(&prompt, &[10, 11], 8), vec![12, 13, 14]);
        assert_eq!(c.draft(&prompt, &[10, 11], 2), vec![12, 13]);
        assert!(SpecConfig::default().draft(&[1, 1, 1], &[1], 4).is_empty());
        assert_eq!(SpecKind::parse("ngram-simple"), Some(SpecKind::NgramSimple));
        assert_eq!(SpecKind::parse("draft-mtp"), None);
        assert_eq!(SpecKind::parse_list("none,ngram-simple"), Ok(SpecKind::NgramSimple));
        assert_eq!(SpecKind::parse_list(""), Ok(SpecKind::None));
        assert!(SpecKind::parse_list("ngram-simple,draft-mtp").unwrap_err().contains("'draft-mtp' needs a draft model"));
        assert!(SpecKind::parse_list("bogus").unwrap_err().contains("unknown speculative decoding type 'bogus'"));
    }
}
