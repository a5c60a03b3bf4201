//! Token selection: llama.cpp's sampler chain (logit bias, penalties, DRY, top-n-sigma,
//! top-k, typical-p, top-p, min-p, XTC, temperature / dynamic temperature, mirostat 1/2,
//! and the final seeded draw), plus greedy selection and the top-k log-probabilities
//! reported with each token.
//!
//! One concern per file: `params` (parameters, validation, sampler names), `chain` (the
//! `Sampler`), `candidates` (the candidate array), `logit_bias`, `penalties`, `dry`,
//! `filters` (top-k/top-p/min-p/typical/top-n-sigma/XTC), `temperature`, `mirostat`, `rng`;
//! tests in `tests` (each sampler) and `tests_chain` (DRY, order, seeds, the whole chain).
mod candidates;
mod chain;
mod dry;
mod filters;
mod logit_bias;
mod mirostat;
mod params;
mod penalties;
mod rng;
mod temperature;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_chain;
#[cfg(test)]
mod tests_stats;

pub use chain::Sampler;
pub use params::{parse_sampler_names, parse_sampling_seq, SamplerKind, SamplingParams};
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
