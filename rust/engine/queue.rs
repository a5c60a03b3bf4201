//! What passes between the callers' threads and the engine loop: the scheduler's
//! configuration, the command queue (requests, cancellations, slot actions), the shared
//! flags (shutdown, a dead loop), the published snapshot, and the faults tests inject.
use super::draft_model::DraftEngine;
use super::speculative::SpecConfig;
use super::metrics::Snapshot;
use super::request::Request;
use crate::error::{Error, Result};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex};

#[derive(Debug, Clone)]
pub struct SchedConfig {
    /// Slots (llama.cpp `-np`); each gets n_ctx / n_parallel positions.
    pub n_parallel: usize,
    /// Most tokens in one forward pass (llama.cpp `-ub`).
    pub n_ubatch: usize,
    /// Minimum prompt similarity for preferring a slot by its cached prompt (0 = off).
    pub slot_prompt_similarity: f32,
    /// Minimum chunk length reused after a shift (`--cache-reuse`, 0 = off).
    pub cache_reuse: usize,
    /// Host-RAM prompt cache in MiB (0 = off, -1 = no limit).
    pub cache_ram_mib: i64,
    /// Keep generating past the end of the context by discarding old tokens.
    pub context_shift: bool,
    /// Directory for slot save/restore (None = disabled).
    pub slot_save_path: Option<PathBuf>,
    /// Keep every position on sliding-window layers too (no ring).
    pub swa_full: bool,
    /// Speculative decoding (`--spec-type` and its parameters).
    pub spec: SpecConfig,
    /// The draft model of `draft-simple` speculative decoding (`-md`).
    pub draft: Option<DraftEngine>,
}

impl Default for SchedConfig {
    fn default() -> Self {
        SchedConfig {
            n_parallel: 1,
            n_ubatch: 512,
            slot_prompt_similarity: 0.1,
            cache_reuse: 0,
            cache_ram_mib: 0,
            context_shift: false,
            slot_save_path: None,
            swa_full: false,
            spec: SpecConfig::default(),
            draft: None,
        }
    }
}

#[derive(Debug, Clone)]
pub enum SlotAction {
    Save(String),
    Restore(String),
    Erase,
}

#[derive(Debug, Clone)]
pub struct SlotActionResult {
    pub id_slot: usize,
    pub filename: String,
    /// Tokens saved / restored / erased.
    pub n_tokens: usize,
    /// Bytes written or read.
    pub n_bytes: usize,
    pub ms: f64,
}

pub enum Cmd {
    Submit(Box<Request>),
    /// An encoder's inputs (embeddings, rerank pairs): `encode.rs`.
    Encode(Box<super::encode::EncodeJob>),
    Cancel(u64),
    Slot(usize, SlotAction, mpsc::Sender<Result<SlotActionResult>>),
}

/// A fault injected for tests (`Scheduler::inject`): how the loop's error paths are exercised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Every forward pass whose batch holds this request fails with a device error.
    DeviceError(u64),
    /// The next forward pass fails with a device error.
    DeviceErrorNext,
    /// The next step panics inside the forward pass.
    PanicInStep,
    /// The loop thread panics outside any step: it dies.
    KillLoop,
}

pub struct Shared {
    pub cmds: Mutex<VecDeque<Cmd>>,
    pub cv: Condvar,
    pub shutdown: AtomicBool,
    /// The loop thread died (a panic outside a step): every request is refused.
    pub dead: AtomicBool,
    pub snapshot: Mutex<Snapshot>,
    pub faults: Mutex<Vec<Fault>>,
}

impl Shared {
    pub fn new() -> Shared {
        Shared {
            cmds: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            dead: AtomicBool::new(false),
            snapshot: Mutex::new(Snapshot::default()),
            faults: Mutex::new(Vec::new()),
        }
    }

    /// Queue a command; refused once shutdown began or the loop died (checked under the
    /// queue lock, so a command is either drained by the loop or refused here, never lost).
    /// A refused request tells its sink nothing: the caller gets the error.
    pub fn push(&self, cmd: Cmd) -> Result<()> {
        let mut q = self.cmds.lock().unwrap_or_else(|e| e.into_inner());
        let refused = if self.dead.load(Ordering::Acquire) {
            Some(Error::Unavailable(DEAD.into()))
        } else if self.shutdown.load(Ordering::Acquire) {
            Some(Error::Unavailable("the engine is closed; create a new Engine".into()))
        } else {
            None
        };
        if let Some(e) = refused {
            if let Cmd::Submit(mut r) = cmd {
                r.silence();
            }
            return Err(e);
        }
        q.push_back(cmd);
        drop(q);
        self.cv.notify_one();
        Ok(())
    }

    /// Whether a fault is armed; `once` faults are disarmed when seen.
    pub fn fault(&self, f: impl Fn(&Fault) -> bool, once: bool) -> Option<Fault> {
        let mut v = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let i = v.iter().position(f)?;
        Some(if once { v.remove(i) } else { v[i].clone() })
    }
}

impl Default for Shared {
    fn default() -> Self {
        Shared::new()
    }
}

/// What a request gets when the loop thread is gone.
pub const DEAD: &str = "the engine loop stopped after an internal error; restart the server (or create a new Engine)";

impl Cmd {
    /// End the command with an error (shutdown, a dead loop).
    pub fn fail(self, e: Error) {
        match self {
            Cmd::Submit(mut r) => r.end(super::request::Event::Error(e)),
            Cmd::Encode(j) => j.fail(e),
            Cmd::Slot(_, _, tx) => {
                let _ = tx.send(Err(e));
            }
            Cmd::Cancel(_) => {}
        }
    }
}

