//! Every generation field a caller can set, defined once: its name, its kind, where it
//! lands in `RequestParams`, how a value is read (and range-checked), and how the effective
//! value is reported back. `Engine`, `AsyncEngine` and every server route build requests
//! through `RequestParams::from_fields`; the defaults are the `Default` impls of
//! `RequestParams` / `GenParams` / `SamplingParams`, exported through `defaults()`.
//!
//! Values arrive as JSON (`serde_json::Value`; the Python layer converts its objects),
//! `null` meaning "not set" (the default), except for `max_tokens` where it means "no
//! limit". Type errors and the ranges of the request fields are checked here; the ranges
//! of the sampler fields in `SamplingParams::validate` (one place each). Every message
//! starts with the field's name as the caller spelled it (`names` renames, e.g.
//! `max_tokens` → `n_predict` for llama-server's routes).
use super::decode::GenParams;
use super::request::RequestParams;
use super::speculative::MAX_DRAFT;
use crate::error::{Error, Result};
use crate::grammar::GrammarSpec;
use crate::sampling::{parse_sampler_names, parse_sampling_seq, SamplingParams};
use serde_json::{json, Map, Number, Value};

/// What the setters may need from the model: vocabulary size and a tokenizer for
/// `logit_bias` keys given as text.
pub struct Ctx<'a> {
    pub n_vocab: usize,
    /// LoRA adapters loaded (the ids a request's `lora` may name).
    pub n_lora: usize,
    pub tokenize: &'a dyn Fn(&str) -> Vec<u32>,
}

/// A field's value type, for the Python request schemas (`schemas/native.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Float,
    Int,
    Bool,
    Str,
    /// a string or a list of strings
    StrOrList,
    StrList,
    /// `{token id or text: bias}` or `[[token id or text, bias], ...]`
    Bias,
    /// a JSON schema: an object, `true`, or its JSON text
    Schema,
    /// a list of sampler names or a string of letters
    Samplers,
    /// `[{"id": adapter id, "scale": factor}, ...]`
    Lora,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Float => "float",
            Kind::Int => "int",
            Kind::Bool => "bool",
            Kind::Str => "str",
            Kind::StrOrList => "str_or_list",
            Kind::StrList => "str_list",
            Kind::Bias => "bias",
            Kind::Schema => "schema",
            Kind::Samplers => "samplers",
            Kind::Lora => "lora",
        }
    }
}

/// `Sampling`: the sampler chain and output constraints every generation route accepts;
/// `Request`: how one request runs (its routes name and default some of these themselves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Sampling,
    Request,
}

type Setter = fn(&mut RequestParams, &Value, &Ctx) -> std::result::Result<(), String>;
type Getter = fn(&RequestParams) -> Value;

pub struct Field {
    pub name: &'static str,
    pub kind: Kind,
    pub group: Group,
    pub doc: &'static str,
    set: Setter,
    get: Getter,
}

// ------------------------------------------------------------------ value readers

fn float(v: &Value) -> std::result::Result<f32, String> {
    match v {
        Value::Number(n) => {
            let x = n.as_f64().ok_or("must be a number")?;
            let f = x as f32;
            if x.is_finite() && !f.is_finite() {
                return Err(format!("{x:e} is out of range (32-bit floats end near 3.4e38)"));
            }
            Ok(f)
        }
        _ => Err("must be a number".into()),
    }
}

fn int(v: &Value) -> std::result::Result<i64, String> {
    match v {
        Value::Number(n) => match n.as_i64() {
            Some(i) => Ok(i),
            None if n.is_u64() => Err(format!("{n} is out of range")),
            None => Err("must be an integer".into()),
        },
        _ => Err("must be an integer".into()),
    }
}

fn int_in(v: &Value, lo: i64, hi: i64) -> std::result::Result<i64, String> {
    let i = int(v)?;
    if i < lo || i > hi {
        return Err(if hi == i64::MAX { format!("must be >= {lo}, got {i}") } else { format!("must be within [{lo}, {hi}], got {i}") });
    }
    Ok(i)
}

fn boolean(v: &Value) -> std::result::Result<bool, String> {
    v.as_bool().ok_or_else(|| "must be true or false".into())
}

