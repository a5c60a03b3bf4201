//! Each sampler on small hand-made logit vectors, with expected survivors and
//! probabilities worked out by hand; parameter validation and sampler-name parsing.
//! (DRY, order, seeds and the whole chain: tests_chain.rs.)
use super::candidates::Candidates;
use super::penalties::Penalties;
use super::temperature::apply_temp_ext;
use super::*;

pub(super) const EPS: f32 = 1e-5;

/// Logits whose softmax is `probs`.
pub(super) fn ln(probs: &[f32]) -> Vec<f32> {
    probs.iter().map(|p| p.ln()).collect()
}

/// Params with the given chain, temperature 1 (not in the chain, so no scaling), fixed seed.
pub(super) fn only(samplers: &[SamplerKind]) -> SamplingParams {
    SamplingParams { samplers: samplers.to_vec(), temperature: 1.0, seed: Some(7), ..Default::default() }
}

/// Survivors of one `sample` call with their final probabilities, best first.
pub(super) fn survivors(params: SamplingParams, logits: &[f32]) -> Vec<(u32, f32)> {
    let mut s = Sampler::new(params);
    s.sample(logits);
    s.last_probs(usize::MAX)
}

pub(super) fn assert_probs(got: &[(u32, f32)], want: &[(u32, f32)]) {
    assert_eq!(got.len(), want.len(), "got {got:?}, want {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.0, w.0, "got {got:?}, want {want:?}");
        assert!((g.1 - w.1).abs() < EPS, "got {got:?}, want {want:?}");
    }
}

/// Probabilities 0.5 / 0.3 / 0.15 / 0.05 on ids 2 / 0 / 3 / 1 (deliberately unsorted).
fn four() -> Vec<f32> {
    ln(&[0.3, 0.05, 0.5, 0.15])
}

#[test]
fn top_k_keeps_the_k_best() {
    let p = SamplingParams { top_k: 2, ..only(&[SamplerKind::TopK]) };
    let e = std::f32::consts::E;
    assert_probs(&survivors(p, &[1.0, 3.0, 2.0, 5.0, 4.0]), &[(3, e / (e + 1.0)), (4, 1.0 / (e + 1.0))]);
    // 0 = off
    let p = SamplingParams { top_k: 0, ..only(&[SamplerKind::TopK]) };
    assert_eq!(survivors(p, &[1.0, 3.0, 2.0]).len(), 3);
}

#[test]
fn top_p_keeps_the_minimal_prefix_reaching_p() {
    let p = SamplingParams { top_p: 0.75, ..only(&[SamplerKind::TopP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.625), (0, 0.375)]);
    let p = SamplingParams { top_p: 0.85, ..only(&[SamplerKind::TopP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.5 / 0.95), (0, 0.3 / 0.95), (3, 0.15 / 0.95)]);
    let p = SamplingParams { top_p: 0.4, ..only(&[SamplerKind::TopP]) };
    assert_probs(&survivors(p, &four()), &[(2, 1.0)]);
    // min_keep wins over p
    let p = SamplingParams { top_p: 0.4, min_keep: 3, ..only(&[SamplerKind::TopP]) };
    assert_eq!(survivors(p, &four()).len(), 3);
    // 1.0 = off
    let p = SamplingParams { top_p: 1.0, ..only(&[SamplerKind::TopP]) };
    assert_eq!(survivors(p, &four()).len(), 4);
}

#[test]
fn top_p_on_a_large_unsorted_vocabulary_matches_a_full_sort() {
    let mut rng = Rng::new(3);
    let logits: Vec<f32> = (0..5000).map(|_| rng.next_f32() * 8.0).collect();
    for &top_p in &[0.01f32, 0.3, 0.9, 0.999] {
        let got = survivors(SamplingParams { top_p, ..only(&[SamplerKind::TopP]) }, &logits);
        // reference: full sort, softmax, shortest prefix with cum >= p
        let max = logits.iter().cloned().fold(f32::MIN, f32::max);
        let sum: f32 = logits.iter().map(|l| (l - max).exp()).sum();
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        idx.sort_by(|&a, &b| logits[b].total_cmp(&logits[a]).then(a.cmp(&b)));
        let mut cum = 0.0f32;
        let mut n = idx.len();
        for (i, &j) in idx.iter().enumerate() {
            cum += (logits[j] - max).exp() / sum;
            if cum >= top_p {
                n = i + 1;
                break;
            }
        }
        let mut want: Vec<u32> = idx[..n].iter().map(|&j| j as u32).collect();
        let mut got_ids: Vec<u32> = got.iter().map(|g| g.0).collect();
        want.sort();
        got_ids.sort();
        assert_eq!(got_ids, want, "top_p {top_p}");
    }
}

