//! Writes the batch's K or V rows into the f16 cache (kvstore.wgsl).
use super::{op, words, Family, Op};
use crate::error::Result;
use crate::gpu::device::Gpu;

/// cache: [n_slots · cap, dim] f16 pairs; src: [n, dim] f32; tm: per-token (slot, pos, ring_lo, 0).
pub fn op_store(gpu: &Gpu, cache: &wgpu::Buffer, src: &wgpu::Buffer, tm: &wgpu::Buffer, dim: usize, cap: usize, step: &wgpu::Buffer) -> Result<Op> {
    let p = words(&[dim as u32, cap as u32, 0, 0]);
    let half = (dim / 2) as u32;
    op(gpu, Family::KvStore, "kv_store", &[cache, src, tm], Some(&p), step, Box::new(move |s| [half.div_ceil(64), s.n_tok, 1]))
}
