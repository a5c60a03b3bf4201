//! What a queued generation looks like from Python: the `Request` handle (events over
//! a channel), the asyncio `Hub`, event and result conversion, and the sampling dict.
use super::errors::to_py;
use crate::engine::{Event, Final, Hub, Scheduler};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3::IntoPyObjectExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

type TokenTuple = (Option<u32>, String, Option<f32>, Vec<(u32, f32)>);

fn final_dict<'py>(py: Python<'py>, f: &Final) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("stop_reason", f.stop_reason.as_str())?;
    d.set_item("stopping_word", &f.stopping_word)?;
    d.set_item("truncated", f.truncated)?;
    d.set_item("text", &f.text)?;
    d.set_item("tokens", &f.tokens)?;
    d.set_item("prompt_tokens", &f.prompt)?;
    d.set_item("tokens_cached", f.tokens_cached)?;
    d.set_item("tokens_evaluated", f.tokens_evaluated)?;
    d.set_item("seed", f.seed)?;
    d.set_item("id_slot", f.id_slot)?;
    d.set_item("n_ctx", f.n_ctx)?;
    let probs = PyList::empty(py);
    for (id, lp, top) in &f.probs {
        let p = PyDict::new(py);
        p.set_item("id", id)?;
        p.set_item("logprob", lp)?;
        let tl = PyList::empty(py);
        for (i, l) in top {
            let t = PyDict::new(py);
            t.set_item("id", i)?;
            t.set_item("logprob", l)?;
            tl.append(t)?;
        }
        p.set_item("top_logprobs", tl)?;
        probs.append(p)?;
    }
    d.set_item("probs", probs)?;
    let t = PyDict::new(py);
    t.set_item("prompt_n", f.timings.prompt_n)?;
    t.set_item("prompt_ms", f.timings.prompt_ms)?;
    t.set_item("predicted_n", f.timings.predicted_n)?;
    t.set_item("predicted_ms", f.timings.predicted_ms)?;
    t.set_item("draft_n", f.timings.draft_n)?;
    t.set_item("draft_n_accepted", f.timings.draft_n_accepted)?;
    d.set_item("timings", t)?;
    Ok(d)
}

/// One event as ("token", (id, text, logprob, top)) | ("done", dict) | ("error", exception).
fn event_to_py(py: Python<'_>, ev: Event) -> PyResult<(&'static str, Py<PyAny>)> {
    Ok(match ev {
        Event::Token(t) => {
            let tup: TokenTuple = (t.token, t.text, t.logprob, t.top);
            ("token", tup.into_py_any(py)?)
        }
        Event::Done(f) => ("done", final_dict(py, &f)?.into_any().unbind()),
        Event::Progress(p) => {
            let d = PyDict::new(py);
            d.set_item("total", p.total)?;
            d.set_item("cache", p.cache)?;
            d.set_item("processed", p.processed)?;
            d.set_item("time_ms", p.time_ms)?;
            ("progress", d.into_any().unbind())
        }
        Event::Error(e) => ("error", to_py(e).into_value(py).into_any()),
    })
}

/// A queued generation seen from Python: `next()` blocks (without the GIL) for the next
/// event. Dropping it before the end cancels the generation.
#[pyclass(module = "llamars._core", name = "Request")]
pub struct PyRequest {
    #[pyo3(get)]
    pub(super) id: u64,
    pub(super) rx: Mutex<mpsc::Receiver<Event>>,
    pub(super) sched: Arc<Scheduler>,
    pub(super) finished: AtomicBool,
}

#[pymethods]
impl PyRequest {
    /// The next event, ("token", ...) / ("done", dict), or None after "done".
    /// Errors are raised. Ctrl-C while waiting cancels the request.
    fn next(&self, py: Python<'_>) -> PyResult<Option<(&'static str, Py<PyAny>)>> {
        if self.finished.load(Ordering::Acquire) {
            return Ok(None);
        }
        loop {
            let got = py.detach(|| {
                let rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
                rx.recv_timeout(Duration::from_millis(50))
            });
            match got {
                Ok(ev) => {
                    let done = matches!(ev, Event::Done(_) | Event::Error(_));
                    if done {
                        self.finished.store(true, Ordering::Release);
                    }
                    let (kind, obj) = event_to_py(py, ev)?;
                    if kind == "error" {
                        return Err(PyErr::from_value(obj.into_bound(py)));
                    }
                    return Ok(Some((kind, obj)));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Err(e) = py.check_signals() {
                        self.cancel();
                        return Err(e);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    self.finished.store(true, Ordering::Release);
                    let e = if self.sched.is_dead() { crate::Error::Unavailable(crate::engine::queue::DEAD.into()) } else { crate::Error::Cancelled };
                    return Err(to_py(e));
                }
            }
        }
    }

    /// Stop generating; the slot is freed within one loop iteration.
    fn cancel(&self) {
        if !self.finished.swap(true, Ordering::AcqRel) {
            self.sched.cancel(self.id);
        }
    }
}

impl Drop for PyRequest {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// Events of many requests in one queue, drained by a single asyncio dispatcher thread.
#[pyclass(frozen, module = "llamars._core", name = "Hub")]
pub struct PyHub {
    pub(super) inner: Arc<Hub>,
}

#[pymethods]
impl PyHub {
    #[new]
    fn new() -> Self {
        PyHub { inner: Arc::new(Hub::default()) }
    }

    /// Everything queued as [(id, kind, payload)], waiting up to `timeout` seconds.
    fn wait(&self, py: Python<'_>, timeout: f64) -> PyResult<Vec<(u64, &'static str, Py<PyAny>)>> {
        let h = self.inner.clone();
        let evs = py.detach(move || h.wait(Duration::from_secs_f64(timeout.clamp(0.0, 3600.0))));
        evs.into_iter()
            .map(|(id, ev)| {
                let (k, o) = event_to_py(py, ev)?;
                Ok((id, k, o))
            })
            .collect()
    }

    /// Wake the waiting dispatcher for good.
    fn close(&self) {
        self.inner.close();
    }
}
