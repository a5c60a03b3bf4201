//! Embedding lookup (embed.wgsl): rows of a GGUF matrix picked by token id, scaled.
use super::{op, words, Family, Op};
use super::matmul::GpuWeight;
use crate::error::Result;
use crate::gpu::device::Gpu;

/// Y[t, :] = W[TOK[t], :] · scale for the step's tokens; one op per buffer of `w`.
pub fn ops(gpu: &Gpu, w: &GpuWeight, tokens: &wgpu::Buffer, y: &wgpu::Buffer, scale: f32, step: &wgpu::Buffer) -> Result<Vec<Op>> {
    let n4 = (w.n_in / 4) as u32;
    let grids = super::grids::buffer(gpu, w.ty)?;
    w.chunks
        .iter()
        .map(|c| {
            let p = words(&[w.n_in as u32, c.rows as u32, w.row_bytes as u32, c.row0 as u32, scale.to_bits(), 0, 0, 0]);
            let bufs: Vec<&wgpu::Buffer> = [&c.buf, tokens, y].into_iter().chain(grids.as_ref()).collect();
            op(gpu, Family::Embed(w.ty), "embed", &bufs, Some(&p), step, Box::new(move |s| [n4.div_ceil(64), s.n_tok, 1]))
        })
        .collect()
}
