//! Element-wise kernels (eltwise.wgsl) over [rows, width]: residual add, bias add, scale,
//! GEGLU / SwiGLU (and gpt-oss's clamped form), SiLU, a per-row sigmoid gate, and the
//! gather of selected rows.
use super::{fold, op, words, Family, Op};
use crate::error::Result;
use crate::gpu::device::Gpu;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ew {
    /// a += b
    Add,
    /// a[t, :] += b[:]
    AddRow,
    /// a *= scale
    Scale(f32),
    /// a = gelu(a) · b (aux: the GELU table, `gelu_table_bytes`)
    Geglu,
    /// a = silu(a) · b
    Swiglu,
    /// a[i, :] = b[sel[i], :]
    Gather,
    /// a = silu(a)
    Silu,
    /// gpt-oss's clamped SwiGLU: a = min(a, limit) · σ(α · min(a, limit)) · (clamp(b, ±limit) + 1)
    SwigluOai { alpha: f32, limit: f32 },
    /// a[t, :] *= σ(b[t]) (Qwen2-MoE's shared-expert gate, one value per row)
    SigmoidGate,
}

#[allow(clippy::too_many_arguments)]
pub fn op_ew(gpu: &Gpu, kind: Ew, a: &wgpu::Buffer, b: &wgpu::Buffer, aux: &wgpu::Buffer, width: usize, sel: bool, step: &wgpu::Buffer) -> Result<Op> {
    let mut extra = 0u32;
    let (entry, scale) = match kind {
        Ew::Add => ("add", 1.0f32),
        Ew::AddRow => ("add_row", 1.0),
        Ew::Scale(s) => ("scale", s),
        Ew::Geglu => ("geglu", 1.0),
        Ew::Swiglu => ("swiglu", 1.0),
        Ew::Gather => ("gather", 1.0),
        Ew::Silu => ("silu", 1.0),
        Ew::SwigluOai { alpha, limit } => {
            extra = limit.to_bits();
            ("swiglu_oai", alpha)
        }
        Ew::SigmoidGate => ("sigmoid_gate", 1.0),
    };
    let sel = sel || kind == Ew::Gather;
    let p = words(&[width as u32, scale.to_bits(), sel as u32, extra]);
    let w = width as u32;
    op(gpu, Family::Eltwise, entry, &[a, b, aux], Some(&p), step, Box::new(move |s| fold((s.rows(sel) * w).div_ceil(256))))
}

/// GELU's table as the CPU path computes it (rust/cpu/ops.rs), f32 by f16 input: the
/// `aux` buffer of `Ew::Geglu`.
pub fn gelu_table_bytes() -> &'static [u8] {
    bytemuck::cast_slice(crate::cpu::ops::gelu_table())
}
