//! Temperature, and dynamic temperature ("temp-ext") driven by the candidates' entropy.
use super::candidates::Candidates;

/// Divide the logits by `temp`; `temp <= 0` keeps only the first maximal logit
/// (every other logit becomes -inf), as llama.cpp's temp sampler does.
pub(crate) fn apply_temp(c: &mut Candidates, temp: f32) {
    if c.data.is_empty() {
        return;
    }
    if temp <= 0.0 {
        let mut max_i = 0;
        let mut max_l = c.data[0].logit;
        for i in 1..c.data.len() {
            if c.data[i].logit > max_l {
                c.data[max_i].logit = f32::NEG_INFINITY;
                max_i = i;
                max_l = c.data[i].logit;
            } else {
                c.data[i].logit = f32::NEG_INFINITY;
            }
        }
        return;
    }
    for t in c.data.iter_mut() {
        t.logit /= temp;
    }
}

/// llama.cpp's temp-ext: with `range > 0` the temperature is
/// `min_t + (max_t - min_t) * (H / H_max)^exponent`, where `min_t = max(0, temp - range)`,
/// `max_t = temp + range`, `H` the entropy of the candidates' softmax and `H_max = ln(n)`.
/// Leaves the candidates sorted with probabilities. Otherwise plain temperature.
/// Returns the temperature applied.
pub(crate) fn apply_temp_ext(c: &mut Candidates, temp: f32, range: f32, exponent: f32) -> f32 {
    if range <= 0.0 {
        apply_temp(c, temp);
        return temp;
    }
    let min_t = (temp - range).max(0.0);
    let max_t = temp + range;
    if c.data.len() <= 1 {
        return temp;
    }
    let max_entropy = -(1.0f32 / c.data.len() as f32).ln();
    c.softmax(true);
    let mut entropy = 0.0f32;
    for t in c.data.iter() {
        if t.p > 0.0 {
            entropy -= t.p * t.p.ln();
        }
    }
    let normalized = entropy / max_entropy;
    let dyn_temp = min_t + (max_t - min_t) * normalized.powf(exponent);
    apply_temp(c, dyn_temp);
    // probabilities after the scaling (f64 sums, as llama.cpp)
    let max = c.data[0].logit as f64;
    let mut sum = 0.0f64;
    for t in c.data.iter_mut() {
        let p = (t.logit as f64 - max).exp();
        t.p = p as f32;
        sum += p;
    }
    for t in c.data.iter_mut() {
        t.p = (t.p as f64 / sum) as f32;
    }
    dyn_temp
}
