//! RoPE (rope.wgsl) with per-token cos/sin tables from the CPU (`cpu::ops::rope_cache`).
use super::{op, words, Family, Op};
use crate::error::Result;
use crate::gpu::device::Gpu;

/// cs: [n_cap, half] cos then [n_cap, half] sin (sin at `sin_off` floats).
#[allow(clippy::too_many_arguments)]
pub fn op_rope(gpu: &Gpu, a: &wgpu::Buffer, cs: &wgpu::Buffer, n_heads: usize, head_dim: usize, n_rot: usize, neox: bool, sin_off: usize, step: &wgpu::Buffer) -> Result<Op> {
    let p = words(&[n_heads as u32, head_dim as u32, n_rot as u32, neox as u32, sin_off as u32, 0, 0, 0]);
    let (half, h) = ((n_rot / 2) as u32, n_heads as u32);
    op(gpu, Family::Rope, "rope", &[a, cs], Some(&p), step, Box::new(move |s| [half.div_ceil(64), h, s.n_tok]))
}
