//! Planning: which tokens of which sequences go into the next forward pass. A `Planner`
//! sees each slot as a `SlotView` (what it needs next) and fills a `Batch`; it knows
//! nothing of requests, sampling or the cache's contents.
use crate::model::{LogitRows, Span};
use std::time::Instant;

/// What a slot needs from the next forward pass.
#[derive(Debug, Clone, Copy)]
pub enum Work<'a> {
    /// Nothing (free, or waiting on something else).
    Idle,
    /// Its last sampled token must be evaluated (one generated token).
    Decode(u32),
    /// Its prompt from position `n_past` on (the request started at `started`).
    Prompt { prompt: &'a [u32], started: Instant },
}

#[derive(Debug, Clone, Copy)]
pub struct SlotView<'a> {
    pub slot: usize,
    /// Positions the slot's cache holds.
    pub n_past: usize,
    /// The sequence's sliding-window ring start (`SeqCells::ring_lo`).
    pub ring_lo: usize,
    pub work: Work<'a>,
}

/// One forward pass: the tokens, and each sequence's share of them.
#[derive(Debug, Default)]
pub struct Batch {
    pub tokens: Vec<u32>,
    pub spans: Vec<Span>,
}

impl Batch {
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.spans.clear();
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The tokens of span `i`.
    pub fn span_tokens(&self, i: usize) -> &[u32] {
        let off: usize = self.spans[..i].iter().map(|s| s.n).sum();
        &self.tokens[off..off + self.spans[i].n]
    }
}

pub trait Planner {
    /// Fill `batch` (empty on entry) with at most `budget` tokens of the slots' work.
    fn plan(&mut self, slots: &[SlotView<'_>], budget: usize, batch: &mut Batch);
}

/// llama-server's order: a decode token for every generating sequence first (so a long
/// prompt never stalls them), then prompt chunks, oldest request first, up to the budget.
/// Prompts are evaluated in chunks of `ubatch` as llama.cpp would (`model/orders.rs`).
pub struct DecodeFirst {
    pub ubatch: usize,
}

impl Planner for DecodeFirst {
    fn plan(&mut self, slots: &[SlotView<'_>], mut budget: usize, batch: &mut Batch) {
        for v in slots {
            let Work::Decode(tok) = v.work else { continue };
            if budget == 0 {
                return;
            }
            // a generated token: one at a time (prompt_end 0)
            batch.spans.push(Span { slot: v.slot, pos0: v.n_past, n: 1, logits: LogitRows::Last, ring_lo: v.ring_lo, prompt_end: 0, ubatch: 0 });
            batch.tokens.push(tok);
            budget -= 1;
        }
        let mut prefill: Vec<(&SlotView, &[u32], Instant)> = slots
            .iter()
            .filter_map(|v| match v.work {
                Work::Prompt { prompt, started } => Some((v, prompt, started)),
                _ => None,
            })
            .collect();
        prefill.sort_by_key(|&(_, _, started)| started);
        for (v, prompt, _) in prefill {
            if budget == 0 {
                break;
            }
            let left = prompt.len().saturating_sub(v.n_past);
            let take = left.min(budget);
            if take == 0 {
                continue;
            }
            let logits = if take == left { LogitRows::Last } else { LogitRows::None };
            batch.spans.push(Span { slot: v.slot, pos0: v.n_past, n: take, logits, ring_lo: v.ring_lo, prompt_end: prompt.len(), ubatch: self.ubatch });
            batch.tokens.extend_from_slice(&prompt[v.n_past..v.n_past + take]);
            budget -= take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn decodes_first_then_oldest_prompts_within_the_budget() {
        let t0 = Instant::now();
        let (p_old, p_new) = ([1u32; 10], [2u32; 6]);
        let slots = [
            SlotView { slot: 0, n_past: 0, ring_lo: 0, work: Work::Prompt { prompt: &p_new, started: t0 + Duration::from_millis(5) } },
            SlotView { slot: 1, n_past: 7, ring_lo: 0, work: Work::Decode(42) },
            SlotView { slot: 2, n_past: 4, ring_lo: 0, work: Work::Prompt { prompt: &p_old, started: t0 } },
            SlotView { slot: 3, n_past: 0, ring_lo: 0, work: Work::Idle },
        ];
        let mut b = Batch::default();
        DecodeFirst { ubatch: 512 }.plan(&slots, 9, &mut b);
        let got: Vec<(usize, usize, usize, LogitRows)> = b.spans.iter().map(|s| (s.slot, s.pos0, s.n, s.logits)).collect();
        // the decode, then the older prompt's 6 remaining tokens (done: logits), then 2 of the newer
        assert_eq!(got, vec![(1, 7, 1, LogitRows::Last), (2, 4, 6, LogitRows::Last), (0, 0, 2, LogitRows::None)]);
        assert_eq!(b.tokens, [42, 1, 1, 1, 1, 1, 1, 2, 2]);
        assert_eq!(b.span_tokens(2), [2, 2]);
        assert_eq!((b.spans[1].prompt_end, b.spans[1].ubatch, b.spans[0].prompt_end), (10, 512, 0));
    }

    #[test]
    fn zero_budget_plans_nothing() {
        let slots = [SlotView { slot: 0, n_past: 3, ring_lo: 0, work: Work::Decode(1) }];
        let mut b = Batch::default();
        DecodeFirst { ubatch: 8 }.plan(&slots, 0, &mut b);
        assert!(b.is_empty() && b.spans.is_empty());
    }
}
