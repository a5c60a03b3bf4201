//! Thin PyO3 classes over `engine::Engine` and its `Scheduler`: extract owned
//! inputs, release the GIL around the work, convert back.
use super::errors::{to_py, InvalidRequestError};
use super::request::{extra_sampling, PyHub, PyRequest};
use crate::engine::{Engine, EngineConfig, GenParams, RequestParams, SchedConfig, Scheduler, Sink, SlotAction};
use crate::grammar::GrammarSpec;
use crate::sampling::SamplingParams;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

#[pyclass(frozen, module = "llamars._core", name = "Engine")]
pub struct PyEngine {
    inner: Arc<Engine>,
    sched: Arc<Scheduler>,
}

#[pymethods]
impl PyEngine {
    #[new]
    #[pyo3(signature = (path, n_ctx=4096, n_threads=None, n_batch=512, n_ubatch=512, n_parallel=1, slot_prompt_similarity=0.1,
        cache_reuse=0, cache_ram=0, context_shift=false, slot_save_path=None, swa_full=false, n_gpu_layers=0, device=None, main_gpu=0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        n_ctx: usize,
        n_threads: Option<usize>,
        n_batch: usize,
        n_ubatch: usize,
        n_parallel: usize,
        slot_prompt_similarity: f32,
        cache_reuse: usize,
        cache_ram: i64,
        context_shift: bool,
        slot_save_path: Option<PathBuf>,
        swa_full: bool,
        n_gpu_layers: i64,
        device: Option<String>,
        main_gpu: usize,
    ) -> PyResult<Self> {
        let gpu = crate::gpu::GpuConfig { n_gpu_layers, device, main_gpu, ..Default::default() };
        let cfg = EngineConfig { n_ctx, n_threads, n_batch, gpu };
        let sc = SchedConfig {
            n_parallel,
            n_ubatch: n_ubatch.min(n_batch),
            slot_prompt_similarity,
            cache_reuse,
            cache_ram_mib: cache_ram,
            context_shift,
            slot_save_path,
            swa_full,
        };
        let (e, s) = py
            .detach(|| -> crate::Result<_> {
                let e = Arc::new(Engine::load(&path, cfg)?);
                let s = Scheduler::start(e.clone(), sc)?;
                Ok((e, s))
            })
            .map_err(to_py)?;
        Ok(PyEngine { inner: e, sched: Arc::new(s) })
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

    /// Final-normed hidden states of every position as float32 bytes: (bytes, n_rows, n_embd).
    fn hidden_states<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let ids = self.check_ids(&ids, "ids")?;
        let out = py.detach(|| self.inner.hidden_states(&ids)).map_err(to_py)?;
        let ne = self.inner.model.config.n_embd;
        // SAFETY: f32 has no padding or invalid bit patterns; viewing it as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(out.as_ptr() as *const u8, out.len() * 4) };
        Ok((PyBytes::new(py, bytes), ids.len(), ne))
    }

    /// Queue a generation; events come back through the returned `Request`.
    #[pyo3(signature = (prompt, max_tokens=Some(16), stop=Vec::new(), temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None,
        ignore_eos=false, n_probs=0, cache_prompt=true, id_slot=None, n_keep=0, n_discard=0, truncate=false, return_progress=false, quiet=false, n_indent=0, t_max_predict_ms=0, post_sampling_probs=false, sampling=None, grammar=None, json_schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn submit(
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
        cache_prompt: bool,
        id_slot: Option<i64>,
        n_keep: i64,
        n_discard: i64,
        truncate: bool,
        return_progress: bool,
        quiet: bool,
        n_indent: usize,
        t_max_predict_ms: u64,
        post_sampling_probs: bool,
        sampling: Option<Bound<'_, PyDict>>,
        grammar: Option<String>,
        json_schema: Option<String>,
    ) -> PyResult<PyRequest> {
        let mut p = self.params(
            prompt, max_tokens, stop, temperature, top_k, top_p, min_p, seed, ignore_eos, n_probs, cache_prompt, id_slot, n_keep, n_discard, truncate,
        )?;
        p.gen.post_sampling_probs = post_sampling_probs;
        p.gen.grammar = grammar_spec(grammar, json_schema)?;
        self.extras(&mut p, return_progress, quiet, n_indent, t_max_predict_ms, sampling)?;
        let (id, rx) = self.sched.submit_channel(p).map_err(to_py)?;
        Ok(PyRequest { id, rx: Mutex::new(rx), sched: self.sched.clone(), finished: AtomicBool::new(false) })
    }

    /// Queue a generation whose events go to `hub` (for asyncio); returns its id.
    #[pyo3(signature = (hub, prompt, max_tokens=Some(16), stop=Vec::new(), temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None,
        ignore_eos=false, n_probs=0, cache_prompt=true, id_slot=None, n_keep=0, n_discard=0, truncate=false, return_progress=false, quiet=false, n_indent=0, t_max_predict_ms=0, post_sampling_probs=false, sampling=None, grammar=None, json_schema=None))]
    #[allow(clippy::too_many_arguments)]
    fn submit_to(
        &self,
        hub: &PyHub,
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
        cache_prompt: bool,
        id_slot: Option<i64>,
        n_keep: i64,
        n_discard: i64,
        truncate: bool,
        return_progress: bool,
        quiet: bool,
        n_indent: usize,
        t_max_predict_ms: u64,
        post_sampling_probs: bool,
        sampling: Option<Bound<'_, PyDict>>,
        grammar: Option<String>,
        json_schema: Option<String>,
    ) -> PyResult<u64> {
        let mut p = self.params(
            prompt, max_tokens, stop, temperature, top_k, top_p, min_p, seed, ignore_eos, n_probs, cache_prompt, id_slot, n_keep, n_discard, truncate,
        )?;
        p.gen.post_sampling_probs = post_sampling_probs;
        p.gen.grammar = grammar_spec(grammar, json_schema)?;
        self.extras(&mut p, return_progress, quiet, n_indent, t_max_predict_ms, sampling)?;
        self.sched.submit(p, Sink::Hub(hub.inner.clone())).map_err(to_py)
    }

    /// Run the sampler chain once on given logits after feeding it `history` (as the
    /// prompt is fed): the token it picks. For checking the samplers against llama.cpp's
    /// on the same logits; the sampling fields are `submit`'s.
    #[pyo3(signature = (logits, history, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, seed=None, sampling=None))]
    #[allow(clippy::too_many_arguments)]
    fn sample_logits(
        &self,
        py: Python<'_>,
        logits: Vec<f32>,
        history: Vec<i64>,
        temperature: f32,
        top_k: i64,
        top_p: f32,
        min_p: f32,
        seed: Option<i64>,
        sampling: Option<Bound<'_, PyDict>>,
    ) -> PyResult<u32> {
        let nv = self.inner.model.config.n_vocab;
        if logits.len() != nv {
            return Err(InvalidRequestError::new_err(format!("logits: expected {nv} values, got {}", logits.len())));
        }
        let history = self.check_ids(&history, "history")?;
        let mut p = self.params(Vec::new(), Some(1), Vec::new(), temperature, top_k, top_p, min_p, seed, false, 0, true, None, 0, 0, false)?;
        self.extras(&mut p, false, false, 0, 0, sampling)?;
        let pieces = self.inner.pieces();
        let sp = p.gen.sampling;
        py.detach(move || {
            let mut s = crate::sampling::Sampler::new(sp);
            s.set_vocab(pieces);
            for t in history {
                s.accept(t);
            }
            Ok(s.sample(&logits))
        })
    }

    /// Stop a queued or running request; its slot is free within one loop iteration.
    fn cancel(&self, id: u64) {
        self.sched.cancel(id);
    }

    /// Per-slot state: a list of dicts.
    fn slots<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let snap = self.sched.snapshot();
        let l = PyList::empty(py);
        for s in snap.slots {
            let d = PyDict::new(py);
            d.set_item("id", s.id)?;
            d.set_item("n_ctx", s.n_ctx)?;
            d.set_item("is_processing", s.is_processing)?;
            d.set_item("id_task", s.id_task)?;
            d.set_item("n_cached", s.n_cached)?;
            d.set_item("n_prompt_tokens", s.n_prompt_tokens)?;
            d.set_item("n_decoded", s.n_decoded)?;
            d.set_item("n_remain", s.n_remain)?;
            l.append(d)?;
        }
        Ok(l)
    }

    /// Counters since start (llama-server's /metrics figures).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.sched.snapshot().metrics;
        let d = PyDict::new(py);
        d.set_item("prompt_tokens_total", m.n_prompt_tokens_processed_total)?;
        d.set_item("prompt_seconds_total", m.t_prompt_processing_total_ms / 1e3)?;
        d.set_item("tokens_predicted_total", m.n_tokens_predicted_total)?;
        d.set_item("tokens_predicted_seconds_total", m.t_tokens_generation_total_ms / 1e3)?;
        d.set_item("n_decode_total", m.n_decode_total)?;
        d.set_item("n_busy_slots_total", m.n_busy_slots_total)?;
        d.set_item("n_requests_total", m.n_requests_total)?;
        d.set_item("requests_processing", m.requests_processing)?;
        d.set_item("requests_deferred", m.requests_deferred)?;
        d.set_item("kv_cache_tokens", m.kv_cache_tokens)?;
        d.set_item("kv_cache_capacity", m.kv_cache_capacity)?;
        d.set_item("kv_cache_usage_ratio", m.kv_cache_usage_ratio())?;
        d.set_item("prompt_cache_entries", m.prompt_cache_entries)?;
        d.set_item("prompt_cache_bytes", m.prompt_cache_bytes)?;
        d.set_item("prompt_cache_hits", m.prompt_cache_hits)?;
        Ok(d)
    }

    /// action: "save" | "restore" | "erase"; returns counts and timing.
    #[pyo3(signature = (id_slot, action, filename=None))]
    fn slot_action<'py>(&self, py: Python<'py>, id_slot: i64, action: &str, filename: Option<String>) -> PyResult<Bound<'py, PyDict>> {
        if id_slot < 0 {
            return Err(InvalidRequestError::new_err(format!("id_slot must be >= 0, got {id_slot}")));
        }
        let need = |f: Option<String>| f.ok_or_else(|| InvalidRequestError::new_err(format!("filename is required to {action} a slot")));
        let a = match action {
            "save" => SlotAction::Save(need(filename)?),
            "restore" => SlotAction::Restore(need(filename)?),
            "erase" => SlotAction::Erase,
            other => return Err(InvalidRequestError::new_err(format!("action must be save, restore or erase, got {other:?}"))),
        };
        let sched = self.sched.clone();
        let r = py.detach(move || sched.slot_action(id_slot as usize, a)).map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("id_slot", r.id_slot)?;
        d.set_item("filename", r.filename)?;
        d.set_item("n_tokens", r.n_tokens)?;
        d.set_item("n_bytes", r.n_bytes)?;
        d.set_item("ms", r.ms)?;
        Ok(d)
    }

    /// Stop the engine loop (pending requests end with CancelledError).
    fn shutdown(&self, py: Python<'_>) {
        let s = self.sched.clone();
        py.detach(move || s.shutdown());
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
        d.set_item("n_ubatch", self.sched.config.n_ubatch)?;
        d.set_item("n_parallel", self.sched.config.n_parallel)?;
        d.set_item("n_ctx_slot", self.sched.n_ctx_slot)?;
        d.set_item("isa", crate::quant::isa().name())?;
        d.set_item("n_gpu_layers_offloaded", e.model.n_gpu_layers_offloaded())?;
        d.set_item("gpu_device", e.model.gpu.as_ref().map(|g| g.device_name()))?;
        d.set_item("gpu_note", &e.gpu_note)?;
        let v = &e.tokenizer.vocab;
        d.set_item("bos", v.bos)?;
        d.set_item("eos", v.eos)?;
        d.set_item("eot", v.eot)?;
        d.set_item("add_bos", v.add_bos)?;
        d.set_item("chat_template", g.get("tokenizer.chat_template").and_then(|v| v.as_str()))?;
        // named variants: tokenizer.chat_template.<name> (e.g. tool_use, rag)
        let variants = PyDict::new(py);
        for (k, v) in g.metadata() {
            if let (Some(name), Some(src)) = (k.strip_prefix("tokenizer.chat_template."), v.as_str()) {
                variants.set_item(name, src)?;
            }
        }
        d.set_item("chat_templates", variants)?;
        let fim = PyDict::new(py);
        for (name, keys) in [
            ("pre", &["tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"][..]),
            ("suf", &["tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"][..]),
            ("mid", &["tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"][..]),
            ("pad", &["tokenizer.ggml.fim_pad_token_id"][..]),
            ("rep", &["tokenizer.ggml.fim_rep_token_id"][..]),
            ("sep", &["tokenizer.ggml.fim_sep_token_id"][..]),
        ] {
            if let Some(id) = keys.iter().find_map(|k| g.get(k).and_then(|v| v.as_u64())).filter(|&id| (id as usize) < c.n_vocab) {
                fim.set_item(name, id)?;
            }
        }
        d.set_item("fim_tokens", fim)?;
        d.set_item("pooling_type", g.get(&format!("{}.pooling_type", c.arch.name())).and_then(|v| v.as_u64()))?;
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
    /// The keyword-only request options shared by `submit` and `submit_to`.
    fn extras(
        &self,
        p: &mut RequestParams,
        return_progress: bool,
        quiet: bool,
        n_indent: usize,
        t_max_predict_ms: u64,
        sampling: Option<Bound<'_, PyDict>>,
    ) -> PyResult<()> {
        p.return_progress = return_progress;
        p.quiet = quiet;
        p.gen.n_indent = n_indent;
        p.gen.t_max_predict_ms = t_max_predict_ms;
        if let Some(d) = sampling {
            // lazy grammars: the grammar engages once the output contains one of these words
            if let Some(t) = d.get_item("grammar_triggers")? {
                let words: Vec<String> = t.extract().map_err(|_| InvalidRequestError::new_err("grammar_triggers: must be a list of strings"))?;
                if words.iter().any(|w| w.is_empty()) {
                    return Err(InvalidRequestError::new_err("grammar_triggers: a trigger word must not be empty"));
                }
                if p.gen.grammar.is_none() && !words.is_empty() {
                    return Err(InvalidRequestError::new_err("grammar_triggers: a lazy grammar needs a grammar or json_schema"));
                }
                p.gen.grammar_triggers = words;
                d.del_item("grammar_triggers")?;
            }
            extra_sampling(&mut p.gen.sampling, &d)?;
            let nv = self.inner.model.config.n_vocab;
            if let Some((t, _)) = p.gen.sampling.logit_bias.iter().find(|(t, _)| *t as usize >= nv) {
                return Err(InvalidRequestError::new_err(format!("logit_bias: token id {t} is out of range [0, {nv})")));
            }
        }
        p.gen.sampling.validate().map_err(InvalidRequestError::new_err)
    }

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

    #[allow(clippy::too_many_arguments)]
    fn params(
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
        cache_prompt: bool,
        id_slot: Option<i64>,
        n_keep: i64,
        n_discard: i64,
        truncate: bool,
    ) -> PyResult<RequestParams> {
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
        if n_discard < 0 {
            return Err(InvalidRequestError::new_err(format!("n_discard must be >= 0, got {n_discard}")));
        }
        if n_keep < -1 {
            return Err(InvalidRequestError::new_err(format!("n_keep must be >= -1 (-1 = the whole prompt), got {n_keep}")));
        }
        let id_slot = match id_slot {
            None => None,
            Some(s) if s < 0 => None,
            Some(s) => Some(s as usize),
        };
        let gen = GenParams {
            max_tokens,
            stop,
            sampling: SamplingParams {
                temperature,
                top_k: top_k.max(0) as usize,
                top_p,
                min_p,
                seed: seed.filter(|&s| s >= 0).map(|s| s as u64),
                ..SamplingParams::default()
            },
            ignore_eos,
            n_probs: n_probs as usize,
            ..GenParams::default()
        };
        let mut p = RequestParams::new(prompt, gen);
        p.cache_prompt = cache_prompt;
        p.id_slot = id_slot;
        p.n_keep = n_keep;
        p.n_discard = n_discard as usize;
        p.truncate = truncate;
        Ok(p)
    }
}

/// `grammar` (GBNF, or Lark after `%llguidance`) or `json_schema`: at most one.
fn grammar_spec(grammar: Option<String>, json_schema: Option<String>) -> PyResult<Option<GrammarSpec>> {
    match (grammar.filter(|g| !g.trim().is_empty()), json_schema) {
        (Some(_), Some(_)) => Err(InvalidRequestError::new_err("grammar and json_schema: give one, not both")),
        (Some(g), None) => Ok(Some(GrammarSpec::Gbnf(g))),
        (None, Some(j)) => Ok(Some(GrammarSpec::JsonSchema(j))),
        (None, None) => Ok(None),
    }
}
