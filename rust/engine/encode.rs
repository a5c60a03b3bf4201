//! Encoder work in the engine loop: the inputs of embedding and rerank requests queue
//! here (`Cmd::Encode`), and each loop iteration packs the next inputs of every waiting
//! request, in arrival order, into one forward pass of up to `n_batch` tokens (a sequence
//! is never split: bidirectional attention needs all of it). An encoder keeps no KV
//! cache, so its inputs need no slot. Each input's bits are those of its lone run: rows
//! of a batch are independent.
use super::Engine;
use crate::error::{Error, Result};
use crate::model::{LogitRows, Span, State};
use std::collections::VecDeque;
use std::sync::mpsc;

/// One request's inputs and where its results go.
pub struct EncodeJob {
    pub id: u64,
    pub seqs: Vec<Vec<u32>>,
    /// Return the classifier's outputs (rerank) instead of the hidden states.
    pub classify: bool,
    pub reply: mpsc::Sender<Result<Vec<Vec<f32>>>>,
    /// Results so far, in input order; `next` inputs are done or in the current batch.
    out: Vec<Vec<f32>>,
    next: usize,
}

impl EncodeJob {
    pub fn new(id: u64, seqs: Vec<Vec<u32>>, classify: bool, reply: mpsc::Sender<Result<Vec<Vec<f32>>>>) -> EncodeJob {
        EncodeJob { id, out: Vec::with_capacity(seqs.len()), seqs, classify, reply, next: 0 }
    }

    pub fn fail(self, e: Error) {
        let _ = self.reply.send(Err(e));
    }
}

/// The queued jobs and the activations of their forward passes.
#[derive(Default)]
pub struct Encodes {
    jobs: VecDeque<EncodeJob>,
    state: State,
    session: Option<super::Session>,
}

impl Encodes {
    pub fn push(&mut self, j: EncodeJob) {
        self.jobs.push_back(j);
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// Drop a request's job (its caller gets `Cancelled`); false if it is not here.
    pub fn cancel(&mut self, id: u64) -> bool {
        match self.jobs.iter().position(|j| j.id == id) {
            Some(i) => {
                if let Some(j) = self.jobs.remove(i) {
                    j.fail(Error::Cancelled);
                }
                true
            }
            None => false,
        }
    }

    pub fn fail_all(&mut self, e: impl Fn() -> Error) {
        for j in self.jobs.drain(..) {
            j.fail(e());
        }
        self.session = None;
    }

    /// One forward pass over the next inputs; finished jobs get their results. An error
    /// fails the jobs that had inputs in the batch (the others stay queued).
    pub fn step(&mut self, engine: &Engine) {
        if let Err((e, ids)) = self.run(engine) {
            self.session = None;
            self.state = State::default();
            let (failed, kept): (Vec<EncodeJob>, Vec<EncodeJob>) = self.jobs.drain(..).partition(|j| ids.contains(&j.id));
            self.jobs = kept.into();
            for j in failed {
                j.fail(e.again());
            }
        }
    }

    fn run(&mut self, engine: &Engine) -> std::result::Result<(), (Error, Vec<u64>)> {
        let cap = engine.config.n_batch.max(1);
        // (job index, input index) of the batch's sequences, in order
        let (mut toks, mut spans, mut members) = (Vec::new(), Vec::new(), Vec::new());
        'fill: for (ji, j) in self.jobs.iter_mut().enumerate() {
            while j.next < j.seqs.len() {
                let s = &j.seqs[j.next];
                if !toks.is_empty() && toks.len() + s.len() > cap {
                    break 'fill;
                }
                spans.push(Span { slot: 0, pos0: 0, n: s.len(), logits: LogitRows::All, ring_lo: 0, prompt_end: s.len(), ubatch: cap.max(s.len()) });
                toks.extend_from_slice(s);
                members.push((ji, j.next));
                j.next += 1;
            }
        }
        if toks.is_empty() {
            // jobs with no inputs left (an empty request) end here
            self.reply_done();
            return Ok(());
        }
        let ids: Vec<u64> = members.iter().map(|&(ji, _)| self.jobs[ji].id).collect();
        let longest = spans.iter().map(|s| s.n).max().unwrap_or(1);
        if self.session.as_ref().is_none_or(|s| s.kv.slot_ctx < longest) {
            self.session = Some(engine.session_of(engine.config.n_ctx.max(longest)).map_err(|e| (e, ids.clone()))?);
        }
        let Some(sess) = self.session.as_mut() else { return Ok(()) };
        let e = engine.model.config.n_embd;
        let h = engine.model.forward_hidden(&engine.pool, &mut self.state, &mut sess.kv, &toks, &spans).map_err(|x| (x, ids.clone()))?;
        let mut at = 0;
        for (&(ji, _), sp) in members.iter().zip(&spans) {
            let rows = &h[at * e..(at + sp.n) * e];
            at += sp.n;
            let j = &mut self.jobs[ji];
            let v = if j.classify { engine.model.classify(&engine.pool, rows).map_err(|x| (x, ids.clone()))? } else { rows.to_vec() };
            j.out.push(v);
        }
        self.reply_done();
        Ok(())
    }

    /// Send the results of every job whose inputs are all done.
    fn reply_done(&mut self) {
        let (done, open): (Vec<EncodeJob>, Vec<EncodeJob>) = self.jobs.drain(..).partition(|j| j.out.len() == j.seqs.len());
        self.jobs = open.into();
        for j in done {
            let _ = j.reply.send(Ok(j.out));
        }
    }
}