fn string(v: &Value) -> std::result::Result<String, String> {
    v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".into())
}

fn strings(v: &Value) -> std::result::Result<Vec<String>, String> {
    let Value::Array(a) = v else { return Err("must be a list of strings".into()) };
    a.iter()
        .enumerate()
        .map(|(i, x)| x.as_str().map(str::to_owned).ok_or_else(|| format!("[{i}] must be a string")))
        .collect()
}

/// Most distinct DRY sequence breakers a request may give (each is matched against the
/// vocabulary when the sampler is built).
pub const MAX_DRY_BREAKERS: usize = 256;

/// DRY breakers, duplicates dropped (first occurrence kept), at most `MAX_DRY_BREAKERS`.
fn dry_breakers(v: &Value) -> std::result::Result<Vec<String>, String> {
    let mut seen = std::collections::HashSet::new();
    let list: Vec<String> = strings(v)?.into_iter().filter(|b| seen.insert(b.clone())).collect();
    if list.len() > MAX_DRY_BREAKERS {
        return Err(format!("{} distinct breakers exceed the limit of {MAX_DRY_BREAKERS}", list.len()));
    }
    Ok(list)
}

/// Most stop strings a request may give (each is matched against the output after every token).
pub const MAX_STOP: usize = 64;

fn stop_list(v: &Value) -> std::result::Result<Vec<String>, String> {
    let list = match v {
        Value::String(s) => vec![s.clone()],
        _ => strings(v).map_err(|e| if e.starts_with('[') { e } else { "must be a string or a list of strings".into() })?,
    };
    if list.len() > MAX_STOP {
        return Err(format!("at most {MAX_STOP} stop strings, got {}", list.len()));
    }
    Ok(list.into_iter().filter(|s| !s.is_empty()).collect())
}

/// Most logit-bias entries a request may give: every token of the largest vocabularies
/// (Gemma's 262,144) once.
pub const MAX_LOGIT_BIAS: usize = 1 << 18;

/// llama.cpp's logit_bias forms: `[[id or text, bias], ...]` or `{id or text: bias}`;
/// a text biases each of its tokens; bias `false` bans (−inf).
fn logit_bias(v: &Value, cx: &Ctx) -> std::result::Result<Vec<(u32, f32)>, String> {
    let items: Vec<(Value, &Value)> = match v {
        Value::Object(m) => m.iter().map(|(k, b)| (Value::String(k.clone()), b)).collect(),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .map(|(i, e)| match e.as_array().map(Vec::as_slice) {
                Some([k, b]) => Ok((k.clone(), b)),
                _ => Err(format!("[{i}] must be a [token id or text, bias] pair")),
            })
            .collect::<std::result::Result<_, _>>()?,
        _ => return Err("must be an object {token: bias} or a list of [token, bias] pairs".into()),
    };
    if items.len() > MAX_LOGIT_BIAS {
        return Err(format!("{} entries exceed the limit of {MAX_LOGIT_BIAS}", items.len()));
    }
    let mut out = Vec::new();
    for (key, bias) in items {
        let b = match bias {
            Value::Bool(false) => f32::NEG_INFINITY,
            Value::Number(_) => float(bias).map_err(|e| format!("bias for {key}: {e}"))?,
            _ => return Err(format!("bias for {key} must be a number or false")),
        };
        let ids: Vec<i64> = match &key {
            Value::Number(_) => vec![int(&key).map_err(|e| format!("token {key}: {e}"))?],
            // a key of digits is a token id (strictly: ASCII digits, an optional '-')
            Value::String(s) if is_decimal(s) => vec![s.parse::<i64>().map_err(|_| format!("token id {s:?} is out of range"))?],
            Value::String(s) => (cx.tokenize)(s).into_iter().map(i64::from).collect(),
            _ => return Err(format!("{key} is not a token id or text")),
        };
        for id in ids {
            if id < 0 || id as u64 >= cx.n_vocab as u64 {
                return Err(format!("token id {id} is out of range [0, {})", cx.n_vocab));
            }
            out.push((id as u32, b));
        }
        if out.len() > MAX_LOGIT_BIAS {
            return Err(format!("the entries' texts give more than {MAX_LOGIT_BIAS} tokens"));
        }
    }
    Ok(out)
}

