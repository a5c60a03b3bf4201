//! Byte-level BPE (`tokenizer.ggml.model = "gpt2"`), exact with llama.cpp's
//! llm_tokenizer_bpe_session: pre-tokenize (tokenizer/pre), map each word's bytes
//! through GPT-2's bytes_to_unicode, merge adjacent symbols lowest rank first
//! (ties: leftmost), then map symbols to ids. Detokenization reverses the byte map.
use super::pre::{self, PreConfig, Rule};
use super::vocab::Vocab;
use crate::error::{Error, Result};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// The bytes GPT-2's bytes_to_unicode keeps as themselves: '!'..='~', '¡'..='¬', '®'..='ÿ'.
const fn printable(b: u8) -> bool {
    matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other
/// 68 bytes to U+0100.. in byte order.
pub fn byte_to_char(b: u8) -> char {
    const fn table() -> [u32; 256] {
        let mut t = [0u32; 256];
        let mut n = 0;
        let mut b = 0;
        while b < 256 {
            t[b] = if printable(b as u8) {
                b as u32
            } else {
                n += 1;
                255 + n
            };
            b += 1;
        }
        t
    }
    static T: [u32; 256] = table();
    char::from_u32(T[b as usize]).unwrap_or('\u{FFFD}')
}

/// The inverse of `byte_to_char`.
pub fn char_to_byte(c: char) -> Option<u8> {
    // the bytes that map to U+0100.. in order: 0x00-0x20, 0x7F-0xA0, 0xAD
    const fn shifted() -> [u8; 68] {
        let mut t = [0u8; 68];
        let mut n = 0;
        let mut b = 0;
        while b < 256 {
            if !printable(b as u8) {
                t[n] = b as u8;
                n += 1;
            }
            b += 1;
        }
        t
    }
    static SHIFTED: [u8; 68] = shifted();
    let u = c as u32;
    match u {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(u as u8),
        0x100..=0x143 => Some(SHIFTED[(u - 0x100) as usize]),
        _ => None,
    }
}

/// A token's text → the bytes it stands for (llama.cpp llama_decode_text): each
/// character maps back to one byte; one outside the map renders as
/// `[UNK_BYTE_0x<hex of its UTF-8>` + the whole token text + `]`.
pub fn decode_text(text: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(text);
    let mut out = Vec::with_capacity(text.len());
    for c in s.chars() {
        match char_to_byte(c) {
            Some(b) => out.push(b),
            None => {
                out.extend_from_slice(b"[UNK_BYTE_0x");
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text);
                out.push(b']');
            }
        }
    }
    out
}

/// llama_detokenize's clean_spaces passes over the whole detokenized text:
/// drop the space in " ?", " !", " .", " ,"; collapse " ' " to "'"; drop the space
/// before the contractions 's 'm 're 've.
pub fn clean_spaces(text: &[u8]) -> Vec<u8> {
    if text.is_empty() {
        return Vec::new();
    }
    // first pass
    let mut a = vec![text[0]];
    for i in 1..text.len() {
        let x = text[i];
        if text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            a.pop();
        }
        a.push(x);
    }
    // second pass: " ' " → "'" (the next space is consumed, and reads as NUL after)
    let mut b = vec![a[0]];
    let mut i = 1;
    while i < a.len() {
        let x = a[i];
        if x == b'\'' && i + 1 < a.len() && a[i - 1] == b' ' && a[i + 1] == b' ' {
            b.pop();
            a[i + 1] = 0;
            i += 1;
        }
        b.push(x);
        i += 1;
    }
    // third pass
    let mut c = vec![b[0]];
    for i in 1..b.len() {
        let x = b[i];
        if b[i - 1] == b' ' && x == b'\'' && i + 1 < b.len() {
            let x1 = b[i + 1];
            let x2 = b.get(i + 2).copied().filter(|_| i + 2 < b.len());
            let drop = matches!(x1, b's' | b'm')
                || (!matches!(x1, b't' | b'd') && matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e'))));
            if drop {
                c.pop();
            }
        }
        c.push(x);
    }
    c
}

