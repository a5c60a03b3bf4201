//! WGSL kernels and the pieces every wrapper shares: shader assembly, one explicit bind
//! group layout per kernel family, a pipeline cache, and `Op` (a pipeline, its bind
//! group and how many workgroups a step needs). Each `<kernel>.rs` beside its
//! `<kernel>.wgsl` builds the `Op`s of that kernel.
pub mod attention;
pub mod eltwise;
pub mod embed;
pub mod exact;
pub mod grids;
pub mod kvstore;
pub mod matmul;
pub mod moe;
pub mod norm;
pub mod qmatmul;
pub mod rope;

use super::device::Gpu;
use crate::error::{Error, Result};
use crate::quant::GgmlType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use wgpu::util::DeviceExt;

const COMMON: &str = include_str!("common.wgsl");
const EXACT: &str = include_str!("exact.wgsl");
const QUANT: &str = include_str!("quant.wgsl");
const MAT: &str = include_str!("mat_common.wgsl");

/// Workgroups along x before a dispatch wraps to y (`GRID_X` in common.wgsl).
pub const GRID_X: u32 = 32768;

/// The WGSL name suffix of a weight type's `dq4_*` loader, or None when the GPU has none.
pub fn quant_name(ty: GgmlType) -> Option<&'static str> {
    use GgmlType::*;
    Some(match ty {
        F32 => "f32",
        F16 => "f16",
        BF16 => "bf16",
        Q4_0 => "q4_0",
        Q4_1 => "q4_1",
        Q5_0 => "q5_0",
        Q5_1 => "q5_1",
        Q8_0 => "q8_0",
        Q2_K => "q2_k",
        Q3_K => "q3_k",
        Q4_K => "q4_k",
        Q5_K => "q5_k",
        Q6_K => "q6_k",
        IQ4_NL => "iq4_nl",
        IQ4_XS => "iq4_xs",
        MXFP4 => "mxfp4",
        TQ1_0 => "tq1_0",
        TQ2_0 => "tq2_0",
        IQ2_XXS => "iq2_xxs",
        IQ2_XS => "iq2_xs",
        IQ2_S => "iq2_s",
        IQ3_XXS => "iq3_xxs",
        IQ3_S => "iq3_s",
        IQ1_S => "iq1_s",
        IQ1_M => "iq1_m",
        _ => return None,
    })
}

/// Kernel families: one WGSL module and one bind group layout each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// matvec / matmul over a weight type
    Mat(GgmlType),
    /// embedding rows of a weight type
    Embed(GgmlType),
    /// integer-dot products of a weight type against quantized activations
    QMat(GgmlType),
    /// activation quantizers (Q8_0, Q8_K)
    QAct,
    /// expert products over a 3-D weight of a type (llama.cpp's mul_mat_id)
    MatId(GgmlType),
    /// expert routing and the weighted sum of the experts' outputs
    Moe,
    Norm,
    Eltwise,
    Rope,
    KvStore,
    Attention,
}

/// Binding kinds in order: `R` read-only storage, `W` read-write storage, `U` uniform.
#[derive(Clone, Copy)]
enum B {
    R,
    W,
    U,
}

