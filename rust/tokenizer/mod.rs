//! Tokenizers built from GGUF metadata, exact with llama.cpp: special-token
//! partitioning, SPM merges, byte-level BPE with its pre-tokenizer presets,
//! WordPiece and Unigram as `tokenizers` runs them, detokenization and a UTF-8-safe streaming decoder.
pub mod bpe;
pub mod pre;
pub mod spm;
pub mod stream;
pub mod ugm;
pub mod vocab;
pub mod wpm;

pub use stream::StreamDecoder;
pub use vocab::{attr, Vocab, VocabKind};

use crate::error::{Error, Result};
use crate::gguf::Gguf;

pub struct Tokenizer {
    pub vocab: Vocab,
    /// Merges and pre-tokenizer of a byte-level BPE vocabulary (None for SPM).
    pub bpe: Option<bpe::Bpe>,
    /// Charsmap and piece trie of a Unigram vocabulary.
    pub ugm: Option<ugm::Ugm>,
}

enum Fragment<'a> {
    Text(&'a [u8]),
    Token(u32),
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

impl Tokenizer {
    pub fn from_gguf(g: &Gguf) -> Result<Tokenizer> {
        let vocab = Vocab::from_gguf(g)?;
        let path = g.path().display().to_string();
        let ugm = match vocab.kind {
            VocabKind::Ugm => {
                let blob: Option<Vec<u8>> = match g.get("tokenizer.ggml.precompiled_charsmap").and_then(|v| v.as_array()) {
                    None => None,
                    Some(a) => Some(a.iter().map(|x| x.as_i64().unwrap_or(0) as u8).collect()),
                };
                Some(ugm::Ugm::new(&vocab, blob.as_deref(), &path)?)
            }
            _ => None,
        };
        let bpe = match vocab.kind {
            VocabKind::Spm | VocabKind::Wpm | VocabKind::Ugm => None,
            VocabKind::Bpe => {
                if g.get("tokenizer.ggml.merges").is_none() {
                    return Err(Error::Tokenizer(format!(
                        "{}: tokenizer.ggml.merges is missing (required for BPE vocabularies)",
                        g.path().display()
                    )));
                }
                Some(bpe::Bpe::new(&vocab, &path)?)
            }
        };
        Ok(Tokenizer { vocab, bpe, ugm })
    }

    pub fn n_vocab(&self) -> usize {
        self.vocab.n_tokens()
    }

    /// Split text around special tokens (llama.cpp's tokenizer_st_partition).
    /// User-defined tokens are always split out; control/unknown ones only with `parse_special`.
    fn partition<'a>(&self, text: &'a [u8], parse_special: bool) -> Vec<Fragment<'a>> {
        let mut frags = vec![Fragment::Text(text)];
        if text.is_empty() {
            return Vec::new();
        }
        for &id in &self.vocab.special_cache {
            let a = self.vocab.attr(id);
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let tok = &self.vocab.texts[id as usize][..];
            let mut next = Vec::with_capacity(frags.len());
            for f in frags {
                let Fragment::Text(mut raw) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(pos) = find(raw, tok) {
                    let mut left = &raw[..pos];
                    if a & attr::LSTRIP != 0 {
                        while let Some((&last, rest)) = left.split_last() {
                            if !is_space(last) {
                                break;
                            }
                            left = rest;
                        }
                    }
                    if !left.is_empty() {
                        next.push(Fragment::Text(left));
                    }
                    next.push(Fragment::Token(id));
                    raw = &raw[pos + tok.len()..];
                    if a & attr::RSTRIP != 0 {
                        while let Some((&first, rest)) = raw.split_first() {
                            if !is_space(first) {
                                break;
                            }
                            raw = rest;
                        }
                    }
                }
                if !raw.is_empty() {
                    next.push(Fragment::Text(raw));
                }
            }
            frags = next;
        }
        frags
    }

    /// Text → token ids, as llama_tokenize(text, add_special, parse_special).
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let v = &self.vocab;
        let mut out = Vec::new();
        let add_bos = add_special && v.add_bos;
        if add_bos {
            if let Some(b) = v.bos {
                out.push(b);
            }
        }
        let mut is_prev_special = true;
        for f in self.partition(text.as_bytes(), parse_special) {
            match f {
                Fragment::Token(id) => {
                    out.push(id);
                    is_prev_special = true;
                }
                Fragment::Text(raw) => {
                    if let Some(ugm) = &self.ugm {
                        ugm.tokenize(v, &String::from_utf8_lossy(raw), &mut out);
                        continue;
                    }
                    if v.kind == VocabKind::Wpm {
                        wpm::tokenize(v, v.wpm, &String::from_utf8_lossy(raw), &mut out);
                        continue;
                    }
                    if let Some(bpe) = &self.bpe {
                        // fragments of a &str cut at token texts (themselves UTF-8)
                        bpe.tokenize(v, &String::from_utf8_lossy(raw), &mut out);
                        continue;
                    }
                    let mut s = Vec::with_capacity(raw.len() + 3);
                    if v.add_space_prefix && is_prev_special {
                        s.extend_from_slice("\u{2581}".as_bytes());
                    }
                    for &b in raw {
                        if b == b' ' {
                            s.extend_from_slice("\u{2581}".as_bytes());
                        } else {
                            s.push(b);
                        }
                    }
                    spm::tokenize(v, &s, &mut out);
                    is_prev_special = false;
                }
            }
        }
        if add_special && v.add_eos {
            if let Some(e) = v.eos {
                out.push(e);
            }
        }
        // llama.cpp appends the separator in tokenization for WordPiece only (elsewhere
        // add_sep shapes the rerank pair)
        if add_special && v.add_sep && v.kind == VocabKind::Wpm {
            if let Some(s) = v.sep {
                out.push(s);
            }
        }
        out
    }

    /// The bytes a token renders to (llama_token_to_piece). Control and unknown
    /// tokens render only when `special` is set; unused tokens render as nothing.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Vec<u8> {
        let v = &self.vocab;
        let Some(text) = v.texts.get(id as usize) else { return Vec::new() };
        let a = v.attr(id);
        if !special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
            return Vec::new();
        }
        if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
            return text.clone();
        }
        if v.kind == VocabKind::Bpe {
            // byte-level text → bytes; byte/unused/undefined tokens render as nothing
            return if a & attr::NORMAL != 0 { bpe::decode_text(text) } else { Vec::new() };
        }
        if a & attr::NORMAL != 0 {
            return unescape_spm(text);
        }
        if a & attr::BYTE != 0 {
            return v.token_to_byte(id).map(|b| vec![b]).unwrap_or_default();
        }
        Vec::new()
    }

    /// Token ids → bytes (llama_detokenize with remove_special / unparse_special).
    pub fn decode_bytes(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let v = &self.vocab;
        let mut ids = ids;
        let mut remove_space = v.add_space_prefix;
        if remove_special && v.add_bos && !ids.is_empty() && ids.first().copied() == v.bos {
            ids = &ids[1..];
            remove_space = false;
        }
        if remove_special && v.add_eos && ids.last().is_some() && ids.last().copied() == v.eos {
            ids = &ids[..ids.len() - 1];
        }
        let mut out = Vec::new();
        for &id in ids {
            let piece = self.token_to_piece(id, unparse_special);
            let p: &[u8] = if remove_space && piece.first() == Some(&b' ') { &piece[1..] } else { &piece };
            remove_space = false;
            out.extend_from_slice(p);
        }
        if self.bpe.as_ref().is_some_and(|b| b.config.clean_spaces) {
            return bpe::clean_spaces(&out);
        }
        out
    }

    /// Token ids → text; invalid UTF-8 (split multibyte characters) is replaced.
    pub fn decode(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> String {
        String::from_utf8_lossy(&self.decode_bytes(ids, remove_special, unparse_special)).into_owned()
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return None;
    }
    let first = needle[0];
    let last = hay.len() - needle.len();
    let mut i = 0;
    while i <= last {
        match hay[i..=last].iter().position(|&b| b == first) {
            None => return None,
            Some(p) => {
                i += p;
                if &hay[i..i + needle.len()] == needle {
                    return Some(i);
                }
                i += 1;
            }
        }
    }
    None
}

/// U+2581 → space.
fn unescape_spm(t: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len());
    let mut i = 0;
    while i < t.len() {
        if t[i..].starts_with("\u{2581}".as_bytes()) {
            out.push(b' ');
            i += 3;
        } else {
            out.push(t[i]);
            i += 1;
        }
    }
    out
}