/// The merge table and pre-tokenizer of one byte-level BPE vocabulary.
pub struct Bpe {
    pub config: PreConfig,
    rules: Vec<Rule>,
    n_vocab: u32,
    /// (left symbol, right symbol) → (rank, merged symbol). Symbols are token ids
    /// when the string is a token, ids ≥ n_vocab for the other strings merges name.
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// The symbol of each byte's one-character string, if any.
    byte_sym: [Option<u32>; 256],
    /// The UTF-8 of each byte's character.
    byte_utf8: Vec<Vec<u8>>,
}

#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    id: Option<u32>,
    prev: usize,
    next: usize,
}

const NONE: usize = usize::MAX;

/// Pending merges as (rank, left, right, left len, right len); the min-heap order
/// (rank, left) is llama.cpp's llm_bigram_bpe comparator: lowest rank, then leftmost.
type Heap = BinaryHeap<Reverse<(u32, usize, usize, usize, usize)>>;

impl Bpe {
    pub fn new(v: &Vocab, source: &str) -> Result<Bpe> {
        let config = PreConfig::from_name(&v.pre);
        let rules = config.rules.clone().map_err(|kind| {
            Error::Tokenizer(format!(
                "{source}: pre-tokenizer '{}' (llama.cpp type {kind}) is not supported; supported: default, gpt-2 \
                 family, llama3 family, qwen2 family, starcoder family, falcon, deepseek-llm, deepseek-coder, \
                 deepseek-v3, bloom, viking, seed-coder",
                v.pre
            ))
        })?;
        let n_vocab = u32::try_from(v.n_tokens())
            .map_err(|_| Error::Tokenizer(format!("{source}: {} tokens is too many", v.n_tokens())))?;
        let mut extra: HashMap<Vec<u8>, u32> = HashMap::new();
        let mut intern = |s: &[u8]| -> u32 {
            if let Some(id) = v.text_to_token(s) {
                return id;
            }
            let next = n_vocab.saturating_add(extra.len() as u32);
            *extra.entry(s.to_vec()).or_insert(next)
        };
        let mut merges = HashMap::with_capacity(v.merges.len());
        let mut joined = Vec::new();
        for (rank, (l, r)) in v.merges.iter().enumerate() {
            let (a, b) = (intern(l.as_bytes()), intern(r.as_bytes()));
            joined.clear();
            joined.extend_from_slice(l.as_bytes());
            joined.extend_from_slice(r.as_bytes());
            let ab = intern(&joined);
            // the first occurrence of a pair keeps its rank (std::map::emplace)
            merges.entry((a, b)).or_insert((rank as u32, ab));
        }
        let mut byte_sym = [None; 256];
        let mut byte_utf8 = Vec::with_capacity(256);
        for (b, slot) in byte_sym.iter_mut().enumerate() {
            let mut buf = [0u8; 4];
            let s = byte_to_char(b as u8).encode_utf8(&mut buf).as_bytes().to_vec();
            *slot = v.text_to_token(&s).or_else(|| extra.get(&s).copied());
            byte_utf8.push(s);
        }
        Ok(Bpe { config, rules, n_vocab, merges, byte_sym, byte_utf8 })
    }

    /// Append the ids of one text fragment (llm_tokenizer_bpe_session::tokenize).
    pub fn tokenize(&self, v: &Vocab, text: &str, out: &mut Vec<u32>) {
        let mut syms: Vec<Sym> = Vec::new();
        let mut heap = BinaryHeap::new();
        let mut enc = Vec::new();
        for (a, b) in pre::split(&self.rules, text) {
            let word = &text.as_bytes()[a..b];
            if self.config.ignore_merges {
                enc.clear();
                for &byte in word {
                    enc.extend_from_slice(&self.byte_utf8[byte as usize]);
                }
                if let Some(id) = v.text_to_token(&enc) {
                    out.push(id);
                    continue;
                }
            }
            self.merge_word(word, &mut syms, &mut heap);
            let mut i = if syms.is_empty() { NONE } else { 0 };
            while i != NONE {
                let s = syms[i];
                self.emit(v, &word[s.start..s.start + s.len], s.id, out);
                i = s.next;
            }
        }
    }

