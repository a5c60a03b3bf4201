//! Thin PyO3 classes over `engine::Engine` and its `Scheduler`: extract owned
//! inputs, release the GIL around the work, convert back.
use super::errors::{to_py, InvalidRequestError};
use super::fields::PyGenerationRequest;
use super::request::{PyHub, PyRequest};
use crate::engine::fields::Ctx;
use crate::engine::draft_model::{check_compatible, DraftEngine};
use crate::engine::speculative::SpecConfig;
use crate::engine::{Engine, EngineConfig, Fault, SchedConfig, Scheduler, Sink, SlotAction};
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
        cache_reuse=0, cache_ram=0, context_shift=false, slot_save_path=None, swa_full=false, n_gpu_layers=0, device=None, main_gpu=0,
        spec_type=None, spec_params=None, lookup_cache_static=None, lookup_cache_dynamic=None, draft_model=None, draft_n_ctx=0,
        lora=None, lora_init_without_apply=false, control_vectors=None, control_vector_layer_range=(-1, -1),
        cache_type_k="f16", cache_type_v="f16", flash_attn="auto", exact=None))]
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
        spec_type: Option<String>,
        spec_params: Option<Vec<(String, usize)>>,
        lookup_cache_static: Option<PathBuf>,
        lookup_cache_dynamic: Option<PathBuf>,
        draft_model: Option<PathBuf>,
        draft_n_ctx: usize,
        lora: Option<Vec<(PathBuf, f32)>>,
        lora_init_without_apply: bool,
        control_vectors: Option<Vec<(PathBuf, f32)>>,
        control_vector_layer_range: (i64, i64),
        cache_type_k: &str,
        cache_type_v: &str,
        flash_attn: &str,
        exact: Option<bool>,
    ) -> PyResult<Self> {
        use crate::kv_cache::types::{FlashAttn, KvConfig, KvType};
        let kv = KvConfig {
            k_type: KvType::parse(cache_type_k, "cache_type_k").map_err(to_py)?,
            v_type: KvType::parse(cache_type_v, "cache_type_v").map_err(to_py)?,
            flash_attn: FlashAttn::parse(flash_attn).map_err(to_py)?,
        };
        let mut spec = SpecConfig::default();
        // a draft model with no type named: draft-simple
        let default_type = if draft_model.is_some() { "draft-simple" } else { "none" };
        spec.set_types(spec_type.as_deref().unwrap_or(default_type)).map_err(InvalidRequestError::new_err)?;
        for (name, v) in spec_params.unwrap_or_default() {
            spec.set(&name, v).map_err(InvalidRequestError::new_err)?;
        }
        spec.lookup_static = lookup_cache_static;
        spec.lookup_dynamic = lookup_cache_dynamic;
        let gpu = crate::gpu::GpuConfig { n_gpu_layers, device, main_gpu, ..Default::default() };
        let adapters = crate::engine::AdapterConfig {
            lora: lora.unwrap_or_default(),
            init_without_apply: lora_init_without_apply,
            control_vectors: control_vectors.unwrap_or_default(),
            cvec_range: control_vector_layer_range,
        };
        let cfg = EngineConfig { n_ctx, n_threads, n_batch, gpu, adapters, kv, exact };
        let sc = SchedConfig {
            n_parallel,
            n_ubatch: n_ubatch.min(n_batch),
            slot_prompt_similarity,
            cache_reuse,
            cache_ram_mib: cache_ram,
            context_shift,
            slot_save_path,
            swa_full,
            spec,
            draft: None,
        };
        let mut sc = sc;
        let (e, s) = py
            .detach(|| -> crate::Result<_> {
                let e = Arc::new(Engine::load(&path, cfg.clone())?);
                if let Some(dp) = &draft_model {
                    // the draft computes on the target's thread pool (the two never run at once)
                    let n_ctx = if draft_n_ctx > 0 { draft_n_ctx } else { e.config.n_ctx };
                    let dcfg = EngineConfig { n_ctx, n_threads: Some(1), n_batch: cfg.n_batch, exact, ..Default::default() };
                    let d = Engine::load(dp, dcfg)?;
                    check_compatible(&e, &d).map_err(|why| {
                        crate::Error::InvalidRequest(format!("draft model {} cannot draft for {}: {why}", dp.display(), path.display()))
                    })?;
                    sc.draft = Some(DraftEngine(Arc::new(d)));
                }
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

    /// `{"tokens": [ids...]}` as JSON bytes, made with the GIL released (a server's reply
    /// to a huge prompt makes no Python ints).
    #[pyo3(signature = (text, add_special=true, parse_special=true))]
    fn tokenize_json<'py>(&self, py: Python<'py>, text: &str, add_special: bool, parse_special: bool) -> Bound<'py, PyBytes> {
        let text = text.to_owned();
        let body = py.detach(|| {
            use std::io::Write;
            let ids = self.inner.tokenizer.encode(&text, add_special, parse_special);
            let mut out = Vec::with_capacity(16 + ids.len() * 7);
            out.extend_from_slice(b"{\"tokens\":[");
            for (i, t) in ids.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let _ = write!(out, "{t}");
            }
            out.extend_from_slice(b"]}");
            out
        });
        PyBytes::new(py, &body)
    }

    #[pyo3(signature = (ids, remove_special=false, unparse_special=false))]
    fn detokenize(&self, py: Python<'_>, ids: Vec<i64>, remove_special: bool, unparse_special: bool) -> PyResult<String> {
        let ids = self.check_ids(&ids, "ids")?;
        Ok(py.detach(|| self.inner.tokenizer.decode(&ids, remove_special, unparse_special)))
    }

    #[pyo3(signature = (id, special=true))]
    fn token_to_piece<'py>(&self, py: Python<'py>, id: i64, special: bool) -> PyResult<Bound<'py, PyBytes>> {
        let ids = self.check_ids(&[id], "id")?;
        Ok(PyBytes::new(py, &self.inner.tokenizer.token_to_piece(ids[0], special)))
    }

    /// Logits for every position as float32 bytes: (bytes, n_rows, n_vocab); `lora`: the
    /// adapters' scales as (id, scale) pairs (the others 0), None: the global scales.
    #[pyo3(signature = (ids, lora=None))]
    fn logits<'py>(&self, py: Python<'py>, ids: Vec<i64>, lora: Option<Vec<(usize, f32)>>) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let ids = self.check_ids(&ids, "ids")?;
        let out = py.detach(|| self.inner.logits_lora(&ids, lora.as_deref())).map_err(to_py)?;
        let nv = self.inner.model.config.n_vocab;
        // SAFETY: f32 has no padding or invalid bit patterns; viewing it as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(out.as_ptr() as *const u8, out.len() * 4) };
        Ok((PyBytes::new(py, bytes), ids.len(), nv))
    }

    /// Hidden states of several token-id sequences, each on its own (an encoder batches
    /// them): one (float32 bytes, n_rows, n_embd) per sequence.
    fn hidden_states_many<'py>(&self, py: Python<'py>, seqs: Vec<Vec<i64>>) -> PyResult<Vec<(Bound<'py, PyBytes>, usize, usize)>> {
        let seqs = seqs.iter().map(|s| self.check_ids(s, "ids")).collect::<PyResult<Vec<_>>>()?;
        let out = py
            .detach(|| {
                if self.inner.model.config.causal {
                    seqs.iter().map(|s| self.inner.hidden_states(s)).collect::<crate::error::Result<Vec<_>>>()
                } else {
                    // an encoder's inputs go through the loop, batched with other requests'
                    self.sched.encode(seqs, false)
                }
            })
            .map_err(to_py)?;
        let e = self.inner.model.config.n_embd;
        Ok(out
            .iter()
            .map(|h| {
                // SAFETY: f32 has no padding or invalid bit patterns; viewing it as bytes is sound.
                let bytes = unsafe { std::slice::from_raw_parts(h.as_ptr() as *const u8, h.len() * 4) };
                (PyBytes::new(py, bytes), h.len() / e, e)
            })
            .collect())
    }

    /// An encoder's classifier scores for several token-id sequences (batched).
    fn classify_many(&self, py: Python<'_>, seqs: Vec<Vec<i64>>) -> PyResult<Vec<Vec<f32>>> {
        let seqs = seqs.iter().map(|s| self.check_ids(s, "ids")).collect::<PyResult<Vec<_>>>()?;
        py.detach(|| self.sched.encode(seqs, true)).map_err(to_py)
    }

    /// An encoder's classifier scores for token ids (rerankers).
    fn classify(&self, py: Python<'_>, ids: Vec<i64>) -> PyResult<Vec<f32>> {
        let ids = self.check_ids(&ids, "ids")?;
        let mut out = py.detach(|| self.sched.encode(vec![ids], true)).map_err(to_py)?;
        Ok(out.pop().unwrap_or_default())
    }

    /// Final-normed hidden states of every position as float32 bytes: (bytes, n_rows, n_embd).
    fn hidden_states<'py>(&self, py: Python<'py>, ids: Vec<i64>) -> PyResult<(Bound<'py, PyBytes>, usize, usize)> {
        let ids = self.check_ids(&ids, "ids")?;
        let n = ids.len();
        let out = py
            .detach(|| {
                if self.inner.model.config.causal {
                    self.inner.hidden_states(&ids)
                } else {
                    Ok(self.sched.encode(vec![ids], false)?.pop().unwrap_or_default())
                }
            })
            .map_err(to_py)?;
        let ne = self.inner.model.config.n_embd;
        // SAFETY: f32 has no padding or invalid bit patterns; viewing it as bytes is sound.
        let bytes = unsafe { std::slice::from_raw_parts(out.as_ptr() as *const u8, out.len() * 4) };
        Ok((PyBytes::new(py, bytes), n, ne))
    }

    /// A validated request for `prompt` (token ids) with the generation `fields` given
    /// (a dict; the rest at their defaults). `names` maps a field to the name the caller
    /// knows it by (e.g. max_tokens → n_predict), for error messages.
    #[pyo3(signature = (prompt, fields=None, names=None))]
    fn request(&self, prompt: Vec<i64>, fields: Option<Bound<'_, PyDict>>, names: Option<Bound<'_, PyDict>>) -> PyResult<PyGenerationRequest> {
        let prompt = self.check_ids(&prompt, "prompt")?;
        let tok = &self.inner.tokenizer;
        let tokenize = |s: &str| tok.encode(s, false, false);
        let cx = Ctx { n_vocab: self.inner.model.config.n_vocab, n_lora: self.inner.model.adapters.len(), tokenize: &tokenize };
        PyGenerationRequest::build(prompt, fields.as_ref(), names.as_ref(), &cx)
    }

    /// Queue a generation; events come back through the returned `Request`. `quiet`:
    /// only the final event (no per-token events).
    #[pyo3(signature = (req, quiet=false))]
    fn submit(&self, py: Python<'_>, req: &PyGenerationRequest, quiet: bool) -> PyResult<PyRequest> {
        let mut p = req.params.clone();
        p.quiet = quiet;
        // compiling a grammar can take a while: without the GIL
        let (id, rx) = py.detach(|| self.sched.submit_channel(p)).map_err(to_py)?;
        Ok(PyRequest { id, rx: Mutex::new(rx), sched: self.sched.clone(), finished: AtomicBool::new(false) })
    }

    /// Queue a generation whose events go to `hub` (for asyncio); returns its id.
    #[pyo3(signature = (hub, req, quiet=false))]
    fn submit_to(&self, py: Python<'_>, hub: &PyHub, req: &PyGenerationRequest, quiet: bool) -> PyResult<u64> {
        let mut p = req.params.clone();
        p.quiet = quiet;
        let sink = Sink::Hub(hub.inner.clone());
        py.detach(|| self.sched.submit(p, sink)).map_err(to_py)
    }

    /// Compile a grammar (GBNF, or Lark after `%llguidance`) or a JSON schema (text) as a
    /// request's would be, without generating: None when it compiles, else the request's
    /// error (InvalidRequestError naming the field and the limit).
    #[pyo3(signature = (grammar=None, json_schema=None))]
    fn compile_grammar(&self, py: Python<'_>, grammar: Option<String>, json_schema: Option<String>) -> PyResult<()> {
        use crate::grammar::GrammarSpec;
        let spec = match (grammar, json_schema) {
            (Some(g), None) => GrammarSpec::Gbnf(g),
            (None, Some(s)) => GrammarSpec::JsonSchema(s),
            _ => return Err(InvalidRequestError::new_err("give exactly one of grammar, json_schema")),
        };
        py.detach(|| self.inner.compile_grammar(&spec).map(|_| ())).map_err(to_py)
    }

    /// Run the sampler chain of `req` once on given logits after feeding it `history` (as
    /// the prompt is fed): the token it picks. For checking the samplers against
    /// llama.cpp's on the same logits.
    fn sample_logits(&self, py: Python<'_>, logits: Vec<f32>, history: Vec<i64>, req: &PyGenerationRequest) -> PyResult<u32> {
        let nv = self.inner.model.config.n_vocab;
        if logits.len() != nv {
            return Err(InvalidRequestError::new_err(format!("logits: expected {nv} values, got {}", logits.len())));
        }
        let history = self.check_ids(&history, "history")?;
        let pieces = self.inner.pieces();
        let sp = req.params.gen.sampling.clone();
        py.detach(move || {
            let mut s = crate::sampling::Sampler::new(sp);
            s.set_vocab(pieces);
            for t in history {
                s.accept(t);
            }
            Ok(s.sample(&logits))
        })
    }

    /// Arm a fault, for tests of the engine's error paths: "device_error" (every forward
    /// pass holding request `request_id` fails as a GPU failure would; without an id, the
    /// next forward pass), "panic" (the next
    /// forward pass panics), "kill" (the loop thread dies).
    #[pyo3(signature = (kind, request_id=None))]
    fn _inject_fault(&self, kind: &str, request_id: Option<u64>) -> PyResult<()> {
        let f = match (kind, request_id) {
            ("device_error", Some(id)) => Fault::DeviceError(id),
            ("device_error", None) => Fault::DeviceErrorNext,
            ("panic", None) => Fault::PanicInStep,
            ("kill", None) => Fault::KillLoop,
            _ => return Err(InvalidRequestError::new_err(format!("unknown fault {kind:?} (device_error with a request id, panic, kill)"))),
        };
        self.sched.inject(f).map_err(to_py)
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
            d.set_item("kv_bytes", s.kv_bytes)?;
            d.set_item("n_prompt_tokens", s.n_prompt_tokens)?;
            d.set_item("n_prompt_cached", s.n_prompt_cached)?;
            d.set_item("n_decoded", s.n_decoded)?;
            d.set_item("n_remain", s.n_remain)?;
            d.set_item("has_next_token", s.has_next_token)?;
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
        d.set_item("prompt_tokens_cached_total", m.n_prompt_tokens_cached_total)?;
        d.set_item("n_tokens_max", m.n_tokens_max)?;
        d.set_item("tokens_predicted_total", m.n_tokens_predicted_total)?;
        d.set_item("tokens_predicted_seconds_total", m.t_tokens_generation_total_ms / 1e3)?;
        d.set_item("n_decode_total", m.n_decode_total)?;
        d.set_item("n_busy_slots_total", m.n_busy_slots_total)?;
        d.set_item("n_draft_steps_total", m.n_draft_steps_total)?;
        d.set_item("n_drafted_total", m.n_drafted_total)?;
        d.set_item("n_drafted_accepted_total", m.n_drafted_accepted_total)?;
        d.set_item("n_requests_total", m.n_requests_total)?;
        d.set_item("requests_processing", m.requests_processing)?;
        d.set_item("requests_deferred", m.requests_deferred)?;
        d.set_item("kv_cache_tokens", m.kv_cache_tokens)?;
        d.set_item("kv_cache_capacity", m.kv_cache_capacity)?;
        d.set_item("kv_cache_bytes", m.kv_cache_bytes)?;
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
    /// The LoRA adapters: [{id, path, scale, task_name, prompt_prefix}] (llama-server's
    /// `/lora-adapters`), scale being the global one.
    fn lora_adapters<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for a in self.inner.lora_adapters() {
            let d = PyDict::new(py);
            d.set_item("id", a.id)?;
            d.set_item("path", a.path)?;
            d.set_item("scale", a.scale)?;
            d.set_item("task_name", a.task_name)?;
            d.set_item("prompt_prefix", a.prompt_prefix)?;
            d.set_item("n_tensors", a.n_tensors)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Set the adapters' global scales: the listed (id, scale) pairs, the others 0.
    fn set_lora_scales(&self, scales: Vec<(usize, f32)>) -> PyResult<()> {
        self.inner.set_lora_scales(&scales).map_err(to_py)
    }

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
        d.set_item("encoder", c.arch.is_encoder())?;
        d.set_item("name", g.get("general.name").and_then(|v| v.as_str()).unwrap_or(""))?;
        d.set_item("n_vocab", c.n_vocab)?;
        d.set_item("n_ctx", e.config.n_ctx)?;
        d.set_item("n_ctx_train", c.n_ctx_train)?;
        d.set_item("n_embd", c.n_embd)?;
        d.set_item("n_layer", c.n_layer)?;
        d.set_item("n_head", c.n_head)?;
        d.set_item("n_head_kv", c.n_head_kv)?;
        d.set_item("n_params", e.model.n_params())?;
        d.set_item("n_lora", e.model.adapters.len())?;
        let kv = &e.config.kv;
        d.set_item("cache_type_k", kv.k_type.name())?;
        d.set_item("cache_type_v", kv.v_type.name())?;
        d.set_item("flash_attn", kv.resolve().unwrap_or(false))?;
        d.set_item("exactness", format!("{:?}", crate::quant::Exactness::new(e.config.exact)).to_lowercase())?;
        let units = kv.k_type.units(c.n_head_kv * c.head_dim) + kv.v_type.units(c.n_head_kv * c.v_head_dim);
        // K and V bytes of one position in every layer (a sliding-window layer's ring holds fewer)
        d.set_item("kv_bytes_per_token", units * 2 * c.n_layer)?;
        d.set_item("control_vector_layers", e.model.cvec.as_ref().map_or(0, |c| c.n_layers()))?;
        let f = crate::model::footprint::footprint(g, c);
        d.set_item("n_params_active", f.n_params_active)?;
        d.set_item("bytes_per_token", f.bytes_per_token)?;
        d.set_item("n_expert", f.n_expert)?;
        d.set_item("n_expert_used", f.n_expert_used)?;
        d.set_item("size", g.file_size())?;
        d.set_item("n_threads", e.pool.n_threads())?;
        d.set_item("n_batch", e.config.n_batch)?;
        d.set_item("n_ubatch", self.sched.config.n_ubatch)?;
        d.set_item("n_parallel", self.sched.config.n_parallel)?;
        d.set_item("n_ctx_slot", self.sched.n_ctx_slot)?;
        let sp = &self.sched.config.spec;
        d.set_item("spec_type", sp.types_name())?;
        let params = PyDict::new(py);
        for (k, v) in sp.params() {
            params.set_item(k, v)?;
        }
        d.set_item("spec_params", params)?;
        d.set_item("draft_model", self.sched.config.draft.as_ref().map(|dm| dm.0.model.gguf.path().display().to_string()))?;
        d.set_item("isa", crate::quant::isa().name())?;
        d.set_item("n_gpu_layers_offloaded", e.model.n_gpu_layers_offloaded())?;
        d.set_item("gpu_device", e.model.gpu.as_ref().map(|g| g.device_name()))?;
        d.set_item("gpu_note", &e.gpu_note)?;
        let v = &e.tokenizer.vocab;
        d.set_item("bos", v.bos)?;
        d.set_item("eos", v.eos)?;
        d.set_item("eot", v.eot)?;
        d.set_item("add_bos", v.add_bos)?;
        d.set_item("add_eos", v.add_eos)?;
        d.set_item("add_sep", v.add_sep)?;
        d.set_item("sep", v.sep)?;
        d.set_item("classifier", matches!(&e.model.head, crate::model::Head::Encoder { classifier: Some(_), .. }))?;
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
