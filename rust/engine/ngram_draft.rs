//! Draft sources that need no second model: llama.cpp's n-gram family (`ngram-simple`,
//! `ngram-map-k`, `ngram-map-k4v`, `ngram-mod`). Each looks at the sequence so far (the
//! prompt, then the output, its sampled and not yet evaluated token last) and proposes
//! the tokens that followed an earlier occurrence of its last tokens.
//!
//! Drafts only decide how much work verification saves: the committed tokens are the
//! target's own samples whatever is drafted (`speculative.rs`).
use std::collections::HashMap;

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

/// Most m-grams remembered after one key (llama.cpp's `COMMON_NGRAM_MAX_VALUES`).
const MAX_VALUES: usize = 4;
/// Counters saturate here (llama.cpp's `COMMON_NGRAM_MAX_VALUE_COUNT`).
const MAX_COUNT: u16 = 16380;

/// An m-gram seen after a key: where it starts, how often it followed the key, and how
/// many of its tokens were accepted the last time it was drafted (the next draft from it
/// is no longer than that).
#[derive(Debug, Clone, Copy, Default)]
struct Value {
    idx: usize,
    num: u16,
    n_accepted: usize,
}

#[derive(Debug, Clone)]
struct Key {
    /// Where the key n-gram occurs (its first lookup's match).
    idx: usize,
    /// Occurrences of the key before this index were counted into `values`.
    stat: usize,
    /// Lookups that found the key.
    hits: u16,
    values: [Value; MAX_VALUES],
}

/// llama.cpp's `ngram-map-k` (`key_only`) and `ngram-map-k4v` for one sequence: the key
/// n-grams of the sequence indexed as it grows (the most recent occurrence with a whole
/// m-gram after it), per key the number of lookups that found it and, for k4v, up to four
/// different m-grams that followed it with their counts. `ngram-map-k` drafts the m-gram
/// after the key's match; `ngram-map-k4v` only when one m-gram dominates (at least three
/// times as frequent as all the others together), and drafts that one. Both need the key
/// found `min_hits` times (llama.cpp applies `min_hits` to k4v only), and a draft is no
/// longer than what was accepted of the last draft from the same m-gram.
#[derive(Debug, Clone)]
pub struct NgramMap {
    n: usize,
    m: usize,
    key_only: bool,
    min_hits: usize,
    keys: Vec<Key>,
    /// Hash of an n-gram → its most recent indexed start.
    index: HashMap<u64, usize>,
    /// Starts below this are indexed.
    indexed: usize,
    /// The key and value the last draft came from.
    last: Option<(usize, usize)>,
}

fn ngram_hash(t: &[u32]) -> u64 {
    t.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| (h ^ x as u64).wrapping_mul(0x0100_0000_01b3))
}

impl NgramMap {
    pub fn new(n: usize, m: usize, key_only: bool, min_hits: usize) -> NgramMap {
        NgramMap { n, m, key_only, min_hits, keys: Vec::new(), index: HashMap::new(), indexed: 1, last: None }
    }

    /// The draft after `history` (its sampled token last), possibly empty.
    pub fn draft(&mut self, h: &[u32]) -> Vec<u32> {
        self.last = None;
        let (n, m) = (self.n, self.m);
        let Some(cur) = h.len().checked_sub(1) else { return Vec::new() };
        if n == 0 || m == 0 || cur < 2 * n + m {
            return Vec::new();
        }
        // candidate starts: 1 .. cur - n - m - 1 (a whole m-gram follows, before the key)
        let limit = cur - n - m - 1;
        for j in self.indexed..limit {
            self.index.insert(ngram_hash(&h[j..j + n]), j);
        }
        self.indexed = self.indexed.max(limit);
        let key = &h[h.len() - n..];
        let Some(pos) = self.index.get(&ngram_hash(key)).copied().filter(|&j| &h[j..j + n] == key) else {
            return Vec::new();
        };
        let ki = match self.keys.iter().position(|k| &h[k.idx..k.idx + n] == key) {
            Some(i) => i,
            None => {
                let fresh = Value { idx: 0, num: 0, n_accepted: m };
                self.keys.push(Key { idx: pos, stat: 0, hits: 0, values: [fresh; MAX_VALUES] });
                self.keys.len() - 1
            }
        };
        let k = &mut self.keys[ki];
        k.hits = (k.hits + 1).min(MAX_COUNT);
        if (k.hits as usize) < self.min_hits {
            return Vec::new();
        }
        if self.key_only {
            let len = m.min(k.values[0].n_accepted);
            self.last = Some((ki, 0));
            return h[pos + n..pos + n + len].to_vec();
        }
        // count the m-grams after the key's occurrences not counted yet
        for i in k.stat..=pos {
            if &h[i..i + n] != key {
                continue;
            }
            let v_at = i + n;
            let slot = k.values.iter().position(|v| v.idx == 0 || h[v.idx..v.idx + m] == h[v_at..v_at + m]);
            if let Some(s) = slot {
                let v = &mut k.values[s];
                if v.idx == 0 {
                    *v = Value { idx: v_at, num: 0, n_accepted: m };
                }
                v.num = (v.num + 1).min(MAX_COUNT);
            }
        }
        k.stat = pos + 1;
        let mut best = 0;
        for (s, v) in k.values.iter().enumerate() {
            if v.num > k.values[best].num {
                best = s;
            }
        }
        let max = k.values[best].num as u32;
        let others: u32 = k.values.iter().enumerate().filter(|&(s, _)| s != best).map(|(_, v)| v.num as u32).sum();
        if max == 0 || (others > 0 && max < 3 * others) {
            return Vec::new();
        }
        let v = k.values[best];
        self.last = Some((ki, best));
        h[v.idx..v.idx + m.min(v.n_accepted)].to_vec()
    }

