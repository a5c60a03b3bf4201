//! Thin PyO3 classes over `engine::Engine` and `engine::Generation`: extract owned
//! inputs, release the GIL around the work, convert back.
use super::errors::{to_py, InvalidRequestError};
use crate::engine::{Engine, EngineConfig, GenParams, Generation};
use crate::sampling::SamplingParams;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;
use std::sync::Arc;

#[pyclass(frozen, module = "llamars._core", name = "Engine")]
pub struct PyEngine {
    inner: Arc<Engine>,
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (path, n_ctx=4096, n_threads=None, n_batch=512))]
    fn new(py: Python<'_>, path: PathBuf, n_ctx: usize, n_threads: Option<usize>, n_batch: usize) -> PyResult<Self> {
        let cfg = EngineConfig { n_ctx, n_threads, n_batch };
        let e = py.detach(|| Engine::load(&path, cfg)).map_err(to_py)?;
        Ok(PyEngine { inner: Arc::new(e) })
    }

    #[pyo3(signature = (text, add_special=true, parse_special=true))]
    fn tokenize(&self, py: Python<'_>, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        let text = text.to_owned();
        py.detach(|| self.inner.tokenizer.encode(&text, add_special, parse_special))
    }

    #[pyo3(signature = (ids, remove_special=false, unparse_special=false))]
    fn detokenize(&self, ids: Vec<i64>, remove_special: bool, unparse_special: bool) -> PyResult<String> {
        let ids = self.check_ids(&ids, "ids")?;
        Ok(self.inner.tokenizer.decode(&ids, remove_special, unparse_special))
    }

    #[pyo3(signature = (id, special=true))]
    fn token_to_piece<'py>(&self, py: Python<'py>, id: i64, special: bool) -> PyResult<Bound<'py, PyBytes>> {
        let ids = self.check_ids(&[id], "id")?;
        Ok(PyBytes::new(py, &self.inner.tokenizer.token_to_piece(ids[0], special)))
    }

    /// Logits for every position as float32 bytes: (bytes, n_rows, n_vocab).
    fn logits<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let ids = self.check_ids(&ids, "ids")?;
        let out = py.detach(|| self.inner.logits(&ids)).map_err(to_py)?;
        let nv = self.inner.model.config.n_vocab;
        // SAFETY: f32 has no padding or invalid bit patterns; viewing it as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(out.as_ptr() as *const u8, out.len() * 4) };
        Ok((PyBytes::new(py, bytes), ids.len(), nv))
    }

    #[pyo3(signature = (prompt, max_tokens=Some(16), stop=Vec::new(), temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None, ignore_eos=false, n_probs=0))]
    #[allow(clippy::too_many_arguments)]
    fn generate(
        &self,
        prompt: Vec<i64>,
        max_tokens: Option<i64>,
        stop: Vec<String>,
        temperature: f32,
        top_k: i64,
        top_p: f32,
        min_p: f32,
        seed: Option<i64>,
        ignore_eos: bool,
        n_probs: i64,
    ) -> PyResult<PyGeneration> {
        let prompt = self.check_ids(&prompt, "prompt")?;
        let max_tokens = match max_tokens {
            None => None,
            Some(m) if m < 0 => None,
            Some(m) => Some(m as usize),
        };
        if !(0.0..=1.0).contains(&top_p) || top_p.is_nan() {
            return Err(InvalidRequestError::new_err(format!("top_p must be within [0, 1], got {top_p}")));
        }
        if !(0.0..=1.0).contains(&min_p) || min_p.is_nan() {
            return Err(InvalidRequestError::new_err(format!("min_p must be within [0, 1], got {min_p}")));
        }
        if temperature.is_nan() {
            return Err(InvalidRequestError::new_err("temperature must be a number"));
        }
        if !(0..=1000).contains(&n_probs) {
            return Err(InvalidRequestError::new_err(format!("n_probs must be within [0, 1000], got {n_probs}")));
        }
        let params = GenParams {
            max_tokens,
            stop,
            sampling: SamplingParams {
                temperature,
                top_k: top_k.max(0) as usize,
                top_p,
                min_p,
                seed: seed.filter(|&s| s >= 0).map(|s| s as u64),
            },
            ignore_eos,
            n_probs: n_probs as usize,
        };
        let g = Generation::new(self.inner.clone(), prompt, params).map_err(to_py)?;
        Ok(PyGeneration { inner: g })
    }

    /// Model facts for repr / props: a dict of plain values.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let e = &self.inner;
        let c = &e.model.config;
        let g = &e.model.gguf;
        let d = PyDict::new(py);
        d.set_item("path", g.path().to_string_lossy().into_owned())?;
        d.set_item("arch", c.arch.name())?;
        d.set_item("name", g.get("general.name").and_then(|v| v.as_str()).unwrap_or(""))?;
        d.set_item("n_vocab", c.n_vocab)?;
        d.set_item("n_ctx", e.config.n_ctx)?;
        d.set_item("n_ctx_train", c.n_ctx_train)?;
        d.set_item("n_embd", c.n_embd)?;
        d.set_item("n_layer", c.n_layer)?;
        d.set_item("n_head", c.n_head)?;
        d.set_item("n_head_kv", c.n_head_kv)?;
        d.set_item("n_params", e.model.n_params())?;
        d.set_item("size", g.file_size())?;
        d.set_item("n_threads", e.pool.n_threads())?;
        d.set_item("n_batch", e.config.n_batch)?;
        d.set_item("isa", crate::quant::isa().name())?;
        let v = &e.tokenizer.vocab;
        d.set_item("bos", v.bos)?;
        d.set_item("eos", v.eos)?;
        d.set_item("eot", v.eot)?;
        d.set_item("add_bos", v.add_bos)?;
        d.set_item("chat_template", g.get("tokenizer.chat_template").and_then(|v| v.as_str()))?;
        let mut types: Vec<(String, usize)> = Vec::new();
        for t in &g.tensors {
            match types.iter_mut().find(|(n, _)| n == t.ty.name()) {
                Some(x) => x.1 += 1,
                None => types.push((t.ty.name().to_string(), 1)),
            }
        }
        d.set_item("tensor_types", types)?;
        d.set_item("file_type", g.get("general.file_type").and_then(|v| v.as_u64()))?;
        Ok(d)
    }

    fn is_eog(&self, id: u32) -> bool {
        self.inner.tokenizer.vocab.is_eog(id)
    }
}