    /// Run the merges over one word; `syms` ends as a linked list from index 0.
    fn merge_word(&self, word: &[u8], syms: &mut Vec<Sym>, heap: &mut Heap) {
        syms.clear();
        heap.clear();
        let n = word.len();
        for (i, &b) in word.iter().enumerate() {
            let next = if i + 1 == n { NONE } else { i + 1 };
            let prev = if i == 0 { NONE } else { i - 1 };
            syms.push(Sym { start: i, len: 1, id: self.byte_sym[b as usize], prev, next });
        }
        for i in 1..n {
            self.push_pair(syms, heap, i - 1, i);
        }
        while let Some(Reverse((_, l, r, llen, rlen))) = heap.pop() {
            let (ls, rs) = (syms[l], syms[r]);
            if ls.len != llen || rs.len != rlen || ls.len == 0 || rs.len == 0 {
                continue; // outdated
            }
            let Some(&(_, merged)) = ls.id.zip(rs.id).and_then(|k| self.merges.get(&k)) else { continue };
            syms[l].len += rs.len;
            syms[l].id = Some(merged);
            syms[l].next = rs.next;
            syms[r].len = 0;
            if rs.next != NONE {
                syms[rs.next].prev = l;
            }
            if ls.prev != NONE {
                self.push_pair(syms, heap, ls.prev, l);
            }
            if rs.next != NONE {
                self.push_pair(syms, heap, l, rs.next);
            }
        }
    }

    fn push_pair(&self, syms: &[Sym], heap: &mut Heap, l: usize, r: usize) {
        let (a, b) = (syms[l], syms[r]);
        if let (Some(x), Some(y)) = (a.id, b.id) {
            if let Some(&(rank, _)) = self.merges.get(&(x, y)) {
                heap.push(Reverse((rank, l, r, a.len, b.len)));
            }
        }
    }

