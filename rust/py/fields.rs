//! Generation fields from Python: objects converted to JSON values (the one form
//! `engine::fields` reads), the `GenerationRequest` class that carries a validated
//! request, and the field table exported for the Python request schemas.
use super::errors::InvalidRequestError;
use crate::engine::fields::{self, Ctx, FIELDS};
use crate::engine::RequestParams;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::IntoPyObjectExt;
use serde_json::{Map, Number, Value};

/// How deep a field's value may nest (json_schema objects, logit_bias pairs).
pub const MAX_DEPTH: usize = 64;

/// A Python value as JSON. -inf becomes `false` (a logit bias that bans the token); NaN
/// and +inf are errors; integers outside 64 bits are errors naming the value.
pub fn to_json(obj: &Bound<'_, PyAny>, depth: usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!("nests deeper than {MAX_DEPTH} levels"));
    }
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if obj.is_instance_of::<PyBool>() {
        return Ok(Value::Bool(obj.extract::<bool>().unwrap_or(false)));
    }
    if obj.is_instance_of::<PyString>() {
        return obj.extract::<String>().map(Value::String).map_err(|_| "is not valid text".to_string());
    }
    if obj.is_instance_of::<PyInt>() || (obj.hasattr("__index__").unwrap_or(false) && !obj.is_instance_of::<PyFloat>()) {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::Number(i.into()));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::Number(u.into()));
        }
        if obj.is_instance_of::<PyInt>() {
            let s = obj.str().map(|s| s.to_string()).unwrap_or_default();
            let short = if s.len() > 24 { format!("{}…", &s[..24]) } else { s };
            return Err(format!("{short} is out of range (more than 64 bits)"));
        }
    }
    if let Ok(list) = obj.cast::<PyList>() {
        return list.iter().map(|x| to_json(&x, depth + 1)).collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        return t.iter().map(|x| to_json(&x, depth + 1)).collect::<Result<Vec<_>, _>>().map(Value::Array);
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut m = Map::new();
        for (k, v) in d.iter() {
            let key = if k.is_instance_of::<PyString>() {
                k.extract::<String>().map_err(|_| "has a key that is not valid text".to_string())?
            } else if k.is_instance_of::<PyInt>() && !k.is_instance_of::<PyBool>() {
                k.str().map(|s| s.to_string()).map_err(|e| e.to_string())?
            } else {
                return Err("has a key that is not a string".into());
            };
            let val = to_json(&v, depth + 1).map_err(|e| format!("[{key:?}] {e}"))?;
            m.insert(key, val);
        }
        return Ok(Value::Object(m));
    }
    if let Ok(x) = obj.extract::<f64>() {
        if x == f64::NEG_INFINITY {
            return Ok(Value::Bool(false));
        }
        return Number::from_f64(x).map(Value::Number).ok_or_else(|| format!("must be a finite number, got {x}"));
    }
    let ty = obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into());
    Err(format!("cannot be a {ty}"))
}

/// JSON back to Python (settings, defaults).
pub fn to_py(py: Python<'_>, v: &Value) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Value::Null => py.None(),
        Value::Bool(b) => b.into_py_any(py)?,
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_py_any(py)?,
            (None, Some(u)) => u.into_py_any(py)?,
            _ => n.as_f64().unwrap_or(f64::NAN).into_py_any(py)?,
        },
        Value::String(s) => s.into_py_any(py)?,
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(to_py(py, x)?)?;
            }
            l.into_py_any(py)?
        }
        Value::Object(m) => {
            let d = PyDict::new(py);
            for (k, x) in m {
                d.set_item(k, to_py(py, x)?)?;
            }
            d.into_py_any(py)?
        }
    })
}

/// The fields of a dict as JSON, each conversion error naming its field.
pub fn fields_of(d: Option<&Bound<'_, PyDict>>, names: &dyn Fn(&str) -> String) -> PyResult<Map<String, Value>> {
    let mut m = Map::new();
    if let Some(d) = d {
        for (k, v) in d.iter() {
            let key: String = k.extract().map_err(|_| InvalidRequestError::new_err("generation parameter names must be strings"))?;
            let val = to_json(&v, 0).map_err(|e| {
                let sep = if e.starts_with('[') { "" } else { ": " };
                InvalidRequestError::new_err(format!("{}{sep}{e}", names(&key)))
            })?;
            m.insert(key, val);
        }
    }
    Ok(m)
}

/// A validated generation request: the prompt's token ids and every field, defaults
/// filled in. Made by `Engine.request(...)`; `submit` and `submit_to` take it.
#[pyclass(frozen, module = "llamars._core", name = "GenerationRequest")]
pub struct PyGenerationRequest {
    pub(super) params: RequestParams,
}

#[pymethods]
impl PyGenerationRequest {
    /// Every field's effective value (llama-server's `generation_settings` values).
    fn settings(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &Value::Object(self.params.settings()))
    }

    #[getter]
    fn prompt(&self) -> Vec<u32> {
        self.params.prompt.clone()
    }

    #[getter]
    fn return_progress(&self) -> bool {
        self.params.return_progress
    }

    /// Whether the request carries a grammar or JSON schema (compiled when submitted).
    #[getter]
    fn constrained(&self) -> bool {
        self.params.gen.grammar.is_some()
    }

    #[getter]
    fn n_probs(&self) -> usize {
        self.params.gen.n_probs
    }

    fn __repr__(&self) -> String {
        format!("GenerationRequest({} prompt tokens, max_tokens={:?})", self.params.prompt.len(), self.params.gen.max_tokens)
    }
}

impl PyGenerationRequest {
    pub fn build(prompt: Vec<u32>, fields: Option<&Bound<'_, PyDict>>, names: Option<&Bound<'_, PyDict>>, cx: &Ctx) -> PyResult<Self> {
        let rename: std::collections::HashMap<String, String> = match names {
            Some(n) => n.extract().map_err(|_| InvalidRequestError::new_err("names: must map field names to names"))?,
            None => Default::default(),
        };
        let name = |f: &str| rename.get(f).cloned().unwrap_or_else(|| f.to_string());
        let m = fields_of(fields, &name)?;
        let params = RequestParams::from_fields(prompt, &m, cx, &name).map_err(super::errors::to_py)?;
        Ok(PyGenerationRequest { params })
    }
}

/// The generation fields: [(name, kind, group, default, doc)], defaults from the core.
#[pyfunction]
pub fn generation_fields(py: Python<'_>) -> PyResult<Vec<(&'static str, &'static str, &'static str, Py<PyAny>, &'static str)>> {
    let d = fields::defaults();
    FIELDS
        .iter()
        .map(|f| {
            let group = match f.group {
                fields::Group::Sampling => "sampling",
                fields::Group::Request => "request",
            };
            Ok((f.name, f.kind.name(), group, to_py(py, d.get(f.name).unwrap_or(&Value::Null))?, f.doc))
        })
        .collect()
}
