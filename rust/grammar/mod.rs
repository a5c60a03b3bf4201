//! Constrained generation through llguidance: GBNF (converted to Lark, `gbnf.rs`),
//! Lark (`%llguidance` grammars) and JSON schema. A `GrammarFactory` is built once per
//! model from its vocabulary; each request gets a `Grammar` that masks the logits
//! before sampling and follows the sampled tokens.
mod gbnf;
pub mod limits;

pub use gbnf::gbnf_to_lark;

/// A JSON schema (text) with the bounds `harden_schema` adds, as JSON text: for schemas
/// embedded in Lark grammars (`%json {...}`, tool calls), which bypass `compile`.
pub fn harden_schema_text(schema: &str) -> Result<String, String> {
    let mut v: serde_json::Value = serde_json::from_str(schema).map_err(|e| format!("json_schema: not valid JSON: {e}"))?;
    limits::check_schema("json_schema", schema, &v)?;
    harden_schema(&mut v);
    Ok(v.to_string())
}

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
                let is_lark = g.trim_start().starts_with("%llguidance");
                limits::check_grammar("grammar", g, is_lark)?;
                let lark = if is_lark { g.clone() } else { gbnf_to_lark(g)? };
                ("grammar", TopLevelGrammar::from_lark(lark))
            }
            GrammarSpec::JsonSchema(s) => {
                let mut v: serde_json::Value = serde_json::from_str(s).map_err(|e| format!("json_schema: not valid JSON: {e}"))?;
                limits::check_schema("json_schema", s, &v)?;
                harden_schema(&mut v);
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

    /// Follow text that was generated before the grammar engaged (a lazy grammar's
    /// trigger and what came after it in the same token).
    pub fn accept_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        let env = self.m.tok_env().map_err(|e| format!("grammar: {e}"))?;
        let toks = env.tokenize_bytes(bytes);
        let n = self.m.try_consume_tokens(&toks).map_err(|e| format!("grammar: {e}"))?;
        if n == toks.len() {
            Ok(())
        } else {
            Err(format!("grammar: the text after the trigger does not match: {:?}", String::from_utf8_lossy(bytes)))
        }
    }

    pub fn is_stopped(&self) -> bool {
        self.m.is_stopped()
    }
}

/// What llama.cpp's schema converter bounds, bounded here too, so a small model cannot
/// loop inside a value: whitespace between tokens (at most two newlines and 20 spaces or
/// tabs, unless the schema sets `x-guidance`), integral parts (±(2^53 − 1)), decimal
/// places of numbers (10; llama.cpp allows 16, llguidance's `multipleOf` takes at most
/// 10), fractional seconds of `time` / `date-time` (9 digits). As in llama.cpp, an object
/// that lists properties and says nothing of others allows no others, and `allOf` over
/// plain object schemas is merged into one object.
pub fn harden_schema(v: &mut serde_json::Value) {
    walk_schema(v);
    if let serde_json::Value::Object(m) = v {
        if !m.contains_key("x-guidance") {
            m.insert("x-guidance".into(), serde_json::json!({ "whitespace_pattern": "(?:\\x20|\\n{1,2}[\\x20\\t]{0,20})" }));
        }
    }
}

const DATE_RX: &str = "[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])";
const TIME_RX: &str = "(?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])";