fn is_decimal(s: &str) -> bool {
    let d = s.strip_prefix('-').unwrap_or(s);
    !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit())
}

fn schema_text(v: &Value) -> std::result::Result<Option<String>, String> {
    match v {
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        Value::Object(_) | Value::Bool(true) => Ok(Some(v.to_string())),
        _ => Err("must be a JSON schema object (or its JSON text)".into()),
    }
}

fn samplers(v: &Value) -> std::result::Result<Vec<crate::sampling::SamplerKind>, String> {
    match v {
        Value::String(s) => parse_sampling_seq(s),
        _ => parse_sampler_names(&strings(v).map_err(|_| "must be a list of sampler names or a string of letters".to_string())?),
    }
    // the parsers' messages name `samplers[i]` / `sampling_seq`; the caller adds the name
    .map_err(|e| e.strip_prefix("samplers").or_else(|| e.strip_prefix("sampling_seq: ")).unwrap_or(&e).to_string())
}

/// llama-server's `lora`: `[{"id": i, "scale": s}, ...]`; an empty list means the server's
/// global scales (as no list). Ids must name a loaded adapter; a repeated id keeps its last scale.
fn lora_list(v: &Value, n_lora: usize) -> std::result::Result<Option<Vec<(usize, f32)>>, String> {
    let Value::Array(a) = v else { return Err("must be a list of {\"id\": adapter id, \"scale\": factor} objects".into()) };
    if a.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<(usize, f32)> = Vec::new();
    for (i, e) in a.iter().enumerate() {
        let Value::Object(m) = e else { return Err(format!("[{i}] must be an object with id and scale")) };
        let id = m.get("id").ok_or_else(|| format!("[{i}].id is required"))?;
        let id = int(id).map_err(|e| format!("[{i}].id: {e}"))?;
        if id < 0 || id as u64 >= n_lora as u64 {
            return Err(match n_lora {
                0 => format!("[{i}].id: no LoRA adapters are loaded (start the server with --lora FILE)"),
                n => format!("[{i}].id: {id} is not a loaded adapter (ids 0..{})", n - 1),
            });
        }
        let scale = match m.get("scale") {
            None | Some(Value::Null) => 0.0,
            Some(s) => float(s).map_err(|e| format!("[{i}].scale: {e}"))?,
        };
        if !scale.is_finite() {
            return Err(format!("[{i}].scale: must be a finite number"));
        }
        out.retain(|(x, _)| *x != id as usize);
        out.push((id as usize, scale));
    }
    out.sort_by_key(|&(id, _)| id);
    Ok(Some(out))
}

fn sampling(p: &mut RequestParams) -> &mut SamplingParams {
    &mut p.gen.sampling
}

/// An f32 as the f64 of its shortest decimal form (0.8f32 reports as 0.8, not 0.800000011920929).
fn f32v(x: f32) -> Value {
    format!("{x}").parse::<f64>().ok().and_then(Number::from_f64).map_or(Value::Null, Value::Number)
}

/// -1 (or null for max_tokens) = no limit; the value otherwise.
fn opt_count(v: Option<usize>) -> Value {
    v.map_or(json!(-1), |n| json!(n))
}

// ------------------------------------------------------------------ the table

macro_rules! field {
    ($name:literal, $kind:ident, $group:ident, $doc:literal, |$p:ident, $v:ident, $cx:ident| $set:expr, |$g:ident| $get:expr) => {
        Field {
            name: $name,
            kind: Kind::$kind,
            group: Group::$group,
            doc: $doc,
            set: |$p, $v, $cx| {
                let _ = &$cx;
                $set;
                Ok(())
            },
            get: |$g| serde_json::to_value($get).unwrap_or(Value::Null),
        }
    };
}

