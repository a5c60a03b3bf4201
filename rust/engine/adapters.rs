//! The engine's LoRA adapters and control vectors: loaded with the model
//! (`--lora`, `--lora-scaled`, `--control-vector*`), the global scales `/lora-adapters`
//! reads and sets, and the scales each request runs under (llama-server's rules: a
//! request's `lora` list sets the adapters it names and zeroes the others; a request
//! without one runs at the global scales of the moment it was submitted).
use super::Engine;
use crate::error::{Error, Result};
use crate::model::cvec::ControlVector;
use crate::model::lora::Adapter;
use crate::model::Model;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, Default)]
pub struct AdapterConfig {
    /// LoRA adapter files and their initial global scales.
    pub lora: Vec<(PathBuf, f32)>,
    /// Load the adapters with every global scale at 0 (`--lora-init-without-apply`).
    pub init_without_apply: bool,
    /// Control vector files and their strengths.
    pub control_vectors: Vec<(PathBuf, f32)>,
    /// First and last layer the control vectors apply to (≤ 0: 1 and the last layer).
    pub cvec_range: (i64, i64),
}

/// One adapter as `/lora-adapters` lists it.
#[derive(Debug, Clone)]
pub struct AdapterInfo {
    pub id: usize,
    pub path: String,
    pub scale: f32,
    pub task_name: String,
    pub prompt_prefix: String,
    /// Matrices it adapts.
    pub n_tensors: usize,
}

/// Load `cfg`'s adapters and control vectors into `model`; returns the initial global scales.
pub fn attach(model: &mut Model, cfg: &AdapterConfig) -> Result<Vec<f32>> {
    let mut adapters = Vec::with_capacity(cfg.lora.len());
    for (path, _) in &cfg.lora {
        adapters.push(Adapter::load(path, model)?);
    }
    model.adapters = adapters;
    if !cfg.control_vectors.is_empty() {
        let c = &model.config;
        model.cvec = Some(ControlVector::load(&cfg.control_vectors, cfg.cvec_range, c.n_layer, c.n_embd)?);
    }
    Ok(cfg.lora.iter().map(|(_, s)| if cfg.init_without_apply { 0.0 } else { *s }).collect())
}

/// With adapters, control vectors or a KV cache of other types than f16, `-ngl auto` keeps every layer on the CPU (where they
/// are applied); returns the note saying so.
pub fn keep_on_cpu(model: &Model, kv: &crate::kv_cache::types::KvConfig, gpu: &mut crate::gpu::GpuConfig) -> Option<String> {
    use crate::kv_cache::KvType::F16;
    let other_kv = kv.k_type != F16 || kv.v_type != F16;
    if gpu.n_gpu_layers == -1 && (!model.adapters.is_empty() || model.cvec.is_some() || other_kv) {
        gpu.n_gpu_layers = 0;
        return Some("LoRA adapters, control vectors and KV caches of other types than f16 run on the CPU path: no layers offloaded (-ngl auto)".into());
    }
    None
}

/// Refuse adapters on a model whose layers run on a GPU (they are applied by the CPU path).
pub fn check_placement(model: &Model, kv: &crate::kv_cache::types::KvConfig) -> Result<()> {
    if model.n_gpu_layers_offloaded() > 0 && (!model.adapters.is_empty() || model.cvec.is_some()) {
        return Err(Error::NotSupported(
            "LoRA adapters and control vectors run on the CPU path only: start without GPU offload (-ngl 0) to use them".into(),
        ));
    }
    use crate::kv_cache::KvType::F16;
    if model.n_gpu_layers_offloaded() > 0 && (kv.k_type != F16 || kv.v_type != F16) {
        return Err(Error::NotSupported(format!(
            "a {}/{} KV cache runs on the CPU path only: start without GPU offload (-ngl 0), or with -ctk f16 -ctv f16",
            kv.k_type.name(),
            kv.v_type.name()
        )));
    }
    Ok(())
}

/// The scales a full list of `n` adapters takes from `list` (by id; the others 0), as
/// llama-server's `construct_lora_list`.
fn full_list(n: usize, list: &[(usize, f32)]) -> Result<Vec<f32>> {
    let mut out = vec![0.0; n];
    for &(id, s) in list {
        if id >= n {
            return Err(Error::InvalidRequest(match n {
                0 => "id: no LoRA adapters are loaded (start the server with --lora FILE)".into(),
                _ => format!("id: {id} is not a loaded adapter (ids 0..{})", n - 1),
            }));
        }
        if !s.is_finite() {
            return Err(Error::InvalidRequest(format!("scale: must be a finite number, got {s}")));
        }
        out[id] = s;
    }
    Ok(out)
}

impl Engine {
    /// The loaded adapters with their global scales.
    pub fn lora_adapters(&self) -> Vec<AdapterInfo> {
        let scales = self.lora_scales.lock().unwrap_or_else(|e| e.into_inner()).clone();
        self.model
            .adapters
            .iter()
            .enumerate()
            .map(|(id, a)| AdapterInfo {
                id,
                path: a.path.display().to_string(),
                scale: scales.get(id).copied().unwrap_or(0.0),
                task_name: a.task_name.clone(),
                prompt_prefix: a.prompt_prefix.clone(),
                n_tensors: a.n_pairs(),
            })
            .collect()
    }

    /// Set the global scales (`POST /lora-adapters`): the adapters `list` names, the others 0.
    /// Requests already submitted keep the scales they were given.
    pub fn set_lora_scales(&self, list: &[(usize, f32)]) -> Result<()> {
        let v = full_list(self.model.adapters.len(), list)?;
        *self.lora_scales.lock().unwrap_or_else(|e| e.into_inner()) = v;
        Ok(())
    }

    /// The scales a request runs under: its own list, else the global scales now. None when
    /// no adapter applies (every scale 0): the base model's arithmetic, bit for bit.
    pub fn resolve_lora(&self, list: Option<&[(usize, f32)]>) -> Result<Option<Arc<[f32]>>> {
        let n = self.model.adapters.len();
        if n == 0 {
            return match list {
                Some(l) if !l.is_empty() => Err(Error::InvalidRequest("lora: no LoRA adapters are loaded (start the server with --lora FILE)".into())),
                _ => Ok(None),
            };
        }
        let v = match list {
            Some(l) => full_list(n, l)?,
            None => self.lora_scales.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        };
        Ok(v.iter().any(|&s| s != 0.0).then(|| Arc::from(v)))
    }
}

/// Two scale lists mean the same arithmetic.
pub fn same_lora(a: &Option<Arc<[f32]>>, b: &Option<Arc<[f32]>>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(x), Some(y)) => x[..] == y[..],
        _ => false,
    }
}
