//! RMSNorm (norm.wgsl), in place or from another buffer; rows of `len` elements,
//! `per_tok` rows per token (heads for QK-norm).
use super::{fold, op, words, Family, Op};
use crate::error::Result;
use crate::gpu::device::Gpu;

#[allow(clippy::too_many_arguments)]
pub fn op_norm(gpu: &Gpu, dst: &wgpu::Buffer, src: Option<&wgpu::Buffer>, g: &wgpu::Buffer, dummy: &wgpu::Buffer, len: usize, per_tok: usize, eps: f32, sel: bool, step: &wgpu::Buffer) -> Result<Op> {
    let p = words(&[len as u32, per_tok as u32, eps.to_bits(), sel as u32]);
    let per = per_tok as u32;
    let grid = Box::new(move |s: &super::StepSize| fold(s.rows(sel) * per));
    match src {
        Some(b) => op(gpu, Family::Norm, "norm_copy", &[dst, b, g], Some(&p), step, grid),
        None => op(gpu, Family::Norm, "norm_inplace", &[dst, dummy, g], Some(&p), step, grid),
    }
}
