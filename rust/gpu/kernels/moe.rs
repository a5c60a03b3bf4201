//! Mixture-of-experts kernels: routing and the weighted sum of the chosen experts
//! (moe.wgsl), and the expert products over 3-D expert tensors (matmul_id.wgsl), as
//! rust/model/moe.rs computes them on the CPU (f32 activations: the numerics of the f32
//! matrix path, not the CPU's integer dots).
use super::matmul::GpuWeight;
use super::{fold, op, words, Family, Op, GRID_X};
use crate::error::{Error, Result};
use crate::gpu::device::Gpu;
use crate::model::{Experts, Gating, MoeConfig};

/// Experts per token the routing kernel holds (`MOE_K_MAX` in moe.wgsl).
pub const K_MAX: usize = 32;

/// Upload a 3-D expert tensor, its buffers split on expert boundaries.
pub fn upload_experts(gpu: &Gpu, name: &str, e: &Experts) -> Result<GpuWeight> {
    let row_bytes = e.w.ty.row_bytes(e.w.n_in);
    let limit = gpu.limits.max_storage_buffer_binding_size.min(gpu.limits.max_buffer_size).min(1 << 31) as usize;
    let per_expert = e.n_out * row_bytes;
    if per_expert + 16 > limit {
        return Err(Error::NotSupported(format!("{name}: one expert's matrix ({per_expert} bytes) exceeds the device's binding limit ({limit} bytes)")));
    }
    let experts_per_buf = (limit - 16) / per_expert;
    GpuWeight::upload_split(gpu, name, e.w.ty, e.w.n_in, e.w.bytes(), 0, e.n * e.n_out, experts_per_buf * e.n_out)
}

/// Each token's `k` experts into `ids` and their weights into `wts` from the router's
/// logits [n, n_expert].
pub fn op_route(gpu: &Gpu, cfg: &MoeConfig, logits: &wgpu::Buffer, wts: &wgpu::Buffer, ids: &wgpu::Buffer, dummy: &wgpu::Buffer, step: &wgpu::Buffer) -> Result<Op> {
    let gating = match cfg.gating {
        Gating::Softmax => 0u32,
        Gating::Sigmoid => 1,
        Gating::SoftmaxWeight => 2,
    };
    let p = words(&[cfg.n_expert as u32, cfg.n_used as u32, gating, cfg.norm_w as u32, cfg.w_scale.to_bits(), 0, 0, 0]);
    op(gpu, Family::Moe, "route", &[logits, wts, ids, dummy], Some(&p), step, Box::new(|s| fold(s.n_tok.div_ceil(64))))
}

/// out[t, :] (+)= Σ_j wts[t, j] · y[t, j, :] (`add`: onto what `out` holds).
#[allow(clippy::too_many_arguments)]
pub fn op_combine(gpu: &Gpu, k: usize, width: usize, add: bool, y: &wgpu::Buffer, wts: &wgpu::Buffer, ids: &wgpu::Buffer, out: &wgpu::Buffer, step: &wgpu::Buffer) -> Result<Op> {
    let p = words(&[0, k as u32, 0, 0, 0, width as u32, add as u32, 0]);
    let w = width as u32;
    op(gpu, Family::Moe, "combine", &[y, wts, ids, out], Some(&p), step, Box::new(move |s| fold((s.n_tok * w).div_ceil(256))))
}

/// The experts `group_pairs` can group (`GROUP_EXPERTS_MAX` in matmul_id.wgsl); models with
/// more take the per-pair kernel at every batch size.
pub const GROUP_EXPERTS_MAX: usize = 1024;

/// u32 words of the grouping buffer: per-expert offsets, then one entry per pair.
pub fn group_words(n_expert: usize, pairs: usize) -> usize {
    n_expert + 1 + pairs
}

/// The bindings of one expert product besides the weight: input rows, output rows
/// [n, k, n_out], the chosen experts, an optional per-expert bias [n_expert, n_out], and
/// the grouping buffer ([`group_words`]).
pub struct IdIo<'a> {
    pub x: &'a wgpu::Buffer,
    pub y: &'a wgpu::Buffer,
    pub ids: &'a wgpu::Buffer,
    pub group: &'a wgpu::Buffer,
    pub bias: Option<&'a wgpu::Buffer>,
    pub dummy: &'a wgpu::Buffer,
    /// experts per token
    pub k: usize,
    /// `x` holds one row per (token, slot) pair rather than one per token
    pub x_per_pair: bool,
}

impl GpuWeight {
    /// Y[p, :] = W_{ids[p]} · X[p / k or p, :] for the step's (token, slot) pairs; `self`
    /// holds every expert's `n_out` rows ([`upload_experts`]). A step with at least as many
    /// pairs as experts groups them by expert first and decodes each weight row once per 8
    /// of an expert's pairs (`matmul_id_grouped`); fewer pairs (decode) take one workgroup
    /// per (row, pair) (`matvec_id`). Each op's grid is zero at the batch sizes it does not
    /// serve.
    pub fn id_ops(&self, gpu: &Gpu, n_out: usize, io: &IdIo<'_>, step: &wgpu::Buffer) -> Result<Vec<Op>> {
        let grids = super::grids::buffer(gpu, self.ty)?;
        let g = grids.as_ref().unwrap_or(io.dummy);
        let bias = io.bias.unwrap_or(io.dummy);
        let k = io.k as u32;
        let n_expert = self.chunks.iter().map(|c| c.row0 + c.rows).max().unwrap_or(0) / n_out.max(1);
        let ne = n_expert as u32;
        let can_group = n_expert <= GROUP_EXPERTS_MAX;
        let grouped = move |s: &super::StepSize| can_group && s.n_tok * k >= ne && s.n_tok > 0;
        let params = |x0: usize, n_x: usize| {
            words(&[self.n_in as u32, n_out as u32, self.row_bytes as u32, x0 as u32, n_x as u32, k, io.x_per_pair as u32, io.bias.is_some() as u32, ne, 0, 0, 0])
        };
        let mut ops = Vec::with_capacity(1 + 2 * self.chunks.len());
        let Some(first) = self.chunks.first() else { return Ok(ops) };
        let p = params(0, n_expert);
        ops.push(op(
            gpu,
            Family::MatId(self.ty),
            "group_pairs",
            &[&first.buf, io.x, io.y, g, io.ids, bias, io.group],
            Some(&p),
            step,
            Box::new(move |s| if grouped(s) { [1, 1, 1] } else { [0, 0, 0] }),
        )?);
        let rows = n_out as u32;
        for c in &self.chunks {
            let (x0, n_x) = (c.row0 / n_out, c.rows / n_out);
            let p = params(x0, n_x);
            let bufs: [&wgpu::Buffer; 7] = [&c.buf, io.x, io.y, g, io.ids, bias, io.group];
            ops.push(op(
                gpu,
                Family::MatId(self.ty),
                "matvec_id",
                &bufs,
                Some(&p),
                step,
                Box::new(move |s| {
                    let pairs = s.n_tok * k;
                    if pairs == 0 || grouped(s) {
                        return [0, 0, 0];
                    }
                    [rows.min(GRID_X), rows.div_ceil(GRID_X), pairs.min(65535)]
                }),
            )?);
            let n_x = n_x as u32;
            ops.push(op(
                gpu,
                Family::MatId(self.ty),
                "matmul_id_grouped",
                &bufs,
                Some(&p),
                step,
                Box::new(move |s| if grouped(s) { [rows.min(GRID_X), rows.div_ceil(GRID_X), n_x] } else { [0, 0, 0] }),
            )?);
        }
        Ok(ops)
    }
}
