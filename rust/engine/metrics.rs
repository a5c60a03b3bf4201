//! Counters the scheduler keeps for `/metrics`, `/slots` and `Engine.metrics()`.
use super::slot::SlotInfo;

#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Prompt tokens evaluated (cache hits excluded) and the time spent on them.
    pub n_prompt_tokens_processed_total: u64,
    pub t_prompt_processing_total_ms: f64,
    /// Prompt tokens reused from a slot's KV cache or the prompt cache.
    pub n_prompt_tokens_cached_total: u64,
    /// The longest sequence a slot has held (prompt + generation).
    pub n_tokens_max: u64,
    /// Tokens generated and the time spent generating them.
    pub n_tokens_predicted_total: u64,
    pub t_tokens_generation_total_ms: f64,
    /// Batched forward passes, and the sum over them of the slots they served.
    pub n_decode_total: u64,
    pub n_busy_slots_total: u64,
    /// Speculative decoding: verification steps, drafted tokens, accepted drafted tokens.
    pub n_draft_steps_total: u64,
    pub n_drafted_total: u64,
    pub n_drafted_accepted_total: u64,
    pub n_requests_total: u64,
    pub requests_processing: usize,
    pub requests_deferred: usize,
    /// Tokens held across all slots' KV caches, and the capacity.
    pub kv_cache_tokens: usize,
    pub kv_cache_capacity: usize,
    /// Bytes the KV cache's host tensors hold.
    pub kv_cache_bytes: usize,
    /// Host-RAM prompt cache: entries, bytes, hits.
    pub prompt_cache_entries: usize,
    pub prompt_cache_bytes: usize,
    pub prompt_cache_hits: u64,
}

impl Metrics {
    pub fn kv_cache_usage_ratio(&self) -> f64 {
        if self.kv_cache_capacity == 0 {
            0.0
        } else {
            self.kv_cache_tokens as f64 / self.kv_cache_capacity as f64
        }
    }
}

/// What the loop publishes after every iteration; readers never wait for a batch.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub slots: Vec<SlotInfo>,
    pub metrics: Metrics,
}
