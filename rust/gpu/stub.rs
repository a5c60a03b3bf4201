//! The twin of the wgpu backend in a build without the `wgpu` feature: the same names,
//! no device, and a typed error where work would go to one.
use crate::error::{Error, Result};
use crate::kv_cache::LayerKv;

fn not_built() -> Error {
    Error::NotSupported("GPU offload: this build of llamars has no wgpu backend (built without the `wgpu` feature); running on the CPU".into())
}

/// Never constructed without the feature.
pub enum Offload {}
/// Never constructed without the feature.
pub enum KvDevice {}
/// Never constructed without the feature.
pub enum Acts {}

impl Offload {
    pub fn embeds_on_device(&self) -> bool {
        match *self {}
    }
    pub fn first_layer(&self) -> usize {
        match *self {}
    }
    pub fn n_offloaded(&self) -> usize {
        match *self {}
    }
    pub fn device_name(&self) -> String {
        match *self {}
    }
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        _m: &crate::model::Model,
        _acts: &mut Option<Acts>,
        _kv: &mut crate::kv_cache::KvStore,
        _tokens: &[u32],
        _queries: &[crate::cpu::attention::QueryPos],
        _masks: &crate::model::orders::Masks,
        _sel: &[usize],
        _input: super::StepIo<'_>,
        _hidden: bool,
        _out: &mut Vec<f32>,
    ) -> Result<()> {
        match *self {}
    }
}

impl KvDevice {
    pub fn download(&self, _layers: &mut [LayerKv], _pick: &dyn Fn(usize) -> bool) -> Result<()> {
        match *self {}
    }
    pub fn upload(&self, _layers: &[LayerKv], _pick: &dyn Fn(usize) -> bool) -> Result<()> {
        match *self {}
    }
    pub fn bytes(&self) -> u64 {
        match *self {}
    }
}

/// Offload as asked: without the backend everything stays on the CPU, and the line says so;
/// a device named explicitly does not exist here.
pub fn attach(m: &crate::model::Model, cfg: &super::GpuConfig, _progress: &mut dyn FnMut(usize, usize)) -> Result<(Option<Offload>, String)> {
    let n_layer = m.config.n_layer;
    match cfg.device.as_deref().map(str::trim).filter(|d| !d.is_empty()) {
        Some(d) if !d.eq_ignore_ascii_case("none") => {
            return Err(Error::InvalidRequest(format!("device: no device named '{d}'; available: none (this build has no wgpu backend)")));
        }
        _ => {}
    }
    if cfg.n_gpu_layers == 0 || cfg.device.as_deref().is_some_and(|d| d.trim().eq_ignore_ascii_case("none")) {
        return Ok((None, format!("offloaded 0/{} layers to GPU", n_layer + 1)));
    }
    Ok((None, format!("{}", not_built())))
}
