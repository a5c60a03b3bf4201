//! Constrained generation through llguidance: GBNF (converted to Lark, `gbnf.rs`),
//! Lark (`%llguidance` grammars) and JSON schema. A `GrammarFactory` is built once per
//! model from its vocabulary; each request gets a `Grammar` that masks the logits
//! before sampling and follows the sampled tokens.
mod gbnf;

pub use gbnf::gbnf_to_lark;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use std::sync::Arc;

/// What a request asks its output to match.
#[derive(Debug, Clone, PartialEq)]
pub enum GrammarSpec {
    /// llama.cpp's GBNF (`grammar`); text starting with `%llguidance` is Lark.
    Gbnf(String),
    /// A JSON schema (`json_schema`, OpenAI `response_format`), as JSON text.
    JsonSchema(String),
}

pub struct GrammarFactory {
    factory: ParserFactory,
    n_vocab: usize,
}

impl GrammarFactory {
    /// `pieces[id]` is each token's text; `special[id]` marks control tokens (they never
    /// match grammar text). `eos` ends a finished grammar.
    pub fn new(pieces: &[Vec<u8>], special: &[bool], eos: u32) -> Result<GrammarFactory, String> {
        let words: Vec<Vec<u8>> = pieces
            .iter()
            .zip(special)
            .map(|(p, &sp)| if sp { [&[0xffu8][..], p].concat() } else { p.clone() })
            .collect();
        let info = TokRxInfo::new(words.len() as u32, eos);
        let trie = TokTrie::from(&info, &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| format!("grammar engine: {e}"))?;
        factory.quiet();
        Ok(GrammarFactory { factory, n_vocab: pieces.len() })
    }

    /// Compile a request's grammar. Errors name the field (`grammar` / `json_schema`).
    pub fn compile(&self, spec: &GrammarSpec) -> Result<Grammar, String> {
        let (field, top) = match spec {
            GrammarSpec::Gbnf(g) => {
                let t = g.trim_start();
                let lark = if t.starts_with("%llguidance") { g.clone() } else { gbnf_to_lark(g)? };
                ("grammar", TopLevelGrammar::from_lark(lark))
            }
            GrammarSpec::JsonSchema(s) => {
                let v: serde_json::Value = serde_json::from_str(s).map_err(|e| format!("json_schema: not valid JSON: {e}"))?;
                ("json_schema", TopLevelGrammar::from_json_schema(v))
            }
        };
        let parser = self.factory.create_parser(top).map_err(|e| format!("{field}: {e}"))?;
        let m = Matcher::new(Ok(parser));
        if let Some(e) = m.get_error() {
            return Err(format!("{field}: {e}"));
        }
        Ok(Grammar { m, n_vocab: self.n_vocab })
    }
}

pub struct Grammar {
    m: Matcher,
    n_vocab: usize,
}

impl Grammar {
    /// Set the logits of tokens the grammar does not allow next to -inf (only EOS once
    /// the grammar is complete).
    pub fn mask(&mut self, logits: &mut [f32]) -> Result<(), String> {
        let allowed = self.m.compute_mask_or_eos().map_err(|e| format!("grammar: {e}"))?;
        for (i, l) in logits.iter_mut().enumerate().take(self.n_vocab) {
            if !allowed.is_allowed(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Whether `token` may come next (cheap: no full mask).
    pub fn allows(&mut self, token: u32) -> bool {
        !self.m.is_stopped() && self.m.validate_tokens(&[token]).is_ok_and(|n| n == 1)
    }

    /// Follow a sampled token.
    pub fn accept(&mut self, token: u32) -> Result<(), String> {
        self.m.consume_token(token).map_err(|e| format!("grammar: {e}"))
    }

    pub fn is_stopped(&self) -> bool {
        self.m.is_stopped()
    }
}
