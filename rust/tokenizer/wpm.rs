//! WordPiece (`tokenizer.ggml.model = bert`), as the Hugging Face `tokenizers` library
//! runs a BERT checkpoint's tokenizer: its `BertNormalizer` (drop NUL, U+FFFD and
//! control characters, whitespace to spaces, spaces around CJK ideographs, NFD accent
//! stripping, lower-casing), its `BertPreTokenizer` (split on whitespace, isolate
//! punctuation) and greedy longest-match WordPiece with `[UNK]` for a word that does not
//! split or is longer than 100 characters.
//!
//! The vocabulary is in llama.cpp's GGUF form: a word-initial piece is stored as
//! `▁piece`, a continuation (`##piece` in the checkpoint) as bare `piece`, control tokens
//! unchanged. Where llama.cpp's own WPM tokenizer differs from `tokenizers` (see the
//! README), this follows `tokenizers`.
use super::vocab::Vocab;
use unicode_general_category::{get_general_category, GeneralCategory as G};
use unicode_normalization::UnicodeNormalization;

/// `tokenizers`' `max_input_chars_per_word`.
const MAX_WORD_CHARS: usize = 100;

/// The normalizer switches GGUF carries (`tokenizer.ggml.normalizer.*`; llama.cpp's
/// defaults: lower-case, and strip accents when lower-casing).
#[derive(Debug, Clone, Copy)]
pub struct WpmOptions {
    pub lowercase: bool,
    pub strip_accents: bool,
}

fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Other (C*): control, format, unassigned, private use, surrogate — but not \t \n \r.
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r')
        && matches!(get_general_category(c), G::Control | G::Format | G::Unassigned | G::PrivateUse | G::Surrogate)
}

/// ASCII punctuation or a P* category (`tokenizers`' `is_bert_punc`).
fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation() || super::pre::unicode::flags(c) & super::pre::unicode::PUNCT != 0
}

/// The CJK ideograph blocks BERT isolates (the `tokenizers` ranges, including its
/// 0x2B920 where the block starts at 0x2B820).
fn is_chinese_char(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// The normalized text (`BertNormalizer`, every step in its order).
pub fn normalize(text: &str, o: WpmOptions) -> String {
    let mut s = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c == '\0' || c == '\u{fffd}' || is_control(c) {
            continue;
        }
        if is_whitespace(c) {
            s.push(' ');
        } else if is_chinese_char(c) {
            s.push(' ');
            s.push(c);
            s.push(' ');
        } else {
            s.push(c);
        }
    }
    if o.strip_accents {
        s = s.nfd().filter(|&c| get_general_category(c) != G::NonspacingMark).collect();
    }
    if o.lowercase {
        s = s.chars().flat_map(char::to_lowercase).collect();
    }
    s
}

/// Words of the normalized text (`BertPreTokenizer`).
pub fn words(norm: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for w in norm.split(char::is_whitespace).filter(|w| !w.is_empty()) {
        let mut start = 0;
        for (i, c) in w.char_indices() {
            if is_punctuation(c) {
                if start < i {
                    out.push(&w[start..i]);
                }
                out.push(&w[i..i + c.len_utf8()]);
                start = i + c.len_utf8();
            }
        }
        if start < w.len() {
            out.push(&w[start..]);
        }
    }
    out
}

/// Append the WordPiece ids of `text` (no special tokens added).
pub fn tokenize(v: &Vocab, o: WpmOptions, text: &str, out: &mut Vec<u32>) {
    let norm = normalize(text, o);
    let mut key = Vec::with_capacity(64);
    for w in words(&norm) {
        let unk = || v.unk.into_iter();
        if w.chars().count() > MAX_WORD_CHARS {
            out.extend(unk());
            continue;
        }
        let mark = out.len();
        let mut start = 0;
        while start < w.len() {
            // the longest piece from `start` that the vocabulary holds
            let mut end = w.len();
            let mut found = None;
            while end > start {
                key.clear();
                if start == 0 {
                    key.extend_from_slice("\u{2581}".as_bytes());
                }
                key.extend_from_slice(&w.as_bytes()[start..end]);
                if let Some(id) = v.text_to_token(&key) {
                    found = Some(id);
                    break;
                }
                end = w[..end].char_indices().next_back().map_or(start, |(i, _)| i);
            }
            match found {
                Some(id) => {
                    out.push(id);
                    start = end;
                }
                None => {
                    out.truncate(mark);
                    out.extend(unk());
                    break;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const O: WpmOptions = WpmOptions { lowercase: true, strip_accents: true };

    #[test]
    fn normalizer_and_words() {
        let n = normalize("Héllo,\tWORLD!\u{0}野口 x\u{200b}y", O);
        assert_eq!(n, "hello, world! 野  口  xy");
        assert_eq!(words(&n), ["hello", ",", "world", "!", "野", "口", "xy"]);
        let keep = WpmOptions { lowercase: false, strip_accents: false };
        assert_eq!(normalize("Héllo", keep), "Héllo");
        assert_eq!(words("a...b"), ["a", ".", ".", ".", "b"]);
    }
}
