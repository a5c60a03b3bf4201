//! The vocabulary as llama.cpp loads it from `tokenizer.ggml.*` metadata.
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use std::collections::HashMap;

/// Token attributes (llama_token_attr bits).
pub mod attr {
    pub const NORMAL: u32 = 1 << 2;
    pub const UNKNOWN: u32 = 1 << 0;
    pub const CONTROL: u32 = 1 << 3;
    pub const USER_DEFINED: u32 = 1 << 4;
    pub const BYTE: u32 = 1 << 5;
    pub const UNUSED: u32 = 1 << 1;
    pub const LSTRIP: u32 = 1 << 7;
    pub const RSTRIP: u32 = 1 << 8;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VocabKind {
    /// SentencePiece (tokenizer.ggml.model = "llama")
    Spm,
    /// Byte-level BPE (tokenizer.ggml.model = "gpt2")
    Bpe,
    /// WordPiece (tokenizer.ggml.model = "bert")
    Wpm,
    /// Unigram (tokenizer.ggml.model = "t5")
    Ugm,
}

pub struct Vocab {
    pub kind: VocabKind,
    pub pre: String,
    pub texts: Vec<Vec<u8>>,
    pub scores: Vec<f32>,
    pub attrs: Vec<u32>,
    pub token_to_id: HashMap<Vec<u8>, u32>,
    pub merges: Vec<(String, String)>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub pad: Option<u32>,
    /// The separator appended after a text when `add_sep` (WordPiece: `[SEP]`).
    pub sep: Option<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_sep: bool,
    /// WordPiece normalizer switches (`tokenizer.ggml.normalizer.*`).
    pub wpm: super::wpm::WpmOptions,
    pub add_space_prefix: bool,
    /// Unigram: collapse runs of spaces (`tokenizer.ggml.remove_extra_whitespaces`).
    pub remove_extra_whitespaces: bool,
    /// End-of-generation tokens (eos, eot and known turn-end tokens).
    pub eog: Vec<u32>,
    /// Control / user-defined / unknown tokens, longest text first (tokenizer_st_partition order).
    pub special_cache: Vec<u32>,
    byte_to_id: [Option<u32>; 256],
}

fn type_to_attr(t: i64) -> u32 {
    match t {
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => attr::NORMAL,
    }
}

/// Tokens llama.cpp treats as end-of-turn when no eot id is given (llama-vocab.cpp).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>",
    "<｜end▁of▁sentence｜>", "<|end_of_text|>", "<end_of_utterance>",
];

