//! What a caller hands the scheduler and what it gets back: a request with its
//! parameters and an event sink (a channel per request, or a shared hub that one
//! asyncio dispatcher drains for many requests).
use super::decode::{GenParams, StopReason, Timings, TokenEvent, TokenProbs};
use crate::error::Error;
use std::collections::VecDeque;
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RequestParams {
    pub prompt: Vec<u32>,
    pub gen: GenParams,
    /// Reuse the longest common prefix a slot already holds (llama.cpp `cache_prompt`).
    pub cache_prompt: bool,
    /// Run in this slot (waits until it is free).
    pub id_slot: Option<usize>,
    /// Tokens of the prompt kept on context shift / truncation (-1 = the whole prompt).
    pub n_keep: i64,
    /// Tokens dropped per context shift (0 = half of what is not kept).
    pub n_discard: usize,
    /// Cut an over-long prompt (keeping n_keep tokens) instead of refusing it.
    pub truncate: bool,
    /// Report prompt processing after every chunk (the final report is always sent).
    pub return_progress: bool,
    /// Send no per-token events, only the final one (non-streamed callers).
    pub quiet: bool,
    /// LoRA scales the request asked for, by adapter id (llama-server's `lora`; adapters it
    /// does not list run at 0). None: the engine's global scales at submission.
    pub lora: Option<Vec<(usize, f32)>>,
    /// The scales it runs under, one per loaded adapter (None: none applies), fixed by the
    /// scheduler at submission.
    pub lora_scales: Option<std::sync::Arc<[f32]>>,
}

impl RequestParams {
    pub fn new(prompt: Vec<u32>, gen: GenParams) -> RequestParams {
        RequestParams { prompt, gen, cache_prompt: true, id_slot: None, n_keep: 0, n_discard: 0, truncate: false, return_progress: false, quiet: false, lora: None, lora_scales: None }
    }
}

/// The last event of a request.
#[derive(Debug, Clone)]
pub struct Final {
    pub stop_reason: StopReason,
    pub stopping_word: String,
    /// The context filled up (or the prompt was cut to fit).
    pub truncated: bool,
    pub text: String,
    pub tokens: Vec<u32>,
    /// The prompt as evaluated (after truncation, if any).
    pub prompt: Vec<u32>,
    pub tokens_cached: usize,
    pub tokens_evaluated: usize,
    pub timings: Timings,
    pub seed: u64,
    pub id_slot: usize,
    pub n_ctx: usize,
    /// (token, log-probability, top candidates) per token when n_probs > 0.
    pub probs: Vec<TokenProbs>,
}

/// Prompt processing so far (llama.cpp's `prompt_progress`).
#[derive(Debug, Clone)]
pub struct Progress {
    pub total: usize,
    pub cache: usize,
    pub processed: usize,
    pub time_ms: f64,
}

#[derive(Debug)]
pub enum Event {
    Token(TokenEvent),
    Progress(Progress),
    Done(Box<Final>),
    Error(Error),
}

/// Events of many requests in one queue: `wait` hands a batch to one consumer.
#[derive(Default)]
pub struct Hub {
    q: Mutex<VecDeque<(u64, Event)>>,
    cv: Condvar,
    closed: std::sync::atomic::AtomicBool,
}

impl Hub {
    pub fn push(&self, id: u64, ev: Event) {
        self.q.lock().unwrap_or_else(|e| e.into_inner()).push_back((id, ev));
        self.cv.notify_one();
    }

    /// Everything queued, waiting up to `timeout` for the first event.
    pub fn wait(&self, timeout: Duration) -> Vec<(u64, Event)> {
        let mut q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        if q.is_empty() && !self.closed.load(std::sync::atomic::Ordering::Acquire) {
            q = self.cv.wait_timeout(q, timeout).unwrap_or_else(|e| e.into_inner()).0;
        }
        q.drain(..).collect()
    }

    /// Wake a waiting consumer for good (shutdown).
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::Release);
        let _q = self.q.lock().unwrap_or_else(|e| e.into_inner());
        self.cv.notify_all();
    }
}

pub enum Sink {
    Channel(mpsc::Sender<Event>),
    Hub(Arc<Hub>),
}

impl Sink {
    /// Deliver; false when nobody is listening any more.
    pub fn send(&self, id: u64, ev: Event) -> bool {
        match self {
            Sink::Channel(tx) => tx.send(ev).is_ok(),
            Sink::Hub(h) => {
                h.push(id, ev);
                true
            }
        }
    }
}

/// A queued or running generation. Its last event (`Done` or `Error`) goes out through
/// `end`; a request dropped before that (a panic that unwound past it) ends with an
/// internal error instead of leaving its caller waiting.
pub struct Request {
    pub id: u64,
    pub params: RequestParams,
    pub sink: Sink,
    pub queued_at: std::time::Instant,
    /// The compiled grammar (compiled when submitted, so errors reach the caller).
    pub grammar: Option<crate::grammar::Grammar>,
    ended: bool,
}

impl Request {
    pub fn new(id: u64, params: RequestParams, sink: Sink, grammar: Option<crate::grammar::Grammar>) -> Request {
        Request { id, params, sink, queued_at: std::time::Instant::now(), grammar, ended: false }
    }

    /// A non-final event; false when nobody is listening any more.
    pub fn send(&self, ev: Event) -> bool {
        self.sink.send(self.id, ev)
    }

    /// The last event (`Done` or `Error`); later events are dropped.
    pub fn end(&mut self, ev: Event) {
        if !self.ended {
            self.ended = true;
            self.sink.send(self.id, ev);
        }
    }

    /// Drop without telling the caller (a submission refused synchronously).
    pub fn silence(&mut self) {
        self.ended = true;
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        if !self.ended {
            self.ended = true;
            let why = if std::thread::panicking() { "a panic while it was being processed" } else { "no final event" };
            self.sink.send(self.id, Event::Error(Error::Internal(format!("the engine dropped this request unfinished ({why})"))));
        }
    }
}
