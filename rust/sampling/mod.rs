//! Token selection. This module holds greedy selection, temperature sampling with a
//! seeded RNG, and the top-k log-probabilities reported with each token.
mod rng;

pub use rng::Rng;

/// Index of the largest logit (first one on ties, like llama.cpp's greedy sampler).
pub fn argmax(logits: &[f32]) -> usize {
    let mut best = 0;
    let mut bv = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > bv {
            bv = v;
            best = i;
        }
    }
    best
}

#[derive(Debug, Clone)]
pub struct SamplingParams {
    /// <= 0: greedy.
    pub temperature: f32,
    pub top_k: usize,
    pub top_p: f32,
    pub min_p: f32,
    /// None: random seed drawn from the OS clock.
    pub seed: Option<u64>,
}

impl Default for SamplingParams {
    fn default() -> Self {
        SamplingParams { temperature: 0.8, top_k: 40, top_p: 0.95, min_p: 0.05, seed: None }
    }
}

pub struct Sampler {
    pub params: SamplingParams,
    rng: Rng,
    cand: Vec<(f32, u32)>,
}

impl Sampler {
    pub fn new(params: SamplingParams) -> Sampler {
        let seed = params.seed.unwrap_or_else(Rng::time_seed);
        Sampler { rng: Rng::new(seed), params, cand: Vec::new() }
    }

    pub fn seed(&self) -> u64 {
        self.rng.seed
    }

    /// Pick the next token from raw logits.
    pub fn sample(&mut self, logits: &[f32]) -> u32 {
        let p = &self.params;
        if p.temperature <= 0.0 {
            return argmax(logits) as u32;
        }
        // top-k (0 = all), sorted descending
        self.cand.clear();
        self.cand.extend(logits.iter().enumerate().map(|(i, &l)| (l, i as u32)));
        let k = if p.top_k == 0 { self.cand.len() } else { p.top_k.min(self.cand.len()) };
        if k < self.cand.len() {
            self.cand.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
            self.cand.truncate(k);
        }
        self.cand.sort_by(|a, b| b.0.total_cmp(&a.0));
        // softmax over the candidates
        let max = self.cand[0].0;
        let mut probs: Vec<f32> = self.cand.iter().map(|c| (c.0 - max).exp()).collect();
        let sum: f32 = probs.iter().sum();
        probs.iter_mut().for_each(|x| *x /= sum);
        // top-p
        let mut keep = probs.len();
        if p.top_p < 1.0 {
            let mut cum = 0.0;
            for (i, &q) in probs.iter().enumerate() {
                cum += q;
                if cum >= p.top_p {
                    keep = i + 1;
                    break;
                }
            }
        }
        // min-p
        if p.min_p > 0.0 {
            let thr = probs[0] * p.min_p;
            keep = keep.min(probs.iter().take_while(|&&q| q >= thr).count().max(1));
        }
        // temperature on the surviving logits
        let t = p.temperature;
        let mut w: Vec<f32> = self.cand[..keep].iter().map(|c| ((c.0 - max) / t).exp()).collect();
        let s: f32 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= s);
        let r = self.rng.next_f32();
        let mut cum = 0.0;
        for (i, &q) in w.iter().enumerate() {
            cum += q;
            if r < cum {
                return self.cand[i].1;
            }
        }
        self.cand[keep - 1].1
    }
}

/// The `k` most likely tokens with their log-probabilities (log-softmax of `logits`).
pub fn top_logprobs(logits: &[f32], k: usize) -> Vec<(u32, f32)> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let lse = max + logits.iter().map(|&l| ((l - max) as f64).exp()).sum::<f64>().ln() as f32;
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    let k = k.min(idx.len());
    if k == 0 {
        return Vec::new();
    }
    idx.select_nth_unstable_by(k - 1, |&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    idx.truncate(k);
    idx.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    idx.into_iter().map(|i| (i, logits[i as usize] - lse)).collect()
}
