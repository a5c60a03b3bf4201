//! SentencePiece-style tokenization by score-ordered bigram merges with byte fallback.
//! Semantics of llama.cpp's `llm_tokenizer_spm_session` (llama-vocab.cpp).
use super::vocab::Vocab;
use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Symbol {
    start: usize,
    n: usize,
    prev: i32,
    next: i32,
}

struct Bigram {
    left: i32,
    right: i32,
    score: f32,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    // Highest score first; on ties the leftmost pair first.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.partial_cmp(&o.score).unwrap_or(Ordering::Equal).then_with(|| o.left.cmp(&self.left))
    }
}

fn utf8_len(b: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(b >> 4) as usize]
}

/// Tokenize already-escaped text (spaces replaced by U+2581) and append to `out`.
pub fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) {
    let mut symbols: Vec<Symbol> = Vec::new();
    let mut offs = 0;
    while offs < text.len() {
        let len = utf8_len(text[offs]).min(text.len() - offs);
        let idx = symbols.len() as i32;
        symbols.push(Symbol {
            start: offs,
            n: len,
            prev: idx - 1,
            next: if offs + len == text.len() { -1 } else { idx + 1 },
        });
        offs += len;
    }
    if symbols.is_empty() {
        return;
    }
    let mut heap = BinaryHeap::new();
    // A bigram is a merge candidate when the concatenated text is a token.
    let try_add = |symbols: &Vec<Symbol>, heap: &mut BinaryHeap<Bigram>, left: i32, right: i32| {
        if left == -1 || right == -1 {
            return;
        }
        let (l, r) = (&symbols[left as usize], &symbols[right as usize]);
        let piece = &text[l.start..l.start + l.n + r.n];
        if let Some(id) = vocab.text_to_token(piece) {
            heap.push(Bigram { left, right, score: vocab.scores[id as usize], size: piece.len() });
        }
    };
    for i in 1..symbols.len() {
        try_add(&symbols, &mut heap, i as i32 - 1, i as i32);
    }
    while let Some(bg) = heap.pop() {
        let (li, ri) = (bg.left as usize, bg.right as usize);
        let (ln, rn) = (symbols[li].n, symbols[ri].n);
        // Stale entry: one side was merged away since it was queued.
        if ln == 0 || rn == 0 || ln + rn != bg.size {
            continue;
        }
        symbols[li].n += rn;
        symbols[ri].n = 0;
        let rnext = symbols[ri].next;
        symbols[li].next = rnext;
        if rnext >= 0 {
            symbols[rnext as usize].prev = bg.left;
        }
        let lprev = symbols[li].prev;
        try_add(&symbols, &mut heap, lprev, bg.left);
        try_add(&symbols, &mut heap, bg.left, rnext);
    }
    // Every merged symbol is a token by construction; an unmerged character that is
    // not in the vocabulary falls back to byte tokens (llama.cpp's resegment).
    let mut i = 0i32;
    while i != -1 {
        let s = &symbols[i as usize];
        let piece = &text[s.start..s.start + s.n];
        match vocab.text_to_token(piece) {
            Some(id) => out.push(id),
            None => {
                for &b in piece {
                    if let Some(id) = vocab.byte_to_token(b).or(vocab.unk) {
                        out.push(id);
                    }
                }
            }
        }
        i = s.next;
    }
}
