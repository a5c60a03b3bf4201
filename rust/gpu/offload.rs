//! Layer offload: the last layers and the output layer of a model resident on the device
//! (llama.cpp's placement: `-ngl N` puts the output layer and the last N-1 layers there),
//! uploaded as the layers' steps name them (`model::plan`). The device half of a KV cache
//! is `kv_device.rs`, a session's activations `acts.rs`, the forward step `step.rs`.
use super::device::Gpu;
use super::kernels::matmul::GpuWeight;
use super::kernels::moe::upload_experts;
use crate::cpu::Weight;
use crate::error::{Error, Result};
use crate::model::plan::Step;
use crate::model::Model;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the device holds for one step of a layer (`model::plan`): the weight rows of a
/// matrix product, the vector of a norm or bias, a mixture-of-experts FFN's experts, or
/// nothing.
pub(super) enum Dev {
    None,
    W(GpuWeight),
    V(wgpu::Buffer),
    Moe(Box<MoeDev>),
}

/// The routed experts of one layer: 3-D weights split on expert boundaries and the
/// per-expert biases (gpt-oss).
pub(super) struct MoeDev {
    pub(super) gate: Option<GpuWeight>,
    pub(super) up: GpuWeight,
    pub(super) down: GpuWeight,
    pub(super) gate_b: Option<wgpu::Buffer>,
    pub(super) up_b: Option<wgpu::Buffer>,
    pub(super) down_b: Option<wgpu::Buffer>,
}

impl Dev {
    fn weight_bytes(&self) -> usize {
        match self {
            Dev::W(w) => w.bytes(),
            Dev::Moe(m) => m.gate.as_ref().map_or(0, GpuWeight::bytes) + m.up.bytes() + m.down.bytes(),
            _ => 0,
        }
    }
}

fn up_moe(g: &Gpu, il: usize, moe: &crate::model::Moe) -> Result<MoeDev> {
    let name = |n: &str| format!("blk.{il}.{n}");
    let bias = |n: &str, v: &Option<Vec<f32>>| v.as_deref().map(|v| up_vec(g, &name(n), v)).transpose();
    Ok(MoeDev {
        gate: moe.gate.as_ref().map(|e| upload_experts(g, &name("ffn_gate_exps"), e)).transpose()?,
        up: upload_experts(g, &name("ffn_up_exps"), &moe.up)?,
        down: upload_experts(g, &name("ffn_down_exps"), &moe.down)?,
        gate_b: bias("ffn_gate_exps.bias", &moe.gate_bias)?,
        up_b: bias("ffn_up_exps.bias", &moe.up_bias)?,
        down_b: bias("ffn_down_exps.bias", &moe.down_bias)?,
    })
}

/// A layer on the device: one entry per step of `Model::layer_steps`, in step order.
pub(super) struct GLayer {
    pub(super) devs: Vec<Dev>,
}
/// The part of a model held by the device.
pub struct Offload {
    pub gpu: Arc<Gpu>,
    /// First layer on the device (layers before it run on the CPU).
    pub first: usize,
    /// Layers offloaded, counted as llama.cpp does (the output layer is one of them).
    pub n_offloaded: usize,
    /// Bytes of weights uploaded.
    pub weight_bytes: usize,
    pub(super) layers: Vec<GLayer>,
    pub(super) out_norm: wgpu::Buffer,
    pub(super) output: GpuWeight,
    /// The token embeddings are the output matrix (tied) and every layer is offloaded:
    /// the lookup runs on the device.
    pub(super) embed_on_device: bool,
    pub(super) id: u64,
}

pub(super) fn f32_bytes(v: &[f32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn up_vec(gpu: &Gpu, name: &str, v: &[f32]) -> Result<wgpu::Buffer> {
    gpu.upload(name, f32_bytes(v))
}

fn up_w(gpu: &Gpu, name: &str, w: &Weight, r_lo: usize, r_hi: usize) -> Result<GpuWeight> {
    GpuWeight::upload(gpu, name, w.ty, w.n_in, w.bytes(), r_lo, r_hi)
}

pub(super) fn next_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Offload {
    /// Upload the output layer and the last `n_gpu_layers - 1` layers (all of them when
    /// `n_gpu_layers > n_layer`). `progress(done, total)` is called after each layer.
    pub fn new(gpu: Arc<Gpu>, m: &Model, n_gpu_layers: usize, progress: &mut dyn FnMut(usize, usize)) -> Result<Offload> {
        let c = &m.config;
        let n_layer = c.n_layer;
        let n_offloaded = n_gpu_layers.min(n_layer + 1);
        if n_offloaded == 0 {
            return Err(Error::InvalidRequest("n_gpu_layers: 0 layers to offload".into()));
        }
        let first = n_layer + 1 - n_offloaded;
        if c.head_dim > 512 || c.head_dim % 2 != 0 || c.v_head_dim % 2 != 0 {
            return Err(Error::NotSupported(format!("GPU attention needs an even head size of at most 512 (this model: {})", c.head_dim)));
        }
        let g = &*gpu;
        let mut layers = Vec::new();
        for il in first..n_layer {
            let mut devs = Vec::new();
            for step in m.layer_steps(il) {
                devs.push(match step {
                    Step::MatMul { w, lo, hi, name, .. } => Dev::W(up_w(g, &format!("blk.{il}.{name}"), w, lo, hi)?),
                    Step::Norm { w, name, .. } | Step::AddBias { b: w, name, .. } => Dev::V(up_vec(g, &format!("blk.{il}.{name}"), w)?),
                    Step::Attention { sinks: Some(v), .. } => Dev::V(up_vec(g, &format!("blk.{il}.attn_sinks"), v)?),
                    Step::Moe { moe, .. } => Dev::Moe(Box::new(up_moe(g, il, moe)?)),
                    _ => Dev::None,
                });
            }
            layers.push(GLayer { devs });
            progress(il + 1 - first, n_offloaded);
        }
        let (m_norm, m_out) = m.lm_head()?;
        let crate::model::Norm::Rms(m_norm) = m_norm else {
            return Err(Error::NotSupported("a LayerNorm output norm does not run on the GPU yet".into()));
        };
        let output = up_w(g, "output", m_out, 0, m_out.n_out)?;
        let out_norm = up_vec(g, "output_norm", m_norm)?;
        progress(n_offloaded, n_offloaded);
        let tied = std::ptr::eq(m_out.bytes().as_ptr(), m.tok_embd.bytes().as_ptr());
        let weight_bytes = output.bytes()
            + layers.iter().flat_map(|l| &l.devs).map(Dev::weight_bytes).sum::<usize>();
        Ok(Offload { gpu, first, n_offloaded, weight_bytes, layers, out_norm, output, embed_on_device: tied && first == 0, id: next_id() })
    }

    pub fn embeds_on_device(&self) -> bool {
        self.embed_on_device
    }

    pub fn first_layer(&self) -> usize {
        self.first
    }

    pub fn n_offloaded(&self) -> usize {
        self.n_offloaded
    }

    pub fn device_name(&self) -> String {
        self.gpu.info.name.clone()
    }
}