    /// `n_accepted` tokens of the last draft were accepted.
    pub fn accept(&mut self, n_accepted: usize) {
        if let Some((k, v)) = self.last {
            self.keys[k].values[v].n_accepted = n_accepted;
        }
    }
}

/// No token stored (llama.cpp's `common_ngram_mod::EMPTY`).
const EMPTY: u32 = u32::MAX;
/// Entries of the `ngram-mod` table (llama.cpp's 4 Mi).
pub const MOD_ENTRIES: usize = 4 * 1024 * 1024;

/// llama.cpp's `ngram-mod` table, shared by all sequences: the hash of an `n`-gram (mod the
/// table size) → the token that last followed one with that hash. Collisions overwrite.
pub struct NgramMod {
    n: usize,
    entries: Vec<u32>,
    used: usize,
}

impl NgramMod {
    pub fn new(n: usize, size: usize) -> NgramMod {
        NgramMod { n, entries: vec![EMPTY; size.max(1)], used: 0 }
    }

    fn idx(&self, t: &[u32]) -> usize {
        let h = t[..self.n].iter().fold(0u64, |r, &x| r.wrapping_mul(6364136223846793005).wrapping_add(x as u64));
        (h % self.entries.len() as u64) as usize
    }

    /// Record that `t[n]` followed `t[..n]`.
    fn add(&mut self, t: &[u32]) {
        let i = self.idx(t);
        if self.entries[i] != EMPTY {
            self.used += 1;
        }
        self.entries[i] = t[self.n];
    }

    fn get(&self, t: &[u32]) -> u32 {
        self.entries[self.idx(t)]
    }

    fn reset(&mut self) {
        self.entries.fill(EMPTY);
        self.used = 0;
    }

    /// Bytes the table holds.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.entries.len() * 4
    }
}

/// One sequence's use of the `ngram-mod` table (llama.cpp's `seq_info`).
#[derive(Debug, Clone, Default)]
pub struct ModSeq {
    begun: bool,
    /// N-grams starting below this were added to the table.
    i_last: usize,
    /// Length of the last draft.
    n_draft_last: usize,
    /// Consecutive verifications that accepted under a quarter of the draft.
    n_low: usize,
}

impl ModSeq {
    /// The draft after `h` (the prompt's n-grams join the table the first time), with at
    /// least `n_min` and at most `n_max` tokens, or none.
    pub fn draft(&mut self, table: &mut NgramMod, prompt: &[u32], h: &[u32], n_min: usize, n_max: usize) -> Vec<u32> {
        let n = table.n;
        if !self.begun {
            self.begun = true;
            if prompt.len() >= n {
                for i in 0..prompt.len() - n {
                    table.add(&prompt[i..]);
                }
                self.i_last = prompt.len() - n;
                if table.used as f64 / table.entries.len() as f64 > 0.25 {
                    table.reset();
                }
            }
        }
        self.n_draft_last = 0;
        let Some(cur) = h.len().checked_sub(1) else { return Vec::new() };
        if n == 0 || cur < n {
            return Vec::new();
        }
        // the sequence's new n-grams join the table in chunks
        if self.i_last + 32 < cur {
            for i in self.i_last..cur - n {
                table.add(&h[i..]);
            }
            self.i_last = cur - n;
        }
        let mut r: Vec<u32> = h[h.len() - n..].to_vec();
        for i in 0..n_max {
            let t = table.get(&r[i..]);
            if t == EMPTY {
                if i < n_min {
                    return Vec::new();
                }
                break;
            }
            r.push(t);
        }
        let d = r.split_off(n);
        self.n_draft_last = d.len();
        d
    }