impl Family {
    fn bindings(self) -> &'static [(u32, B)] {
        use B::*;
        match self {
            f if grids::family_binds(f) => &[(0, R), (1, R), (2, W), (3, U), (4, U), (5, R)],
            Family::Mat(_) | Family::Embed(_) => &[(0, R), (1, R), (2, W), (3, U), (4, U)],
            Family::QMat(_) => &[(0, R), (1, R), (2, W), (3, U), (4, U), (5, R)],
            Family::QAct => &[(0, R), (1, W), (3, U), (4, U)],
            Family::MatId(_) => &[(0, R), (1, R), (2, W), (3, U), (4, U), (5, R), (6, R), (7, R), (8, W)],
            Family::Moe => &[(0, R), (1, W), (2, W), (3, U), (4, U), (5, W)],
            Family::Norm => &[(0, W), (1, R), (2, R), (3, U), (4, U)],
            Family::Eltwise => &[(0, W), (1, R), (2, R), (3, U), (4, U)],
            Family::Rope => &[(0, W), (1, R), (3, U), (4, U)],
            Family::KvStore => &[(0, W), (1, R), (2, R), (3, U), (4, U)],
            Family::Attention => &[(0, R), (1, R), (2, R), (3, W), (4, W), (5, R), (6, U), (7, U), (8, R)],
        }
    }

    /// The module's WGSL: common.wgsl, exact.wgsl with `fmaf` (the device's `fma` where it
    /// rounds once, else its emulation), then the family's kernels.
    fn source(self, gpu: &Gpu) -> Result<String> {
        let dp4a = gpu.dp4a;
        let fmaf = if gpu.fma_native { "fma(a, b, c)" } else { "fma_emulated(a, b, c)" };
        let common = format!("{COMMON}\n{EXACT}\nfn fmaf(a: f32, b: f32, c: f32) -> f32 {{\n    return {fmaf};\n}}\n");
        let body = match self {
            Family::QMat(ty) => {
                let spec = qmatmul::specialise(ty, dp4a).ok_or_else(|| Error::NotSupported(format!("no integer GPU kernel for tensor type {}", ty.name())))?;
                return Ok(format!("{common}\n{}\n{}\n{MAT}\n{QUANT}\n{spec}", crate::quant::blocks::wgsl_constants(), include_str!("qmatmul.wgsl")));
            }
            Family::QAct => include_str!("qact.wgsl"),
            Family::Moe => include_str!("moe.wgsl"),
            Family::Mat(ty) | Family::Embed(ty) | Family::MatId(ty) => {
                let name = quant_name(ty).ok_or_else(|| Error::NotSupported(format!("no GPU kernel for tensor type {}", ty.name())))?;
                let (k, mat) = match self {
                    Family::Mat(_) => (include_str!("matmul.wgsl"), MAT),
                    Family::Embed(_) => (include_str!("embed.wgsl"), ""),
                    _ => (include_str!("matmul_id.wgsl"), ""),
                };
                let blocks = crate::quant::blocks::wgsl_constants();
                let grid = if grids::uses_grids(ty) { grids::wgsl() } else { String::new() };
                return Ok(format!("{common}\n{k}\n{mat}\n{blocks}\n{QUANT}\n{grid}\nfn dq4(rb: u32, k: u32) -> vec4<f32> {{\n    return dq4_{name}(rb, k);\n}}\n"));
            }
            Family::Norm => include_str!("norm.wgsl"),
            Family::Eltwise => include_str!("eltwise.wgsl"),
            Family::Rope => include_str!("rope.wgsl"),
            Family::KvStore => include_str!("kvstore.wgsl"),
            Family::Attention => {
                // the f16 cache as f16 arrays (SHADER_F16), else as words unpacked in f32
                let (enable, ty, read) = if gpu.f16 { ("enable f16;\n", "vec2<f16>", "vec2<f32>") } else { ("", "u32", "unpack2x16float") };
                return Ok(format!(
                    "{enable}{common}\n\
                     @group(0) @binding(1) var<storage, read> KC: array<{ty}>;\n\
                     @group(0) @binding(2) var<storage, read> VC: array<{ty}>;\n\
                     fn kc2(i: u32) -> vec2<f32> {{\n    return {read}(KC[i]);\n}}\n\
                     fn vc2(i: u32) -> vec2<f32> {{\n    return {read}(VC[i]);\n}}\n{}",
                    include_str!("attention.wgsl")
                ));
            }
        };
        Ok(format!("{common}\n{body}"))
    }
}

/// Compiled pipelines, built on first use and shared by every model on the device.
#[derive(Default)]
pub struct Pipelines {
    layouts: Mutex<HashMap<Family, (Arc<wgpu::BindGroupLayout>, Arc<wgpu::ShaderModule>)>>,
    pipes: Mutex<HashMap<(Family, &'static str), Arc<wgpu::ComputePipeline>>>,
    /// The i-quant grid tables (grids.rs), uploaded on first use.
    pub grids: Mutex<Option<wgpu::Buffer>>,
}

impl Pipelines {
    fn family(&self, gpu: &Gpu, f: Family) -> Result<(Arc<wgpu::BindGroupLayout>, Arc<wgpu::ShaderModule>)> {
        let mut map = self.layouts.lock().map_err(|_| Error::Gpu("pipeline cache poisoned".into()))?;
        if let Some(e) = map.get(&f) {
            return Ok(e.clone());
        }
        let entries: Vec<wgpu::BindGroupLayoutEntry> = f
            .bindings()
            .iter()
            .map(|&(binding, b)| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match b {
                        B::R => wgpu::BufferBindingType::Storage { read_only: true },
                        B::W => wgpu::BufferBindingType::Storage { read_only: false },
                        B::U => wgpu::BufferBindingType::Uniform,
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let src = f.source(gpu)?;
        let (bgl, module) = gpu.checked(&format!("compiling the {f:?} kernels"), || {
            let bgl = gpu.device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: None, entries: &entries });
            let module = gpu.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&format!("{f:?}")),
                source: wgpu::ShaderSource::Wgsl(src.into()),
            });
            (bgl, module)
        })?;
        let e = (Arc::new(bgl), Arc::new(module));
        map.insert(f, e.clone());
        Ok(e)
    }

    /// The pipeline of entry point `entry` of family `f` and its bind group layout.
    pub fn get(&self, gpu: &Gpu, f: Family, entry: &'static str) -> Result<(Arc<wgpu::ComputePipeline>, Arc<wgpu::BindGroupLayout>)> {
        let (bgl, module) = self.family(gpu, f)?;
        let mut map = self.pipes.lock().map_err(|_| Error::Gpu("pipeline cache poisoned".into()))?;
        if let Some(p) = map.get(&(f, entry)) {
            return Ok((p.clone(), bgl));
        }
        let pipe = gpu.checked(&format!("building the {f:?} pipeline '{entry}'"), || {
            let layout = gpu.device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&*bgl)],
                immediate_size: 0,
            });
            gpu.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&layout),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        })?;
        let p = Arc::new(pipe);
        map.insert((f, entry), p.clone());
        Ok((p, bgl))
    }
}

