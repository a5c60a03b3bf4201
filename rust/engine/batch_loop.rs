//! The engine loop, on its own thread. One iteration: take commands → admit queued
//! requests into free slots (`admission.rs`) → plan one batch (`planner.rs`) → one
//! forward pass (`execute.rs`) → commit: sample each sequence, emit events (`commit.rs`)
//! → publish a snapshot, then send the last events of the requests that ended. With
//! nothing to do it sleeps on a condition variable.
//!
//! A panic inside a step fails that step's requests and the loop goes on; if the thread
//! itself ever unwinds, `Drop` marks the loop dead and fails every request it holds or
//! that is queued, so nobody waits for a loop that is gone.
use super::encode::Encodes;
use super::execute::{execute, Logits};
use super::planner::{Batch, DecodeFirst, Planner};
use super::queue::{Cmd, Fault, SchedConfig, Shared, DEAD};
use super::request::{Event, Request};
use super::state::LoopState;
use super::Engine;
use crate::error::{Error, Result};
use crate::model::State;
use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub struct Loop {
    st: LoopState,
    waiting: VecDeque<Request>,
    /// Commands taken from the queue and not yet handled (here, not on the stack, so a
    /// loop that dies fails them as it fails everything else).
    inbox: VecDeque<Cmd>,
    shared: Arc<Shared>,
    planner: Box<dyn Planner + Send>,
    /// Activations of the forward pass.
    exec: State,
    batch: Batch,
    /// Encoder inputs waiting for a forward pass.
    encodes: Encodes,
}

impl Loop {
    pub fn new(engine: Arc<Engine>, cfg: SchedConfig, n_ctx_slot: usize, shared: Arc<Shared>) -> Result<Loop> {
        let planner = Box::new(DecodeFirst { ubatch: cfg.n_ubatch });
        let st = LoopState::new(engine, cfg, n_ctx_slot)?;
        Ok(Loop { st, waiting: VecDeque::new(), inbox: VecDeque::new(), shared, planner, exec: State::default(), batch: Batch::default(), encodes: Encodes::default() })
    }

    pub fn run(mut self) {
        loop {
            // drain and read the shutdown flag under one lock: the flag is set under it too,
            // so every command pushed before shutdown is seen here
            let stop = {
                let mut q = self.shared.cmds.lock().unwrap_or_else(|e| e.into_inner());
                while q.is_empty() && !self.st.busy() && self.waiting.is_empty() && self.encodes.is_empty() && !self.shared.shutdown.load(Ordering::Acquire) {
                    q = self.shared.cv.wait(q).unwrap_or_else(|e| e.into_inner());
                }
                self.inbox.extend(q.drain(..));
                self.shared.shutdown.load(Ordering::Acquire)
            };
            if stop {
                for c in self.inbox.drain(..) {
                    c.fail(Error::Cancelled);
                }
                self.shutdown();
                return;
            }
            if self.shared.fault(|f| *f == Fault::KillLoop, true).is_some() {
                panic!("injected: the engine loop dies");
            }
            while let Some(cmd) = self.inbox.pop_front() {
                self.command(cmd);
            }
            self.st.admit(&mut self.waiting);
            self.flush();
            self.step();
            self.encode_step();
            self.flush();
        }
    }

    /// One forward pass of queued encoder inputs; a panic in it fails the jobs queued then
    /// (their callers get the error) and the loop goes on.
    fn encode_step(&mut self) {
        if self.encodes.is_empty() {
            return;
        }
        let engine = self.st.engine.clone();
        if catch_unwind(AssertUnwindSafe(|| self.encodes.step(&engine))).is_err() {
            self.encodes.fail_all(|| Error::Internal("an encoder step failed (a panic inside it)".into()));
        }
    }

    /// Publish the snapshot, then send the last events of the requests that ended (so a
    /// reader woken by one sees its slot already free).
    fn flush(&mut self) {
        self.publish();
        for (mut r, ev) in self.st.ended.drain(..) {
            r.end(ev);
        }
    }

