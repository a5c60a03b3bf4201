//! The scheduler handle: requests and slot actions go in through a command queue
//! (`queue.rs`), the loop (`batch_loop.rs`) runs on its own thread, and a snapshot of slots
//! and counters is published after every iteration for readers that must not wait.
use super::batch_loop::Loop;
use super::metrics::Snapshot;
use super::queue::{Cmd, Fault, SchedConfig, Shared, SlotAction, SlotActionResult, DEAD};
use super::request::{Event, Request, RequestParams, Sink};
use super::Engine;
use crate::error::{Error, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;

pub struct Scheduler {
    shared: Arc<Shared>,
    next_id: AtomicU64,
    thread: Mutex<Option<JoinHandle<()>>>,
    pub engine: Arc<Engine>,
    pub config: SchedConfig,
    /// Positions per slot.
    pub n_ctx_slot: usize,
}

impl Scheduler {
    /// Allocate the KV cache for every slot and start the loop thread.
    pub fn start(engine: Arc<Engine>, config: SchedConfig) -> Result<Scheduler> {
        if config.n_parallel == 0 {
            return Err(Error::InvalidRequest("n_parallel must be at least 1".into()));
        }
        if config.n_ubatch == 0 {
            return Err(Error::InvalidRequest("n_ubatch must be at least 1".into()));
        }
        if !(0.0..=1.0).contains(&config.slot_prompt_similarity) {
            return Err(Error::InvalidRequest(format!(
                "slot_prompt_similarity must be within [0, 1], got {}",
                config.slot_prompt_similarity
            )));
        }
        let n_ctx_slot = engine.config.n_ctx / config.n_parallel;
        if n_ctx_slot < 8 {
            return Err(Error::InvalidRequest(format!(
                "n_ctx = {} split over {} slots leaves {} positions per slot; raise n_ctx or lower n_parallel",
                engine.config.n_ctx, config.n_parallel, n_ctx_slot
            )));
        }
        if let Some(dir) = &config.slot_save_path {
            std::fs::create_dir_all(dir).map_err(|e| Error::Io { path: dir.clone(), source: e })?;
        }
        let shared = Arc::new(Shared::new());
        let lp = Loop::new(engine.clone(), config.clone(), n_ctx_slot, shared.clone())?;
        lp.publish();
        let thread = std::thread::Builder::new()
            .name("llamars-engine".into())
            .spawn(move || lp.run())
            .map_err(|e| Error::InvalidRequest(format!("could not start the engine thread: {e}")))?;
        Ok(Scheduler { shared, next_id: AtomicU64::new(1), thread: Mutex::new(Some(thread)), engine, config, n_ctx_slot })
    }

    fn push(&self, cmd: Cmd) -> Result<()> {
        self.shared.push(cmd)
    }

    /// Whether the loop thread died (every request is refused with `Unavailable`).
    pub fn is_dead(&self) -> bool {
        self.shared.dead.load(Ordering::Acquire)
    }

    /// Arm a fault (tests: the loop's error paths).
    pub fn inject(&self, f: Fault) -> Result<()> {
        if self.is_dead() {
            return Err(Error::Unavailable(DEAD.into()));
        }
        self.shared.faults.lock().unwrap_or_else(|e| e.into_inner()).push(f);
        self.shared.cv.notify_all();
        Ok(())
    }

    /// Check a request before queueing it, so a bad one fails in the caller's thread.
    pub fn validate(&self, p: &RequestParams) -> Result<()> {
        if p.prompt.is_empty() {
            return Err(Error::InvalidRequest("prompt: at least one token is required".into()));
        }
        let nv = self.engine.model.config.n_vocab;
        if let Some(&bad) = p.prompt.iter().find(|&&t| t as usize >= nv) {
            return Err(Error::InvalidRequest(format!("prompt: token id {bad} is out of range (n_vocab = {nv})")));
        }
        if let Some(s) = p.id_slot {
            if s >= self.config.n_parallel {
                return Err(Error::InvalidRequest(format!("id_slot: slot {s} does not exist (0..{})", self.config.n_parallel)));
            }
        }
        if !p.truncate && p.prompt.len() >= self.n_ctx_slot {
            return Err(Error::ContextOverflow { n_tokens: p.prompt.len(), n_ctx: self.n_ctx_slot });
        }
        Ok(())
    }

    /// Queue a request; its events go to `sink`. Returns the request id.
    pub fn submit(&self, mut params: RequestParams, sink: Sink) -> Result<u64> {
        // an encoder has no next-token head: say so before any work
        self.engine.model.lm_head()?;
        self.validate(&params)?;
        // the LoRA scales are fixed now: a later change of the global ones affects later requests
        params.lora_scales = self.engine.resolve_lora(params.lora.as_deref())?;
        let grammar = match &params.gen.grammar {
            Some(spec) => Some(self.engine.compile_grammar(spec)?),
            None => None,
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let req = Request::new(id, params, sink, grammar);
        self.push(Cmd::Submit(Box::new(req)))?;
        Ok(id)
    }

    /// An encoder's hidden states [n_i, n_embd] (or, with `classify`, its classifier's
    /// outputs) for each input, computed in the loop with the inputs of other requests in
    /// shared batches. Blocks until they are done.
    pub fn encode(&self, seqs: Vec<Vec<u32>>, classify: bool) -> Result<Vec<Vec<f32>>> {
        let e = &self.engine;
        let c = &e.model.config;
        if c.causal {
            return Err(Error::NotSupported(format!("{} is a decoder: its hidden states come from Engine::hidden_states", c.arch.name())));
        }
        for (i, s) in seqs.iter().enumerate() {
            if s.is_empty() {
                return Err(Error::InvalidRequest(format!("input[{i}]: at least one token is required")));
            }
            if s.len() > e.config.n_ctx {
                return Err(Error::ContextOverflow { n_tokens: s.len(), n_ctx: e.config.n_ctx });
            }
            if let Some(&t) = s.iter().find(|&&t| t as usize >= c.n_vocab) {
                return Err(Error::InvalidRequest(format!("input[{i}]: token id {t} is out of range (n_vocab = {})", c.n_vocab)));
            }
        }
        if classify {
            // say it before any work: a model without a classification head cannot rerank
            e.model.classifier()?;
        }
        let (tx, rx) = mpsc::channel();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.push(Cmd::Encode(Box::new(super::encode::EncodeJob::new(id, seqs, classify, tx))))?;
        rx.recv().map_err(|_| if self.is_dead() { Error::Unavailable(DEAD.into()) } else { Error::Cancelled })?
    }

    /// Queue a request with its own event channel.
    pub fn submit_channel(&self, params: RequestParams) -> Result<(u64, mpsc::Receiver<Event>)> {
        let (tx, rx) = mpsc::channel();
        let id = self.submit(params, Sink::Channel(tx))?;
        Ok((id, rx))
    }

    /// Stop a request (queued or running); its slot is free after the current iteration.
    pub fn cancel(&self, id: u64) {
        // after shutdown every request has already ended
        let _ = self.push(Cmd::Cancel(id));
    }

    /// Save, restore or erase a slot (waits for the loop to do it between batches).
    pub fn slot_action(&self, id_slot: usize, action: SlotAction) -> Result<SlotActionResult> {
        if id_slot >= self.config.n_parallel {
            return Err(Error::InvalidRequest(format!("id_slot: slot {id_slot} does not exist (0..{})", self.config.n_parallel)));
        }
        if let SlotAction::Save(f) | SlotAction::Restore(f) = &action {
            validate_filename(f)?;
        }
        let (tx, rx) = mpsc::channel();
        self.push(Cmd::Slot(id_slot, action, tx))?;
        rx.recv().map_err(|_| if self.is_dead() { Error::Unavailable(DEAD.into()) } else { Error::Cancelled })?
    }

    pub fn snapshot(&self) -> Snapshot {
        self.shared.snapshot.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Stop the loop; queued and running requests end with `Cancelled`.
    pub fn shutdown(&self) {
        {
            let _q = self.shared.cmds.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.shutdown.store(true, Ordering::Release);
            self.shared.cv.notify_all();
        }
        if let Some(t) = self.thread.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = t.join();
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A slot file name: a plain name inside the slot directory.
pub fn validate_filename(name: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::InvalidRequest(format!("filename: {name:?} {why}")));
    if name.is_empty() {
        return bad("is empty");
    }
    if name.len() > 255 {
        return bad("is longer than 255 bytes");
    }
    if name.contains(['/', '\\', '\0']) || name.contains("..") {
        return bad("must be a plain file name (no path separators or '..')");
    }
    if name.starts_with('.') {
        return bad("must not start with '.'");
    }
    if name.chars().any(|c| c.is_control()) {
        return bad("contains control characters");
    }
    Ok(())
}
