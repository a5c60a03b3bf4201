//! Pre-tokenization for byte-level BPE: the text is split into words by the
//! regex sequence of the preset named by `tokenizer.ggml.pre`, exactly as
//! llama.cpp's llm_tokenizer_bpe + unicode_regex_split do it.
//!
//! Each regex of a preset splits every chunk the previous ones produced into its
//! matches and the unmatched gaps between them (both kept); chunk ends act as the
//! text's ends for lookaheads and `$`. The regexes are hand-written (`rules.rs`)
//! over Unicode general categories rather than run by a regex engine: the patterns
//! are few and fixed, and this keeps llama.cpp's details exact: its custom GPT-2
//! and Llama-3 splitters, `\s` = White_Space, and its `std::wregex` fallback that
//! sees non-ASCII whitespace as U+000B in the regexes without `\p{..}`.
mod rules;
pub(crate) mod unicode;

pub use rules::{Class, Lead, Rule};

use rules::Cps;

/// Per-preset switches llama.cpp sets next to the pre-tokenizer type (llama-vocab.cpp, load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreConfig {
    /// The `tokenizer.ggml.pre` value this came from.
    pub name: String,
    /// The regex sequence; Err(type name) for a preset llama.cpp knows but llamars does not.
    pub rules: Result<Vec<Rule>, &'static str>,
    /// Whether detokenization cleans up spaces before punctuation (llama_detokenize).
    pub clean_spaces: bool,
    /// A word that is itself a token skips the merges (Llama 3, Tekken).
    pub ignore_merges: bool,
    /// Default of `add_bos` when `tokenizer.ggml.add_bos_token` is absent.
    pub add_bos: bool,
    /// The preset clears the default BOS id (GLM-4).
    pub no_default_bos: bool,
}

const GPT2: Rule = Rule::Gpt2;
const LLAMA3: Rule = Rule::Llama3 { digits: 3, marks: false, nl_tail: true };
const QWEN2: Rule = Rule::Llama3 { digits: 1, marks: false, nl_tail: true };

const fn run(lead: Lead, class: Class, min: usize, max: usize) -> Rule {
    Rule::Run { lead, class, min, max }
}
const fn one(class: Class) -> Rule {
    run(Lead::None, class, 1, 1)
}
const fn plus(class: Class) -> Rule {
    run(Lead::None, class, 1, usize::MAX)
}

/// The regexes of each llama.cpp pre-tokenizer type (llm_tokenizer_bpe constructor).
fn rules_of(kind: &str) -> Result<Vec<Rule>, &'static str> {
    use Class::*;
    Ok(match kind {
        "default" => vec![plus(PunctSym), GPT2, plus(Number), run(Lead::None, Digit, 3, 3)],
        "gpt2" => vec![GPT2],
        "llama3" => vec![LLAMA3],
        "qwen2" => vec![QWEN2],
        "seed-coder" => vec![Rule::Llama3 { digits: 1, marks: false, nl_tail: false }],
        "starcoder" => vec![one(Number), GPT2],
        "falcon" => vec![plus(PunctSymTick), GPT2, run(Lead::None, Digit, 3, 3)],
        "deepseek-llm" => vec![
            one(CrLf),
            run(Lead::OptWhite, DsLetters, 1, usize::MAX),
            run(Lead::OptWhite, DsPunct, 1, usize::MAX),
            Rule::TrailingWhite,
            plus(Cjk),
            plus(Number),
        ],
        "deepseek-coder" => vec![
            one(CrLf),
            run(Lead::OptWhite, Letter, 1, usize::MAX),
            run(Lead::OptWhite, Punct, 1, usize::MAX),
            plus(Cjk),
            one(Number),
        ],
        "deepseek-v3" => vec![run(Lead::None, Number, 1, 3), plus(CjkKana), Rule::Deepseek3],
        "bloom" => vec![run(Lead::OptSpace, NotBloomStop, 1, usize::MAX)],
        "viking" => vec![run(Lead::OptSpace, NotBloomStop, 1, usize::MAX), one(Number)],
        "tekken" => vec![Rule::CaseRuns { contractions: false, digits: 1 }],
        "chameleon" => return Err("chameleon"),
        "gpt-4o" => vec![Rule::CaseRuns { contractions: true, digits: 3 }],
        "superbpe" => return Err("superbpe"),
        "kimi-k2" => return Err("kimi-k2"),
        "afmoe" => return Err("afmoe"),
        _ => return Err("unknown"),
    })
}

