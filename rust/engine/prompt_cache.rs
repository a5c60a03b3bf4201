//! Host-RAM prompt cache (`cache_ram`, MiB): when a slot is handed a prompt that
//! shares little with what it holds, its tokens and KV rows are kept here, and a later
//! request whose prompt starts the same way gets them back instead of re-evaluating.
use super::adapters::same_lora;
use std::sync::Arc;

pub struct Entry {
    pub tokens: Vec<u32>,
    pub bytes: Vec<u8>,
    /// The LoRA scales the rows were computed under (only a request under the same ones reuses them).
    pub lora: Option<Arc<[f32]>>,
    last_used: u64,
}

pub struct PromptCache {
    /// None: no limit; Some(0): disabled.
    limit: Option<usize>,
    entries: Vec<Entry>,
    clock: u64,
    pub hits: u64,
}

impl PromptCache {
    /// `mib` < 0: no limit; 0: disabled.
    pub fn new(mib: i64) -> PromptCache {
        let limit = if mib < 0 { None } else { Some((mib as usize).saturating_mul(1 << 20)) };
        PromptCache { limit, entries: Vec::new(), clock: 0, hits: 0 }
    }

    pub fn enabled(&self) -> bool {
        self.limit != Some(0)
    }

    pub fn bytes(&self) -> usize {
        self.entries.iter().map(|e| e.bytes.len()).sum()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Keep a slot's state; an entry whose tokens are a prefix of the new one is replaced.
    pub fn put(&mut self, tokens: Vec<u32>, bytes: Vec<u8>, lora: Option<Arc<[f32]>>) {
        if !self.enabled() || self.limit.is_some_and(|l| bytes.len() > l) {
            return;
        }
        self.entries.retain(|e| !(same_lora(&e.lora, &lora) && e.tokens.len() <= tokens.len() && tokens[..e.tokens.len()] == e.tokens[..]));
        self.clock += 1;
        self.entries.push(Entry { tokens, bytes, lora, last_used: self.clock });
        if let Some(limit) = self.limit {
            while self.bytes() > limit {
                let Some((i, _)) = self.entries.iter().enumerate().min_by_key(|(_, e)| e.last_used) else { break };
                self.entries.remove(i);
            }
        }
    }

    /// The entry computed under `lora` sharing the longest prefix with `prompt`, if longer
    /// than `better_than`. Returns (index, common prefix length).
    pub fn best(&self, prompt: &[u32], better_than: usize, lora: &Option<Arc<[f32]>>) -> Option<(usize, usize)> {
        if self.is_empty() {
            return None;
        }
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| same_lora(&e.lora, lora))
            .map(|(i, e)| (i, e.tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count()))
            .filter(|&(_, n)| n > better_than)
            .max_by_key(|&(i, n)| (n, self.entries[i].last_used))
    }

    /// Take an entry out (it goes back into a slot).
    pub fn take(&mut self, i: usize) -> Entry {
        self.hits += 1;
        self.entries.swap_remove(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_eviction_and_lookup() {
        let mut c = PromptCache::new(0);
        c.put(vec![1], vec![0; 10], None);
        assert!(c.is_empty(), "0 MiB disables the cache");
        let mut c = PromptCache::new(1);
        c.put(vec![1, 2, 3], vec![0; 600_000], None);
        c.put(vec![4, 5], vec![0; 600_000], None);
        assert_eq!(c.len(), 1, "the older entry is evicted past 1 MiB");
        assert_eq!(c.best(&[4, 5, 6], 0, &None), Some((0, 2)));
        assert_eq!(c.best(&[4, 5, 6], 2, &None), None);
        assert_eq!(c.best(&[4, 5, 6], 0, &Some(Arc::from(vec![1.0f32]))), None, "rows of other LoRA scales are no match");
        assert_eq!(c.take(0).tokens, vec![4, 5]);
        assert_eq!(c.hits, 1);
    }
}