fn walk_schema(v: &mut serde_json::Value) {
    const SAFE: i64 = (1 << 53) - 1;
    match v {
        serde_json::Value::Array(items) => items.iter_mut().for_each(walk_schema),
        serde_json::Value::Object(m) => {
            merge_all_of(m);
            if m.contains_key("properties") && !m.contains_key("additionalProperties") && !m.contains_key("patternProperties") {
                m.insert("additionalProperties".into(), false.into());
            }
            let has = |t: &str| match m.get("type") {
                Some(serde_json::Value::String(x)) => x == t,
                Some(serde_json::Value::Array(ts)) => ts.iter().any(|x| x == t),
                _ => false,
            };
            let (int, num, string) = (has("integer"), has("number"), has("string"));
            if int || num {
                if !m.contains_key("minimum") && !m.contains_key("exclusiveMinimum") {
                    m.insert("minimum".into(), (-SAFE).into());
                }
                if !m.contains_key("maximum") && !m.contains_key("exclusiveMaximum") {
                    m.insert("maximum".into(), SAFE.into());
                }
            }
            if num && !int && !m.contains_key("multipleOf") {
                m.insert("multipleOf".into(), serde_json::json!(1e-10));
            }
            if string && !m.contains_key("pattern") {
                let rx = match m.get("format").and_then(|f| f.as_str()) {
                    Some("time") => Some(format!("^{TIME_RX}$")),
                    Some("date-time") => Some(format!("^{DATE_RX}T{TIME_RX}$")),
                    _ => None,
                };
                if let Some(rx) = rx {
                    m.remove("format");
                    m.insert("pattern".into(), rx.into());
                }
            }
            for (k, sub) in m.iter_mut() {
                if !matches!(k.as_str(), "const" | "enum" | "default" | "examples" | "x-guidance") {
                    walk_schema(sub);
                }
            }
        }
        _ => {}
    }
}

/// `allOf` whose branches are all plain object schemas (properties / required only) →
/// one object with their properties and required fields (llama.cpp merges them too).
fn merge_all_of(m: &mut serde_json::Map<String, serde_json::Value>) {
    const PLAIN: [&str; 6] = ["type", "properties", "required", "additionalProperties", "title", "description"];
    let Some(serde_json::Value::Array(branches)) = m.get("allOf") else { return };
    let plain = |b: &serde_json::Value| {
        b.as_object().is_some_and(|o| o.keys().all(|k| PLAIN.contains(&k.as_str())) && o.get("type").is_none_or(|t| t == "object"))
    };
    if branches.is_empty() || !branches.iter().all(plain) || m.contains_key("properties") {
        return;
    }
    let (mut props, mut required) = (serde_json::Map::new(), Vec::<serde_json::Value>::new());
    for b in branches.iter().filter_map(|b| b.as_object()) {
        if let Some(serde_json::Value::Object(p)) = b.get("properties") {
            props.extend(p.clone());
        }
        if let Some(serde_json::Value::Array(r)) = b.get("required") {
            required.extend(r.iter().filter(|x| !required.contains(x)).cloned().collect::<Vec<_>>());
        }
    }
    m.remove("allOf");
    m.insert("type".into(), "object".into());
    m.insert("properties".into(), props.into());
    m.insert("required".into(), required.into());
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn hardening_bounds_what_a_model_could_write_forever() {
        let mut v = json!({"type": "object", "properties": {
            "n": {"type": "integer"}, "x": {"type": "number", "maximum": 3},
            "t": {"type": "string", "format": "date-time"},
            "all": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                               {"properties": {"b": {"type": "boolean"}}, "required": ["b"]}]}}});
        harden_schema(&mut v);
        let p = &v["properties"];
        assert_eq!(v["additionalProperties"], json!(false));
        assert_eq!((p["n"]["minimum"].as_i64(), p["n"]["maximum"].as_i64()), (Some(-(1i64 << 53) + 1), Some((1i64 << 53) - 1)));
        assert!(p["n"].get("multipleOf").is_none());
        assert_eq!((p["x"]["maximum"].as_i64(), p["x"]["multipleOf"].as_f64()), (Some(3), Some(1e-10)));
        assert!(p["t"].get("format").is_none() && p["t"]["pattern"].as_str().is_some_and(|r| r.contains("[0-9]{1,9}")));
        assert_eq!(p["all"]["required"], json!(["a", "b"]));
        assert_eq!(p["all"]["additionalProperties"], json!(false));
        assert!(p["all"].get("allOf").is_none());
        assert!(v["x-guidance"]["whitespace_pattern"].as_str().is_some());
        // a schema that says what it wants keeps it
        let mut w = json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": true, "x-guidance": {"lenient": true}});
        harden_schema(&mut w);
        assert_eq!(w["additionalProperties"], json!(true));
        assert_eq!(w["x-guidance"], json!({"lenient": true}));
    }
}