pub static FIELDS: &[Field] = &[
    field!("max_tokens", Int, Request, "tokens to generate (-1 or null: until the context is full)",
        |p, v, _c| p.gen.max_tokens = if v.is_null() { None } else { let n = int_in(v, -1, i64::MAX)?; (n >= 0).then_some(n as usize) },
        |p| opt_count(p.gen.max_tokens)),
    field!("stop", StrOrList, Request, "strings that end the generation (not included in the output)",
        |p, v, _c| p.gen.stop = stop_list(v)?, |p| &p.gen.stop),
    field!("cache_prompt", Bool, Request, "reuse the longest common prefix a slot already holds",
        |p, v, _c| p.cache_prompt = boolean(v)?, |p| p.cache_prompt),
    field!("id_slot", Int, Request, "run in this slot (-1: any)",
        |p, v, _c| p.id_slot = { let s = int_in(v, -1, i64::MAX)?; (s >= 0).then_some(s as usize) },
        |p| p.id_slot.map_or(json!(-1), |s| json!(s))),
    field!("n_keep", Int, Request, "prompt tokens kept on context shift or truncation (-1: all)",
        |p, v, _c| p.n_keep = int_in(v, -1, i64::MAX)?, |p| p.n_keep),
    field!("n_discard", Int, Request, "tokens dropped per context shift (0: half of what is not kept)",
        |p, v, _c| p.n_discard = int_in(v, 0, i64::MAX)? as usize, |p| p.n_discard),
    field!("truncate", Bool, Request, "cut an over-long prompt (keeping n_keep tokens) instead of refusing it",
        |p, v, _c| p.truncate = boolean(v)?, |p| p.truncate),
    field!("return_progress", Bool, Request, "report prompt processing after every chunk",
        |p, v, _c| p.return_progress = boolean(v)?, |p| p.return_progress),
    field!("n_indent", Int, Request, "end the generation at a line indented by fewer spaces (0: off)",
        |p, v, _c| p.gen.n_indent = int_in(v, 0, i64::MAX)? as usize, |p| p.gen.n_indent),
    field!("t_max_predict_ms", Int, Request, "stop after this long once a new line was generated (0: off)",
        |p, v, _c| p.gen.t_max_predict_ms = int_in(v, 0, i64::MAX)? as u64, |p| p.gen.t_max_predict_ms),
    field!("post_sampling_probs", Bool, Request, "report probabilities after the sampler chain",
        |p, v, _c| p.gen.post_sampling_probs = boolean(v)?, |p| p.gen.post_sampling_probs),
    field!("temperature", Float, Sampling, "<= 0: greedy",
        |p, v, _c| sampling(p).temperature = float(v)?, |p| f32v(p.gen.sampling.temperature)),
    field!("top_k", Int, Sampling, "keep the k most likely tokens (<= 0: off)",
        |p, v, _c| sampling(p).top_k = int(v)?.clamp(0, i32::MAX as i64) as usize, |p| p.gen.sampling.top_k),
    field!("top_p", Float, Sampling, "nucleus sampling (1.0: off)", |p, v, _c| sampling(p).top_p = float(v)?, |p| f32v(p.gen.sampling.top_p)),
    field!("min_p", Float, Sampling, "minimum probability relative to the best (0.0: off)",
        |p, v, _c| sampling(p).min_p = float(v)?, |p| f32v(p.gen.sampling.min_p)),
    field!("seed", Int, Sampling, "RNG seed (-1: random)",
        |p, v, _c| sampling(p).seed = match v {
            Value::Number(n) if n.is_u64() => n.as_u64(),
            _ => { let s = int(v)?; (s >= 0).then_some(s as u64) }
        },
        |p| p.gen.sampling.seed.map_or(json!(-1), |s| json!(s))),
    field!("n_probs", Int, Sampling, "report this many top log-probabilities per token",
        |p, v, _c| p.gen.n_probs = int_in(v, 0, 1000)? as usize, |p| p.gen.n_probs),
    field!("ignore_eos", Bool, Sampling, "keep generating past end-of-generation tokens",
        |p, v, _c| p.gen.ignore_eos = boolean(v)?, |p| p.gen.ignore_eos),
    field!("dynatemp_range", Float, Sampling, "dynamic temperature range (0.0: off)",
        |p, v, _c| sampling(p).dynatemp_range = float(v)?, |p| f32v(p.gen.sampling.dynatemp_range)),
    field!("dynatemp_exponent", Float, Sampling, "dynamic temperature exponent",
        |p, v, _c| sampling(p).dynatemp_exponent = float(v)?, |p| f32v(p.gen.sampling.dynatemp_exponent)),
    field!("typical_p", Float, Sampling, "locally typical sampling (1.0: off)",
        |p, v, _c| sampling(p).typical_p = float(v)?, |p| f32v(p.gen.sampling.typical_p)),
    field!("top_n_sigma", Float, Sampling, "top-n-sigma sampling (<= 0: off)",
        |p, v, _c| sampling(p).top_n_sigma = float(v)?, |p| f32v(p.gen.sampling.top_n_sigma)),
    field!("xtc_probability", Float, Sampling, "XTC probability (0.0: off)",
        |p, v, _c| sampling(p).xtc_probability = float(v)?, |p| f32v(p.gen.sampling.xtc_probability)),
    field!("xtc_threshold", Float, Sampling, "XTC threshold (> 0.5: off)",
        |p, v, _c| sampling(p).xtc_threshold = float(v)?, |p| f32v(p.gen.sampling.xtc_threshold)),
    field!("repeat_penalty", Float, Sampling, "penalty for repeated tokens (1.0: off)",
        |p, v, _c| sampling(p).repeat_penalty = float(v)?, |p| f32v(p.gen.sampling.repeat_penalty)),
    field!("presence_penalty", Float, Sampling, "presence penalty (0.0: off)",
        |p, v, _c| sampling(p).presence_penalty = float(v)?, |p| f32v(p.gen.sampling.presence_penalty)),
    field!("frequency_penalty", Float, Sampling, "frequency penalty (0.0: off)",
        |p, v, _c| sampling(p).frequency_penalty = float(v)?, |p| f32v(p.gen.sampling.frequency_penalty)),
    field!("repeat_last_n", Int, Sampling, "tokens the penalties look back at (-1: the context, 0: off)",
        |p, v, _c| sampling(p).repeat_last_n = int(v)?.clamp(i32::MIN as i64, i32::MAX as i64) as i32, |p| p.gen.sampling.repeat_last_n),
    field!("dry_multiplier", Float, Sampling, "DRY multiplier (0.0: off)",
        |p, v, _c| sampling(p).dry_multiplier = float(v)?, |p| f32v(p.gen.sampling.dry_multiplier)),
    field!("dry_base", Float, Sampling, "DRY base", |p, v, _c| sampling(p).dry_base = float(v)?, |p| f32v(p.gen.sampling.dry_base)),
    field!("dry_allowed_length", Int, Sampling, "DRY allowed length",
        |p, v, _c| sampling(p).dry_allowed_length = int_in(v, 0, i32::MAX as i64)? as usize, |p| p.gen.sampling.dry_allowed_length),
    field!("dry_penalty_last_n", Int, Sampling, "tokens DRY looks back at (-1: the context, 0: off)",
        |p, v, _c| sampling(p).dry_penalty_last_n = int(v)?.clamp(i32::MIN as i64, i32::MAX as i64) as i32, |p| p.gen.sampling.dry_penalty_last_n),
    field!("dry_sequence_breakers", StrList, Sampling, "strings DRY does not match across",
        |p, v, _c| sampling(p).dry_sequence_breakers = dry_breakers(v)?, |p| &p.gen.sampling.dry_sequence_breakers),
    field!("mirostat", Int, Sampling, "0: off, 1: Mirostat, 2: Mirostat 2.0",
        |p, v, _c| sampling(p).mirostat = int_in(v, 0, 2)? as u8, |p| p.gen.sampling.mirostat),
    field!("mirostat_tau", Float, Sampling, "Mirostat target entropy",
        |p, v, _c| sampling(p).mirostat_tau = float(v)?, |p| f32v(p.gen.sampling.mirostat_tau)),
    field!("mirostat_eta", Float, Sampling, "Mirostat learning rate",
        |p, v, _c| sampling(p).mirostat_eta = float(v)?, |p| f32v(p.gen.sampling.mirostat_eta)),
    field!("min_keep", Int, Sampling, "candidates the truncating samplers always leave",
        |p, v, _c| sampling(p).min_keep = int_in(v, 0, i32::MAX as i64)? as usize, |p| p.gen.sampling.min_keep),
    field!("logit_bias", Bias, Sampling, "added to the logits: {token id or text: bias}, bias false bans the token",
        |p, v, c| sampling(p).logit_bias = logit_bias(v, c)?,
        |p| p.gen.sampling.logit_bias.iter().map(|&(t, b)| if b == f32::NEG_INFINITY { json!([t, false]) } else { json!([t, f32v(b)]) }).collect::<Vec<_>>()),
    field!("samplers", Samplers, Sampling, "the order of the sampler chain (names, or letters as --sampling-seq)",
        |p, v, _c| sampling(p).samplers = samplers(v)?,
        |p| p.gen.sampling.samplers.iter().map(|s| s.name()).collect::<Vec<_>>()),
    field!("grammar", Str, Sampling, "GBNF (or Lark after %llguidance) the output must match",
        |p, v, _c| { let g = string(v)?; if !g.trim().is_empty() { set_grammar(p, GrammarSpec::Gbnf(g))? } },
        |p| match &p.gen.grammar { Some(GrammarSpec::Gbnf(g)) => g.as_str(), _ => "" }),
    field!("json_schema", Schema, Sampling, "a JSON schema the output must match",
        |p, v, _c| if let Some(s) = schema_text(v)? { set_grammar(p, GrammarSpec::JsonSchema(s))? },
        |p| match &p.gen.grammar { Some(GrammarSpec::JsonSchema(s)) => serde_json::from_str(s).unwrap_or(Value::Null), _ => Value::Null }),
    field!("grammar_triggers", StrList, Sampling, "words that engage the grammar (lazy grammar)",
        |p, v, _c| { let w = strings(v)?; if w.iter().any(|x| x.is_empty()) { return Err("a trigger word must not be empty".into()); } p.gen.grammar_triggers = w },
        |p| &p.gen.grammar_triggers),
    field!("preserved_tokens", StrList, Sampling, "special tokens written into the output text (a chat format's markup)",
        |p, v, _c| { let w = strings(v)?; if w.len() > MAX_PRESERVED { return Err(format!("at most {MAX_PRESERVED} tokens")); } p.gen.preserved_tokens = w },
        |p| &p.gen.preserved_tokens),
    field!("speculative.n_max", Int, Sampling, "most drafted tokens verified per step (0: no speculative decoding)",
        |p, v, _c| p.gen.spec.n_max = int_in(v, 0, MAX_DRAFT as i64)? as usize, |p| p.gen.spec.n_max),
    field!("speculative.n_min", Int, Sampling, "shorter drafts are not verified",
        |p, v, _c| p.gen.spec.n_min = int_in(v, 0, MAX_DRAFT as i64)? as usize, |p| p.gen.spec.n_min),
    field!("speculative.p_min", Float, Sampling, "a draft model's least probability for a drafted token",
        |p, v, _c| p.gen.spec.p_min = { let x = float(v)?; if !(0.0..=1.0).contains(&x) { return Err(format!("must be in [0, 1], got {x}")); } x },
        |p| f32v(p.gen.spec.p_min)),
    field!("lora", Lora, Sampling, "LoRA adapters for this request: [{\"id\", \"scale\"}]; adapters not listed run at scale 0 (empty or null: the server's scales)",
        |p, v, c| p.lora = lora_list(v, c.n_lora)?,
        |p| p.lora.iter().flatten().map(|&(id, s)| json!({"id": id, "scale": f32v(s)})).collect::<Vec<_>>()),
];

