//! Attention over the device KV cache (attention.wgsl): scores, softmax (with attention
//! sinks where the model has them), P·V.
use super::{op, words, Family, Op};
use crate::error::Result;
use crate::gpu::device::Gpu;

pub struct AttnDesc {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    pub cap: usize,
    pub ring: bool,
    pub window: usize,
    pub swa: bool,
    pub scale: f32,
    pub softcap: f32,
}

pub struct AttnBufs<'a> {
    pub q: &'a wgpu::Buffer,
    pub k: &'a wgpu::Buffer,
    pub v: &'a wgpu::Buffer,
    pub scores: &'a wgpu::Buffer,
    pub out: &'a wgpu::Buffer,
    pub tm: &'a wgpu::Buffer,
    /// per query head, a logit the softmax takes in without a value (gpt-oss's sinks)
    pub sinks: Option<&'a wgpu::Buffer>,
}

/// The three passes, in order.
pub fn ops(gpu: &Gpu, d: &AttnDesc, b: &AttnBufs<'_>, step: &wgpu::Buffer) -> Result<Vec<Op>> {
    let p = words(&[
        d.n_head as u32,
        d.n_head_kv as u32,
        d.head_dim as u32,
        d.v_head_dim as u32,
        d.cap as u32,
        d.ring as u32,
        d.window as u32,
        d.swa as u32,
        d.scale.to_bits(),
        d.softcap.to_bits(),
        b.sinks.is_some() as u32,
        0,
    ]);
    // without sinks any read-only buffer fills their binding
    let bufs = [b.q, b.k, b.v, b.scores, b.out, b.tm, b.sinks.unwrap_or(b.tm)];
    let (nh, swa, vd) = (d.n_head as u32, d.swa, d.v_head_dim as u32);
    let l = move |s: &super::StepSize| if swa { s.l_swa } else { s.l_full };
    Ok(vec![
        op(gpu, Family::Attention, "attn_scores", &bufs, Some(&p), step, Box::new(move |s| [l(s).div_ceil(64), nh, s.n_tok]))?,
        op(gpu, Family::Attention, "attn_softmax", &bufs, Some(&p), step, Box::new(move |s| [nh, s.n_tok, 1]))?,
        op(gpu, Family::Attention, "attn_pv", &bufs, Some(&p), step, Box::new(move |s| [vd.div_ceil(64), nh, s.n_tok]))?,
    ])
}