/// Token texts that end a generation (llama.cpp's list, 2026).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>", "<end_of_utterance>",
    "<eos>", "<turn|>", "<|tool_response>", "<｜end▁of▁sentence｜>", "[e~[",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &["<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

impl Vocab {
    pub fn from_gguf(g: &Gguf) -> Result<Vocab> {
        let model = g.get_str("tokenizer.ggml.model")?;
        let kind = match model {
            "llama" => VocabKind::Spm,
            "gpt2" => VocabKind::Bpe,
            "bert" => VocabKind::Wpm,
            "t5" => VocabKind::Ugm,
            other => {
                return Err(Error::Tokenizer(format!(
                    "{}: tokenizer model '{other}' is not supported (supported: llama (SPM), gpt2 (BPE), bert (WordPiece), t5 (Unigram))",
                    g.path().display()
                )))
            }
        };
        let pre = g.get("tokenizer.ggml.pre").and_then(|v| v.as_str()).unwrap_or("default").to_string();
        let tokens = g.get_array("tokenizer.ggml.tokens")?;
        let n = tokens.len();
        if n == 0 {
            return Err(Error::Tokenizer(format!("{}: tokenizer.ggml.tokens is empty", g.path().display())));
        }
        let mut texts = Vec::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            let s = t.as_str().ok_or_else(|| {
                Error::Tokenizer(format!("{}: tokenizer.ggml.tokens[{i}] is not a string", g.path().display()))
            })?;
            texts.push(s.as_bytes().to_vec());
        }
        let scores = match g.get("tokenizer.ggml.scores").and_then(|v| v.as_array()) {
            Some(a) if a.len() == n => a.iter().map(|v| v.as_f64().unwrap_or(0.0) as f32).collect(),
            Some(a) => {
                return Err(Error::Tokenizer(format!(
                    "{}: tokenizer.ggml.scores has {} entries for {n} tokens",
                    g.path().display(),
                    a.len()
                )))
            }
            None => vec![0.0; n],
        };
        let mut attrs: Vec<u32> = match g.get("tokenizer.ggml.token_type").and_then(|v| v.as_array()) {
            Some(a) if a.len() == n => a.iter().map(|v| type_to_attr(v.as_i64().unwrap_or(1))).collect(),
            Some(a) => {
                return Err(Error::Tokenizer(format!(
                    "{}: tokenizer.ggml.token_type has {} entries for {n} tokens",
                    g.path().display(),
                    a.len()
                )))
            }
            None => vec![attr::NORMAL; n],
        };
        // "left right", rank = index; split at the first space after the first byte and
        // keep malformed entries as ("", "") so ranks stay indices (llama-vocab.cpp, load)
        let merges = match g.get("tokenizer.ggml.merges").and_then(|v| v.as_array()) {
            Some(a) => a
                .iter()
                .map(|v| {
                    let s = v.as_str().unwrap_or("");
                    match s.bytes().skip(1).position(|b| b == b' ') {
                        Some(p) => (s[..p + 1].to_string(), s[p + 2..].to_string()),
                        None => (String::new(), String::new()),
                    }
                })
                .collect(),
            None => Vec::new(),
        };
        let pre_cfg = super::pre::PreConfig::from_name(&pre);
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in texts.iter().enumerate() {
            token_to_id.insert(t.clone(), i as u32);
        }
        let id = |key: &str| -> Option<u32> {
            g.get(key).and_then(|v| v.as_u64()).filter(|&v| v < n as u64).map(|v| v as u32)
        };
        let flag = |key: &str, default: bool| g.get(key).and_then(|v| v.as_bool()).unwrap_or(default);
        let (def_bos, def_eos, def_unk) = match kind {
            VocabKind::Spm => (Some(1), Some(2), Some(0)),
            VocabKind::Bpe => (Some(11).filter(|_| !pre_cfg.no_default_bos), Some(11), None),
            // [CLS], no end-of-sequence token, [UNK] (llama-vocab.cpp)
            VocabKind::Wpm => (Some(101), None, Some(100)),
            // no beginning-of-sequence token, </s>, <unk> (llama-vocab.cpp)
            VocabKind::Ugm => (None, Some(1), Some(2)),
        };
        let bos = id("tokenizer.ggml.bos_token_id").or(def_bos.filter(|&i| i < n as u32));
        let eos = id("tokenizer.ggml.eos_token_id").or(def_eos.filter(|&i| i < n as u32));
        let unk = id("tokenizer.ggml.unknown_token_id").or(def_unk.filter(|&i| i < n as u32));
        let pad = id("tokenizer.ggml.padding_token_id").or(if matches!(kind, VocabKind::Wpm | VocabKind::Ugm) { Some(0) } else { None });
        let sep = id("tokenizer.ggml.seperator_token_id").or(if kind == VocabKind::Wpm { Some(102).filter(|&i| i < n as u32) } else { None });
        let mut eot = id("tokenizer.ggml.eot_token_id");
        if eot.is_none() {
            for t in EOT_TEXTS {
                if let Some(&i) = token_to_id.get(t.as_bytes()) {
                    eot = Some(i);
                    break;
                }
            }
        }
        let mut eog = Vec::new();
        for t in [eos, eot, id("tokenizer.ggml.eom_token_id")].into_iter().flatten() {
            if !eog.contains(&t) {
                eog.push(t);
            }
        }
        // llama.cpp (llama-vocab.cpp, 2026): the FIM pad / repo / file-separator tokens (from
        // the metadata, else found by their text) and every token spelled as an end of turn
        // end generation; such a token that is not control-type is made control-type
        let mut mark = |i: u32, eog: &mut Vec<u32>| {
            attrs[i as usize] |= attr::CONTROL;
            if !eog.contains(&i) {
                eog.push(i);
            }
        };
        for (key, texts) in [
            ("tokenizer.ggml.fim_pad_token_id", FIM_PAD_TEXTS),
            ("tokenizer.ggml.fim_rep_token_id", FIM_REP_TEXTS),
            ("tokenizer.ggml.fim_sep_token_id", FIM_SEP_TEXTS),
        ] {
            if let Some(i) = id(key) {
                if !eog.contains(&i) {
                    eog.push(i);
                }
            } else if let Some(&i) = texts.iter().find_map(|t| token_to_id.get(t.as_bytes())) {
                mark(i, &mut eog);
            }
        }
        for t in EOG_TEXTS {
            if let Some(&i) = token_to_id.get(t.as_bytes()) {
                mark(i, &mut eog);
            }
        }
        let text_of = |i: u32| texts.get(i as usize).map(|t| t.as_slice()).unwrap_or(b"");
        let eog_with = |eog: &[u32], t: &[u8]| eog.iter().copied().find(|&i| text_of(i) == t);
        // harmony / solar-open: <|end|> ends a message, not the generation
        let has = |eog: &[u32], t: &[u8]| eog_with(eog, t).is_some();
        let call = has(&eog, b"<|call|>") || has(&eog, b"<|calls|>");
        if let Some(end) = eog_with(&eog, b"<|end|>") {
            if call && (has(&eog, b"<|return|>") || has(&eog, b"<|flush|>")) {
                eog.retain(|&i| i != end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        // gemma4 / plamo: </s> is a normal token there
        if let Some(s_id) = eog_with(&eog, b"</s>") {
            if has(&eog, b"<|tool_response>") || has(&eog, b"<|plamo:eos|>") {
                eog.retain(|&i| i != s_id);
                attrs[s_id as usize] = attr::NORMAL;
            }
        }
        let mut special_cache: Vec<u32> = (0..n as u32)
            .filter(|&i| attrs[i as usize] & (attr::CONTROL | attr::USER_DEFINED | attr::UNKNOWN) != 0)
            .filter(|&i| !texts[i as usize].is_empty())
            .collect();
        special_cache.sort_by(|&a, &b| texts[b as usize].len().cmp(&texts[a as usize].len()).then(a.cmp(&b)));
        let mut byte_to_id = [None; 256];
        for (b, slot) in byte_to_id.iter_mut().enumerate() {
            let hex = format!("<0x{b:02X}>");
            *slot = token_to_id.get(hex.as_bytes()).copied().or_else(|| token_to_id.get(&[b as u8][..]).copied());
        }
        let add_bos = flag("tokenizer.ggml.add_bos_token", matches!(kind, VocabKind::Spm | VocabKind::Wpm) || pre_cfg.add_bos && kind == VocabKind::Bpe);
        let add_eos = flag("tokenizer.ggml.add_eos_token", kind == VocabKind::Ugm);
        let add_sep = flag("tokenizer.ggml.add_sep_token", kind == VocabKind::Wpm);
        let lowercase = flag("tokenizer.ggml.normalizer.lowercase", true);
        let wpm = super::wpm::WpmOptions { lowercase, strip_accents: flag("tokenizer.ggml.normalizer.strip_accents", lowercase) };
        let add_space_prefix = flag("tokenizer.ggml.add_space_prefix", kind == VocabKind::Spm);
        let remove_extra_whitespaces = flag("tokenizer.ggml.remove_extra_whitespaces", false);
        Ok(Vocab {
            kind,
            pre,
            texts,
            scores,
            attrs,
            token_to_id,
            merges,
            bos,
            eos,
            eot,
            unk,
            pad,
            sep,
            add_bos,
            add_eos,
            add_sep,
            wpm,
            add_space_prefix,
            remove_extra_whitespaces,
            eog,
            special_cache,
            byte_to_id,
        })
    }

    pub fn n_tokens(&self) -> usize {
        self.texts.len()
    }

    pub fn text_to_token(&self, s: &[u8]) -> Option<u32> {
        self.token_to_id.get(s).copied()
    }

    pub fn byte_to_token(&self, b: u8) -> Option<u32> {
        self.byte_to_id[b as usize]
    }

    pub fn attr(&self, id: u32) -> u32 {
        self.attrs.get(id as usize).copied().unwrap_or(attr::UNUSED)
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// The byte value of a `<0xXX>` byte token.
    pub fn token_to_byte(&self, id: u32) -> Option<u8> {
        let t = self.texts.get(id as usize)?;
        if t.len() == 6 && t.starts_with(b"<0x") && t.ends_with(b">") {
            u8::from_str_radix(std::str::from_utf8(&t[3..5]).ok()?, 16).ok()
        } else if t.len() == 1 {
            Some(t[0])
        } else {
            None
        }
    }
}
