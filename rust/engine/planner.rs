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
    /// Its last sampled token must be evaluated (one generated token), with the tokens
    /// drafted after it to verify (speculative decoding; usually none).
    Decode { token: u32, draft: &'a [u32] },
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
/// Drafted tokens ride with their sequence's decode token (in the one-token orders, logits
/// for every row), from what the decode tokens leave of the budget, in slot order.
pub struct DecodeFirst {
    pub ubatch: usize,
}

impl Planner for DecodeFirst {
    fn plan(&mut self, slots: &[SlotView<'_>], mut budget: usize, batch: &mut Batch) {
        let n_decode = slots.iter().filter(|v| matches!(v.work, Work::Decode { .. })).count();
        let mut spare = budget.saturating_sub(n_decode);
        for v in slots {
            let Work::Decode { token, draft } = v.work else { continue };
            if budget == 0 {
                return;
            }
            let draft = &draft[..draft.len().min(spare).min(budget - 1)];
            spare -= draft.len();
            // generated tokens: each in the one-token orders (prompt_end 0)
            let n = 1 + draft.len();
            let logits = if n > 1 { LogitRows::All } else { LogitRows::Last };
            batch.spans.push(Span { slot: v.slot, pos0: v.n_past, n, logits, ring_lo: v.ring_lo, prompt_end: 0, ubatch: 0 });
            batch.tokens.push(token);
            batch.tokens.extend_from_slice(draft);
            budget -= n;
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
            SlotView { slot: 1, n_past: 7, ring_lo: 0, work: Work::Decode { token: 42, draft: &[] } },
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
    fn drafts_ride_with_their_decode_token_from_the_budget_left() {
        let (d0, d1) = ([5u32, 6, 7], [8u32, 9]);
        let slots = [
            SlotView { slot: 0, n_past: 10, ring_lo: 0, work: Work::Decode { token: 1, draft: &d0 } },
            SlotView { slot: 1, n_past: 20, ring_lo: 0, work: Work::Decode { token: 2, draft: &d1 } },
        ];
        let mut b = Batch::default();
        // 6 tokens: both decode tokens first, then 4 drafted ones in slot order
        DecodeFirst { ubatch: 512 }.plan(&slots, 6, &mut b);
        let got: Vec<(usize, usize, usize, LogitRows, usize)> = b.spans.iter().map(|s| (s.slot, s.pos0, s.n, s.logits, s.prompt_end)).collect();
        assert_eq!(got, vec![(0, 10, 4, LogitRows::All, 0), (1, 20, 2, LogitRows::All, 0)]);
        assert_eq!(b.tokens, [1, 5, 6, 7, 2, 8]);
        b.clear();
        DecodeFirst { ubatch: 512 }.plan(&slots, 2, &mut b);
        assert_eq!(b.spans.iter().map(|s| (s.n, s.logits)).collect::<Vec<_>>(), vec![(1, LogitRows::Last), (1, LogitRows::Last)]);
    }

    #[test]
    fn zero_budget_plans_nothing() {
        let slots = [SlotView { slot: 0, n_past: 3, ring_lo: 0, work: Work::Decode { token: 1, draft: &[] } }];
        let mut b = Batch::default();
        DecodeFirst { ubatch: 8 }.plan(&slots, 0, &mut b);
        assert!(b.is_empty() && b.spans.is_empty());
    }
}
