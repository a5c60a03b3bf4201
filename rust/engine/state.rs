//! What the engine loop owns between iterations: the KV cache and the slots over it, the
//! RAM prompt cache, the counters, and the outbox of requests that ended (their last
//! events go out after the snapshot that shows their slots free). The stages
//! (`admission.rs`, `commit.rs`, `slot_io.rs`) work on it; `batch_loop.rs` drives them.
use super::decode::{StopReason, Timings};
use super::metrics::{Metrics, Snapshot};
use super::prompt_cache::PromptCache;
use super::queue::SchedConfig;
use super::request::{Event, Final, Request};
use super::draft_model::DraftModel;
use super::speculative::{SharedDrafts, SpecKind};
use super::slot::{Slot, SlotInfo};
use super::Engine;
use crate::error::{Error, Result};
use crate::kv_cache::{KvStore, SeqCells};
use std::sync::Arc;
use std::time::Instant;

pub struct LoopState {
    pub engine: Arc<Engine>,
    pub cfg: SchedConfig,
    pub kv: KvStore,
    pub slots: Vec<Slot>,
    pub ram: PromptCache,
    pub fingerprint: u64,
    /// Monotonic use counter (least recently used slot choice).
    pub clock: u64,
    pub metrics: Metrics,
    /// Requests that ended, with their last event: sent by the loop after it publishes.
    pub ended: Vec<(Request, Event)>,
    /// What all sequences' draft sources share (speculative decoding).
    pub shared_drafts: SharedDrafts,
    /// The draft model and its cache (`draft-simple`).
    pub draft: Option<DraftModel>,
}

impl LoopState {
    pub fn new(engine: Arc<Engine>, cfg: SchedConfig, n_ctx_slot: usize) -> Result<LoopState> {
        let m = &engine.model;
        let c = &m.config;
        let caps = m.kv_caps(n_ctx_slot, cfg.n_ubatch, cfg.swa_full);
        let kv = engine.config.kv.store(cfg.n_parallel, n_ctx_slot, &caps, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim)?;
        let ring = m.kv_ring(&kv);
        let slots = (0..cfg.n_parallel)
            .map(|id| Slot { id, cells: SeqCells::new(ring), task: None, last_used: 0, n_decoded_last: 0, id_task_last: None, ended_early: false, checkpoints: Vec::new(), lora: None })
            .collect();
        let metrics = Metrics { kv_cache_capacity: n_ctx_slot * cfg.n_parallel, kv_cache_bytes: kv.bytes(), ..Metrics::default() };
        let shared_drafts = cfg.spec.shared(c.n_vocab)?;
        let draft = match (&cfg.draft, cfg.spec.has(SpecKind::DraftSimple)) {
            (Some(d), true) => {
                // the draft's context (-cd; the target's unless set) split over the slots as the target's is
                let n_ctx_draft = d.0.config.n_ctx / cfg.n_parallel;
                if n_ctx_draft < 8 {
                    return Err(Error::InvalidRequest(format!("the draft model's context of {} tokens leaves {n_ctx_draft} per slot; raise -cd", d.0.config.n_ctx)));
                }
                Some(DraftModel::new(d.0.clone(), cfg.n_parallel, n_ctx_draft, cfg.n_ubatch, c.n_vocab)?)
            }
            (None, true) => return Err(Error::InvalidRequest("speculative decoding type draft-simple needs a draft model (-md / draft_model)".into())),
            _ => None,
        };
        Ok(LoopState { fingerprint: m.fingerprint(), ram: PromptCache::new(cfg.cache_ram_mib), shared_drafts, draft, engine, cfg, kv, slots, clock: 0, metrics, ended: Vec::new() })
    }

    pub fn busy(&self) -> bool {
        self.slots.iter().any(|s| s.task.is_some())
    }

    /// End the task in slot `si`: its final event (or the error) into the outbox, counters,
    /// slot freed. What the slot evaluated stays cached for the next prompt.
    pub fn release(&mut self, si: usize, err: Option<Error>) {
        let n_ctx = self.kv.slot_ctx;
        let Some(mut t) = self.slots[si].task.take() else { return };
        self.clock += 1;
        let n_decoded = t.dec.tokens.len();
        let s = &mut self.slots[si];
        s.last_used = self.clock;
        s.n_decoded_last = n_decoded;
        s.ended_early = err.is_some();
        let now = Instant::now();
        let prompt_ms = t.prompt_done.unwrap_or(now).duration_since(t.started).as_secs_f64() * 1e3;
        let predicted_ms = t.prompt_done.map(|p| now.duration_since(p).as_secs_f64() * 1e3).unwrap_or(0.0);
        let evaluated = t.n_prompt - t.tokens_cached;
        let m = &mut self.metrics;
        if t.prompt_done.is_some() {
            m.n_prompt_tokens_processed_total += evaluated as u64;
            m.n_prompt_tokens_cached_total += t.tokens_cached as u64;
            m.t_prompt_processing_total_ms += prompt_ms;
        }
        m.n_tokens_max = m.n_tokens_max.max((t.n_prompt + n_decoded) as u64);
        m.n_tokens_predicted_total += t.dec.tokens.len() as u64;
        m.t_tokens_generation_total_ms += predicted_ms;
        if let Some(e) = err {
            self.ended.push((t.req, Event::Error(e)));
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
            timings: Timings { prompt_n: evaluated, prompt_ms, predicted_n: n_decoded, predicted_ms, draft_n: t.drafts.drafted, draft_n_accepted: t.drafts.accepted },
            seed: t.dec.seed(),
            id_slot: si,
            n_ctx,
            prompt: t.prompt,
        };
        self.ended.push((t.req, Event::Done(Box::new(fin))));
    }

    /// End a request that never reached a slot.
    pub fn refuse(&mut self, req: Request, e: Error) {
        self.ended.push((req, Event::Error(e)));
    }

    /// Slots and counters as readers see them; `waiting`: requests queued for a slot.
    pub fn snapshot(&self, waiting: usize) -> Snapshot {
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
                kv_bytes: self.kv.slot_bytes(s.cells.n_past()),
                n_prompt_tokens: s.task.as_ref().map(|t| t.n_prompt).unwrap_or(0),
                n_prompt_cached: s.task.as_ref().map(|t| t.tokens_cached).unwrap_or(0),
                n_decoded: s.task.as_ref().map(|t| t.dec.tokens.len()).unwrap_or(s.n_decoded_last),
                n_remain: s.task.as_ref().and_then(|t| t.dec.params.max_tokens.map(|m| m.saturating_sub(t.dec.tokens.len()))),
                has_next_token: s.task.is_some() || s.ended_early,
            })
            .collect();
        let mut metrics = self.metrics.clone();
        metrics.requests_processing = self.slots.iter().filter(|s| s.task.is_some()).count();
        metrics.requests_deferred = waiting;
        metrics.kv_cache_tokens = self.slots.iter().map(|s| s.cells.n_past()).sum();
        metrics.prompt_cache_entries = self.ram.len();
        metrics.prompt_cache_bytes = self.ram.bytes();
        metrics.prompt_cache_hits = self.ram.hits;
        Snapshot { slots, metrics }
    }
}