    /// A finished symbol → ids: its token, or else the tokens of the single bytes
    /// of its byte-level text that are tokens (llama.cpp's fallback).
    fn emit(&self, v: &Vocab, bytes: &[u8], id: Option<u32>, out: &mut Vec<u32>) {
        if let Some(id) = id.filter(|&id| id < self.n_vocab) {
            out.push(id);
            return;
        }
        for &b in bytes {
            for &u in &self.byte_utf8[b as usize] {
                if let Some(t) = v.text_to_token(&[u]) {
                    out.push(t);
                }
            }
        }
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{Gguf, GgufFile};
    use crate::tokenizer::Tokenizer;
    use std::path::Path;

    const MERGES: &[&str] = &[
        "h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "b c", "a b", "a a", "x q",
    ];
    const EXTRA: &[&str] = &["he", "ll", "hell", "hello", "Ġw", "or", "Ġwor", "ld", "Ġworld", "bc", "ab", "aa", "xyz", "日"];

    fn s(out: &mut Vec<u8>, v: &str) {
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        out.extend_from_slice(v.as_bytes());
    }

    /// A GGUF holding only tokenizer metadata: the 256 byte-level characters (id = byte),
    /// EXTRA, then <|endoftext|> (control) and <tool> (user-defined).
    fn tokenizer(pre: &str, add_bos: Option<bool>) -> Tokenizer {
        try_tokenizer(pre, add_bos).expect("tokenizer")
    }

    fn try_tokenizer(pre: &str, add_bos: Option<bool>) -> Result<Tokenizer> {
        let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_to_char(b).to_string()).collect();
        tokens.extend(EXTRA.iter().map(|t| t.to_string()));
        tokens.push("<|endoftext|>".into());
        tokens.push("<tool>".into());
        let n = tokens.len();
        let mut types = vec![1i32; n];
        types[n - 2] = 3;
        types[n - 1] = 4;
        let mut b = b"GGUF".to_vec();
        b.extend_from_slice(&3u32.to_le_bytes());
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&(7 + add_bos.is_some() as u64).to_le_bytes());
        let kv_str = |b: &mut Vec<u8>, k: &str, v: &str| {
            s(b, k);
            b.extend_from_slice(&8u32.to_le_bytes());
            s(b, v);
        };
        kv_str(&mut b, "general.architecture", "qwen2");
        kv_str(&mut b, "tokenizer.ggml.model", "gpt2");
        kv_str(&mut b, "tokenizer.ggml.pre", pre);
        for (key, list) in [("tokenizer.ggml.tokens", &tokens[..]), ("tokenizer.ggml.merges", &MERGES.iter().map(|m| m.to_string()).collect::<Vec<_>>()[..])] {
            s(&mut b, key);
            b.extend_from_slice(&9u32.to_le_bytes());
            b.extend_from_slice(&8u32.to_le_bytes());
            b.extend_from_slice(&(list.len() as u64).to_le_bytes());
            for t in list {
                s(&mut b, t);
            }
        }
        s(&mut b, "tokenizer.ggml.token_type");
        b.extend_from_slice(&9u32.to_le_bytes());
        b.extend_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(&(n as u64).to_le_bytes());
        for t in &types {
            b.extend_from_slice(&t.to_le_bytes());
        }
        s(&mut b, "tokenizer.ggml.bos_token_id");
        b.extend_from_slice(&4u32.to_le_bytes());
        b.extend_from_slice(&((n - 2) as u32).to_le_bytes());
        if let Some(add) = add_bos {
            s(&mut b, "tokenizer.ggml.add_bos_token");
            b.extend_from_slice(&7u32.to_le_bytes());
            b.push(add as u8);
        }
        let f = GgufFile::from_bytes(Path::new("bpe-test.gguf"), b).expect("valid gguf");
        Tokenizer::from_gguf(&Gguf::from_files(vec![f]))
    }

    fn id(t: &Tokenizer, text: &str) -> u32 {
        t.vocab.text_to_token(text.as_bytes()).expect("token exists")
    }

    #[test]
    fn byte_map_is_gpt2s() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        assert_eq!(byte_to_char(0xFF), 'ÿ');
        let mut seen = std::collections::HashSet::new();
        for b in 0..=255u8 {
            let c = byte_to_char(b);
            assert!(seen.insert(c));
            assert_eq!(char_to_byte(c), Some(b));
        }
        assert_eq!(char_to_byte('日'), None);
        assert_eq!(char_to_byte('\u{144}'), None);
    }

    #[test]
    fn merges_by_rank_then_leftmost() {
        let t = tokenizer("gpt-2", None);
        assert_eq!(t.encode("hello world", false, false), [id(&t, "hello"), id(&t, "Ġworld")]);
        // (b,c) has rank 9 < (a,b) rank 10
        assert_eq!(t.encode("abc", false, false), [id(&t, "a"), id(&t, "bc")]);
        // equal ranks: the leftmost pair merges first
        assert_eq!(t.encode("aaa", false, false), [id(&t, "aa"), id(&t, "a")]);
        // each word merges on its own: " hello" is Ġ + hello, never across words
        assert_eq!(t.encode("hello hello", false, false), [id(&t, "hello"), 32, id(&t, "hello")]);
    }

    #[test]
    fn bytes_of_multibyte_characters_are_symbols() {
        let t = tokenizer("gpt-2", None);
        assert_eq!(t.encode("é", false, false), [0xC3, 0xA9]);
        assert_eq!(t.encode("a\n", false, false), [b'a' as u32, b'\n' as u32]);
    }

    #[test]
    fn merge_into_a_non_token_falls_back_to_single_byte_tokens() {
        let t = tokenizer("gpt-2", None);
        assert_eq!(t.encode("xq", false, false), [b'x' as u32, b'q' as u32]);
    }

    #[test]
    fn ignore_merges_only_for_llama3_presets() {
        let l3 = tokenizer("llama-bpe", None);
        assert_eq!(l3.encode("xyz", false, false), [id(&l3, "xyz")]);
        let g2 = tokenizer("gpt-2", None);
        assert_eq!(g2.encode("xyz", false, false), [b'x' as u32, b'y' as u32, b'z' as u32]);
    }

    #[test]
    fn special_tokens_and_bos() {
        let t = tokenizer("gpt-2", Some(true));
        let (eot, tool) = (id(&t, "<|endoftext|>"), id(&t, "<tool>"));
        assert_eq!(t.encode("<|endoftext|>hello", true, true), [eot, eot, id(&t, "hello")]);
        assert_eq!(t.encode("hello", false, true), [id(&t, "hello")]);
        let plain = t.encode("<|endoftext|>", false, false);
        assert!(plain.len() > 1 && !plain.contains(&eot));
        // user-defined tokens split out even without parse_special
        assert_eq!(t.encode("a<tool>a", false, false), [b'a' as u32, tool, b'a' as u32]);
        // llama3 presets default add_bos to true, others to false
        assert!(tokenizer("llama3", None).vocab.add_bos);
        assert!(!tokenizer("llama3", Some(false)).vocab.add_bos);
        assert!(!tokenizer("gpt-2", None).vocab.add_bos);
    }

    #[test]
    fn pieces_and_detokenize() {
        let t = tokenizer("qwen2", None);
        let (eot, tool) = (id(&t, "<|endoftext|>"), id(&t, "<tool>"));
        assert_eq!(t.token_to_piece(id(&t, "Ġworld"), false), b" world");
        assert_eq!(t.token_to_piece(eot, false), b"");
        assert_eq!(t.token_to_piece(eot, true), b"<|endoftext|>");
        assert_eq!(t.token_to_piece(tool, false), b"<tool>");
        assert_eq!(t.token_to_piece(id(&t, "日"), true), "[UNK_BYTE_0xe697a5日]".as_bytes());
        let text = "hello world\n\t naïve 日本 🦙 'quoted' , x";
        let ids = t.encode(text, false, false);
        assert_eq!(t.decode(&ids, false, false), text);
        let ids = t.encode("<|endoftext|>hi", true, true);
        assert_eq!(t.decode(&ids, false, false), "hi");
        assert_eq!(t.decode(&ids, false, true), "<|endoftext|>hi");
    }

    #[test]
    fn clean_spaces_matches_llama_detokenize() {
        let c = |s: &str| String::from_utf8(clean_spaces(s.as_bytes())).unwrap_or_default();
        assert_eq!(c("Hello , world ! ok ? yes ."), "Hello, world! ok? yes.");
        assert_eq!(c("a ' b"), "a'b");
        assert_eq!(c("it 's I 'm you 're we 've"), "it's I'm you're we've");
        assert_eq!(c("don 't we 'll I 'd"), "don 't we 'll I 'd");
        // the second apostrophe's left space was consumed with the first's
        assert_eq!(c(" ' ' "), "'' ");
        assert_eq!(c(""), "");
        // gpt-2 presets clean, qwen2 does not
        let g = tokenizer("gpt-2", None);
        assert_eq!(g.decode(&g.encode("x , y", false, false), false, false), "x, y");
        let q = tokenizer("qwen2", None);
        assert_eq!(q.decode(&q.encode("x , y", false, false), false, false), "x , y");
    }

    #[test]
    fn unsupported_preset_is_an_error() {
        let err = try_tokenizer("kimi-k2", None).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("pre-tokenizer 'kimi-k2'"), "{err}");
    }

    #[test]
    fn hundred_kilobytes_in_well_under_a_second() {
        let t = tokenizer("qwen2", None);
        let unit = "hello world, naïve café 12345 日本語 🦙\n\t  'quoted' ";
        let text = unit.repeat(100_000 / unit.len() + 1);
        let start = std::time::Instant::now();
        let ids = t.encode(&text, false, false);
        assert!(start.elapsed().as_secs_f64() < 1.0, "{:?}", start.elapsed());
        assert_eq!(t.decode(&ids, false, false), text);
    }
}
