//! Truncation samplers: top-k, top-p, min-p, typical-p, top-n-sigma and XTC, with
//! llama.cpp's semantics (src/llama-sampling.cpp).
use super::candidates::{asc_key, by_logit_desc, radix_sort_by_key, Candidates, TokenData, RADIX_MIN};
use super::rng::Rng;

/// Keep the `k` highest logits (0 = off), sorted.
pub(crate) fn top_k(c: &mut Candidates, k: usize) {
    if k == 0 || c.data.is_empty() {
        return;
    }
    c.keep_top(k);
}

/// Keep the shortest most-likely prefix whose probability reaches `p` (at least `min_keep`).
/// Probabilities are the softmax over the current candidates.
pub(crate) fn top_p(c: &mut Candidates, p: f32, min_keep: usize) {
    if p >= 1.0 || c.data.is_empty() {
        return;
    }
    c.softmax(false);
    let n = c.data.len();
    // Unsorted and large: sort only the best 256 first, and the rest only if needed.
    let mut sorted_upto = n;
    if !c.sorted && n > 1024 {
        let k = 256;
        c.data.select_nth_unstable_by(k - 1, by_logit_desc);
        c.data[..k].sort_unstable_by(by_logit_desc);
        sorted_upto = k;
    } else {
        c.sort();
    }
    c.identity = false;
    let mut cum = 0.0f32;
    let mut last = n;
    let mut i = 0;
    while i < n {
        cum += c.data[i].p;
        if cum >= p && i + 1 >= min_keep {
            last = i + 1;
            break;
        }
        if i + 1 == sorted_upto && sorted_upto < n {
            // not reached within the best 256: sort everything (the sorted prefix stays put)
            c.sorted = false;
            c.sort();
            sorted_upto = n;
        }
        i += 1;
    }
    c.data.truncate(last);
    c.sorted = true;
}

/// Keep the candidates whose probability is at least `p` times the best one's (at least `min_keep`).
pub(crate) fn min_p(c: &mut Candidates, p: f32, min_keep: usize) {
    if p <= 0.0 || c.data.is_empty() {
        return;
    }
    if !c.sorted {
        // order-preserving filter on the logits: p_i >= p * p_max  <=>  l_i >= l_max + ln p
        let max = c.data.iter().fold(f32::MIN, |m, t| m.max(t.logit));
        let min_logit = max + p.ln();
        let count = c.data.iter().filter(|t| t.logit >= min_logit).count();
        if count > 0 && count >= min_keep {
            if count < c.data.len() {
                c.data.retain(|t| t.logit >= min_logit);
                c.identity = false;
            }
            return;
        }
    }
    c.sort();
    let min_logit = c.data[0].logit + p.ln();
    let mut i = 1;
    while i < c.data.len() {
        if c.data[i].logit < min_logit && i >= min_keep {
            break;
        }
        i += 1;
    }
    c.data.truncate(i);
}

/// Reusable buffers for `typical`.
#[derive(Default)]
pub(crate) struct TypicalScratch {
    order: Vec<(f32, u32)>,
    order_tmp: Vec<(f32, u32)>,
    out: Vec<TokenData>,
}

/// Locally typical sampling: rank candidates by |surprise - entropy| and keep the
/// shortest such prefix whose probability exceeds `p` (at least `min_keep`).
pub(crate) fn typical(c: &mut Candidates, p: f32, min_keep: usize, s: &mut TypicalScratch) {
    if p >= 1.0 || c.data.is_empty() {
        return;
    }
    c.softmax(true);
    // zero-probability candidates add nothing to the entropy (llama.cpp would get NaN here)
    let entropy: f32 = c.data.iter().filter(|t| t.p > 0.0).map(|t| -t.p * t.p.ln()).sum();
    s.order.clear();
    s.order.extend(c.data.iter().enumerate().map(|(i, t)| ((-t.p.ln() - entropy).abs(), i as u32)));
    // by score; ties keep probability order
    if s.order.len() > RADIX_MIN {
        radix_sort_by_key(&mut s.order, &mut s.order_tmp, |o| asc_key(o.0));
    } else {
        s.order.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    }
    let mut cum = 0.0f32;
    let mut last = s.order.len();
    for (i, &(_, idx)) in s.order.iter().enumerate() {
        cum += c.data[idx as usize].p;
        if cum > p && (min_keep == 0 || i + 1 >= min_keep) {
            last = i + 1;
            break;
        }
    }
    s.out.clear();
    s.out.extend(s.order[..last].iter().map(|&(_, idx)| c.data[idx as usize]));
    std::mem::swap(&mut c.data, &mut s.out);
    c.sorted = false;
    c.identity = false;
}

/// Top-n-sigma: mask (logit -> -inf) every candidate below max - n * std of the finite
/// logits, then softmax (sorted). The masked candidates stay, with probability 0.
pub(crate) fn top_n_sigma(c: &mut Candidates, n: f32) {
    if n <= 0.0 || c.data.len() <= 1 {
        return;
    }
    let mut max = c.data[0].logit;
    let mut sum = 0.0f32;
    let mut count = 0usize;
    for t in c.data.iter().filter(|t| t.logit != f32::NEG_INFINITY) {
        if t.logit > max {
            max = t.logit;
        }
        sum += t.logit;
        count += 1;
    }
    let mean = if count > 0 { sum / count as f32 } else { 0.0 };
    let mut acc = 0.0f32;
    for t in c.data.iter().filter(|t| t.logit != f32::NEG_INFINITY) {
        let d = (t.logit - mean) as f64;
        acc = (acc as f64 + d * d) as f32;
    }
    let std = if count > 0 { (acc / count as f32).sqrt() } else { 0.0 };
    let cut = max - n * std;
    for t in c.data.iter_mut() {
        if t.logit < cut {
            t.logit = f32::NEG_INFINITY;
        }
    }
    c.softmax(true);
}

/// XTC ("exclude top choices"): with chance `probability`, remove every candidate whose
/// probability is >= `threshold` except the least likely of them (if at least two are,
/// and at least `min_keep` candidates remain). One RNG draw per call that gets past the
/// cheap checks, as in llama.cpp.
pub(crate) fn xtc(c: &mut Candidates, probability: f32, threshold: f32, min_keep: usize, rng: &mut Rng) {
    if probability <= 0.0 || threshold > 0.5 || c.data.len() < 2 {
        return;
    }
    let chance = rng.next_f32();
    if chance > probability {
        return;
    }
    c.softmax(true);
    let mut pos_last = 0;
    for (i, t) in c.data.iter().enumerate() {
        if t.p >= threshold {
            pos_last = i;
        } else {
            break;
        }
    }
    if c.data.len() - pos_last >= min_keep && pos_last > 0 {
        c.drop_front(pos_last);
    }
}