/// Most preserved tokens a request may name (each is looked up in the vocabulary).
pub const MAX_PRESERVED: usize = 256;

fn set_grammar(p: &mut RequestParams, spec: GrammarSpec) -> std::result::Result<(), String> {
    if p.gen.grammar.is_some() {
        return Err("give grammar or json_schema, not both".into());
    }
    p.gen.grammar = Some(spec);
    Ok(())
}

pub fn field(name: &str) -> Option<&'static Field> {
    FIELDS.iter().find(|f| f.name == name)
}

/// Every field's default value.
pub fn defaults() -> Map<String, Value> {
    RequestParams::default().settings()
}

impl RequestParams {
    /// A request for `prompt` with the given fields (the rest at their defaults). `names`
    /// maps a field to the name the caller knows it by, for messages. Every error is an
    /// `InvalidRequest` whose message starts with that name.
    pub fn from_fields(prompt: Vec<u32>, fields: &Map<String, Value>, cx: &Ctx, names: &dyn Fn(&str) -> String) -> Result<RequestParams> {
        let mut p = RequestParams { prompt, ..RequestParams::default() };
        let unknown: Vec<&str> = fields.keys().filter(|k| field(k).is_none()).map(String::as_str).collect();
        if !unknown.is_empty() {
            return Err(Error::InvalidRequest(format!("unknown generation parameter(s): {}", unknown.join(", "))));
        }
        // in table order, so json_schema after grammar gives one message for both
        for f in FIELDS {
            let Some(v) = fields.get(f.name) else { continue };
            if v.is_null() && f.name != "max_tokens" {
                continue;
            }
            (f.set)(&mut p, v, cx).map_err(|e| {
                let sep = if e.starts_with('[') { "" } else { ": " };
                Error::InvalidRequest(format!("{}{sep}{e}", names(f.name)))
            })?;
        }
        p.validate(cx.n_vocab).map_err(|e| {
            // messages start with the internal field name; show the caller's
            let (head, rest) = e.split_once(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).map_or((e.as_str(), ""), |(h, _)| (h, &e[h.len()..]));
            Error::InvalidRequest(format!("{}{rest}", if field(head).is_some() { names(head) } else { head.to_string() }))
        })?;
        Ok(p)
    }