#[test]
fn min_p_threshold_is_relative_to_the_best() {
    // unsorted path: 0.2 * 0.5 = 0.1 drops only the 0.05 token
    let p = SamplingParams { min_p: 0.2, ..only(&[SamplerKind::MinP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.5 / 0.95), (0, 0.3 / 0.95), (3, 0.15 / 0.95)]);
    // 0.35 * 0.5 = 0.175 keeps 0.5 and 0.3
    let p = SamplingParams { min_p: 0.35, ..only(&[SamplerKind::MinP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.625), (0, 0.375)]);
    // sorted path (after top_k) gives the same
    let p = SamplingParams { min_p: 0.35, top_k: 4, ..only(&[SamplerKind::TopK, SamplerKind::MinP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.625), (0, 0.375)]);
    // min_keep: the filter would keep 1, min_keep 3 keeps the best 3
    let p = SamplingParams { min_p: 0.9, min_keep: 3, ..only(&[SamplerKind::MinP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.5 / 0.95), (0, 0.3 / 0.95), (3, 0.15 / 0.95)]);
}

#[test]
fn typical_p_ranks_by_distance_from_the_entropy() {
    // H = 1.1421; |surprise - H|: 0.3 -> 0.0619, 0.5 -> 0.4490, 0.15 -> 0.7550, 0.05 -> 1.8536
    // p = 0.2: the 0.3 token alone already exceeds it (the most likely token is dropped)
    let p = SamplingParams { typical_p: 0.2, ..only(&[SamplerKind::TypicalP]) };
    assert_probs(&survivors(p, &four()), &[(0, 1.0)]);
    // p = 0.5: 0.3, then 0.3 + 0.5 > 0.5
    let p = SamplingParams { typical_p: 0.5, ..only(&[SamplerKind::TypicalP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.625), (0, 0.375)]);
    // p = 0.85: 0.3 + 0.5 + 0.15 = 0.95 > 0.85
    let p = SamplingParams { typical_p: 0.85, ..only(&[SamplerKind::TypicalP]) };
    assert_eq!(survivors(p, &four()).len(), 3);
    let p = SamplingParams { typical_p: 0.2, min_keep: 2, ..only(&[SamplerKind::TypicalP]) };
    assert_probs(&survivors(p, &four()), &[(2, 0.625), (0, 0.375)]);
    // greedy picks the most likely *surviving* candidate
    let p = SamplingParams { typical_p: 0.2, temperature: 0.0, ..only(&[SamplerKind::TypicalP, SamplerKind::Temperature]) };
    assert_eq!(Sampler::new(p).sample(&four()), 0);
}

#[test]
fn top_n_sigma_masks_below_max_minus_n_std() {
    // mean 2, std sqrt(2) = 1.414: n = 1 keeps logits >= 2.586, n = 2 keeps >= 1.172
    let logits = [0.0, 1.0, 2.0, 3.0, 4.0, f32::NEG_INFINITY];
    let e = std::f32::consts::E;
    let got = survivors(SamplingParams { top_n_sigma: 1.0, ..only(&[SamplerKind::TopNSigma]) }, &logits);
    let live: Vec<_> = got.iter().cloned().filter(|g| g.1 > 0.0).collect();
    assert_probs(&live, &[(4, e / (e + 1.0)), (3, 1.0 / (e + 1.0))]);
    let got = survivors(SamplingParams { top_n_sigma: 2.0, ..only(&[SamplerKind::TopNSigma]) }, &logits);
    let z = 1.0 + 1.0 / e + 1.0 / (e * e);
    let live: Vec<_> = got.iter().cloned().filter(|g| g.1 > 0.0).collect();
    assert_probs(&live, &[(4, 1.0 / z), (3, 1.0 / e / z), (2, 1.0 / (e * e) / z)]);
    // <= 0: off
    let got = survivors(SamplingParams { top_n_sigma: -1.0, ..only(&[SamplerKind::TopNSigma]) }, &logits);
    assert_eq!(got.iter().filter(|g| g.1 > 0.0).count(), 5);
}

