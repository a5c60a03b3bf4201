//! Unigram (`tokenizer.ggml.model = t5`: XLM-RoBERTa, bge-m3, T5), as the Hugging Face
//! `tokenizers` library runs such a checkpoint's `tokenizer.json`: its `Precompiled`
//! normalizer (SentencePiece's charsmap, looked up per extended grapheme cluster and then
//! per character), runs of spaces collapsed (`Replace(" {2,}", " ")`, when the GGUF says
//! `remove_extra_whitespaces`), its `Metaspace` pre-tokenizer (spaces to `▁`, a `▁`
//! prepended when `add_space_prefix`, split before every `▁`) and its Viterbi search over
//! the pieces' scores, with consecutive unknown characters fused into one `<unk>`.
//!
//! Where llama.cpp's UGM tokenizer differs from `tokenizers` (see the README), this
//! follows `tokenizers`. Everything read from the file is bounds-checked: a broken
//! charsmap is refused when the model opens, never indexed blindly.
use super::vocab::{attr, Vocab};
use crate::error::{Error, Result};
use std::collections::HashMap;
use unicode_segmentation::UnicodeSegmentation;

/// `tokenizers`' (and SentencePiece's) penalty below the lowest piece score for `<unk>`.
const UNK_PENALTY: f64 = 10.0;
const SPACE: char = '\u{2581}';

/// SentencePiece's precompiled charsmap: a double-array trie over UTF-8 bytes whose
/// leaves index NUL-terminated replacement strings.
struct Charsmap {
    array: Vec<u32>,
    normalized: Vec<u8>,
}

impl Charsmap {
    fn parse(blob: &[u8]) -> Option<Charsmap> {
        let size = u32::from_le_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        let trie = blob.get(4..4usize.checked_add(size)?)?;
        if size % 4 != 0 || size == 0 {
            return None;
        }
        let array = trie.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
        Some(Charsmap { array, normalized: blob[4 + size..].to_vec() })
    }

    fn offset(unit: u32) -> usize {
        ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize
    }

    /// The replacement of the shortest prefix of `key` the trie holds (`spm_precompiled`'s
    /// `transform`: the first result of a common-prefix search).
    fn transform(&self, key: &[u8]) -> Option<&[u8]> {
        let mut pos = Self::offset(*self.array.first()?);
        for &c in key {
            if c == 0 {
                break;
            }
            pos ^= c as usize;
            let unit = *self.array.get(pos)?;
            if unit & ((1 << 31) | 0xff) != c as u32 {
                return None;
            }
            pos ^= Self::offset(unit);
            if (unit >> 8) & 1 == 1 {
                let at = (*self.array.get(pos)? & ((1 << 31) - 1)) as usize;
                let rest = self.normalized.get(at..)?;
                let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
                return Some(&rest[..end]);
            }
        }
        None
    }
}

/// Byte trie over the pieces' texts; `child` maps (node, byte) to the next node.
struct Trie {
    child: HashMap<(u32, u8), u32>,
    value: Vec<u32>,
}

impl Trie {
    fn new() -> Trie {
        Trie { child: HashMap::new(), value: vec![u32::MAX] }
    }

    fn insert(&mut self, text: &[u8], id: u32) {
        let mut node = 0u32;
        for &b in text {
            node = match self.child.get(&(node, b)) {
                Some(&n) => n,
                None => {
                    let n = self.value.len() as u32;
                    self.value.push(u32::MAX);
                    self.child.insert((node, b), n);
                    n
                }
            };
        }
        self.value[node as usize] = id;
    }
}

pub struct Ugm {
    charsmap: Option<Charsmap>,
    trie: Trie,
    unk_score: f64,
}

impl Ugm {
    pub fn new(v: &Vocab, charsmap: Option<&[u8]>, path: &str) -> Result<Ugm> {
        let charsmap = match charsmap {
            None => None,
            Some(b) => Some(Charsmap::parse(b).ok_or_else(|| {
                Error::Tokenizer(format!("{path}: tokenizer.ggml.precompiled_charsmap is malformed (its trie does not fit the blob)"))
            })?),
        };
        if v.unk.is_none() {
            return Err(Error::Tokenizer(format!("{path}: a Unigram vocabulary needs an unknown token (tokenizer.ggml.unknown_token_id)")));
        }
        let mut trie = Trie::new();
        let mut min_score = f64::INFINITY;
        for (i, t) in v.texts.iter().enumerate() {
            if v.attrs[i] & attr::UNUSED != 0 || t.is_empty() {
                continue;
            }
            trie.insert(t, i as u32);
            min_score = min_score.min(v.scores[i] as f64);
        }
        let min_score = if min_score.is_finite() { min_score } else { 0.0 };
        Ok(Ugm { charsmap, trie, unk_score: min_score - UNK_PENALTY })
    }

