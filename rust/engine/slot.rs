//! A slot: one sequence's share of the KV cache, what it holds, and the request
//! running in it. Slot choice follows llama-server: the free slot whose cached prompt
//! is most similar to the new one (above a threshold), else the least recently used.
use super::decode::Decoder;
use super::request::Request;
use super::speculative::{DraftStats, Drafter};
use super::adapters::same_lora;
use crate::kv_cache::{Checkpoint, SeqCells};
use std::sync::Arc;
use std::time::Instant;

pub struct Task {
    pub req: Request,
    /// The prompt as it will be evaluated (after truncation).
    pub prompt: Vec<u32>,
    pub dec: Decoder,
    /// Token sampled but not yet evaluated.
    pub pending: Option<u32>,
    pub n_prompt: usize,
    pub tokens_cached: usize,
    pub prompt_truncated: bool,
    pub started: Instant,
    /// When the prompt's logits came back (first token sampled).
    pub prompt_done: Option<Instant>,
    pub n_keep: usize,
    /// Drafted tokens to verify after `pending` in the next forward pass (speculative decoding).
    pub draft: Vec<u32>,
    pub drafts: DraftStats,
    /// The draft sources' state for this sequence.
    pub drafter: Drafter,
}

impl Task {
    /// Prompt tokens still to evaluate, given what the slot holds.
    pub fn prompt_left(&self, cells: &SeqCells) -> usize {
        self.prompt.len().saturating_sub(cells.n_past())
    }
}

pub struct Slot {
    pub id: usize,
    pub cells: SeqCells,
    pub task: Option<Task>,
    /// Monotonic use counter for least-recently-used choice.
    pub last_used: u64,
    /// Counters over the slot's life.
    pub n_decoded_last: usize,
    pub id_task_last: Option<u64>,
    /// The last task ended without reaching a stop (cancelled or failed).
    pub ended_early: bool,
    /// Sliding-window checkpoints taken at prompt chunk ends, oldest first.
    pub checkpoints: Vec<Checkpoint>,
    /// The LoRA scales the cached rows were computed under (None: no adapter): a request
    /// under other scales reuses none of them.
    pub lora: Option<Arc<[f32]>>,
}

/// Checkpoints kept per slot.
pub const MAX_CHECKPOINTS: usize = 8;

impl Slot {
    /// Cut what the slot holds to `p` tokens; checkpoints beyond p become stale.
    pub fn truncate(&mut self, p: usize) {
        self.cells.truncate(p);
        self.checkpoints.retain(|c| c.pos <= p);
    }

    /// Forget everything the slot holds.
    pub fn clear(&mut self) {
        self.cells.clear();
        self.checkpoints.clear();
        self.lora = None;
    }
}

/// Public view of a slot for `/slots` and `Engine.slots()`.
#[derive(Debug, Clone)]
pub struct SlotInfo {
    pub id: usize,
    pub n_ctx: usize,
    pub is_processing: bool,
    pub id_task: Option<u64>,
    /// Tokens the slot's KV cache holds.
    pub n_cached: usize,
    /// Bytes of KV rows those tokens take (of the cache's types).
    pub kv_bytes: usize,
    pub n_prompt_tokens: usize,
    /// Of the running task's prompt, the tokens reused from the cache.
    pub n_prompt_cached: usize,
    pub n_decoded: usize,
    pub n_remain: Option<usize>,
    /// Generating, or the last task ended before a stop (llama-server's `has_next_token`).
    pub has_next_token: bool,
}

/// Pick a free slot for `prompt` (to run under the LoRA scales `lora`): the most similar
/// cached prompt computed under the same scales (similarity >= `threshold`, > 0), else the
/// least recently used. `threshold` 0 disables similarity.
pub fn choose(slots: &[Slot], prompt: &[u32], threshold: f32, lora: &Option<Arc<[f32]>>) -> Option<usize> {
    let free = || slots.iter().filter(|s| s.task.is_none());
    if threshold > 0.0 {
        let best = free()
            .filter(|s| same_lora(&s.lora, lora))
            .map(|s| (s.cells.similarity(prompt), s))
            .filter(|(sim, _)| *sim > 0.0 && *sim >= threshold)
            .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.id.cmp(&a.1.id)));
        if let Some((_, s)) = best {
            return Some(s.id);
        }
    }
    free().min_by_key(|s| (s.last_used, s.id)).map(|s| s.id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(id: usize, toks: &[u32], last_used: u64) -> Slot {
        let mut cells = SeqCells::new(None);
        cells.push(toks);
        Slot { id, cells, task: None, last_used, n_decoded_last: 0, id_task_last: None, ended_early: false, checkpoints: Vec::new(), lora: None }
    }

    #[test]
    fn prefers_similar_then_lru() {
        let slots = vec![slot(0, &[1, 2, 3], 5), slot(1, &[7, 8, 9, 10], 1), slot(2, &[], 3)];
        assert_eq!(choose(&slots, &[7, 8, 9, 11], 0.1, &None), Some(1));
        assert_eq!(choose(&slots, &[1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13], 0.5, &None), Some(1), "below threshold: LRU");
        assert_eq!(choose(&slots, &[4], 0.1, &None), Some(1));
        assert_eq!(choose(&slots, &[1, 2, 3, 4], 0.0, &None), Some(1), "similarity disabled: LRU");
        // rows computed under other LoRA scales are no match
        let mut slots = slots;
        slots[0].lora = Some(Arc::from(vec![1.0f32]));
        assert_eq!(choose(&slots, &[1, 2, 3, 4], 0.1, &None), Some(1));
        assert_eq!(choose(&slots, &[1, 2, 3, 4], 0.1, &slots[0].lora.clone()), Some(0));
    }
}
