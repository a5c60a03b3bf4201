//! llama.cpp's `ngram-cache` draft source (lookup decoding): counts of the tokens that
//! followed each 1- to 4-gram, from three caches — the sequence's own (built as it grows),
//! and a static and a dynamic one read from files (`-lcs` / `-lcd`, the format of
//! llama.cpp's `llama-lookup-create`). Each drafted token is the most frequent follower of
//! the longest n-gram whose counts pass llama.cpp's sample-size and share thresholds
//! (lax for the sequence's cache, strict for the dynamic one), weighted by the static
//! cache's counts after the last two tokens; the static cache alone is the last resort.
use crate::error::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// N-gram lengths counted (llama.cpp's `LLAMA_NGRAM_MIN` / `_MAX`) and the static cache's.
const NGRAM_MIN: usize = 1;
const NGRAM_MAX: usize = 4;
const NGRAM_STATIC: usize = 2;
/// A shorter n-gram's unused places (llama.cpp's `LLAMA_TOKEN_NULL`, -1).
const NULL: u32 = u32::MAX;
/// Tokens drafted per step (llama.cpp's fixed 8).
pub const N_DRAFT: usize = 8;

/// Below these sample sizes and shares (percent) of the most frequent follower, per n-gram
/// length 1..4, an n-gram does not draft (llama.cpp's lax and strict thresholds).
const MIN_SAMPLES_LAX: [u32; NGRAM_MAX] = [2, 2, 1, 1];
const MIN_PERCENT_LAX: [u32; NGRAM_MAX] = [66, 50, 50, 50];
const MIN_SAMPLES_STRICT: [u32; NGRAM_MAX] = [4, 3, 2, 2];
const MIN_PERCENT_STRICT: [u32; NGRAM_MAX] = [75, 66, 66, 66];

type Ngram = [u32; NGRAM_MAX];
/// Follower token → count, by token (a deterministic order for ties).
type Part = BTreeMap<u32, u32>;

/// N-gram → the counts of the tokens that followed it.
#[derive(Debug, Clone, Default)]
pub struct NgramCounts {
    map: HashMap<Ngram, Part>,
}

fn ngram(t: &[u32]) -> Ngram {
    let mut g = [NULL; NGRAM_MAX];
    g[..t.len()].copy_from_slice(t);
    g
}

impl NgramCounts {
    /// Count the n-grams that end in the last `n_new` tokens of `inp` (llama.cpp's
    /// `common_ngram_cache_update`).
    pub fn update(&mut self, inp: &[u32], n_new: usize) {
        for size in NGRAM_MIN..=NGRAM_MAX {
            for i in inp.len().saturating_sub(n_new).max(size)..inp.len() {
                let c = self.map.entry(ngram(&inp[i - size..i])).or_default().entry(inp[i]).or_insert(0);
                *c = c.saturating_add(1);
            }
        }
    }

