//! Repetition, frequency and presence penalties over the last `last_n` accepted tokens.
use super::candidates::Candidates;
use std::collections::{HashMap, VecDeque};

pub(crate) struct Penalties {
    /// Window size in tokens; 0 = off.
    last_n: usize,
    repeat: f32,
    freq: f32,
    present: f32,
    prev: VecDeque<u32>,
    /// Occurrences of each token in `prev` (only tokens that occur).
    counts: HashMap<u32, u32>,
}

impl Penalties {
    pub fn new(last_n: usize, repeat: f32, freq: f32, present: f32) -> Penalties {
        Penalties {
            last_n,
            repeat,
            freq,
            present,
            prev: VecDeque::with_capacity(last_n.min(4096)),
            counts: HashMap::new(),
        }
    }

    pub fn accept(&mut self, token: u32) {
        if self.last_n == 0 {
            return;
        }
        *self.counts.entry(token).or_insert(0) += 1;
        if self.prev.len() >= self.last_n {
            if let Some(old) = self.prev.pop_front() {
                if let Some(n) = self.counts.get_mut(&old) {
                    *n -= 1;
                    if *n == 0 {
                        self.counts.remove(&old);
                    }
                }
            }
        }
        self.prev.push_back(token);
    }

    /// For each candidate seen `count` times in the window: a positive logit is divided
    /// by the repeat penalty, a non-positive one multiplied by it; then
    /// `count * frequency + presence` is subtracted.
    pub fn apply(&self, c: &mut Candidates) {
        if self.last_n == 0 || (self.repeat == 1.0 && self.freq == 0.0 && self.present == 0.0) {
            return;
        }
        let (repeat, freq, present) = (self.repeat, self.freq, self.present);
        c.for_each_in_map(&self.counts, |t, count| {
            if t.logit <= 0.0 {
                t.logit *= repeat;
            } else {
                t.logit /= repeat;
            }
            t.logit -= count as f32 * freq + present;
        });
        c.sorted = false;
    }

    /// Occurrences of `token` in the window (for tests and diagnostics).
    #[allow(dead_code)]
    pub fn count(&self, token: u32) -> u32 {
        self.counts.get(&token).copied().unwrap_or(0)
    }
}
