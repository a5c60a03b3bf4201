//! Committing a step's results: the evaluated tokens join their slots' caches, prompt
//! progress is reported (and sliding-window checkpoints taken), each sequence that got
//! logits samples its next token and emits it, and finished or failed requests are
//! released. Before planning, sequences at the end of their context are shifted or ended,
//! and generating sequences take their drafts (speculative decoding, `speculative.rs`).
use super::decode::StopReason;
use super::draft_model::DraftAsk;
use super::execute::Logits;
use super::planner::{Batch, SlotView, Work};
use super::request::{Event, Progress};
use super::slot::MAX_CHECKPOINTS;
use super::state::LoopState;
use crate::error::Error;
use crate::kv_cache::Checkpoint;
use crate::model::LogitRows;
use std::time::Instant;

impl LoopState {
    /// Sequences whose next token would not fit: shift the context (llama.cpp's
    /// `--context-shift`) or end them at the limit.
    pub fn fit_decodes(&mut self) {
        let n_ctx = self.kv.slot_ctx;
        for si in 0..self.slots.len() {
            let at_end = self.slots[si].task.as_ref().is_some_and(|t| t.pending.is_some()) && self.slots[si].cells.n_past() + 1 >= n_ctx;
            if !at_end {
                continue;
            }
            if self.cfg.context_shift {
                self.context_shift(si);
                continue;
            }
            if let Some(t) = self.slots[si].task.as_mut() {
                t.dec.truncated = true;
                if let Some(ev) = t.dec.finish(StopReason::Limit) {
                    if !t.req.params.quiet {
                        t.req.send(Event::Token(ev));
                    }
                }
            }
            self.release(si, None);
        }
    }

    /// Before planning: each generating sequence's draft for the next step, within what it
    /// may still generate, what its context holds (a draft never writes a position that
    /// one-token decoding would not reach) and one micro-batch.
    pub fn make_drafts(&mut self) {
        let LoopState { cfg, slots, kv, shared_drafts, draft, engine, .. } = self;
        let spec = &cfg.spec;
        if !spec.enabled() {
            return;
        }
        let n_ctx = kv.slot_ctx;
        let per_pass = cfg.n_ubatch.saturating_sub(1);
        // sequences the n-gram sources left without a draft, for the draft model
        let mut asks: Vec<(usize, Vec<u32>, usize, f32)> = Vec::new();
        for (si, s) in slots.iter_mut().enumerate() {
            let n_past = s.cells.n_past();
            let Some(t) = s.task.as_mut() else { continue };
            t.draft.clear();
            if t.pending.is_none() {
                continue;
            }
            let sp = t.dec.params.spec;
            // k drafts can give k + 1 tokens; the pending one is already counted
            let to_generate = t.dec.params.max_tokens.map_or(usize::MAX, |m| m.saturating_sub(t.dec.tokens.len() + 1));
            let max = sp.n_max.min(per_pass).min(n_ctx.saturating_sub(n_past + 2)).min(to_generate);
            if max == 0 {
                continue;
            }
            let d = spec.draft(&mut t.drafter, shared_drafts, &t.prompt, &t.dec.tokens, max);
            if d.is_empty() && draft.is_some() {
                asks.push((si, [&t.prompt[..], &t.dec.tokens[..]].concat(), max, sp.p_min));
            } else if d.len() >= sp.n_min.min(sp.n_max).max(1) {
                t.draft = d;
            }
        }
        let Some(dm) = draft.as_mut() else { return };
        if asks.is_empty() {
            return;
        }
        let a: Vec<DraftAsk<'_>> = asks.iter().map(|(si, h, max, p_min)| DraftAsk { slot: *si, history: h, max: *max, p_min: *p_min }).collect();
        let drafts = dm.draft(&engine.pool, &a);
        for ((si, ..), d) in asks.iter().zip(drafts) {
            let Some(t) = slots[*si].task.as_mut() else { continue };
            let sp = t.dec.params.spec;
            if d.len() >= sp.n_min.min(sp.n_max).max(1) {
                t.drafter.drafted_by_model();
                t.draft = d;
            }
        }
    }