    /// `Precompiled`, then the space collapse, as `tokenizers` normalizes a fragment.
    fn normalize(&self, text: &str, collapse: bool) -> String {
        let mut out = String::with_capacity(text.len());
        let Some(map) = &self.charsmap else {
            out.push_str(text);
            return if collapse { collapse_spaces(&out) } else { out };
        };
        let mut bytes = Vec::with_capacity(text.len());
        for g in text.graphemes(true) {
            if g.len() < 6 {
                if let Some(r) = map.transform(g.as_bytes()) {
                    bytes.extend_from_slice(r);
                    continue;
                }
            }
            for (i, c) in g.char_indices() {
                let part = &g.as_bytes()[i..i + c.len_utf8()];
                bytes.extend_from_slice(map.transform(part).unwrap_or(part));
            }
        }
        out.push_str(&String::from_utf8_lossy(&bytes));
        if collapse {
            collapse_spaces(&out)
        } else {
            out
        }
    }

    /// Ids of one text fragment (between special tokens), appended to `out`.
    pub fn tokenize(&self, v: &Vocab, text: &str, out: &mut Vec<u32>) {
        let norm = self.normalize(text, v.remove_extra_whitespaces);
        if norm.is_empty() {
            // `tokenizers` prepends nothing to an empty string
            return;
        }
        let mut s: String = norm.chars().map(|c| if c == ' ' { SPACE } else { c }).collect();
        if v.add_space_prefix && !s.starts_with(SPACE) {
            s.insert(0, SPACE);
        }
        // split before every ▁ (MergedWithNext)
        let mut start = 0;
        for (i, _) in s.match_indices(SPACE) {
            if i > start {
                self.viterbi(v, &s[start..i], out);
            }
            start = i;
        }
        if start < s.len() {
            self.viterbi(v, &s[start..], out);
        }
    }

    fn viterbi(&self, v: &Vocab, s: &str, out: &mut Vec<u32>) {
        let b = s.as_bytes();
        let n = b.len();
        let unk = v.unk.unwrap_or(0);
        // (score, start, id); start = usize::MAX: not reached yet
        let mut best: Vec<(f64, usize, u32)> = vec![(0.0, usize::MAX, unk); n + 1];
        best[0].1 = 0;
        let mut at = 0;
        while at < n {
            let here = best[at].0;
            let mblen = s[at..].chars().next().map_or(1, |c| c.len_utf8());
            let mut single = false;
            let mut node = 0u32;
            for (k, &byte) in b[at..].iter().enumerate() {
                let Some(&next) = self.trie.child.get(&(node, byte)) else { break };
                node = next;
                let id = self.trie.value[node as usize];
                if id == u32::MAX {
                    continue;
                }
                let end = at + k + 1;
                let cand = here + v.scores[id as usize] as f64;
                let t = &mut best[end];
                if t.1 == usize::MAX || cand > t.0 {
                    *t = (cand, at, id);
                }
                single |= k + 1 == mblen;
            }
            if !single {
                let cand = here + self.unk_score;
                let t = &mut best[at + mblen];
                if t.1 == usize::MAX || cand > t.0 {
                    *t = (cand, at, unk);
                }
            }
            at += mblen;
        }
        let first = out.len();
        let mut end = n;
        let mut prev_unk = false;
        while end > 0 {
            let (_, start, id) = best[end];
            if start == usize::MAX || start >= end {
                break;
            }
            let is_unk = id == unk;
            if !(prev_unk && is_unk) {
                out.push(id);
            }
            prev_unk = is_unk;
            end = start;
        }
        out[first..].reverse();
    }
}

/// `Replace(" {2,}", " ")`.
fn collapse_spaces(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut prev_space = false;
    for c in s.chars() {
        if c == ' ' && prev_space {
            continue;
        }
        prev_space = c == ' ';
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collapse() {
        assert_eq!(collapse_spaces("a  b   c d "), "a b c d ");
    }

    #[test]
    fn broken_charsmaps_are_refused() {
        assert!(Charsmap::parse(&[]).is_none());
        assert!(Charsmap::parse(&[8, 0, 0, 0, 1, 2, 3]).is_none());
        assert!(Charsmap::parse(&[3, 0, 0, 0, 1, 2, 3, 0]).is_none());
        let m = Charsmap::parse(&[4, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, b'x', 0]).unwrap();
        // out-of-range nodes end the search instead of indexing past the array
        assert_eq!(m.transform("abc".as_bytes()), None);
    }
}
