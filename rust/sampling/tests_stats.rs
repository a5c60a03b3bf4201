//! Statistical checks of the stochastic samplers: for fixed logits, the frequencies of
//! many seeded draws match the truncated distribution each sampler should leave, worked
//! out here independently in f64 (chi-square test, p > 0.001); a wrong expectation is
//! rejected by the same test; Mirostat's observed surprise converges to its target.
use super::tests::{ln, only};
use super::*;

const N: usize = 40_000;

/// Probabilities of the fixed test vocabulary, deliberately not sorted by id.
const P: [f64; 10] = [0.06, 0.30, 0.01, 0.15, 0.20, 0.02, 0.10, 0.05, 0.08, 0.03];

fn logits() -> Vec<f32> {
    ln(&P.map(|p| p as f32))
}

fn normalized(w: &[f64]) -> Vec<f64> {
    let z: f64 = w.iter().sum();
    w.iter().map(|x| x / z).collect()
}

fn softmax_t(p: &[f64], t: f64) -> Vec<f64> {
    normalized(&p.iter().map(|x| x.powf(1.0 / t)).collect::<Vec<_>>())
}

/// Ids by probability, best first.
fn order(p: &[f64]) -> Vec<usize> {
    let mut ids: Vec<usize> = (0..p.len()).collect();
    ids.sort_by(|&a, &b| p[b].total_cmp(&p[a]));
    ids
}

fn keep(p: &[f64], kept: &[usize]) -> Vec<f64> {
    normalized(&(0..p.len()).map(|i| if kept.contains(&i) { p[i] } else { 0.0 }).collect::<Vec<_>>())
}

fn ref_top_k(p: &[f64], k: usize) -> Vec<f64> {
    keep(p, &order(p)[..k])
}

fn ref_top_p(p: &[f64], top_p: f64) -> Vec<f64> {
    let (mut cum, mut kept) = (0.0, Vec::new());
    for i in order(p) {
        kept.push(i);
        cum += p[i];
        if cum >= top_p {
            break;
        }
    }
    keep(p, &kept)
}

fn ref_min_p(p: &[f64], min_p: f64) -> Vec<f64> {
    let max = p.iter().cloned().fold(0.0, f64::max);
    keep(p, &(0..p.len()).filter(|&i| p[i] >= min_p * max).collect::<Vec<_>>())
}

/// Locally typical sampling: rank by |surprise - entropy|, keep the smallest such prefix
/// whose probability reaches typical_p.
fn ref_typical(p: &[f64], typ: f64) -> Vec<f64> {
    let h: f64 = -p.iter().filter(|&&x| x > 0.0).map(|x| x * x.ln()).sum::<f64>();
    let mut ids: Vec<usize> = (0..p.len()).collect();
    ids.sort_by(|&a, &b| (-p[a].ln() - h).abs().total_cmp(&(-p[b].ln() - h).abs()));
    let (mut cum, mut kept) = (0.0, Vec::new());
    for i in ids {
        cum += p[i];
        kept.push(i);
        if cum >= typ {
            break;
        }
    }
    keep(p, &kept)
}

/// XTC: with probability `prob`, every token at or above the threshold but the least
/// likely of them is removed (only when at least two reach it).
fn ref_xtc(p: &[f64], prob: f64, threshold: f64) -> Vec<f64> {
    let above: Vec<usize> = order(p).into_iter().filter(|&i| p[i] >= threshold).collect();
    if above.len() < 2 {
        return p.to_vec();
    }
    let removed = &above[..above.len() - 1];
    let cut = keep(p, &(0..p.len()).filter(|i| !removed.contains(i)).collect::<Vec<_>>());
    p.iter().zip(&cut).map(|(a, b)| (1.0 - prob) * a + prob * b).collect()
}

/// Dynamic temperature: the normalised entropy maps into [t - range, t + range].
fn ref_dynatemp(p: &[f64], t: f64, range: f64, exponent: f64) -> Vec<f64> {
    let h: f64 = -p.iter().filter(|&&x| x > 0.0).map(|x| x * x.ln()).sum::<f64>();
    let hmax = (p.len() as f64).ln();
    let (lo, hi) = ((t - range).max(0.0), t + range);
    softmax_t(p, lo + (hi - lo) * (h / hmax).powf(exponent))
}

// ------------------------------------------------------------------ chi-square

fn ln_gamma(x: f64) -> f64 {
    // Lanczos approximation, g = 7, n = 9 (x >= 0.5 here)
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    let x = x - 1.0;
    let t = x + 7.5;
    let s = C[0] + (1..9).map(|i| C[i] / (x + i as f64)).sum::<f64>();
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + s.ln()
}

/// Upper regularized incomplete gamma Q(a, x).
fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    let front = (-x + a * x.ln() - ln_gamma(a)).exp();
    if x < a + 1.0 {
        let (mut term, mut sum, mut n) = (1.0 / a, 1.0 / a, 1.0);
        while term.abs() > sum.abs() * 1e-15 {
            term *= x / (a + n);
            sum += term;
            n += 1.0;
        }
        return 1.0 - sum * front;
    }
    let tiny = 1e-300;
    let mut b = x + 1.0 - a;
    let (mut c, mut d) = (1.0 / tiny, 1.0 / b);
    let mut h = d;
    for i in 1..1000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < tiny {
            d = tiny;
        }
        c = b + an / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-15 {
            break;
        }
    }
    front * h
}