#[test]
fn xtc_removes_the_top_choices_but_the_least_likely_of_them() {
    let logits = ln(&[0.4, 0.3, 0.2, 0.06, 0.04]);
    let xtc = |prob: f32, thr: f32, min_keep: usize| {
        let p = SamplingParams { xtc_probability: prob, xtc_threshold: thr, min_keep, ..only(&[SamplerKind::Xtc]) };
        survivors(p, &logits)
    };
    // 0.4, 0.3, 0.2 are >= 0.1: the first two go
    assert_probs(&xtc(1.0, 0.1, 0), &[(2, 0.2 / 0.3), (3, 0.06 / 0.3), (4, 0.04 / 0.3)]);
    // min_keep 4 would be violated: nothing happens
    assert_eq!(xtc(1.0, 0.1, 4).len(), 5);
    // only one token above the threshold: nothing happens
    assert_eq!(xtc(1.0, 0.35, 0).len(), 5);
    // threshold > 0.5 or probability 0: off
    assert_eq!(xtc(1.0, 0.6, 0).len(), 5);
    assert_eq!(xtc(0.0, 0.1, 0).len(), 5);
    // probability 0.5 fires on some seeds and not on others
    let fired: usize = (0..200u64)
        .map(|seed| {
            let p = SamplingParams { xtc_probability: 0.5, xtc_threshold: 0.1, seed: Some(seed), ..only(&[SamplerKind::Xtc]) };
            (survivors(p, &logits).len() == 3) as usize
        })
        .sum();
    assert!((60..140).contains(&fired), "fired {fired}/200");
}

#[test]
fn penalties_arithmetic() {
    let mut pen = Penalties::new(64, 2.0, 0.5, 0.25);
    for t in [0, 1, 0, 3] {
        pen.accept(t);
    }
    let mut c = Candidates::default();
    c.fill(&[2.0, -1.0, 0.5, 3.0]);
    pen.apply(&mut c);
    let l: Vec<f32> = c.data.iter().map(|t| t.logit).collect();
    // 0: 2/2 - (2*0.5 + 0.25); 1: -1*2 - (0.5 + 0.25); 2: untouched; 3: 3/2 - 0.75
    assert_eq!(l, vec![-0.25, -2.75, 0.5, 0.75]);
    // the window holds the last 2 tokens: 0 once, 3 once
    let mut pen = Penalties::new(2, 2.0, 0.5, 0.25);
    for t in [0, 1, 0, 3] {
        pen.accept(t);
    }
    assert_eq!((pen.count(0), pen.count(1), pen.count(3)), (1, 0, 1));
    c.fill(&[2.0, -1.0, 0.5, 3.0]);
    pen.apply(&mut c);
    let l: Vec<f32> = c.data.iter().map(|t| t.logit).collect();
    assert_eq!(l, vec![1.0 - 0.75, -1.0, 0.5, 0.75]);
    // the same through the Sampler: the penalised best token loses to the runner-up
    let params = SamplingParams { repeat_penalty: 1.1, temperature: 0.0, ..Default::default() };
    let mut s = Sampler::new(params.clone());
    assert_eq!(s.sample(&[2.0, 0.0, 1.9]), 0);
    s.accept(0);
    assert_eq!(s.sample(&[2.0, 0.0, 1.9]), 2);
    // repeat_last_n = 0: off; -1: the context size
    let mut s = Sampler::new(SamplingParams { repeat_last_n: 0, ..params.clone() });
    s.accept(0);
    assert_eq!(s.sample(&[2.0, 0.0, 1.9]), 0);
    let mut s = Sampler::new(SamplingParams { repeat_last_n: -1, n_ctx: 2, ..params });
    s.accept(0);
    s.accept(1);
    assert_eq!(s.sample(&[2.0, 0.0, 1.9]), 2);
    s.accept(1); // 0 leaves the 2-token window
    assert_eq!(s.sample(&[2.0, 0.0, 1.9]), 0);
}