    /// What each slot needs from the next forward pass, for the planner.
    pub fn views(&self) -> Vec<SlotView<'_>> {
        self.slots
            .iter()
            .map(|s| {
                let work = match &s.task {
                    Some(t) => match t.pending {
                        Some(token) => Work::Decode { token, draft: &t.draft },
                        None if t.prompt_done.is_none() => Work::Prompt { prompt: &t.prompt, started: t.started },
                        None => Work::Idle,
                    },
                    None => Work::Idle,
                };
                SlotView { slot: s.id, n_past: s.cells.n_past(), ring_lo: s.cells.ring_lo, work }
            })
            .collect()
    }

    /// Apply a step's results. Spans that failed end their requests with the error (its
    /// own kind: a device failure stays a device failure).
    pub fn commit(&mut self, batch: &Batch, logits: &Logits<'_>) {
        let engine = self.engine.clone();
        let nv = engine.model.config.n_vocab;
        self.metrics.n_decode_total += 1;
        self.metrics.n_busy_slots_total += batch.spans.len() as u64;
        let mut row = 0;
        let mut done: Vec<(usize, Option<Error>)> = Vec::new();
        for (i, sp) in batch.spans.iter().enumerate() {
            let rows = match sp.logits {
                LogitRows::None => 0,
                LogitRows::Last => 1,
                LogitRows::All => sp.n,
            };
            let outcome = logits.span(i, row, rows, nv);
            if matches!(logits, Logits::Batch(_)) {
                row += rows;
            }
            let l = match outcome {
                Err(e) => {
                    // what the failed pass wrote for this sequence is not trusted
                    self.slots[sp.slot].clear();
                    done.push((sp.slot, Some(e.again())));
                    continue;
                }
                Ok(l) => l,
            };
            let s = &mut self.slots[sp.slot];
            s.cells.push(batch.span_tokens(i));
            let Some(t) = s.task.as_mut() else { continue };
            if t.pending.is_none() {
                // a prompt chunk: report progress (always once the prompt is done)
                let finished = sp.logits != LogitRows::None;
                if finished || t.req.params.return_progress {
                    let pr = Progress {
                        total: t.n_prompt,
                        cache: t.tokens_cached,
                        processed: s.cells.n_past(),
                        time_ms: t.started.elapsed().as_secs_f64() * 1e3,
                    };
                    t.req.send(Event::Progress(pr));
                }
                if s.cells.ring.is_some() {
                    // a prompt chunk ended here: remember the ring for later prompts
                    let synced = self.kv.to_host(true).is_ok();
                    if let Some(cp) = Checkpoint::take(&self.kv, &s.cells, sp.slot).filter(|_| synced) {
                        if s.checkpoints.len() >= MAX_CHECKPOINTS {
                            // keep the earliest (shared prefixes) and the newest
                            s.checkpoints.remove(1.min(s.checkpoints.len() - 1));
                        }
                        s.checkpoints.push(cp);
                    }
                }
            }
            let Some(l) = l else { continue };
            let was_decode = t.pending.take().is_some();
            if t.prompt_done.is_none() {
                t.prompt_done = Some(Instant::now());
            }
            // one row per evaluated token of a decode span: the pending token's, then each
            // drafted token's (speculative decoding: `speculative.rs`)
            let drafted = if was_decode { &batch.span_tokens(i)[1..] } else { &[][..] };
            let mut alive = true;
            let mut accepted = 0;
            for r in l.chunks_exact(nv) {
                let ev = t.dec.step(&engine.tokenizer, r);
                alive = match ev {
                    Some(ev) if !t.req.params.quiet => t.req.send(Event::Token(ev)),
                    _ => true,
                };
                if !alive || t.dec.is_done() || t.dec.tokens.last() != drafted.get(accepted) {
                    break;
                }
                accepted += 1;
            }
            if !drafted.is_empty() {
                t.drafts.drafted += drafted.len();
                t.drafts.accepted += accepted;
                self.metrics.n_draft_steps_total += 1;
                self.metrics.n_drafted_total += drafted.len() as u64;
                self.metrics.n_drafted_accepted_total += accepted as u64;
                t.drafter.accept(&mut self.shared_drafts, accepted);
            }
            if !alive {
                done.push((sp.slot, Some(Error::Cancelled)));
            } else if t.dec.is_done() {
                done.push((sp.slot, None));
            } else {
                t.pending = t.dec.tokens.last().copied();
            }
            if accepted < drafted.len() {
                // the rejected drafts' rows leave the cache
                s.truncate(sp.pos0 + 1 + accepted);
            }
        }
        for (si, err) in done {
            self.release(si, err);
        }
    }

    /// The requests of the slots in `batch` end with `e` (a step that panicked outside the
    /// forward pass); their caches are cleared.
    pub fn fail_step(&mut self, batch: &Batch, e: &Error) {
        for sp in &batch.spans {
            self.slots[sp.slot].clear();
            self.release(sp.slot, Some(e.again()));
        }
    }

    /// llama.cpp's context shift: keep n_keep tokens, drop n_discard (default half of
    /// the rest), move the remainder down.
    fn context_shift(&mut self, si: usize) {
        let s = &mut self.slots[si];
        let Some(t) = s.task.as_ref() else { return };
        let n_past = s.cells.n_past();
        let n_keep = t.n_keep.min(n_past);
        let n_left = n_past - n_keep;
        let n_discard = if t.req.params.n_discard > 0 { t.req.params.n_discard.min(n_left) } else { n_left / 2 };
        s.checkpoints.clear();
        if self.kv.to_host(false).is_err() {
            s.clear();
            return;
        }
        self.engine.model.kv_shift(&mut self.kv, &mut s.cells, si, n_keep, n_discard);
        if self.kv.to_device(false).is_err() {
            s.clear();
        }
    }
}
