//! Execution: one forward pass over a planned batch. If the pass fails (an error or a
//! caught panic), each sequence is run again alone, so a failure that belongs to one
//! request fails that request only; the others get the same logits they would have had
//! (a token's arithmetic depends only on its own sequence: `model/orders.rs`). K/V rows
//! are written by position, so re-running a span rewrites the same rows.
use super::planner::Batch;
use super::queue::{Fault, Shared};
use super::Engine;
use crate::error::{Error, Result};
use crate::kv_cache::KvStore;
use crate::model::{LogitRows, State};

/// Logits of a step: the batch's rows in span order, or per span when it had to be split.
pub enum Logits<'a> {
    /// The rows of the spans that asked for logits (one, or every token's), in span order.
    Batch(&'a [f32]),
    /// Per span: its logits row (if it asked for one), or its error.
    PerSpan(Vec<Result<Vec<f32>>>),
}

impl Logits<'_> {
    /// Span `i`'s outcome: Ok(Some(rows)) when it has logits (`rows` of them), Ok(None) when
    /// it asked for none, Err when it failed. `row` counts the earlier spans' rows.
    pub fn span(&self, i: usize, row: usize, rows: usize, n_vocab: usize) -> std::result::Result<Option<&[f32]>, &Error> {
        match self {
            Logits::Batch(_) if rows == 0 => Ok(None),
            Logits::Batch(l) => Ok(l.get(row * n_vocab..(row + rows) * n_vocab)),
            Logits::PerSpan(v) => match &v[i] {
                Ok(l) if l.is_empty() => Ok(None),
                Ok(l) => Ok(Some(&l[..])),
                Err(e) => Err(e),
            },
        }
    }
}

/// Run `batch`; `ids[i]` is the request of span `i` (for injected faults).
pub fn execute<'s>(engine: &Engine, st: &'s mut State, kv: &mut KvStore, batch: &Batch, ids: &[u64], shared: &Shared) -> Logits<'s> {
    let whole = forward(engine, st, kv, &batch.tokens, &batch.spans, ids, shared);
    if whole.is_ok() || batch.spans.len() == 1 {
        return match whole {
            Ok(n) => Logits::Batch(&st.logits[..n]),
            Err(e) => Logits::PerSpan(vec![Err(e)]),
        };
    }
    let out = (0..batch.spans.len())
        .map(|i| {
            let sp = &batch.spans[i..i + 1];
            forward(engine, st, kv, batch.span_tokens(i), sp, &ids[i..i + 1], shared).map(|n| {
                if sp[0].logits == LogitRows::None {
                    Vec::new()
                } else {
                    st.logits[..n].to_vec()
                }
            })
        })
        .collect();
    Logits::PerSpan(out)
}

/// One forward pass, its logits left in `st.logits[..n]` ([rows, n_vocab]; returns n); a
/// panic in it (or in the thread pool's tasks) becomes an `Internal` error.
fn forward(engine: &Engine, st: &mut State, kv: &mut KvStore, tokens: &[u32], spans: &[crate::model::Span], ids: &[u64], shared: &Shared) -> Result<usize> {
    if let Some(Fault::DeviceError(id)) = shared.fault(|f| matches!(f, Fault::DeviceError(id) if ids.contains(id)), false) {
        return Err(Error::Gpu(format!("injected device failure (request {id})")));
    }
    if shared.fault(|f| *f == Fault::DeviceErrorNext, true).is_some() {
        return Err(Error::Gpu("injected device failure".into()));
    }
    let panic = shared.fault(|f| *f == Fault::PanicInStep, true).is_some();
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if panic {
            panic!("injected panic in a forward pass");
        }
        Ok(engine.model.forward(&engine.pool, st, kv, tokens, spans)?.len())
    }));
    r.unwrap_or_else(|p| {
        // the activations may be half-sized: start them afresh
        *st = State::default();
        Err(Error::from_panic(p, "a forward pass"))
    })
}
