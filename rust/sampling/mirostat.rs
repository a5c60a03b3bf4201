//! Mirostat 1.0 and 2.0: pick a token while steering the observed surprise
//! (-log2 p of the picked token) towards `tau`, adapting `mu` with learning rate `eta`.
//! Each replaces the truncation chain and does the final draw itself.
use super::candidates::Candidates;
use super::rng::Rng;

pub(crate) struct Mirostat {
    pub version: u8,
    tau: f32,
    eta: f32,
    /// Mirostat 1.0: how many of the best candidates estimate the Zipf exponent (llama.cpp: 100).
    m: usize,
    /// Maximum surprise; starts at 2 * tau.
    pub mu: f32,
}

impl Mirostat {
    pub fn new(version: u8, tau: f32, eta: f32) -> Mirostat {
        Mirostat { version, tau, eta, m: 100, mu: 2.0 * tau }
    }

    /// Truncate, draw and update `mu`. Returns the index of the picked candidate, with
    /// the candidates' probabilities renormalised over the survivors.
    pub fn sample(&mut self, c: &mut Candidates, n_vocab: usize, rng: &mut Rng) -> usize {
        if c.data.is_empty() {
            return 0;
        }
        if self.version == 2 {
            // keep the candidates no more surprising than mu (at least the best one); only
            // those need sorting, not the whole vocabulary
            c.softmax(false);
            let mu = self.mu;
            let best = c.data.iter().enumerate().fold(0, |b, (i, t)| if super::candidates::by_logit_desc(t, &c.data[b]).is_lt() { i } else { b });
            let keep_best = c.data[best];
            let min_p = (-mu).exp2(); // -log2(p) <= mu, without a log per candidate
            c.data.retain(|t| t.p >= min_p);
            if c.data.is_empty() {
                c.data.push(keep_best);
            }
            c.identity = false;
            c.sorted = false;
            c.softmax(true);
            let idx = c.draw(rng.next_f32());
            let observed_surprise = -c.data[idx].p.log2();
            self.mu -= self.eta * (observed_surprise - self.tau);
            return idx;
        }
        c.softmax(true);
        if self.version == 1 {
            // estimate the Zipf exponent s from the best m candidates
            let mut sum_ti_bi = 0.0f32;
            let mut sum_ti_sq = 0.0f32;
            let mut i = 0;
            while i + 1 < self.m && i + 1 < c.data.len() {
                let t_i = ((i + 2) as f32 / (i + 1) as f32).ln();
                let b_i = (c.data[i].p / c.data[i + 1].p).ln();
                sum_ti_bi += t_i * b_i;
                sum_ti_sq += t_i * t_i;
                i += 1;
            }
            let s_hat = sum_ti_bi / sum_ti_sq;
            let epsilon_hat = s_hat - 1.0;
            let k = ((epsilon_hat * 2f32.powf(self.mu)) / (1.0 - (n_vocab as f32).powf(-epsilon_hat))).powf(1.0 / s_hat);
            // C's int(k) (saturating here; NaN -> 0), at least 1
            let k = (k as i64).max(1) as usize;
            c.keep_top(k);
        }
        c.softmax(true);
        let idx = c.draw(rng.next_f32());
        let observed_surprise = -c.data[idx].p.log2();
        self.mu -= self.eta * (observed_surprise - self.tau);
        idx
    }
}
