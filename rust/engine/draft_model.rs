//! Speculative decoding with a draft model (llama.cpp's `draft-simple`, `-md`): a second,
//! smaller model with a compatible vocabulary, with its own KV cache (one sequence per
//! slot), proposes the next tokens greedily. Before a step, each generating sequence that
//! wants a draft brings the draft's cache up to its prompt and output (what the draft
//! holds from earlier steps is kept as far as it agrees), then the draft model decodes
//! one token at a time for all of them together while its top token is likely enough
//! (`speculative.p_min`, the probability among its 10 best as llama.cpp's draft sampler
//! measures it). The target verifies as for every draft source (`speculative.rs`), so the
//! output never depends on the draft; rejected tokens are cut from the draft's cache the
//! next time it is brought up to the sequence.
use super::Engine;
use crate::cpu::ThreadPool;
use crate::error::Result;
use crate::kv_cache::{KvStore, SeqCells};
use crate::model::{LogitRows, Span, State};
use std::sync::Arc;

/// Token ids below this may differ between the two vocabularies (llama.cpp's
/// `SPEC_VOCAB_CHECK_START_TOKEN_ID`), and how much their sizes may differ.
const VOCAB_CHECK_FROM: usize = 5;
const VOCAB_MAX_DIFF: usize = 128;
/// The draft's top token's probability is taken among its best 10 (`LLAMA_DRAFT_TOP_K`).
const DRAFT_TOP_K: usize = 10;

/// Why `draft` cannot draft for `target`, as llama.cpp's `common_speculative_are_compatible`
/// decides it (same tokenizer kind, BOS and EOS use, sizes within 128, the same token
/// texts from id 5 on).
pub fn check_compatible(target: &Engine, draft: &Engine) -> std::result::Result<(), String> {
    let (t, d) = (&target.tokenizer.vocab, &draft.tokenizer.vocab);
    if t.kind != d.kind {
        return Err(format!("the draft model's tokenizer is {:?}, the target's {:?}", d.kind, t.kind));
    }
    let id = |t: Option<u32>| t.map_or("none".to_string(), |t| t.to_string());
    if t.add_bos != d.add_bos || (t.add_bos && t.bos != d.bos) {
        return Err(format!("the BOS tokens differ (target: added {}, id {}; draft: added {}, id {})", t.add_bos, id(t.bos), d.add_bos, id(d.bos)));
    }
    if t.add_eos != d.add_eos || (t.add_eos && t.eos != d.eos) {
        return Err(format!("the EOS tokens differ (target: added {}, id {}; draft: added {}, id {})", t.add_eos, id(t.eos), d.add_eos, id(d.eos)));
    }
    let (nt, nd) = (t.n_tokens(), d.n_tokens());
    if nt.abs_diff(nd) > VOCAB_MAX_DIFF {
        return Err(format!("the vocabularies have {nt} and {nd} tokens (at most {VOCAB_MAX_DIFF} apart)"));
    }
    for i in VOCAB_CHECK_FROM..nt.min(nd) {
        if t.texts[i] != d.texts[i] {
            return Err(format!(
                "token {i} is {:?} in the target's vocabulary and {:?} in the draft's",
                String::from_utf8_lossy(&t.texts[i]),
                String::from_utf8_lossy(&d.texts[i])
            ));
        }
    }
    Ok(())
}

/// One sequence's request for a draft: its slot, the sequence (prompt then output, the
/// sampled token last), and its limits.
pub struct DraftAsk<'a> {
    pub slot: usize,
    pub history: &'a [u32],
    pub max: usize,
    pub p_min: f32,
}

/// The draft model, its cache and activations.
pub struct DraftModel {
    pub engine: Arc<Engine>,
    kv: KvStore,
    state: State,
    cells: Vec<SeqCells>,
    n_ubatch: usize,
    /// The target's vocabulary size: drafted ids at or past it are not proposed.
    n_vocab_target: usize,
}

impl DraftModel {
    pub fn new(engine: Arc<Engine>, n_parallel: usize, n_ctx_slot: usize, n_ubatch: usize, n_vocab_target: usize) -> Result<DraftModel> {
        let m = &engine.model;
        let c = &m.config;
        let caps = m.kv_caps(n_ctx_slot, n_ubatch, false);
        let kv = KvStore::new(n_parallel, n_ctx_slot, &caps, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim)?;
        let ring = m.kv_ring(&kv);
        let cells = (0..n_parallel).map(|_| SeqCells::new(ring)).collect();
        Ok(DraftModel { engine, kv, state: State::default(), cells, n_ubatch: n_ubatch.max(1), n_vocab_target })
    }

