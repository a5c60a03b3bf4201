//! The engine loop, on its own thread. One iteration: take commands → admit queued
//! requests into free slots → plan one batch (a decode token for every generating
//! sequence first, then prompt chunks up to n_ubatch) → one forward → sample each
//! sequence → emit events → publish a snapshot. With nothing to do it sleeps on a
//! condition variable.
use super::decode::{Decoder, StopReason, Timings};
use super::metrics::{Metrics, Snapshot};
use super::prompt_cache::PromptCache;
use super::request::{Event, Final, Progress, Request};
use super::scheduler::{Cmd, SchedConfig, Shared};
use super::slot::{choose, Slot, SlotInfo, Task, MAX_CHECKPOINTS};
use super::Engine;
use crate::error::{Error, Result};
use crate::kv_cache::{persist, Checkpoint, KvStore, SeqCells};
use crate::model::{LogitRows, Span, State};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

pub(super) struct Loop {
    pub(super) engine: Arc<Engine>,
    pub(super) cfg: SchedConfig,
    pub(super) kv: KvStore,
    state: State,
    pub(super) slots: Vec<Slot>,
    waiting: VecDeque<Request>,
    shared: Arc<Shared>,
    clock: u64,
    metrics: Metrics,
    pub(super) ram: PromptCache,
    pub(super) fingerprint: u64,
    tokens: Vec<u32>,
    spans: Vec<Span>,
}

impl Loop {
    pub(super) fn new(engine: Arc<Engine>, cfg: SchedConfig, n_ctx_slot: usize, shared: Arc<Shared>) -> Result<Loop> {
        let m = &engine.model;
        let c = &m.config;
        let caps = m.kv_caps(n_ctx_slot, cfg.n_ubatch, cfg.swa_full);
        let kv = KvStore::new(cfg.n_parallel, n_ctx_slot, &caps, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim)?;
        let ring = m.kv_ring(&kv);
        let slots = (0..cfg.n_parallel)
            .map(|id| Slot { id, cells: SeqCells::new(ring), task: None, last_used: 0, n_decoded_last: 0, id_task_last: None, checkpoints: Vec::new() })
            .collect();
        let metrics = Metrics { kv_cache_capacity: n_ctx_slot * cfg.n_parallel, ..Metrics::default() };
        Ok(Loop {
            fingerprint: m.fingerprint(),
            ram: PromptCache::new(cfg.cache_ram_mib),
            engine,
            cfg,
            kv,
            state: State::default(),
            slots,
            waiting: VecDeque::new(),
            shared,
            clock: 0,
            metrics,
            tokens: Vec::new(),
            spans: Vec::new(),
        })
    }

    fn busy(&self) -> bool {
        self.slots.iter().any(|s| s.task.is_some())
    }

    pub(super) fn run(mut self) {
        loop {
            // drain and read the shutdown flag under one lock: the flag is set under it too,
            // so every command pushed before shutdown is seen here
            let (cmds, stop): (Vec<Cmd>, bool) = {
                let mut q = self.shared.cmds.lock().unwrap_or_else(|e| e.into_inner());
                while q.is_empty() && !self.busy() && self.waiting.is_empty() && !self.shared.shutdown.load(Ordering::Acquire) {
                    q = self.shared.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                (q.drain(..).collect(), self.shared.shutdown.load(Ordering::Acquire))
            };
            if stop {
                self.shutdown(cmds);
                return;
            }
            for cmd in cmds {
                self.command(cmd);
            }
            self.admit();
            self.step();
            self.publish();
        }
    }

    fn shutdown(&mut self, cmds: Vec<Cmd>) {
        for cmd in cmds {
            match cmd {
                Cmd::Submit(r) => {
                    r.sink.send(r.id, Event::Error(Error::Cancelled));
                }
                Cmd::Slot(_, _, tx) => {
                    let _ = tx.send(Err(Error::Cancelled));
                }
                Cmd::Cancel(_) => {}
            }
        }
        for r in self.waiting.drain(..) {
            r.sink.send(r.id, Event::Error(Error::Cancelled));
        }
        for s in &mut self.slots {
            if let Some(t) = s.task.take() {
                t.req.sink.send(t.req.id, Event::Error(Error::Cancelled));
            }
        }
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Submit(r) => {
                self.metrics.n_requests_total += 1;
                self.waiting.push_back(*r);
            }
            Cmd::Cancel(id) => {
                if let Some(i) = self.waiting.iter().position(|r| r.id == id) {
                    if let Some(r) = self.waiting.remove(i) {
                        r.sink.send(id, Event::Error(Error::Cancelled));
                    }
                }
                if let Some(si) = self.slots.iter().position(|s| s.task.as_ref().is_some_and(|t| t.req.id == id)) {
                    self.release(si, Some(Error::Cancelled));
                }
            }
            Cmd::Slot(id, action, tx) => {
                let r = self.slot_action(id, action);
                // the caller may read slots() right after the reply
                self.publish();
                let _ = tx.send(r);
            }
        }
    }