impl PreConfig {
    /// The preset for a `tokenizer.ggml.pre` value; names llama.cpp does not know
    /// fall back to "default", as llama.cpp does (with a warning).
    pub fn from_name(pre: &str) -> PreConfig {
        // (llama.cpp pre-tokenizer type, clean_spaces, ignore_merges + add_bos)
        let (kind, clean, llama3_like) = match pre {
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2" => {
                ("llama3", true, true)
            }
            "dbrx" | "smaug-bpe" | "glm4" | "chatglm-bpe" => ("llama3", true, false),
            "deepseek-llm" => ("deepseek-llm", false, false),
            "deepseek-coder" => ("deepseek-coder", false, false),
            "deepseek-v3" | "hunyuan-dense" => ("deepseek-v3", false, false),
            "falcon" => ("falcon", true, false),
            "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" => ("starcoder", true, false),
            "command-r" | "smollm" => ("starcoder", false, false),
            "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0"
            | "mellum" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" | "mpt" | "olmo" | "jais" | "exaone4" | "modern-bert" => {
                ("gpt2", true, false)
            }
            "trillion" | "granite-docling" => ("gpt2", false, false),
            "qwen2" | "deepseek-r1-qwen" | "kormo" | "hunyuan" | "grok-2" | "bailingmoe" | "bailingmoe2"
            | "llada-moe" => ("qwen2", false, false),
            "stablelm2" | "megrez" => ("qwen2", true, false),
            "seed-coder" => ("seed-coder", false, false),
            "poro-chat" => ("bloom", false, false),
            "bloom" | "gpt3-finnish" => ("bloom", true, false),
            "viking" => ("viking", false, false),
            "tekken" => ("tekken", false, true),
            "chameleon" => ("chameleon", false, false),
            "gpt-4o" | "llama4" | "minimax-m2" | "kanana2" | "talkie" => ("gpt-4o", false, false),
            "superbpe" => ("superbpe", false, false),
            "kimi-k2" => ("kimi-k2", false, false),
            "afmoe" => ("afmoe", false, false),
            _ => ("default", true, false),
        };
        PreConfig {
            name: pre.to_string(),
            rules: rules_of(kind),
            clean_spaces: clean,
            ignore_merges: llama3_like,
            add_bos: llama3_like || kind == "chameleon",
            no_default_bos: matches!(pre, "glm4" | "chatglm-bpe"),
        }
    }
}

/// Split `text` into the byte ranges of its words, by `rules` applied in order.
pub fn split(rules: &[Rule], text: &str) -> Vec<(usize, usize)> {
    let mut offs = Vec::with_capacity(text.len() + 1);
    let mut cps = Cps { c: Vec::with_capacity(text.len()), f: Vec::with_capacity(text.len()) };
    for (i, c) in text.char_indices() {
        offs.push(i);
        cps.c.push(c);
        cps.f.push(unicode::flags(c));
    }
    offs.push(text.len());
    let n = cps.c.len();
    let mut chunks = if n == 0 { Vec::new() } else { vec![(0usize, n)] };
    for rule in rules {
        let mut next = Vec::with_capacity(chunks.len() * 2);
        for &(start, end) in &chunks {
            let mut gap = start;
            let mut p = start;
            while p < end {
                match rule.match_at(&cps, p, end) {
                    Ok(q) => {
                        let q = q.clamp(p + 1, end);
                        if gap < p {
                            next.push((gap, p));
                        }
                        next.push((p, q));
                        p = q;
                        gap = q;
                    }
                    Err(q) => p = q.max(p + 1),
                }
            }
            if gap < end {
                next.push((gap, end));
            }
        }
        chunks = next;
    }
    chunks.into_iter().map(|(a, b)| (offs[a], offs[b])).collect()
}

#[cfg(test)]
mod tests;