impl PyEngine {
    fn check_ids(&self, ids: &[i64], field: &str) -> PyResult<Vec<u32>> {
        let nv = self.inner.model.config.n_vocab as i64;
        ids.iter()
            .map(|&t| {
                if (0..nv).contains(&t) {
                    Ok(t as u32)
                } else {
                    Err(InvalidRequestError::new_err(format!("{field}: token id {t} is out of range [0, {nv})")))
                }
            })
            .collect()
    }
}

#[pyclass(module = "llamars._core", name = "Generation")]
pub struct PyGeneration {
    inner: Generation,
}

type EventTuple = (Option<u32>, String, Option<f32>, Vec<(u32, f32)>);

#[pymethods]
impl PyGeneration {
    /// One step: (token or None, text, logprob or None, top [(id, logprob)]), or None when finished.
    fn step(&mut self, py: Python<'_>) -> PyResult<Option<EventTuple>> {
        let g = &mut self.inner;
        let ev = py.detach(|| g.next_event()).map_err(to_py)?;
        Ok(ev.map(|e| (e.token, e.text, e.logprob, e.top)))
    }

    #[getter]
    fn tokens(&self) -> Vec<u32> {
        self.inner.tokens.clone()
    }
    #[getter]
    fn text(&self) -> String {
        self.inner.text.clone()
    }
    #[getter]
    fn done(&self) -> bool {
        self.inner.is_done()
    }
    #[getter]
    fn stop_reason(&self) -> Option<&'static str> {
        self.inner.stop_reason.map(|r| r.as_str())
    }
    #[getter]
    fn stopping_word(&self) -> String {
        self.inner.stopping_word.clone()
    }
    #[getter]
    fn truncated(&self) -> bool {
        self.inner.truncated
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.inner.seed()
    }
    #[getter]
    fn prompt_tokens(&self) -> Vec<u32> {
        self.inner.prompt().to_vec()
    }
    #[getter]
    fn timings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = &self.inner.timings;
        let d = PyDict::new(py);
        d.set_item("prompt_n", t.prompt_n)?;
        d.set_item("prompt_ms", t.prompt_ms)?;
        d.set_item("predicted_n", t.predicted_n)?;
        d.set_item("predicted_ms", t.predicted_ms)?;
        Ok(d)
    }
}