#[test]
fn dynatemp_maps_entropy_to_the_temperature_range() {
    let mut c = Candidates::default();
    // uniform: normalised entropy 1 -> temp + range
    c.fill(&[0.0; 4]);
    assert!((apply_temp_ext(&mut c, 1.0, 0.5, 1.0) - 1.5).abs() < EPS);
    // H = 1.1421201, H / ln 4 = 0.8238694 -> 0.5 + 1.0 * 0.8238694
    c.fill(&ln(&[0.5, 0.3, 0.15, 0.05]));
    let t = apply_temp_ext(&mut c, 1.0, 0.5, 1.0);
    assert!((t - 1.3238694).abs() < 1e-4, "{t}");
    // the probabilities come out of the scaled logits: p_i ~ p_i^(1/t)
    let z: f32 = [0.5f32, 0.3, 0.15, 0.05].iter().map(|p| p.powf(1.0 / t)).sum();
    assert!((c.data[0].p - 0.5f32.powf(1.0 / t) / z).abs() < EPS);
    // exponent 2: 0.5 + 0.8238694^2
    c.fill(&ln(&[0.5, 0.3, 0.15, 0.05]));
    assert!((apply_temp_ext(&mut c, 1.0, 0.5, 2.0) - 1.1787608).abs() < 1e-4);
    // a certain distribution: entropy 0 -> max(0, temp - range), here 0 = greedy
    c.fill(&[0.0, f32::NEG_INFINITY, f32::NEG_INFINITY]);
    assert_eq!(apply_temp_ext(&mut c, 1.0, 1.5, 1.0), 0.0);
    // range 0: plain temperature
    c.fill(&[1.0, 2.0]);
    assert_eq!(apply_temp_ext(&mut c, 0.5, 0.0, 1.0), 0.5);
    assert_eq!((c.data[0].logit, c.data[1].logit), (2.0, 4.0));
}

#[test]
fn mirostat2_truncates_by_surprise_and_updates_mu() {
    // tau 1 -> mu 2: surprises 1, 1.74, 2.74, 4.32 bits keep the 0.5 and 0.3 tokens
    for seed in 0..20 {
        let p = SamplingParams { mirostat: 2, mirostat_tau: 1.0, mirostat_eta: 0.1, temperature: 1.0, seed: Some(seed), ..Default::default() };
        let mut s = Sampler::new(p);
        assert_eq!(s.mirostat_mu(), Some(2.0));
        let tok = s.sample(&four());
        assert_probs(&s.last_probs(10), &[(2, 0.625), (0, 0.375)]);
        let p_tok = if tok == 2 { 0.625f32 } else { 0.375 };
        let want_mu = 2.0 - 0.1 * (-p_tok.log2() - 1.0);
        let mu = s.mirostat_mu().unwrap_or(f32::NAN);
        assert!((mu - want_mu).abs() < EPS, "{mu} vs {want_mu}");
    }
}

#[test]
fn mirostat1_estimates_k_from_the_zipf_exponent() {
    // p = [0.8, 0.2]: s_hat = ln 4 / ln 2 = 2, eps = 1,
    // k = (2^mu / (1 - 2^-1))^(1/2): mu = 0.5 -> 1.68 -> k = 1; mu = 1 -> k = 2
    let logits = ln(&[0.8, 0.2]);
    let p = SamplingParams { mirostat: 1, mirostat_tau: 0.25, mirostat_eta: 0.1, temperature: 1.0, seed: Some(1), ..Default::default() };
    let mut s = Sampler::new(p.clone());
    assert_eq!(s.sample(&logits), 0);
    assert_probs(&s.last_probs(10), &[(0, 1.0)]);
    // surprise 0: mu = 0.5 - 0.1 * (0 - 0.25)
    assert!((s.mirostat_mu().unwrap_or(f32::NAN) - 0.525).abs() < EPS);
    let mut s = Sampler::new(SamplingParams { mirostat_tau: 0.5, ..p });
    s.sample(&logits);
    assert_probs(&s.last_probs(10), &[(0, 0.8), (1, 0.2)]);
}