    /// Move queued requests into free slots, in arrival order.
    fn admit(&mut self) {
        let mut i = 0;
        while i < self.waiting.len() {
            let want = self.waiting[i].params.id_slot;
            let si = match want {
                Some(s) if s < self.slots.len() => {
                    if self.slots[s].task.is_some() {
                        i += 1;
                        continue;
                    }
                    s
                }
                _ => match choose(&self.slots, &self.waiting[i].params.prompt, self.cfg.slot_prompt_similarity) {
                    Some(s) => s,
                    None => break,
                },
            };
            let Some(req) = self.waiting.remove(i) else { break };
            match self.prepare(si, req) {
                Ok(task) => {
                    self.clock += 1;
                    let s = &mut self.slots[si];
                    s.last_used = self.clock;
                    s.id_task_last = Some(task.req.id);
                    s.task = Some(task);
                }
                Err((req, e)) => {
                    req.sink.send(req.id, Event::Error(e));
                }
            }
        }
    }

    /// Fit the prompt to the slot, reuse what the slot (or the RAM cache) holds, and
    /// build the task.
    #[allow(clippy::result_large_err)]
    fn prepare(&mut self, si: usize, mut req: Request) -> std::result::Result<Task, (Request, Error)> {
        let n_ctx = self.kv.slot_ctx;
        let p = &req.params;
        let mut prompt = p.prompt.clone();
        let add_bos = self.engine.tokenizer.vocab.add_bos as usize;
        let n_keep = if p.n_keep < 0 { prompt.len() } else { p.n_keep as usize };
        let n_keep = (n_keep + add_bos).min(n_ctx.saturating_sub(4));
        let mut truncated = false;
        if prompt.len() >= n_ctx {
            if !p.truncate {
                let e = Error::ContextOverflow { n_tokens: prompt.len(), n_ctx };
                return Err((req, e));
            }
            // llama.cpp's prompt truncation: keep n_keep tokens, drop whole blocks of
            // half the remaining context from what follows.
            let n_block = (n_ctx - n_keep) / 2;
            if n_block == 0 {
                let e = Error::InvalidRequest(format!("n_keep = {n_keep} leaves no room to truncate the prompt into {n_ctx} positions"));
                return Err((req, e));
            }
            let erased = (prompt.len() - n_keep - n_block) / n_block;
            prompt.drain(n_keep..n_keep + erased * n_block);
            truncated = true;
        }
        let cache_prompt = p.cache_prompt;
        let slot_cells = &self.slots[si].cells;
        let mut reuse = if cache_prompt { slot_cells.reusable_prefix(&prompt) } else { 0 };
        // The RAM cache may hold a longer prefix than the slot does.
        if cache_prompt && self.ram.enabled() {
            if let Some((idx, _)) = self.ram.best(&prompt, reuse) {
                self.stash(si, reuse);
                let entry = self.ram.take(idx);
                let s = &mut self.slots[si];
                s.checkpoints.clear();
                let restored = persist::restore(&mut self.kv, &mut s.cells, si, self.fingerprint, &entry.bytes, "prompt cache");
                if restored.and_then(|_| self.kv.to_device(false)).is_err() {
                    s.clear();
                }
                reuse = self.slots[si].cells.reusable_prefix(&prompt);
            } else {
                self.stash(si, reuse);
            }
        }
        // The ring forgot the window before the divergence: resume from the latest
        // checkpoint taken at or before it instead of from the start.
        let s = &mut self.slots[si];
        let lcp = s.cells.common_prefix(&prompt).min(prompt.len().saturating_sub(1));
        if cache_prompt && reuse < lcp {
            if let Some(cp) = s.checkpoints.iter().filter(|c| c.pos > reuse && c.pos <= lcp).max_by_key(|c| c.pos) {
                cp.restore(&mut self.kv, &mut s.cells, si);
                reuse = cp.pos;
                if self.kv.to_device(true).is_err() {
                    s.clear();
                    reuse = 0;
                }
            }
        }
        if cache_prompt && self.cfg.cache_reuse > 0 && self.slots[si].cells.ring.is_none() {
            reuse = self.reuse_chunks(si, &prompt, reuse);
        }
        self.slots[si].truncate(reuse);
        let started = Instant::now();
        let mut gen = req.params.gen.clone();
        gen.sampling.n_ctx = n_ctx;
        let mut dec = Decoder::new(gen);
        if dec.needs_vocab() {
            dec.set_vocab(self.engine.pieces());
        }
        dec.prime(&prompt);
        dec.set_grammar(req.grammar.take());
        Ok(Task {
            dec,
            n_prompt: prompt.len(),
            tokens_cached: reuse,
            prompt,
            req,
            pending: None,
            prompt_truncated: truncated,
            started,
            prompt_done: None,
            n_keep,
        })
    }

