//! DRY, logit bias, sampler order, greedy, seeds and the whole chain.
use super::candidates::Candidates;
use super::dry::{Dry, GreedyTokenizer};
use super::tests::{assert_probs, ln, only, survivors, EPS};
use super::*;
use std::sync::Arc;

// vocabulary for the DRY tests
const A: u32 = 0;
const B: u32 = 1;
const C: u32 = 2;
const D: u32 = 3;
const NL: u32 = 4;
const X: u32 = 5;

fn vocab() -> Vec<Vec<u8>> {
    ["a", "b", "c", "d", "\n", "x"].iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// DRY penalties (multiplier 0.8, base 1.75) on all-zero logits after `context`.
fn dry_penalties(context: &[u32], breakers: &[&str], allowed_length: usize) -> Vec<f32> {
    let breakers: Vec<String> = breakers.iter().map(|s| s.to_string()).collect();
    let mut dry = Dry::new(0.8, 1.75, allowed_length, -1, 0, &breakers);
    let v = vocab();
    let mut greedy = GreedyTokenizer::new(&v);
    dry.set_vocab(&v, &mut |t: &[u8]| greedy.tokenize(t));
    for &t in context {
        dry.accept(t);
    }
    let mut c = Candidates::default();
    c.fill(&[0.0; 6]);
    dry.apply(&mut c);
    c.data.iter().map(|t| -t.logit).collect()
}

#[test]
fn dry_penalises_the_token_that_would_extend_a_repeat() {
    // a b c d x a b c: "a b c" was followed by d; extending it to 4 tokens costs
    // 0.8 * 1.75^(3 - 2)
    let pen = dry_penalties(&[A, B, C, D, X, A, B, C], &["\n"], 2);
    assert_eq!(pen.len(), 6);
    for (t, &p) in pen.iter().enumerate() {
        let want = if t as u32 == D { 0.8 * 1.75 } else { 0.0 };
        assert!((p - want).abs() < EPS, "token {t}: {p} vs {want}");
    }
    // a repeat of length < allowed_length is free
    let pen = dry_penalties(&[A, B, C, D, X, A, B, C], &["\n"], 4);
    assert!(pen.iter().all(|&p| p == 0.0), "{pen:?}");
}

#[test]
fn dry_sequence_breakers_cut_the_repeat() {
    // x \n a b x \n a b: the repeat "x \n a b" (4 tokens) would cost 0.8 * 1.75^2 for x ...
    let ctx = [X, NL, A, B, X, NL, A, B];
    let pen = dry_penalties(&ctx, &[], 2);
    assert!((pen[X as usize] - 0.8 * 1.75 * 1.75).abs() < EPS, "{pen:?}");
    // ... but with "\n" a breaker it only reaches back to the last "\n": "a b", 0.8 * 1.75^0
    let pen = dry_penalties(&ctx, &["\n"], 2);
    assert!((pen[X as usize] - 0.8).abs() < EPS, "{pen:?}");
    // a breaker token itself is never penalised: a \n a \n a, allowed length 1
    let ctx = [A, NL, A, NL, A];
    let pen = dry_penalties(&ctx, &[], 1);
    assert!((pen[NL as usize] - 0.8 * 1.75 * 1.75).abs() < EPS, "{pen:?}");
    let pen = dry_penalties(&ctx, &["\n"], 1);
    assert!(pen.iter().all(|&p| p == 0.0), "{pen:?}");
}

#[test]
fn dry_multi_token_breaker() {
    // breaker "ab" = token a followed by token b: in a b c d x a b c d the repeat
    // "a b c d" (which would cost 0.8 * 1.75^2 for x) stops at the last "a b": "c d"
    let ctx = [A, B, C, D, X, A, B, C, D];
    let pen = dry_penalties(&ctx, &["q"], 2);
    assert!((pen[X as usize] - 0.8 * 1.75 * 1.75).abs() < EPS, "{pen:?}");
    let pen = dry_penalties(&ctx, &["ab"], 2);
    assert!((pen[X as usize] - 0.8).abs() < EPS, "{pen:?}");
}

#[test]
fn dry_through_the_sampler() {
    let params = SamplingParams { dry_multiplier: 0.8, temperature: 0.0, ..Default::default() };
    let mut logits = vec![0.0f32; 6];
    logits[D as usize] = 1.0;
    let mut s = Sampler::new(params.clone());
    for t in [A, B, C, D, X, A, B, C] {
        s.accept(t);
    }
    // no vocabulary: DRY is inactive
    assert_eq!(s.sample(&logits), D);
    s.set_vocab(Arc::new(vocab()));
    // d: 1.0 - 1.4 < 0
    assert_eq!(s.sample(&logits), A);
    // dry_penalty_last_n = 3 only sees "a b c": no repeat
    let mut s = Sampler::new(SamplingParams { dry_penalty_last_n: 3, ..params });
    s.set_vocab(Arc::new(vocab()));
    for t in [A, B, C, D, X, A, B, C] {
        s.accept(t);
    }
    assert_eq!(s.sample(&logits), D);
}

#[test]
fn logit_bias_comes_first() {
    let greedy = SamplingParams { temperature: 0.0, ..Default::default() };
    let logits = [1.0, 3.0, 2.0];
    let ban = SamplingParams { logit_bias: vec![(1, f32::NEG_INFINITY)], ..greedy.clone() };
    assert_eq!(Sampler::new(ban).sample(&logits), 2);
    let boost = SamplingParams { logit_bias: vec![(0, 1.5), (0, 1.0), (99, 5.0)], ..greedy };
    assert_eq!(Sampler::new(boost).sample(&logits), 0);
    // a banned token never comes out of a random draw either
    let p = SamplingParams { logit_bias: vec![(1, f32::NEG_INFINITY)], top_k: 0, top_p: 1.0, min_p: 0.0, ..Default::default() };
    let mut s = Sampler::new(p);
    for _ in 0..200 {
        assert_ne!(s.sample(&logits), 1);
    }
}

#[test]
fn order_changes_results() {
    use SamplerKind::*;
    let probs = ln(&[0.5, 0.3, 0.15, 0.05]);
    // min_p 0.2 before temperature 0.5 keeps three; after it, two (0.3^2 / 0.5^2 = 0.36 >= 0.2)
    let p = SamplingParams { min_p: 0.2, temperature: 0.5, ..only(&[MinP, Temperature]) };
    assert_eq!(survivors(p.clone(), &probs).len(), 3);
    let got = survivors(SamplingParams { samplers: vec![Temperature, MinP], ..p }, &probs);
    assert_probs(&got, &[(0, 0.25 / 0.34), (1, 0.09 / 0.34)]);
    // penalties then top_k 1 picks the runner-up; top_k 1 then penalties keeps the best
    let p = SamplingParams { repeat_penalty: 2.0, top_k: 1, ..only(&[Penalties, TopK]) };
    let mut s = Sampler::new(p.clone());
    s.accept(0);
    assert_eq!(s.sample(&[2.0, 1.5, 0.0]), 1);
    let mut s = Sampler::new(SamplingParams { samplers: vec![TopK, Penalties], ..p });
    s.accept(0);
    assert_eq!(s.sample(&[2.0, 1.5, 0.0]), 0);
}

#[test]
fn greedy_is_argmax() {
    let mut rng = Rng::new(11);
    for &t in &[0.0f32, -1.0] {
        for _ in 0..20 {
            let logits: Vec<f32> = (0..1000).map(|_| rng.next_f32() * 10.0 - 5.0).collect();
            let mut s = Sampler::new(SamplingParams { temperature: t, ..Default::default() });
            assert_eq!(s.sample(&logits) as usize, argmax(&logits));
            let lp = s.last_probs(3);
            assert_eq!(lp[0], (argmax(&logits) as u32, 1.0));
            assert_eq!(lp[1].1, 0.0);
        }
    }
    // ties: the first
    let mut s = Sampler::new(SamplingParams { temperature: 0.0, ..Default::default() });
    assert_eq!(s.sample(&[1.0, 3.0, 3.0, 2.0]), 1);
    // without a temperature stage in the chain, temperature 0 is still greedy
    let mut s = Sampler::new(SamplingParams { temperature: 0.0, samplers: vec![], ..Default::default() });
    assert_eq!(s.sample(&[1.0, 3.0, 2.5]), 1);
}

#[test]
fn seeds_reproduce() {
    let mut rng = Rng::new(5);
    let logits: Vec<f32> = (0..500).map(|_| rng.next_f32() * 4.0).collect();
    let params = SamplingParams { top_k: 0, min_p: 0.0, seed: Some(1234), ..Default::default() };
    let run = |p: SamplingParams| {
        let mut s = Sampler::new(p);
        (0..50).map(|_| s.sample(&logits)).collect::<Vec<u32>>()
    };
    assert_eq!(run(params.clone()), run(params.clone()));
    assert_ne!(run(params.clone()), run(SamplingParams { seed: Some(4321), ..params.clone() }));
    // a random seed is reported and reproduces the run
    let s = Sampler::new(SamplingParams { seed: None, ..params.clone() });
    assert_eq!(Sampler::new(SamplingParams { seed: Some(1234), ..params.clone() }).seed(), 1234);
    let drawn = s.seed();
    assert_eq!(run(SamplingParams { seed: None, ..params.clone() }).len(), 50);
    assert_eq!(run(SamplingParams { seed: Some(drawn), ..params.clone() }), run(SamplingParams { seed: Some(drawn), ..params }));
}

/// The previous sampler (top-k, top-p, min-p, temperature, one next_f32 per draw).
fn old_sample(rng: &mut Rng, logits: &[f32], temp: f32, top_k: usize, top_p: f32, min_p: f32) -> u32 {
    let mut cand: Vec<(f32, u32)> = logits.iter().enumerate().map(|(i, &l)| (l, i as u32)).collect();
    let k = if top_k == 0 { cand.len() } else { top_k.min(cand.len()) };
    cand.sort_by(|a, b| b.0.total_cmp(&a.0));
    cand.truncate(k);
    let max = cand[0].0;
    let mut probs: Vec<f32> = cand.iter().map(|c| (c.0 - max).exp()).collect();
    let sum: f32 = probs.iter().sum();
    probs.iter_mut().for_each(|x| *x /= sum);
    let mut keep = probs.len();
    let mut cum = 0.0;
    for (i, &q) in probs.iter().enumerate() {
        cum += q;
        if cum >= top_p {
            keep = i + 1;
            break;
        }
    }
    let thr = probs[0] * min_p;
    keep = keep.min(probs.iter().take_while(|&&q| q >= thr).count().max(1));
    let w: Vec<f32> = cand[..keep].iter().map(|c| ((c.0 - max) / temp).exp()).collect();
    let s: f32 = w.iter().sum();
    let r = rng.next_f32();
    let mut cum = 0.0;
    for (i, &q) in w.iter().enumerate() {
        cum += q / s;
        if r < cum {
            return cand[i].1;
        }
    }
    cand[keep - 1].1
}

#[test]
fn default_chain_keeps_old_seeds() {
    // same draws as the previous sampler, up to floating-point boundary cases
    let mut gen = Rng::new(99);
    let mut same = 0;
    let total = 400;
    for seed in 0..(total / 20) as u64 {
        let mut old_rng = Rng::new(seed);
        let mut s = Sampler::new(SamplingParams { seed: Some(seed), ..Default::default() });
        for _ in 0..20 {
            let logits: Vec<f32> = (0..300).map(|_| gen.next_f32() * 6.0).collect();
            same += (s.sample(&logits) == old_sample(&mut old_rng, &logits, 0.8, 40, 0.95, 0.05)) as usize;
        }
    }
    assert!(same >= total - 2, "{same}/{total}");
}

#[test]
fn last_probs_are_sorted_and_normalised() {
    let mut s = Sampler::new(SamplingParams { seed: Some(3), ..Default::default() });
    assert!(s.last_probs(5).is_empty());
    let mut rng = Rng::new(8);
    let logits: Vec<f32> = (0..1000).map(|_| rng.next_f32() * 5.0).collect();
    let tok = s.sample(&logits);
    let all = s.last_probs(usize::MAX);
    assert!(all.len() <= 40 && !all.is_empty());
    assert!(all.iter().any(|&(t, _)| t == tok));
    assert!(all.windows(2).all(|w| w[0].1 >= w[1].1));
    assert!((all.iter().map(|x| x.1).sum::<f32>() - 1.0).abs() < 1e-4);
    assert_eq!(s.last_probs(3), all[..3].to_vec());
}

#[test]
fn large_vocabulary() {
    let n = 262_144;
    let mut rng = Rng::new(1);
    let logits: Vec<f32> = (0..n).map(|_| rng.next_f32() * 20.0 - 10.0).collect();
    let everything = SamplingParams {
        repeat_penalty: 1.1,
        frequency_penalty: 0.1,
        presence_penalty: 0.1,
        dry_multiplier: 0.8,
        top_n_sigma: 2.0,
        typical_p: 0.95,
        xtc_probability: 0.5,
        dynatemp_range: 0.3,
        seed: Some(2),
        ..Default::default()
    };
    for params in [SamplingParams { seed: Some(2), ..Default::default() }, SamplingParams { top_k: 0, ..everything.clone() }, everything] {
        let mut s = Sampler::new(params);
        s.set_vocab(Arc::new((0..n).map(|i| format!("t{i}").into_bytes()).collect()));
        let t0 = std::time::Instant::now();
        for _ in 0..10 {
            let t = s.sample(&logits);
            assert!((t as usize) < n);
            s.accept(t);
        }
        eprintln!("10 samples over {n} logits: {:?}", t0.elapsed());
    }
}

