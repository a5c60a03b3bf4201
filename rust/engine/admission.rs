//! Admission: queued requests move into free slots in arrival order; each prompt is fitted
//! to the slot (truncation), and what the slot, the RAM prompt cache or a sliding-window
//! checkpoint already holds is reused (`--cache-reuse` shifts matching chunks into place).
use super::decode::Decoder;
use super::request::Request;
use super::adapters::same_lora;
use super::slot::{choose, Task};
use super::state::LoopState;
use crate::error::Error;
use crate::kv_cache::persist;
use std::collections::VecDeque;
use std::time::Instant;

impl LoopState {
    /// Move queued requests into free slots, in arrival order. A request that cannot
    /// start (or whose preparation panics) ends with its error; the others go on.
    pub fn admit(&mut self, waiting: &mut VecDeque<Request>) {
        let mut i = 0;
        while i < waiting.len() {
            let want = waiting[i].params.id_slot;
            let si = match want {
                Some(s) if s < self.slots.len() => {
                    if self.slots[s].task.is_some() {
                        i += 1;
                        continue;
                    }
                    s
                }
                _ => match choose(&self.slots, &waiting[i].params.prompt, self.cfg.slot_prompt_similarity, &waiting[i].params.lora_scales) {
                    Some(s) => s,
                    None => break,
                },
            };
            let Some(req) = waiting.remove(i) else { break };
            // a panic here drops `req`, which tells its caller (Request's Drop); the slot's
            // cache may be half-restored, so it is cleared
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.prepare(si, req)));
            match r {
                Ok(Ok(task)) => {
                    self.clock += 1;
                    let s = &mut self.slots[si];
                    s.last_used = self.clock;
                    s.id_task_last = Some(task.req.id);
                    s.task = Some(task);
                }
                Ok(Err((req, e))) => self.refuse(req, e),
                Err(_) => self.slots[si].clear(),
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
        let lora = p.lora_scales.clone();
        if !same_lora(&self.slots[si].lora, &lora) {
            // rows computed under other LoRA scales: kept in the RAM cache, not reused here
            self.stash(si, 0);
            self.slots[si].clear();
        }
        self.slots[si].lora = lora.clone();
        let slot_cells = &self.slots[si].cells;
        let mut reuse = if cache_prompt { slot_cells.reusable_prefix(&prompt) } else { 0 };
        // The RAM cache may hold a longer prefix than the slot does.
        if cache_prompt && self.ram.enabled() {
            if let Some((idx, _)) = self.ram.best(&prompt, reuse, &lora) {
                self.stash(si, reuse);
                let entry = self.ram.take(idx);
                let s = &mut self.slots[si];
                s.checkpoints.clear();
                let n_lora = self.engine.model.adapters.len();
                let restored = persist::restore(&mut self.kv, &mut s.cells, si, self.fingerprint, &entry.bytes, "prompt cache", self.engine.model.config.n_vocab, n_lora);
                if restored.and_then(|_| self.kv.to_device(false)).is_err() {
                    s.clear();
                }
                s.lora = lora.clone();
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
            draft: Vec::new(),
            drafts: Default::default(),
            drafter: Default::default(),
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
        let s = &self.slots[si];
        let bytes = persist::save(&self.kv, &s.cells, si, self.fingerprint, s.lora.as_deref());
        self.ram.put(s.cells.tokens.clone(), bytes, s.lora.clone());
    }
}