    /// `--cache-reuse`: past the common prefix, pull later chunks of the slot's cache that
    /// match the prompt (at least cache_reuse tokens long) down into place by shifting
    /// the KV cache, as llama-server does. Returns the new reusable length.
    fn reuse_chunks(&mut self, si: usize, prompt: &[u32], reuse: usize) -> usize {
        let limit = prompt.len().saturating_sub(1);
        let (mut head_p, mut head_c) = (reuse, reuse);
        let s = &mut self.slots[si];
        while head_c < s.cells.n_past() && head_p < limit {
            let cached = &s.cells.tokens;
            let n = cached[head_c..].iter().zip(&prompt[head_p..limit]).take_while(|(a, b)| a == b).count();
            if n >= self.cfg.cache_reuse {
                if head_c > head_p {
                    s.checkpoints.clear();
                    if self.kv.to_host(false).is_err() {
                        break;
                    }
                    self.engine.model.kv_shift(&mut self.kv, &mut s.cells, si, head_p, head_c - head_p);
                    if self.kv.to_device(false).is_err() {
                        s.clear();
                        return 0;
                    }
                }
                head_p += n;
                head_c = head_p;
            } else {
                head_c += 1;
            }
        }
        head_p
    }

    /// Before a slot drops most of what it holds, keep it in the RAM cache.
    fn stash(&mut self, si: usize, keep: usize) {
        let cells = &self.slots[si].cells;
        let n = cells.n_past();
        if !self.ram.enabled() || n < 16 || keep * 2 >= n || self.kv.to_host(false).is_err() {
            return;
        }
        let cells = &self.slots[si].cells;
        let bytes = persist::save(&self.kv, cells, si, self.fingerprint);
        self.ram.put(cells.tokens.clone(), bytes);
    }

