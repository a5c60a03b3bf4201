//! The candidate array the samplers work on (llama.cpp's `llama_token_data_array`):
//! token id, logit, probability, and whether the array is sorted by logit, descending.
use std::cmp::Ordering;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TokenData {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// Descending by logit; ties by ascending id, so the order never depends on the
/// sorting algorithm (llama.cpp leaves ties to std::sort / std::partial_sort).
#[inline]
pub(crate) fn by_logit_desc(a: &TokenData, b: &TokenData) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// 32-bit key whose ascending order is f32::total_cmp order.
#[inline]
pub(crate) fn asc_key(x: f32) -> u32 {
    let b = x.to_bits() as i32;
    (b ^ ((((b >> 31) as u32) >> 1) as i32)) as u32 ^ 0x8000_0000
}

/// Stable LSD radix sort by a 32-bit key (4 passes of 8 bits; a pass where every key
/// shares the byte is skipped). `scratch` is reused between calls.
pub(crate) fn radix_sort_by_key<T: Copy>(data: &mut Vec<T>, scratch: &mut Vec<T>, key: impl Fn(&T) -> u32) {
    let n = data.len();
    scratch.clear();
    scratch.extend_from_slice(data);
    for shift in [0u32, 8, 16, 24] {
        let mut count = [0usize; 257];
        for t in data.iter() {
            count[((key(t) >> shift) & 255) as usize + 1] += 1;
        }
        if count.contains(&n) {
            continue;
        }
        for i in 0..256 {
            count[i + 1] += count[i];
        }
        for t in data.iter() {
            let b = ((key(t) >> shift) & 255) as usize;
            scratch[count[b]] = *t;
            count[b] += 1;
        }
        std::mem::swap(data, scratch);
    }
}

/// Sort by `by_logit_desc`: radix sort on the logit, then equal-logit runs by id.
fn radix_sort(data: &mut Vec<TokenData>, scratch: &mut Vec<TokenData>) {
    radix_sort_by_key(data, scratch, |t| !asc_key(t.logit));
    let n = data.len();
    let mut i = 0;
    while i < n {
        let k = data[i].logit.to_bits();
        let mut j = i + 1;
        while j < n && data[j].logit.to_bits() == k {
            j += 1;
        }
        if j - i > 1 {
            data[i..j].sort_unstable_by_key(|t| t.id);
        }
        i = j;
    }
}

/// Full sorts of more elements than this use the radix sort.
pub(crate) const RADIX_MIN: usize = 4096;

#[derive(Debug, Default)]
pub(crate) struct Candidates {
    pub data: Vec<TokenData>,
    /// Sorted by `by_logit_desc`.
    pub sorted: bool,
    /// `data[i].id == i` for every i (the vocabulary in id order, possibly cut at the end).
    /// Anything that reorders, filters or removes from the front must clear it.
    pub identity: bool,
    /// Scratch for the radix sort.
    scratch: Vec<TokenData>,
}

/// `keep_top` scans instead of selecting above this many candidates, for k up to TOP_SCAN_MAX_K.
const TOP_SCAN_MIN: usize = 4096;
const TOP_SCAN_MAX_K: usize = 1024;

/// The `asc_key` of the k-th largest logit (1 <= k <= len): a running set of the k best
/// seen so far, whose smallest is the bar a new value must clear (rarely, once the set
/// holds the peak of the distribution).
fn kth_largest_key(data: &[TokenData], k: usize) -> u32 {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let mut heap: BinaryHeap<Reverse<u32>> = data[..k].iter().map(|t| Reverse(asc_key(t.logit))).collect();
    let mut bar = heap.peek().map_or(0, |r| r.0);
    for t in &data[k..] {
        let key = asc_key(t.logit);
        if key > bar {
            heap.pop();
            heap.push(Reverse(key));
            bar = heap.peek().map_or(0, |r| r.0);
        }
    }
    bar
}

impl Candidates {
    /// One candidate per vocabulary entry, in id order (reuses the buffer).
    pub fn fill(&mut self, logits: &[f32]) {
        self.data.clear();
        self.data.extend(logits.iter().enumerate().map(|(i, &l)| TokenData { id: i as u32, logit: l, p: 0.0 }));
        self.sorted = false;
        self.identity = true;
    }

    /// Sort the whole array (no-op when already sorted).
    pub fn sort(&mut self) {
        if !self.sorted {
            if self.data.len() > RADIX_MIN {
                radix_sort(&mut self.data, &mut self.scratch);
            } else {
                self.data.sort_unstable_by(by_logit_desc);
            }
            self.sorted = true;
            self.identity = false;
        }
    }

    /// Keep the `k` best candidates, sorted (llama.cpp's partial_sort_inplace).
    pub fn keep_top(&mut self, k: usize) {
        let k = k.min(self.data.len());
        if k == 0 {
            self.data.clear();
            self.sorted = true;
            self.identity = false;
            return;
        }
        if !self.sorted {
            if k < self.data.len() {
                if self.data.len() >= TOP_SCAN_MIN && k <= TOP_SCAN_MAX_K {
                    // one pass for the k-th largest logit, one to keep what reaches it:
                    // far cheaper than a select over 12-byte records for a large vocabulary
                    let bar = kth_largest_key(&self.data, k);
                    self.data.retain(|t| asc_key(t.logit) >= bar);
                } else {
                    self.data.select_nth_unstable_by(k - 1, by_logit_desc);
                }
            }
            self.data.sort_unstable_by(by_logit_desc);
            self.data.truncate(k);
            self.sorted = true;
            self.identity = false;
        } else {
            self.data.truncate(k);
        }
    }

    /// Largest logit (index 0 when sorted). The array must not be empty.
    pub fn max_logit(&self) -> f32 {
        if self.sorted {
            return self.data[0].logit;
        }
        self.data.iter().fold(self.data[0].logit, |m, c| m.max(c.logit))
    }

    /// Probabilities from the logits (llama.cpp's softmax_impl, f32 sums); optionally sorts first.
    pub fn softmax(&mut self, do_sort: bool) {
        if self.data.is_empty() {
            return;
        }
        if do_sort {
            self.sort();
        }
        let max = self.max_logit();
        let mut sum = 0.0f32;
        for c in self.data.iter_mut() {
            c.p = (c.logit - max).exp();
            sum += c.p;
        }
        for c in self.data.iter_mut() {
            c.p /= sum;
        }
    }

    /// Apply `f(candidate, value)` to each candidate whose id is a key of `map`. While the
    /// array is still the vocabulary in id order (`identity`), candidates are found by index;
    /// otherwise with one pass over the candidates.
    pub fn for_each_in_map<V: Copy>(&mut self, map: &HashMap<u32, V>, mut f: impl FnMut(&mut TokenData, V)) {
        if map.is_empty() {
            return;
        }
        let n = self.data.len();
        let direct = self.identity && map.keys().all(|&t| (t as usize) >= n || self.data[t as usize].id == t);
        if direct {
            for (&t, &v) in map.iter() {
                if let Some(c) = self.data.get_mut(t as usize) {
                    f(c, v);
                }
            }
        } else {
            for c in self.data.iter_mut() {
                if let Some(&v) = map.get(&c.id) {
                    f(c, v);
                }
            }
        }
    }
}

impl Candidates {
    /// Remove the first `k` candidates (XTC).
    pub fn drop_front(&mut self, k: usize) {
        let k = k.min(self.data.len());
        self.data.drain(..k);
        if k > 0 {
            self.identity = false;
        }
    }

    /// Index of a categorical draw over the candidates' `p` (need not be normalized), given
    /// `r` uniform in [0, 1): the first candidate whose cumulative probability exceeds
    /// `r * total`. Zero-probability candidates are never picked unless all are zero.
    pub fn draw(&self, r: f32) -> usize {
        let total: f64 = self.data.iter().map(|c| c.p as f64).sum();
        let target = r as f64 * total;
        let mut run = 0.0f64;
        let mut last_pos = None;
        for (i, c) in self.data.iter().enumerate() {
            run += c.p as f64;
            if c.p > 0.0 {
                if run > target {
                    return i;
                }
                last_pos = Some(i);
            }
        }
        last_pos.unwrap_or(0)
    }
}