    /// Checks across fields, and the sampler ranges (`SamplingParams::validate`).
    pub fn validate(&self, n_vocab: usize) -> std::result::Result<(), String> {
        if !self.gen.grammar_triggers.is_empty() && self.gen.grammar.is_none() {
            return Err("grammar_triggers: a lazy grammar needs a grammar or json_schema".into());
        }
        if let Some((t, _)) = self.gen.sampling.logit_bias.iter().find(|(t, _)| *t as usize >= n_vocab) {
            return Err(format!("logit_bias: token id {t} is out of range [0, {n_vocab})"));
        }
        self.gen.sampling.validate()
    }

    /// The effective value of every field (llama-server's `generation_settings` values).
    pub fn settings(&self) -> Map<String, Value> {
        FIELDS.iter().map(|f| (f.name.to_string(), (f.get)(self))).collect()
    }
}

impl Default for RequestParams {
    fn default() -> Self {
        RequestParams::new(Vec::new(), GenParams::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx() -> Ctx<'static> {
        Ctx { n_vocab: 100, n_lora: 2, tokenize: &|s: &str| s.bytes().map(|b| b as u32 % 100).collect() }
    }

    fn build(v: Value) -> Result<RequestParams> {
        let Value::Object(m) = v else { panic!() };
        RequestParams::from_fields(vec![1, 2], &m, &cx(), &|n| if n == "max_tokens" { "n_predict".into() } else { n.into() })
    }

    fn err(v: Value) -> String {
        build(v).err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn defaults_are_the_rust_defaults() {
        let d = defaults();
        assert_eq!(d["max_tokens"], json!(16));
        assert_eq!(d["temperature"], json!(0.8));
        assert_eq!(d["top_k"], json!(40));
        assert_eq!(d["seed"], json!(-1));
        assert_eq!(d["samplers"].as_array().map(Vec::len), Some(9));
        assert_eq!(d.len(), FIELDS.len());
        let p = build(json!({})).unwrap();
        assert_eq!(p.gen.sampling, SamplingParams::default());
        assert_eq!(p.prompt, vec![1, 2]);
    }

    #[test]
    fn every_field_round_trips_its_default() {
        // setting each field to its reported default changes nothing
        let d = defaults();
        let p = build(Value::Object(d.clone())).unwrap();
        assert_eq!(p.settings(), d);
    }

    #[test]
    fn messages_name_the_field_as_the_caller_knows_it() {
        assert!(err(json!({"max_tokens": -2})).starts_with("n_predict: must be >= -1"), "{}", err(json!({"max_tokens": -2})));
        assert!(err(json!({"top_p": 1.5})).starts_with("top_p must be in [0, 1]"));
        assert!(err(json!({"top_k": "x"})).starts_with("top_k: must be an integer"));
        assert!(err(json!({"seed": 1e300})).starts_with("seed: must be an integer"));
        assert!(err(json!({"n_probs": 5000})).starts_with("n_probs: must be within [0, 1000]"));
        assert!(err(json!({"mirostat": 3})).starts_with("mirostat: must be within [0, 2]"));
        assert!(err(json!({"temperature": 1e39})).starts_with("temperature: 1e39 is out of range"));
        assert!(err(json!({"bogus": 1, "zz": 2})).contains("unknown generation parameter(s): bogus, zz"));
        assert!(err(json!({"grammar": "root ::= \"a\"", "json_schema": {}})).contains("not both"));
        assert!(err(json!({"grammar_triggers": ["x"]})).starts_with("grammar_triggers: a lazy grammar needs"));
        assert!(err(json!({"stop": [1]})).starts_with("stop[0] must be a string"));
        assert!(err(json!({"stop": vec!["s"; 65]})).contains("at most 64"));
        let many = vec![json!([1, 1.0]); MAX_LOGIT_BIAS + 1];
        assert!(err(json!({"logit_bias": many})).starts_with("logit_bias: 262145 entries exceed the limit of 262144"));
    }

    #[test]
    fn integers_past_64_bits_are_a_request_error() {
        let big: Value = serde_json::from_str("18446744073709551616").unwrap(); // 2^64: an f64 in serde_json
        assert!(err(json!({"n_keep": big})).starts_with("n_keep: must be an integer"));
        assert!(err(json!({"n_keep": u64::MAX})).starts_with("n_keep: 18446744073709551615 is out of range"));
        assert_eq!(build(json!({"seed": u64::MAX})).unwrap().gen.sampling.seed, Some(u64::MAX));
    }

    #[test]
    fn logit_bias_forms() {
        let p = build(json!({"logit_bias": {"5": 1.5, "-1": false}}));
        assert!(p.is_err(), "-1 is out of range");
        let p = build(json!({"logit_bias": [[5, false], ["ab", 2.0]]})).unwrap();
        assert_eq!(p.gen.sampling.logit_bias, vec![(5, f32::NEG_INFINITY), (97, 2.0), (98, 2.0)]);
        assert!(err(json!({"logit_bias": {"１２": 1.0}})).is_empty(), "non-ASCII digits are text, tokenized");
        assert!(err(json!({"logit_bias": {"5": "x"}})).contains("must be a number or false"));
        assert!(err(json!({"logit_bias": {"100": 1}})).contains("out of range [0, 100)"));
        assert!(err(json!({"logit_bias": {"99999999999999999999999": 1}})).contains("out of range"));
        assert_eq!(p.settings()["logit_bias"], json!([[5, false], [97, 2.0], [98, 2.0]]));
    }

    #[test]
    fn lora_lists() {
        assert_eq!(build(json!({"lora": [{"id": 1, "scale": 0.5}, {"id": 0, "scale": 1}]})).unwrap().lora, Some(vec![(0, 1.0), (1, 0.5)]));
        assert_eq!(build(json!({"lora": []})).unwrap().lora, None, "an empty list: the server's scales");
        assert_eq!(build(json!({"lora": [{"id": 0}]})).unwrap().lora, Some(vec![(0, 0.0)]));
        assert!(err(json!({"lora": [{"id": 2, "scale": 1}]})).starts_with("lora[0].id: 2 is not a loaded adapter (ids 0..1)"));
        assert!(err(json!({"lora": [{"scale": 1}]})).starts_with("lora[0].id is required"));
        assert!(err(json!({"lora": [{"id": 0, "scale": "x"}]})).starts_with("lora[0].scale: must be a number"));
        assert!(err(json!({"lora": {"id": 0}})).starts_with("lora: must be a list"));
        let p = build(json!({"lora": [{"id": 1, "scale": 0.25}]})).unwrap();
        assert_eq!(p.settings()["lora"], json!([{"id": 1, "scale": 0.25}]));
    }

    #[test]
    fn null_means_default_and_no_limit_for_max_tokens() {
        let p = build(json!({"temperature": null, "max_tokens": null})).unwrap();
        assert_eq!(p.gen.sampling.temperature, 0.8);
        assert_eq!(p.gen.max_tokens, None);
        assert_eq!(build(json!({"max_tokens": -1})).unwrap().gen.max_tokens, None);
        assert_eq!(build(json!({"id_slot": -1})).unwrap().id_slot, None);
    }
}
