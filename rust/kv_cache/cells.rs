//! Which tokens a slot's sequence holds: token i sits at position i. Tensor rows live
//! in `KvStore`; this is the bookkeeping that prefix reuse, context shift and slot
//! save/restore reason about.

#[derive(Debug, Clone, Default)]
pub struct SeqCells {
    /// tokens[p] is the token at position p; n_past = tokens.len().
    pub tokens: Vec<u32>,
    /// Sliding-window ring: (rows per slot, window) when some layer keeps a ring.
    pub ring: Option<(usize, usize)>,
    /// Lowest position whose ring rows are still intact (older ones were overwritten).
    pub ring_lo: usize,
}

impl SeqCells {
    pub fn new(ring: Option<(usize, usize)>) -> SeqCells {
        SeqCells { tokens: Vec::new(), ring, ring_lo: 0 }
    }

    pub fn n_past(&self) -> usize {
        self.tokens.len()
    }

    pub fn clear(&mut self) {
        self.tokens.clear();
        self.ring_lo = 0;
    }

    /// Length of the longest common prefix with `prompt`.
    pub fn common_prefix(&self, prompt: &[u32]) -> usize {
        self.tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count()
    }

    /// Whether the sequence can be cut back to `p` tokens and continued from there:
    /// every key the query at position p can see must still be stored.
    pub fn can_resume_at(&self, p: usize) -> bool {
        if p == 0 {
            return true;
        }
        if p > self.tokens.len() {
            return false;
        }
        match self.ring {
            None => true,
            Some((_, window)) => (p + 1).saturating_sub(window) >= self.ring_lo,
        }
    }

    /// The most tokens of `prompt` this sequence can keep (at most prompt.len() - 1, so
    /// that at least one token is evaluated to produce logits).
    pub fn reusable_prefix(&self, prompt: &[u32]) -> usize {
        let lcp = self.common_prefix(prompt).min(prompt.len().saturating_sub(1));
        if self.can_resume_at(lcp) {
            lcp
        } else {
            0
        }
    }

    /// Cut the sequence back to `p` tokens (positions >= p are forgotten).
    pub fn truncate(&mut self, p: usize) {
        self.tokens.truncate(p);
        if p == 0 {
            self.ring_lo = 0;
        }
    }

    /// Record `toks` written at positions n_past.. .
    pub fn push(&mut self, toks: &[u32]) {
        self.tokens.extend_from_slice(toks);
        if let Some((cap, _)) = self.ring {
            self.ring_lo = self.ring_lo.max(self.tokens.len().saturating_sub(cap));
        }
    }

    /// Similarity of `prompt` to what this slot holds, as llama.cpp's slot selection
    /// measures it: common prefix length / prompt length.
    pub fn similarity(&self, prompt: &[u32]) -> f32 {
        if prompt.is_empty() || self.tokens.is_empty() {
            return 0.0;
        }
        self.common_prefix(prompt) as f32 / prompt.len() as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_reuse_without_ring() {
        let mut c = SeqCells::new(None);
        c.push(&[1, 2, 3, 4, 5]);
        assert_eq!(c.reusable_prefix(&[1, 2, 3, 9]), 3);
        // identical prompt: keep all but the last token, which is re-evaluated for logits
        assert_eq!(c.reusable_prefix(&[1, 2, 3, 4, 5]), 4);
        assert_eq!(c.reusable_prefix(&[7]), 0);
        assert!((c.similarity(&[1, 2, 3, 9]) - 0.75).abs() < 1e-6);
    }

    #[test]
    fn ring_limits_how_far_back_a_sequence_can_resume() {
        // ring of 8 rows, window 4
        let mut c = SeqCells::new(Some((8, 4)));
        c.push(&(0..20).collect::<Vec<u32>>());
        assert_eq!(c.ring_lo, 12);
        // resuming at p needs positions p-3..p-1 intact: p >= 15
        assert!(c.can_resume_at(15));
        assert!(!c.can_resume_at(14));
        assert!(c.can_resume_at(0));
        let prompt: Vec<u32> = (0..14).chain([99]).collect();
        assert_eq!(c.reusable_prefix(&prompt), 0);
        let prompt: Vec<u32> = (0..16).chain([99]).collect();
        assert_eq!(c.reusable_prefix(&prompt), 16);
        c.truncate(16);
        assert_eq!(c.ring_lo, 12);
        c.truncate(0);
        assert_eq!(c.ring_lo, 0);
    }
}