    /// Plan and run one batch. Returns whether anything was evaluated.
    fn step(&mut self) -> bool {
        let n_ctx = self.kv.slot_ctx;
        self.tokens.clear();
        self.spans.clear();
        let mut budget = self.cfg.n_ubatch;
        // decode tokens of generating sequences first, so a long prompt never stalls them
        for si in 0..self.slots.len() {
            let Some(pending) = self.slots[si].task.as_ref().and_then(|t| t.pending) else { continue };
            if budget == 0 {
                break;
            }
            if self.slots[si].cells.n_past() + 1 >= n_ctx {
                if !self.cfg.context_shift {
                    if let Some(t) = self.slots[si].task.as_mut() {
                        t.dec.truncated = true;
                        if let Some(ev) = t.dec.finish(StopReason::Limit) {
                            if !t.req.params.quiet {
                                t.req.sink.send(t.req.id, Event::Token(ev));
                            }
                        }
                    }
                    self.release(si, None);
                    continue;
                }
                self.context_shift(si);
            }
            let s = &self.slots[si];
            // a generated token: one at a time (prompt_end 0; `model/orders.rs`)
            let (pos0, ring_lo) = (s.cells.n_past(), s.cells.ring_lo);
            self.spans.push(Span { slot: si, pos0, n: 1, logits: LogitRows::Last, ring_lo, prompt_end: 0, ubatch: 0 });
            self.tokens.push(pending);
            budget -= 1;
        }
        // then prompt chunks, oldest request first
        let mut prefill: Vec<usize> =
            (0..self.slots.len()).filter(|&si| self.slots[si].task.as_ref().is_some_and(|t| t.pending.is_none() && t.prompt_done.is_none())).collect();
        prefill.sort_by_key(|&si| self.slots[si].task.as_ref().map(|t| t.started));
        for si in prefill {
            if budget == 0 {
                break;
            }
            let s = &self.slots[si];
            let Some(t) = s.task.as_ref() else { continue };
            let (n_past, left) = (s.cells.n_past(), t.prompt_left(&s.cells));
            let take = left.min(budget);
            if take == 0 {
                continue;
            }
            let logits = if take == left { LogitRows::Last } else { LogitRows::None };
            let (ring_lo, prompt_end, ubatch) = (s.cells.ring_lo, t.prompt.len(), self.cfg.n_ubatch);
            self.spans.push(Span { slot: si, pos0: n_past, n: take, logits, ring_lo, prompt_end, ubatch });
            self.tokens.extend_from_slice(&t.prompt[n_past..n_past + take]);
            budget -= take;
        }
        if self.tokens.is_empty() {
            return false;
        }
        let engine = self.engine.clone();
        let result = engine.model.forward(&engine.pool, &mut self.state, &mut self.kv, &self.tokens, &self.spans);
        let logits = match result {
            Ok(l) => l,
            Err(e) => {
                let msg = e.to_string();
                for sp in std::mem::take(&mut self.spans) {
                    self.slots[sp.slot].clear();
                    self.release(sp.slot, Some(Error::InvalidRequest(format!("evaluation failed: {msg}"))));
                }
                return true;
            }
        };
        self.metrics.n_decode_total += 1;
        self.metrics.n_busy_slots_total += self.spans.len() as u64;
        let nv = engine.model.config.n_vocab;
        let mut row = 0;
        let mut off = 0;
        let mut done: Vec<(usize, Option<Error>)> = Vec::new();
        for sp in &self.spans {
            let s = &mut self.slots[sp.slot];
            s.cells.push(&self.tokens[off..off + sp.n]);
            off += sp.n;
            let Some(t) = s.task.as_mut() else { continue };
            if t.pending.is_none() {
                // a prompt chunk: report progress (always once the prompt is done)
                let done = sp.logits != LogitRows::None;
                if done || t.req.params.return_progress {
                    let pr = Progress {
                        total: t.n_prompt,
                        cache: t.tokens_cached,
                        processed: s.cells.n_past(),
                        time_ms: t.started.elapsed().as_secs_f64() * 1e3,
                    };
                    t.req.sink.send(t.req.id, Event::Progress(pr));
                }
            }
            if t.pending.is_none() && s.cells.ring.is_some() {
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
            if sp.logits == LogitRows::None {
                continue;
            }
            let l = &logits[row * nv..(row + 1) * nv];
            row += 1;
            t.pending = None;
            if t.prompt_done.is_none() {
                t.prompt_done = Some(Instant::now());
            }
            let ev = t.dec.step(&engine.tokenizer, l);
            let alive = match ev {
                Some(ev) if !t.req.params.quiet => t.req.sink.send(t.req.id, Event::Token(ev)),
                _ => true,
            };
            if !alive {
                done.push((sp.slot, Some(Error::Cancelled)));
            } else if t.dec.is_done() {
                done.push((sp.slot, None));
            } else {
                t.pending = t.dec.tokens.last().copied();
            }
        }
        for (si, err) in done {
            self.release(si, err);
        }
        true
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

    /// End the task in slot `si`: the final event (or an error), counters, slot freed.
    /// What the slot evaluated stays cached for the next prompt.
    pub(super) fn release(&mut self, si: usize, err: Option<Error>) {
        let n_ctx = self.kv.slot_ctx;
        let Some(mut t) = self.slots[si].task.take() else { return };
        self.clock += 1;
        let n_decoded = t.dec.tokens.len();
        let s = &mut self.slots[si];
        s.last_used = self.clock;
        s.n_decoded_last = n_decoded;
        let now = Instant::now();
        let prompt_ms = t.prompt_done.unwrap_or(now).duration_since(t.started).as_secs_f64() * 1e3;
        let predicted_ms = t.prompt_done.map(|p| now.duration_since(p).as_secs_f64() * 1e3).unwrap_or(0.0);
        let evaluated = t.n_prompt - t.tokens_cached;
        let m = &mut self.metrics;
        if t.prompt_done.is_some() {
            m.n_prompt_tokens_processed_total += evaluated as u64;
            m.t_prompt_processing_total_ms += prompt_ms;
        }
        m.n_tokens_predicted_total += t.dec.tokens.len() as u64;
        m.t_tokens_generation_total_ms += predicted_ms;
        // readers woken by the final event see the slot already free
        self.publish();
        if let Some(e) = err {
            t.req.sink.send(t.req.id, Event::Error(e));
            return;
        }
        let reason = t.dec.stop_reason.unwrap_or(StopReason::Limit);
        let fin = Final {
            stop_reason: reason,
            stopping_word: std::mem::take(&mut t.dec.stopping_word),
            truncated: t.dec.truncated || t.prompt_truncated,
            text: std::mem::take(&mut t.dec.text),
            tokens: std::mem::take(&mut t.dec.tokens),
            probs: std::mem::take(&mut t.dec.probs),
            tokens_cached: t.tokens_cached,
            tokens_evaluated: t.n_prompt,
            timings: Timings { prompt_n: evaluated, prompt_ms, predicted_n: n_decoded, predicted_ms },
            seed: t.dec.seed(),
            id_slot: si,
            n_ctx,
            prompt: t.prompt,
        };
        t.req.sink.send(t.req.id, Event::Done(Box::new(fin)));
    }

    pub(super) fn publish(&self) {
        let n_ctx = self.kv.slot_ctx;
        let slots = self
            .slots
            .iter()
            .map(|s| SlotInfo {
                id: s.id,
                n_ctx,
                is_processing: s.task.is_some(),
                id_task: s.task.as_ref().map(|t| t.req.id).or(s.id_task_last),
                n_cached: s.cells.n_past(),
                n_prompt_tokens: s.task.as_ref().map(|t| t.n_prompt).unwrap_or(0),
                n_decoded: s.task.as_ref().map(|t| t.dec.tokens.len()).unwrap_or(s.n_decoded_last),
                n_remain: s.task.as_ref().and_then(|t| t.dec.params.max_tokens.map(|m| m.saturating_sub(t.dec.tokens.len()))),
            })
            .collect();
        let mut metrics = self.metrics.clone();
        metrics.requests_processing = self.slots.iter().filter(|s| s.task.is_some()).count();
        metrics.requests_deferred = self.waiting.len();
        metrics.kv_cache_tokens = self.slots.iter().map(|s| s.cells.n_past()).sum();
        metrics.prompt_cache_entries = self.ram.len();
        metrics.prompt_cache_bytes = self.ram.bytes();
        metrics.prompt_cache_hits = self.ram.hits;
        *self.shared.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = Snapshot { slots, metrics };
    }
}