    /// Drafts for `asks` (empty where the draft model has none), computed on `pool` (the
    /// target's: the two models never run at once). A failure of the draft model (an
    /// error or a panic) gives no drafts and forgets what its cache held.
    pub fn draft(&mut self, pool: &ThreadPool, asks: &[DraftAsk<'_>]) -> Vec<Vec<u32>> {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.draft_inner(pool, asks)));
        match r {
            Ok(Ok(d)) => d,
            _ => {
                for a in asks {
                    self.cells[a.slot].clear();
                }
                self.state = State::default();
                asks.iter().map(|_| Vec::new()).collect()
            }
        }
    }

    fn draft_inner(&mut self, pool: &ThreadPool, asks: &[DraftAsk<'_>]) -> Result<Vec<Vec<u32>>> {
        let n_ctx = self.kv.slot_ctx;
        let n_vocab = self.engine.model.config.n_vocab;
        let mut out: Vec<Vec<u32>> = asks.iter().map(|_| Vec::new()).collect();
        // bring each cache up to its sequence: the tokens still to evaluate, from `keep` on
        let mut todo: Vec<(usize, usize)> = Vec::new(); // (ask, next position to evaluate)
        for (i, a) in asks.iter().enumerate() {
            let h = a.history;
            if a.max == 0 || h.is_empty() || h.len() + a.max > n_ctx || h.iter().any(|&t| t as usize >= n_vocab) || a.slot >= self.cells.len() {
                continue;
            }
            let cells = &mut self.cells[a.slot];
            let mut keep = cells.common_prefix(h).min(h.len() - 1);
            if !cells.can_resume_at(keep) {
                keep = 0;
            }
            cells.truncate(keep);
            todo.push((i, keep));
        }
        // catch up in passes of at most n_ubatch tokens; the pass that reaches a sequence's
        // end gives its logits row
        let mut rows: Vec<(usize, Vec<f32>)> = Vec::new();
        while !todo.is_empty() {
            let mut tokens = Vec::new();
            let mut spans = Vec::new();
            let mut in_pass = Vec::new();
            let mut budget = self.n_ubatch;
            for (k, &(i, from)) in todo.iter().enumerate() {
                if budget == 0 {
                    break;
                }
                let a = &asks[i];
                let n = (a.history.len() - from).min(budget);
                let last = from + n == a.history.len();
                let cells = &self.cells[a.slot];
                spans.push(Span {
                    slot: a.slot,
                    pos0: from,
                    n,
                    logits: if last { LogitRows::Last } else { LogitRows::None },
                    ring_lo: cells.ring_lo,
                    prompt_end: from + n,
                    ubatch: self.n_ubatch,
                });
                tokens.extend_from_slice(&a.history[from..from + n]);
                in_pass.push((k, n, last));
                budget -= n;
            }
            let logits = self.engine.model.forward(pool, &mut self.state, &mut self.kv, &tokens, &spans)?;
            let mut row = 0;
            let mut done = Vec::new();
            for (sp, &(k, n, last)) in spans.iter().zip(&in_pass) {
                let (i, from) = todo[k];
                self.cells[sp.slot].push(&asks[i].history[from..from + n]);
                todo[k].1 += n;
                if last {
                    rows.push((i, logits[row * n_vocab..(row + 1) * n_vocab].to_vec()));
                    row += 1;
                    done.push(k);
                }
            }
            for k in done.into_iter().rev() {
                todo.remove(k);
            }
        }
        // decode greedily, all sequences together, while the drafts are likely enough
        let mut live: Vec<(usize, Vec<f32>)> = rows;
        while !live.is_empty() {
            let mut next = Vec::new();
            for (i, l) in live {
                let Some((t, p)) = top_token(&l) else { continue };
                if p < asks[i].p_min || t as usize >= self.n_vocab_target {
                    continue;
                }
                out[i].push(t);
                if out[i].len() < asks[i].max {
                    next.push(i);
                }
            }
            if next.is_empty() {
                break;
            }
            let tokens: Vec<u32> = next.iter().map(|&i| *out[i].last().unwrap_or(&0)).collect();
            let spans: Vec<Span> = next
                .iter()
                .map(|&i| {
                    let c = &self.cells[asks[i].slot];
                    Span { slot: asks[i].slot, pos0: c.n_past(), n: 1, logits: LogitRows::Last, ring_lo: c.ring_lo, prompt_end: 0, ubatch: 0 }
                })
                .collect();
            let logits = self.engine.model.forward(pool, &mut self.state, &mut self.kv, &tokens, &spans)?;
            live = next.iter().enumerate().map(|(r, &i)| (i, logits[r * n_vocab..(r + 1) * n_vocab].to_vec())).collect();
            for (&i, &t) in next.iter().zip(&tokens) {
                self.cells[asks[i].slot].push(&[t]);
            }
        }
        Ok(out)
    }

}

/// A loaded draft model as the scheduler's configuration carries it.
#[derive(Clone)]
pub struct DraftEngine(pub Arc<Engine>);

impl std::fmt::Debug for DraftEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DraftEngine({})", self.0.model.gguf.path().display())
    }
}

/// The most likely token and its probability among the `DRAFT_TOP_K` best (the first of
/// equal logits); none for a row with NaN or +inf.
fn top_token(l: &[f32]) -> Option<(u32, f32)> {
    let mut best: Vec<(f32, u32)> = Vec::with_capacity(DRAFT_TOP_K + 1);
    for (t, &x) in l.iter().enumerate() {
        if !x.is_finite() && x != f32::NEG_INFINITY {
            return None;
        }
        if best.len() < DRAFT_TOP_K || x > best[best.len() - 1].0 {
            let at = best.partition_point(|&(y, _)| y >= x);
            best.insert(at, (x, t as u32));
            best.truncate(DRAFT_TOP_K);
        }
    }
    let &(top, tok) = best.first()?;
    if top == f32::NEG_INFINITY {
        return None;
    }
    let sum: f32 = best.iter().map(|&(x, _)| (x - top).exp()).sum();
    Some((tok, 1.0 / sum))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_token_probability_is_among_the_ten_best() {
        let mut l = vec![0.0f32; 50];
        l[7] = 3.0;
        l[9] = 3.0;
        let (t, p) = top_token(&l).unwrap();
        assert_eq!(t, 7, "the first of equal logits");
        // two at e^3, eight at e^0 among the ten best
        let want = 3f32.exp() / (2.0 * 3f32.exp() + 8.0);
        assert!((p - want).abs() < 1e-6, "{p} {want}");
        let mut l = vec![f32::NEG_INFINITY; 20];
        l[3] = 1.0;
        assert_eq!(top_token(&l), Some((3, 1.0)));
        l[4] = f32::NAN;
        assert_eq!(top_token(&l), None, "a broken row drafts nothing");
        assert_eq!(top_token(&[f32::NEG_INFINITY; 4]), None);
    }
}