fn draws(params: SamplingParams, logits: &[f32]) -> Vec<usize> {
    let mut s = Sampler::new(params);
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..N {
        counts[s.sample(logits) as usize] += 1;
    }
    counts
}

/// p-value of the counts under `expected`; a token with expected probability 0 must
/// never be drawn.
fn p_value(counts: &[usize], expected: &[f64]) -> f64 {
    let (mut chi2, mut cells) = (0.0, 0);
    for (&o, &e) in counts.iter().zip(expected) {
        if e <= 0.0 {
            if o > 0 {
                return 0.0;
            }
            continue;
        }
        let e = e * N as f64;
        chi2 += (o as f64 - e).powi(2) / e;
        cells += 1;
    }
    gamma_q((cells - 1) as f64 / 2.0, chi2 / 2.0)
}

fn check(name: &str, params: SamplingParams, expected: Vec<f64>) {
    let counts = draws(params, &logits());
    let p = p_value(&counts, &expected);
    assert!(p > 1e-3, "{name}: counts {counts:?} do not fit {expected:?} (p = {p:e})");
    // the test can fail: the untruncated distribution does not fit a truncating sampler
    if expected.iter().zip(&P).any(|(e, p)| (e - p).abs() > 0.01) {
        let wrong = p_value(&counts, &P);
        assert!(wrong < 1e-3, "{name}: the plain softmax also fits (p = {wrong:e}): the test has no power");
    }
}

#[test]
fn chi_square_reference_values() {
    // Q(df/2, x/2) for known chi-square quantiles
    assert!((gamma_q(0.5, 3.841_458_8 / 2.0) - 0.05).abs() < 1e-6);
    assert!((gamma_q(4.5, 27.877_16 / 2.0) - 0.001).abs() < 1e-6);
    assert!((gamma_q(2.0, 0.0) - 1.0).abs() < 1e-12);
    assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
}

#[test]
fn plain_softmax_frequencies() {
    check("softmax", only(&[]), P.to_vec());
}

#[test]
fn top_k_frequencies() {
    check("top_k", SamplingParams { top_k: 3, ..only(&[SamplerKind::TopK]) }, ref_top_k(&P, 3));
}

#[test]
fn top_p_frequencies() {
    check("top_p", SamplingParams { top_p: 0.7, ..only(&[SamplerKind::TopP]) }, ref_top_p(&P, 0.7));
}

#[test]
fn min_p_frequencies() {
    check("min_p", SamplingParams { min_p: 0.2, ..only(&[SamplerKind::MinP]) }, ref_min_p(&P, 0.2));
}

#[test]
fn typical_p_frequencies() {
    check("typical", SamplingParams { typical_p: 0.5, ..only(&[SamplerKind::TypicalP]) }, ref_typical(&P, 0.5));
}

#[test]
fn xtc_frequencies() {
    let params = SamplingParams { xtc_probability: 0.5, xtc_threshold: 0.1, ..only(&[SamplerKind::Xtc]) };
    check("xtc", params, ref_xtc(&P, 0.5, 0.1));
}

#[test]
fn temperature_frequencies() {
    for t in [0.5, 1.7] {
        let params = SamplingParams { temperature: t as f32, ..only(&[SamplerKind::Temperature]) };
        check(&format!("temperature {t}"), params, softmax_t(&P, t));
    }
}

#[test]
fn dynatemp_frequencies() {
    let params = SamplingParams { temperature: 1.0, dynatemp_range: 0.6, dynatemp_exponent: 1.5, ..only(&[SamplerKind::Temperature]) };
    check("dynatemp", params, ref_dynatemp(&P, 1.0, 0.6, 1.5));
}

#[test]
fn chained_top_k_then_temperature_frequencies() {
    let params = SamplingParams { top_k: 4, temperature: 0.7, ..only(&[SamplerKind::TopK, SamplerKind::Temperature]) };
    check("top_k + temperature", params, softmax_t(&ref_top_k(&P, 4), 0.7));
}

#[test]
fn mirostat_converges_to_its_target_surprise() {
    // Zipf-like vocabulary of 500 tokens: every target below is reachable
    let zipf: Vec<f32> = (1..=500).map(|i| (1.0 / (i as f32).powf(1.1)).ln()).collect();
    for (version, tau) in [(2u8, 3.0f32), (2, 5.0), (1, 4.0)] {
        let params = SamplingParams { mirostat: version, mirostat_tau: tau, mirostat_eta: 0.1, temperature: 1.0, seed: Some(99), ..Default::default() };
        let mut s = Sampler::new(params);
        let mut surprise = Vec::new();
        for _ in 0..6000 {
            let t = s.sample(&zipf);
            surprise.push(-(s.prob_of(t) as f64).log2());
        }
        let tail = &surprise[3000..];
        let mean = tail.iter().sum::<f64>() / tail.len() as f64;
        assert!((mean - tau as f64).abs() < 0.1 * tau as f64, "mirostat {version}: mean surprise {mean:.3} bits vs target {tau}");
    }
}