/// What a step's sizes say about how many workgroups an `Op` needs.
#[derive(Debug, Clone, Copy)]
pub struct StepSize {
    pub n_tok: u32,
    pub n_sel: u32,
    pub l_full: u32,
    pub l_swa: u32,
}

impl StepSize {
    /// The per-step uniform (`Step` in common.wgsl).
    pub fn bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        for (i, v) in [self.n_tok, self.n_sel, self.l_full, self.l_swa].iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    pub fn rows(&self, sel: bool) -> u32 {
        if sel {
            self.n_sel
        } else {
            self.n_tok
        }
    }
}

pub type GridFn = Box<dyn Fn(&StepSize) -> [u32; 3] + Send + Sync>;

/// One dispatch of a forward step: static bind group, grid from the step's sizes.
pub struct Op {
    pub pipe: Arc<wgpu::ComputePipeline>,
    pub bind: wgpu::BindGroup,
    pub grid: GridFn,
    /// Kept alive with the bind group (the op's static parameters).
    pub _params: Option<wgpu::Buffer>,
}

impl Op {
    pub fn encode(&self, pass: &mut wgpu::ComputePass<'_>, s: &StepSize) {
        let [x, y, z] = (self.grid)(s);
        if x == 0 || y == 0 || z == 0 {
            return;
        }
        pass.set_pipeline(&self.pipe);
        pass.set_bind_group(0, &self.bind, &[]);
        pass.dispatch_workgroups(x, y, z);
    }
}

/// `total` workgroups folded into (x, y) with x <= GRID_X.
pub fn fold(total: u32) -> [u32; 3] {
    if total == 0 {
        return [0, 0, 0];
    }
    [total.min(GRID_X), total.div_ceil(GRID_X), 1]
}

/// Build an op of `f`/`entry` binding `bufs` in the family's binding order, with a
/// uniform of `params` at the family's first uniform slot when given, and the step
/// uniform at the last slot.
pub fn op(gpu: &Gpu, f: Family, entry: &'static str, bufs: &[&wgpu::Buffer], params: Option<&[u8]>, step: &wgpu::Buffer, grid: GridFn) -> Result<Op> {
    let (pipe, bgl) = gpu.pipes.get(gpu, f, entry)?;
    let pbuf = params.map(|p| {
        let mut v = p.to_vec();
        v.resize(v.len().div_ceil(16) * 16, 0);
        gpu.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: Some(entry), contents: &v, usage: wgpu::BufferUsages::UNIFORM })
    });
    let binds = f.bindings();
    let mut entries = Vec::with_capacity(binds.len());
    let (mut next_buf, n_uniform) = (0usize, binds.iter().filter(|b| matches!(b.1, B::U)).count());
    let mut uniforms_seen = 0;
    for &(binding, kind) in binds {
        let res = match kind {
            B::U => {
                uniforms_seen += 1;
                if uniforms_seen == n_uniform {
                    step.as_entire_binding()
                } else {
                    pbuf.as_ref().ok_or_else(|| Error::Gpu(format!("{entry}: parameters missing")))?.as_entire_binding()
                }
            }
            _ => {
                let b = bufs.get(next_buf).ok_or_else(|| Error::Gpu(format!("{entry}: {} buffers bound, more needed", bufs.len())))?;
                next_buf += 1;
                b.as_entire_binding()
            }
        };
        entries.push(wgpu::BindGroupEntry { binding, resource: res });
    }
    let bind = gpu.checked(&format!("binding '{entry}'"), || gpu.device.create_bind_group(&wgpu::BindGroupDescriptor { label: Some(entry), layout: &bgl, entries: &entries }))?;
    Ok(Op { pipe, bind, grid, _params: pbuf })
}

/// Little-endian bytes of a parameter struct given as 32-bit words.
pub fn words(w: &[u32]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}