    /// Read a cache file: records of four i32 tokens (-1 for unused places), an i32
    /// count of followers (> 0), then that many (i32 token, i32 count > 0) pairs, little
    /// endian. Tokens must be below `n_vocab`.
    pub fn load(path: &Path, what: &str, n_vocab: usize) -> Result<NgramCounts> {
        let bytes = std::fs::read(path).map_err(|e| Error::InvalidRequest(format!("{what}: cannot read {}: {e}", path.display())))?;
        let bad = |at: usize, why: &str| {
            Error::InvalidRequest(format!("{what}: {} is not a lookup cache (at byte {at}: {why}); make one with llama.cpp's llama-lookup-create", path.display()))
        };
        let token = |v: i32, at: usize, null_ok: bool| -> Result<u32> {
            match v {
                -1 if null_ok => Ok(NULL),
                v if v >= 0 && (v as usize) < n_vocab => Ok(v as u32),
                v => Err(bad(at, &format!("token {v} outside the model's vocabulary of {n_vocab}"))),
            }
        };
        let mut out = NgramCounts::default();
        let mut at = 0;
        let next = |at: &mut usize| -> Option<i32> {
            let b = bytes.get(*at..*at + 4)?;
            *at += 4;
            Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        while at < bytes.len() {
            let start = at;
            let mut g = [NULL; NGRAM_MAX];
            for slot in g.iter_mut() {
                let v = next(&mut at).ok_or_else(|| bad(start, "truncated n-gram"))?;
                *slot = token(v, at - 4, true)?;
            }
            let n = next(&mut at).ok_or_else(|| bad(at, "truncated record"))?;
            if n <= 0 {
                return Err(bad(at - 4, &format!("{n} followers")));
            }
            let part = out.map.entry(g).or_default();
            for _ in 0..n {
                let (t, c) = match (next(&mut at), next(&mut at)) {
                    (Some(t), Some(c)) => (t, c),
                    _ => return Err(bad(at, "truncated record")),
                };
                if c <= 0 {
                    return Err(bad(at - 4, &format!("count {c}")));
                }
                let e = part.entry(token(t, at - 8, false)?).or_insert(0);
                *e = e.saturating_add(c as u32);
            }
        }
        Ok(out)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

/// The static and dynamic caches read from files, shared by all sequences.
#[derive(Debug, Default)]
pub struct LookupFiles {
    pub fixed: NgramCounts,
    pub dynamic: NgramCounts,
}

/// The most frequent follower of the static n-gram, if it passes the lax thresholds.
fn try_static(fixed: &NgramCounts, g: &Ngram) -> Option<u32> {
    let part = fixed.map.get(g)?;
    let (mut best, mut max, mut sum) = (NULL, 0, 0u64);
    for (&t, &c) in part {
        if c > max {
            (best, max) = (t, c);
        }
        sum += c as u64;
    }
    let i = NGRAM_STATIC - 1;
    if sum < MIN_SAMPLES_LAX[i] as u64 || 100 * (max as u64) < MIN_PERCENT_LAX[i] as u64 * sum {
        return None;
    }
    Some(best)
}

/// The longest of `grams` (index = length - 1) whose most frequent follower (weighted by
/// the static counts) passes the thresholds.
fn try_primary(primary: &NgramCounts, grams: &[Ngram], fixed: Option<&Part>, samples: &[u32; 4], percent: &[u32; 4]) -> Option<u32> {
    for i in (0..grams.len()).rev() {
        let Some(part) = primary.map.get(&grams[i]) else { continue };
        let (mut best, mut max_p, mut max_s, mut sum) = (NULL, 0u64, 0u64, 0u64);
        for (&t, &c) in part {
            let s = fixed.and_then(|f| f.get(&t)).map_or(1, |&s| 100 * s as u64);
            if c as u64 * s > max_p * max_s {
                (best, max_p, max_s) = (t, c as u64, s);
            }
            sum += c as u64;
        }
        if sum < samples[i] as u64 || 100 * max_p < percent[i] as u64 * sum {
            continue;
        }
        return Some(best);
    }
    None
}

/// One sequence's lookup state: its own cache and how much of the sequence it counted.
#[derive(Debug, Clone, Default)]
pub struct LookupSeq {
    context: NgramCounts,
    counted: usize,
}

impl LookupSeq {
    /// Up to `n_draft` tokens after `h` (the sequence, its sampled token last).
    pub fn draft(&mut self, files: &LookupFiles, h: &[u32], n_draft: usize) -> Vec<u32> {
        if h.len() > self.counted {
            self.context.update(h, h.len() - self.counted);
            self.counted = h.len();
        }
        if h.len() < NGRAM_STATIC {
            return Vec::new();
        }
        let mut seq = h.to_vec();
        while seq.len() - h.len() < n_draft {
            let n = seq.len();
            let g_static = ngram(&seq[n - NGRAM_STATIC..]);
            let part_static = files.fixed.map.get(&g_static);
            let grams: Vec<Ngram> = (NGRAM_MIN..=NGRAM_MAX.min(n)).map(|k| ngram(&seq[n - k..])).collect();
            let t = try_primary(&self.context, &grams, part_static, &MIN_SAMPLES_LAX, &MIN_PERCENT_LAX)
                .or_else(|| try_primary(&files.dynamic, &grams, part_static, &MIN_SAMPLES_STRICT, &MIN_PERCENT_STRICT))
                .or_else(|| try_static(&files.fixed, &g_static));
            match t {
                Some(t) => seq.push(t),
                None => break,
            }
        }
        seq.split_off(h.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(g: [i32; 4], followers: &[(i32, i32)]) -> Vec<u8> {
        let mut b = Vec::new();
        for v in g.into_iter().chain([followers.len() as i32]).chain(followers.iter().flat_map(|&(t, c)| [t, c])) {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn the_sequence_cache_drafts_frequent_followers() {
        let mut s = LookupSeq::default();
        let files = LookupFiles::default();
        // "1 2" was followed by 3 twice: the 2-gram passes (2 samples, 100 %); then "2 3" → 1
        // (twice), and so on around the cycle
        let h = [1, 2, 3, 1, 2, 3, 1, 2];
        assert_eq!(s.draft(&files, &h, 4), vec![3, 1, 2, 3]);
        // a follower seen once after a 1-gram does not pass the lax 2-sample threshold;
        // the 3-gram "5 6 7" seen once does (1 sample)
        let mut s = LookupSeq::default();
        assert!(s.draft(&files, &[9, 8, 7], 4).is_empty());
        let mut s = LookupSeq::default();
        assert_eq!(s.draft(&files, &[5, 6, 7, 4, 5, 6, 7], 1), vec![4]);
    }

    #[test]
    fn files_load_and_the_static_cache_drafts_last() {
        let dir = std::env::temp_dir().join(format!("llamars-lookup-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("static.bin");
        let mut b = record([10, 11, -1, -1], &[(12, 3), (13, 1)]);
        b.extend(record([11, 12, -1, -1], &[(10, 2)]));
        std::fs::write(&p, &b).unwrap();
        let fixed = NgramCounts::load(&p, "lookup_cache_static", 100).unwrap();
        assert_eq!(fixed.len(), 2);
        let files = LookupFiles { fixed, dynamic: NgramCounts::default() };
        let mut s = LookupSeq::default();
        // 10 11 → 12 (3 of 4), 11 12 → 10 (2 of 2), 12 10 unknown
        assert_eq!(s.draft(&files, &[50, 10, 11], 8), vec![12, 10]);
        // errors name the file and what is wrong
        std::fs::write(&p, &b[..b.len() - 3]).unwrap();
        let e = NgramCounts::load(&p, "lookup_cache_static", 100).unwrap_err().to_string();
        assert!(e.contains("lookup_cache_static") && e.contains("truncated"), "{e}");
        std::fs::write(&p, record([10, 11, -1, -1], &[(500, 1)])).unwrap();
        let e = NgramCounts::load(&p, "lookup_cache_dynamic", 100).unwrap_err().to_string();
        assert!(e.contains("token 500 outside the model's vocabulary of 100"), "{e}");
        std::fs::write(&p, record([10, 11, -1, -1], &[(5, 0)])).unwrap();
        assert!(NgramCounts::load(&p, "x", 100).unwrap_err().to_string().contains("count 0"));
        let e = NgramCounts::load(&dir.join("missing.bin"), "lookup_cache_static", 100).unwrap_err().to_string();
        assert!(e.contains("lookup_cache_static: cannot read") && e.contains("missing.bin"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