    /// `n_accepted` tokens of this sequence's last draft were accepted: five verifications
    /// in a row that accept under a quarter of the draft clear the table.
    pub fn accept(&mut self, table: &mut NgramMod, n_accepted: usize) {
        if self.n_draft_last == 0 {
            return;
        }
        if (n_accepted as f64) < 0.25 * self.n_draft_last as f64 {
            self.n_low += 1;
            if self.n_low >= 5 {
                table.reset();
                self.n_low = 0;
                self.i_last = 0;
            }
        } else {
            self.n_low = 0;
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
    fn map_k_drafts_after_the_key_and_shrinks_to_what_was_accepted() {
        let mut map = NgramMap::new(2, 3, true, 1);
        // key "1 2" at 1, followed by 5 6 7; the sequence ends with the key again
        let h = [0, 1, 2, 5, 6, 7, 9, 9, 9, 1, 2];
        assert_eq!(map.draft(&h), vec![5, 6, 7]);
        map.accept(1);
        assert_eq!(map.draft(&h), vec![5], "a draft from the same m-gram is no longer than what was accepted");
        map.accept(0);
        assert!(map.draft(&h).is_empty());
        // too short a sequence (under 2n + m before the sampled token), an unknown key
        assert!(NgramMap::new(2, 3, true, 1).draft(&h[..6]).is_empty());
        assert!(NgramMap::new(2, 3, true, 1).draft(&[0, 1, 2, 5, 6, 7, 9, 9, 9, 3, 4]).is_empty());
        // two lookups needed: the first finds the key and counts it
        let mut map = NgramMap::new(2, 3, true, 2);
        assert!(map.draft(&h).is_empty());
        assert_eq!(map.draft(&h), vec![5, 6, 7]);
    }

    #[test]
    fn map_k4v_drafts_only_a_dominant_continuation() {
        // "1 2" is followed by 5 6 twice, by 8 8 once: 2 < 3 * 1, no draft
        let mut h = vec![0, 1, 2, 5, 6, 1, 2, 8, 8, 1, 2, 5, 6, 3, 3, 1, 2];
        assert!(NgramMap::new(2, 2, false, 1).draft(&h).is_empty());
        // a third "5 6": 3 >= 3 * 1, the dominant m-gram is drafted
        h.splice(13..13, [1, 2, 5, 6]);
        assert_eq!(NgramMap::new(2, 2, false, 1).draft(&h), vec![5, 6]);
        // a key seen with one continuation only
        let h = [0, 1, 2, 5, 6, 9, 9, 1, 2];
        let mut map = NgramMap::new(2, 2, false, 1);
        assert_eq!(map.draft(&h), vec![5, 6]);
        assert_eq!(map.draft(&h), vec![5, 6], "occurrences are counted once");
        assert_eq!(map.keys[0].values[0].num, 1);
    }

    #[test]
    fn mod_table_chains_lookups_and_resets_on_low_acceptance() {
        let mut table = NgramMod::new(2, 1 << 10);
        let prompt = [1, 2, 3, 4, 5, 6, 7, 8];
        let mut seq = ModSeq::default();
        // the prompt's bigrams chain 3 4 → 5 → 6 → 7 → 8; the key is the last two tokens
        let h = [1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 4];
        assert_eq!(seq.draft(&mut table, &prompt, &h, 0, 3), vec![5, 6, 7]);
        assert_eq!(seq.draft(&mut table, &prompt, &h, 0, 8), vec![5, 6, 7, 8], "nothing follows 7 8, the prompt's end");
        assert_eq!(seq.draft(&mut table, &prompt, &h, 4, 8).len(), 4);
        assert!(seq.draft(&mut table, &prompt, &h, 5, 8).is_empty(), "fewer than n_min found");
        for _ in 0..5 {
            assert!(!seq.draft(&mut table, &prompt, &h, 0, 8).is_empty());
            seq.accept(&mut table, 0);
        }
        assert!(seq.draft(&mut table, &prompt, &h, 0, 8).is_empty(), "five poor verifications clear the table");
        assert_eq!(table.bytes(), 4096);
    }
}