    fn shutdown(&mut self) {
        self.encodes.fail_all(|| Error::Cancelled);
        for mut r in self.waiting.drain(..) {
            r.end(Event::Error(Error::Cancelled));
        }
        for si in 0..self.st.slots.len() {
            self.st.release(si, Some(Error::Cancelled));
        }
        self.flush();
    }

    fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Submit(r) => {
                self.st.metrics.n_requests_total += 1;
                self.waiting.push_back(*r);
            }
            Cmd::Encode(j) => {
                self.st.metrics.n_requests_total += 1;
                self.encodes.push(*j);
            }
            Cmd::Cancel(id) => {
                self.encodes.cancel(id);
                if let Some(i) = self.waiting.iter().position(|r| r.id == id) {
                    if let Some(mut r) = self.waiting.remove(i) {
                        r.end(Event::Error(Error::Cancelled));
                    }
                }
                if let Some(si) = self.st.slots.iter().position(|s| s.task.as_ref().is_some_and(|t| t.req.id == id)) {
                    self.st.release(si, Some(Error::Cancelled));
                }
            }
            Cmd::Slot(id, action, tx) => {
                let r = catch_unwind(AssertUnwindSafe(|| self.st.slot_action(id, action))).unwrap_or_else(|p| {
                    if let Some(s) = self.st.slots.get_mut(id) {
                        s.clear();
                    }
                    Err(Error::from_panic(p, "the slot action"))
                });
                // the caller may read slots() right after the reply
                self.publish();
                let _ = tx.send(r);
            }
        }
    }

    /// Plan and run one batch, and commit its results. A panic anywhere in it fails the
    /// requests of the batch (their caches are cleared); the loop goes on.
    fn step(&mut self) {
        let mut batch = std::mem::take(&mut self.batch);
        batch.clear();
        let r = catch_unwind(AssertUnwindSafe(|| {
            self.st.fit_decodes();
            self.st.make_drafts();
            let views = self.st.views();
            self.planner.plan(&views, self.st.cfg.n_ubatch, &mut batch);
            if batch.is_empty() {
                return;
            }
            let ids: Vec<u64> = batch.spans.iter().map(|sp| self.st.slots[sp.slot].task.as_ref().map_or(0, |t| t.req.id)).collect();
            let engine = self.st.engine.clone();
            // each sequence's LoRA scales (the ones its slot's rows are computed under)
            self.exec.lora.clear();
            self.exec.lora.extend(self.st.slots.iter().map(|s| s.lora.clone()));
            let logits: Logits<'_> = execute(&engine, &mut self.exec, &mut self.st.kv, &batch, &ids, &self.shared);
            self.st.commit(&batch, &logits);
        }));
        if let Err(p) = r {
            let e = Error::from_panic(p, "an engine step");
            self.st.fail_step(&batch, &e);
            self.exec = State::default();
        }
        self.batch = batch;
    }

    pub fn publish(&self) {
        let snap = self.st.snapshot(self.waiting.len());
        *self.shared.snapshot.lock().unwrap_or_else(|e| e.into_inner()) = snap;
    }
}

impl Drop for Loop {
    /// The thread unwinds (a panic no step caught): mark the loop dead and fail everything
    /// it holds or that is queued with `Unavailable`.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let cmds: Vec<Cmd> = {
            let mut q = self.shared.cmds.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.dead.store(true, Ordering::Release);
            self.inbox.drain(..).chain(q.drain(..)).collect()
        };
        let dead = || Error::Unavailable(DEAD.into());
        for c in cmds {
            c.fail(dead());
        }
        for mut r in self.waiting.drain(..) {
            r.end(Event::Error(dead()));
        }
        self.encodes.fail_all(dead);
        for s in &mut self.st.slots {
            if let Some(mut t) = s.task.take() {
                t.req.end(Event::Error(dead()));
            }
        }
        for (mut r, ev) in self.st.ended.drain(..) {
            r.end(ev);
        }
    }
}
