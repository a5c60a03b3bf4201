//! Sampling cost per token over a 262,144-entry vocabulary (Gemma 3's), for the sampler
//! chains people use: `cargo bench --bench sampling_cost`. Prints µs per token for each
//! chain and its share of one decode step at a given decode speed (default 75 tokens/s,
//! the 2-core figure for Gemma 3 270M; set LLAMARS_DECODE_TPS to change it).
use llamars::sampling::{SamplerKind, Sampler, SamplingParams};
use std::time::Instant;

const VOCAB: usize = 262_144;

/// Logits shaped like a language model's: a few strong candidates over a long tail.
fn logits(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..VOCAB)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let u = (x >> 40) as f32 / (1u64 << 24) as f32;
            let peak = if i % 9973 == 0 { 8.0 } else { 0.0 };
            u * 6.0 - 3.0 + peak
        })
        .collect()
}

fn time(name: &str, params: SamplingParams, history: usize, tps: f64) {
    let inputs: Vec<Vec<f32>> = (0..8).map(logits).collect();
    let mut s = Sampler::new(params);
    for t in 0..history {
        s.accept((t * 7919 % VOCAB) as u32);
    }
    for l in &inputs {
        s.sample(l); // warm-up
    }
    let n = 200;
    let t0 = Instant::now();
    for i in 0..n {
        let tok = s.sample(&inputs[i % inputs.len()]);
        s.accept(tok);
    }
    let us = t0.elapsed().as_secs_f64() * 1e6 / n as f64;
    let share = us / (1e6 / tps) * 100.0;
    println!("{name:<44} {us:>9.1} µs/token  {share:>5.1}% of a decode step");
}

fn main() {
    let tps: f64 = std::env::var("LLAMARS_DECODE_TPS").ok().and_then(|v| v.parse().ok()).unwrap_or(75.0);
    println!("sampling cost, vocabulary {VOCAB}, decode step = {:.1} ms ({tps} tokens/s)", 1000.0 / tps);
    let seed = Some(1);
    let d = SamplingParams { seed, ..Default::default() };
    time("greedy (temperature 0)", SamplingParams { temperature: 0.0, ..d.clone() }, 0, tps);
    time("default chain (top_k 40, top_p .95, min_p .05, t .8)", d.clone(), 0, tps);
    time("default + repeat/presence/frequency penalties", SamplingParams { repeat_penalty: 1.1, presence_penalty: 0.2, frequency_penalty: 0.2, ..d.clone() }, 64, tps);
    time("default + DRY (multiplier 0.8)", SamplingParams { dry_multiplier: 0.8, ..d.clone() }, 256, tps);
    time("top_k 0, top_p 0.95 (full-vocabulary sort)", SamplingParams { top_k: 0, ..d.clone() }, 0, tps);
    time("top_k 0, min_p 0.05 only", SamplingParams { top_k: 0, samplers: vec![SamplerKind::MinP, SamplerKind::Temperature], ..d.clone() }, 0, tps);
    time("typical_p 0.9 (entropy over the vocabulary)", SamplingParams { top_k: 0, typical_p: 0.9, ..d.clone() }, 0, tps);
    time("xtc 0.5 / 0.1 + default", SamplingParams { xtc_probability: 0.5, xtc_threshold: 0.1, ..d.clone() }, 0, tps);
    time("dynatemp range 0.5", SamplingParams { dynatemp_range: 0.5, ..d.clone() }, 0, tps);
    time("mirostat 2", SamplingParams { mirostat: 2, ..d.clone() }, 0, tps);
}
