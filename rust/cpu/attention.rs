//! Causal self-attention over an f16 KV cache: GQA/MQA, optional sliding window.
//! Numerics follow ggml's non-fused path: Q rounded to f16, scores in f32,
//! softmax in f32, probabilities rounded to f16 before the V product.
use super::f16vec::{axpy_f16, dot_f16};
use super::ops::softmax;
use super::pool::ThreadPool;
use crate::quant::f16::{f32_to_f16, round_f16};

pub struct AttnShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub v_head_dim: usize,
    /// Multiplier applied to QK^T before the softmax.
    pub scale: f32,
    /// Sliding window: keys with pos_q - pos_k >= window are masked.
    pub window: Option<usize>,
    /// Gemma-2 style soft-capping of scores (0 = off).
    pub softcap: f32,
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: each task writes its own (token, head) slice of the output.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// q: [n_tokens, n_head*head_dim]; k: cache rows [pos, n_head_kv*head_dim] (f16);
/// v: cache rows [pos, n_head_kv*v_head_dim] (f16); positions[t] = absolute position of
/// query t, whose keys 0..=positions[t] are in the cache; out: [n_tokens, n_head*v_head_dim].
pub fn attention(
    pool: &ThreadPool,
    s: &AttnShape,
    q: &[f32],
    k: &[u16],
    v: &[u16],
    positions: &[usize],
    out: &mut [f32],
) {
    let n_tokens = positions.len();
    let (hd, vd) = (s.head_dim, s.v_head_dim);
    let (kdim, vdim) = (s.n_head_kv * hd, s.n_head_kv * vd);
    let group = s.n_head / s.n_head_kv;
    let optr = SendPtr(out.as_mut_ptr());
    pool.run(n_tokens * s.n_head, |task| {
        let optr = optr;
        let (t, h) = (task / s.n_head, task % s.n_head);
        let g = h / group;
        let pos = positions[t];
        let qh: Vec<u16> = q[t * s.n_head * hd + h * hd..][..hd].iter().map(|&x| f32_to_f16(x)).collect();
        let start = match s.window {
            Some(w) if w > 0 => (pos + 1).saturating_sub(w),
            _ => 0,
        };
        // SAFETY: the (t, h) output slice is written only by this task.
        let o = unsafe { std::slice::from_raw_parts_mut(optr.0.add(t * s.n_head * vd + h * vd), vd) };
        if std::env::var("LLAMARS_ATTN_FA").is_ok() {
            // online softmax, V accumulated in f16 (ggml flash_attn_ext f16 path)
            let mut acc = vec![0u16; vd];
            let (mut sum, mut m) = (0f32, f32::NEG_INFINITY);
            for j in start..=pos {
                let kj = &k[j * kdim + g * hd..][..hd];
                let x = dot_f16(&qh, kj) * s.scale;
                let (mut ms, mut vs) = (1.0f32, 1.0f32);
                if x > m {
                    let mold = m;
                    m = x;
                    ms = (mold - m).exp();
                    for a in acc.iter_mut() { *a = f32_to_f16(crate::quant::f16::f16_to_f32(*a) * ms); }
                } else {
                    vs = (x - m).exp();
                }
                let vj = &v[j * vdim + g * vd..][..vd];
                for (a, &vv) in acc.iter_mut().zip(vj) {
                    *a = f32_to_f16(crate::quant::f16::f16_to_f32(*a) + crate::quant::f16::f16_to_f32(vv) * vs);
                }
                sum = sum * ms + vs;
            }
            let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
            for (oo, &a) in o.iter_mut().zip(&acc) { *oo = crate::quant::f16::f16_to_f32(a) * inv; }
            return;
        }
        let mut scores: Vec<f32> = (start..=pos)
            .map(|j| {
                let kj = &k[j * kdim + g * hd..][..hd];
                let mut x = dot_f16(&qh, kj) * s.scale;
                if s.softcap > 0.0 {
                    x = (x / s.softcap).tanh() * s.softcap;
                }
                x
            })
            .collect();
        softmax(&mut scores);
        o.fill(0.0);
        for (idx, j) in (start..=pos).enumerate() {
            let p = round_f16(scores[idx]);
            if p != 0.0 {
                axpy_f16(o, p, &v[j * vdim + g * vd..][..vd]);
            }
        }
    });
}