#[test]
fn validate_names_the_field() {
    assert_eq!(SamplingParams::default().validate(), Ok(()));
    let bad: Vec<(&str, SamplingParams)> = vec![
        ("top_p", SamplingParams { top_p: 1.5, ..Default::default() }),
        ("top_p", SamplingParams { top_p: -0.1, ..Default::default() }),
        ("min_p", SamplingParams { min_p: 2.0, ..Default::default() }),
        ("typical_p", SamplingParams { typical_p: 0.0, ..Default::default() }),
        ("typical_p", SamplingParams { typical_p: 1.01, ..Default::default() }),
        ("temperature", SamplingParams { temperature: f32::NAN, ..Default::default() }),
        ("dynatemp_range", SamplingParams { dynatemp_range: -1.0, ..Default::default() }),
        ("xtc_probability", SamplingParams { xtc_probability: 1.5, ..Default::default() }),
        ("xtc_threshold", SamplingParams { xtc_threshold: -0.5, ..Default::default() }),
        ("repeat_penalty", SamplingParams { repeat_penalty: 0.0, ..Default::default() }),
        ("presence_penalty", SamplingParams { presence_penalty: f32::INFINITY, ..Default::default() }),
        ("frequency_penalty", SamplingParams { frequency_penalty: f32::NAN, ..Default::default() }),
        ("repeat_last_n", SamplingParams { repeat_last_n: -2, ..Default::default() }),
        ("dry_multiplier", SamplingParams { dry_multiplier: -1.0, ..Default::default() }),
        ("dry_base", SamplingParams { dry_multiplier: 0.8, dry_base: 0.5, ..Default::default() }),
        ("dry_penalty_last_n", SamplingParams { dry_penalty_last_n: -5, ..Default::default() }),
        ("mirostat", SamplingParams { mirostat: 3, ..Default::default() }),
        ("mirostat_tau", SamplingParams { mirostat_tau: -1.0, ..Default::default() }),
        ("mirostat_eta", SamplingParams { mirostat_eta: f32::NAN, ..Default::default() }),
        ("logit_bias[1]", SamplingParams { logit_bias: vec![(1, 1.0), (2, f32::NAN)], ..Default::default() }),
    ];
    for (field, p) in bad {
        let err = p.validate().expect_err(field);
        assert!(err.starts_with(field), "{field}: {err}");
    }
    // dry_base < 1 is fine while DRY is off; -inf bias bans a token
    assert!(SamplingParams { dry_base: 0.5, ..Default::default() }.validate().is_ok());
    assert!(SamplingParams { logit_bias: vec![(3, f32::NEG_INFINITY)], ..Default::default() }.validate().is_ok());
    // out-of-range parameters never make Sampler::new or sample panic
    let mut s = Sampler::new(SamplingParams { mirostat: 9, top_p: 7.0, min_p: -3.0, typical_p: 0.0, ..Default::default() });
    s.sample(&[0.0, 1.0, 2.0]);
}

#[test]
fn sampler_names_and_letters() {
    let names: Vec<String> = ["penalties", "dry", "top_n_sigma", "top_k", "typ_p", "top_p", "min_p", "xtc", "temperature"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(parse_sampler_names(&names), Ok(SamplerKind::default_order()));
    assert_eq!(parse_sampling_seq("edskypmxt"), Ok(SamplerKind::default_order()));
    for k in SamplerKind::default_order() {
        assert_eq!(SamplerKind::from_name(k.name()), Some(k));
        assert_eq!(SamplerKind::from_letter(k.letter()), Some(k));
    }
    let aliases = [
        ("typical_p", SamplerKind::TypicalP),
        ("typical", SamplerKind::TypicalP),
        ("nucleus", SamplerKind::TopP),
        ("top-k", SamplerKind::TopK),
        ("temp", SamplerKind::Temperature),
        ("min-p", SamplerKind::MinP),
    ];
    for (n, k) in aliases {
        assert_eq!(SamplerKind::from_name(n), Some(k), "{n}");
    }
    let err = parse_sampler_names(&["top_k".to_string(), "bogus".to_string()]).unwrap_err();
    assert!(err.contains("samplers[1]") && err.contains("bogus"), "{err}");
    let err = parse_sampling_seq("kpz").unwrap_err();
    assert!(err.contains("'z'") && err.contains("position 2"), "{err}");
    assert_eq!(parse_sampling_seq(""), Ok(vec![]));
}

#[test]
fn keep_top_scan_matches_the_sorting_reference() {
    // large arrays take the scan path; ties, negative values and ±inf included
    let mut rng = Rng::new(5);
    for &(n, k) in &[(5000usize, 1usize), (5000, 40), (20000, 1024), (262_144, 40), (6000, 5999)] {
        let logits: Vec<f32> = (0..n)
            .map(|i| match i % 97 {
                0 => f32::NEG_INFINITY,
                1 => 3.0, // many exact ties at the top
                _ => ((rng.next_f32() * 20.0 - 10.0) * 4.0).round() / 4.0,
            })
            .collect();
        let mut c = Candidates::default();
        c.fill(&logits);
        c.keep_top(k);
        let mut want: Vec<(u32, f32)> = logits.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
        want.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        want.truncate(k);
        let got: Vec<(u32, f32)> = c.data.iter().map(|t| (t.id, t.logit)).collect();
        assert_eq!(got, want, "n={n} k={k}");
    }
}
