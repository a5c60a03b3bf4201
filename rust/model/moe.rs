//! Mixture-of-experts FFNs on the CPU, as llama.cpp's `build_moe_ffn` computes them:
//! router probabilities from the logits (`Gating`), the top k experts per token in
//! descending order, their weights (renormalised and scaled where the architecture says),
//! then each expert's gated FFN over just the tokens routed to it (one matmul per expert
//! and projection, no pass over the others), and per token the weighted outputs summed in
//! the order the experts were chosen.
//!
//! Kernel orders follow llama.cpp's `mul_mat_id`: every routed row is a one-token product
//! (`ggml_vec_dot`, or the repacked gemv for Q4_0 / Q4_K / Q2_K / IQ4_NL experts), except
//! that the tiled K-quant kernel takes an expert's rows once 8 or more tokens of one chunk
//! are routed to it (`ggml_compute_forward_mul_mat_id_tiled`). The count is taken per
//! sequence and prompt chunk (`groups`), so a token's bits never depend on other sequences.
use super::{ExpertAct, Gating, Moe, MoeConfig};
use crate::cpu::f16vec::{expf_ggml, reduce16};
use crate::cpu::ops::swiglu_ggml;
use crate::cpu::{matmul_masked, Scratch, ThreadPool};
use crate::quant::{batch_tokens, GgmlType};

/// Buffers of the MoE step, grown on demand and reused.
#[derive(Default)]
pub struct MoeScratch {
    /// Per token, the chosen experts in order and their weights [n, k].
    ids: Vec<u32>,
    weights: Vec<f32>,
    probs: Vec<f32>,
    order: Vec<u32>,
    /// The (token, slot) pairs routed to each expert, in token order.
    rows: Vec<Vec<(u32, u32)>>,
    xin: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    y: Vec<f32>,
    ones: Vec<f32>,
    mask: Vec<bool>,
    /// Each token's weighted expert outputs [n, k, n_embd].
    out: Vec<f32>,
    scratch: Scratch,
}

/// ggml's `ggml_soft_max` of one row in place, as its AVX-512 build computes it: 16 values
/// at a time through `ggml_v_expf` (summed by `_mm512_reduce_add_ps`), the rest through
/// libm's `expf`, the total in f64, then one multiply by its inverse.
pub fn softmax_row_ggml(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let vec = x.len() - x.len() % 16;
    let mut sum = 0f64;
    for c in x[..vec].chunks_exact_mut(16) {
        c.iter_mut().for_each(|v| *v = expf_ggml(*v - max));
        let lanes: &[f32; 16] = (&*c).try_into().unwrap_or(&[0.0; 16]);
        sum += reduce16(lanes) as f64;
    }
    for v in &mut x[vec..] {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

/// Each token's experts and weights from its router logits `logits` [n, n_expert]: into
/// `ids` / `weights` [n, n_used].
fn route(cfg: &MoeConfig, logits: &[f32], n: usize, s: &mut MoeScratch) {
    let (ne, k) = (cfg.n_expert, cfg.n_used);
    s.ids.clear();
    s.weights.clear();
    s.probs.resize(ne, 0.0);
    for t in 0..n {
        let p = &mut s.probs[..ne];
        p.copy_from_slice(&logits[t * ne..(t + 1) * ne]);
        match cfg.gating {
            Gating::Softmax => softmax_row_ggml(p),
            // ggml_sigmoid: 1 / (1 + expf(-x))
            Gating::Sigmoid => p.iter_mut().for_each(|v| *v = 1.0 / (1.0 + (-*v).exp())),
            Gating::SoftmaxWeight => {}
        }
        // ggml_argsort_top_k: descending (ties by index, std::sort's order being unspecified)
        s.order.clear();
        s.order.extend(0..ne as u32);
        s.order.sort_by(|&a, &b| p[b as usize].total_cmp(&p[a as usize]).then(a.cmp(&b)));
        let w0 = s.weights.len();
        for &x in &s.order[..k] {
            s.ids.push(x);
            s.weights.push(p[x as usize]);
        }
        let w = &mut s.weights[w0..];
        if cfg.gating == Gating::SoftmaxWeight {
            softmax_row_ggml(w);
        }
        if cfg.norm_w {
            // ggml_sum_rows (f64 sum), clamped to f16's smallest normal, then ggml_div
            let sum = (w.iter().map(|&v| v as f64).sum::<f64>() as f32).max(6.103_515_6e-5);
            w.iter_mut().for_each(|v| *v /= sum);
        }
        if cfg.w_scale != 0.0 && cfg.w_scale != 1.0 {
            w.iter_mut().for_each(|v| *v *= cfg.w_scale);
        }
    }
}

/// `rows[r] += bias[x]` for each row of `width` values (ggml_add_id: expert `x`'s bias).
fn add_bias(rows: &mut [f32], bias: Option<&[f32]>, x: usize, width: usize) {
    if let Some(b) = bias {
        let b = &b[x * width..(x + 1) * width];
        rows.chunks_exact_mut(width).for_each(|r| r.iter_mut().zip(b).for_each(|(v, &bv)| *v += bv));
    }
}

/// gpt-oss's clamped SwiGLU in place of `gate`, as ggml's `swiglu_oai` computes it:
/// x = min(gate, limit), y = clamp(up, -limit, limit), x / (1 + expf(α · -x)) · (y + 1).
fn swiglu_oai(gate: &mut [f32], up: &[f32], alpha: f32, limit: f32) {
    for (g, &u) in gate.iter_mut().zip(up) {
        // std::min(g, limit) and std::clamp keep g / u unless the bound is strictly passed
        let x = if limit < *g { limit } else { *g };
        let y = if u < -limit { -limit } else if limit < u { limit } else { u };
        *g = x / (1.0 + (alpha * -x).exp()) * (y + 1.0);
    }
}

/// Whether llama.cpp's `mul_mat_id` takes the tiled K-quant kernel for an expert's rows of
/// this type once enough tokens are routed to it (types it repacks, F32 and F16 stay in
/// the one-token order).
fn tiled_type(ty: GgmlType) -> bool {
    crate::quant::tiled_type(ty)
}

/// Per row routed to one expert: whether llama.cpp's tiled kernel would take it, i.e. its
/// prompt chunk (`groups`, `batch`) routes 8 or more rows to the expert. `rows` are in token
/// order and a chunk's tokens are consecutive, so each chunk is one run of rows.
fn tiled_rows(rows: &[(u32, u32)], groups: &[u32], batch: &[bool], mask: &mut Vec<bool>) {
    mask.clear();
    let mut r0 = 0;
    while r0 < rows.len() {
        let g = groups[rows[r0].0 as usize];
        let r1 = r0 + rows[r0..].iter().take_while(|&&(u, _)| groups[u as usize] == g).count();
        let tiled = batch_tokens(GgmlType::Q6_K, r1 - r0) > 0;
        mask.extend(rows[r0..r1].iter().map(|&(t, _)| tiled && batch[t as usize]));
        r0 = r1;
    }
}

/// `dst[t] (+)= Σ_j w[t,j] · expert_{id[t,j]}(src[t])` for the `n` tokens of a batch.
/// `logits` [n, n_expert] are the router's; `groups[t]` names token t's sequence chunk
/// (the unit llama.cpp would have counted an expert's rows in) and `batch[t]` whether that
/// chunk was a prompt batch.
#[allow(clippy::too_many_arguments)]
pub fn moe_forward(
    pool: &ThreadPool, cfg: &MoeConfig, moe: &Moe, logits: &[f32], src: &[f32], dst: &mut [f32], n: usize, add: bool, groups: &[u32],
    batch: &[bool], s: &mut MoeScratch,
) {
    let (e, k, fe) = (moe.down.n_out, cfg.n_used, cfg.n_ff_exp);
    route(cfg, logits, n, s);
    s.rows.resize_with(cfg.n_expert, Vec::new);
    s.rows.iter_mut().for_each(Vec::clear);
    for t in 0..n {
        for j in 0..k {
            s.rows[s.ids[t * k + j] as usize].push((t as u32, j as u32));
        }
    }
    s.out.resize(n * k * e, 0.0);
    let up_ty = moe.up.w.ty;
    for x in 0..cfg.n_expert {
        let c = s.rows[x].len();
        if c == 0 {
            continue;
        }
        let rows = std::mem::take(&mut s.rows[x]);
        s.xin.resize(c * e, 0.0);
        for (r, &(t, _)) in rows.iter().enumerate() {
            let t = t as usize;
            s.xin[r * e..(r + 1) * e].copy_from_slice(&src[t * e..(t + 1) * e]);
        }
        tiled_rows(&rows, groups, batch, &mut s.mask);
        let mask_for = |ty: GgmlType, m: &[bool]| -> Vec<bool> { m.iter().map(|&b| b && tiled_type(ty)).collect() };
        s.gate.resize(c * fe, 0.0);
        s.up.resize(c * fe, 0.0);
        let m_up = mask_for(up_ty, &s.mask);
        matmul_masked(pool, &moe.up.expert(x), &s.xin, c, &mut s.up, &mut s.scratch, Some(&m_up));
        add_bias(&mut s.up, moe.up_bias.as_deref(), x, fe);
        match &moe.gate {
            Some(g) => {
                let m = mask_for(g.w.ty, &s.mask);
                matmul_masked(pool, &g.expert(x), &s.xin, c, &mut s.gate, &mut s.scratch, Some(&m));
                add_bias(&mut s.gate, moe.gate_bias.as_deref(), x, fe);
                match cfg.act {
                    ExpertAct::Swiglu => swiglu_ggml(&mut s.gate, &s.up, fe),
                    ExpertAct::SwigluOai { alpha, limit } => swiglu_oai(&mut s.gate, &s.up, alpha, limit),
                }
            }
            None => {
                // act(up) alone: ggml_silu is the SwiGLU kernel's silu (times 1)
                s.gate.copy_from_slice(&s.up);
                s.ones.resize(c * fe, 1.0);
                swiglu_ggml(&mut s.gate, &s.ones, fe);
            }
        }
        s.y.resize(c * e, 0.0);
        let m_down = mask_for(moe.down.w.ty, &s.mask);
        matmul_masked(pool, &moe.down.expert(x), &s.gate, c, &mut s.y, &mut s.scratch, Some(&m_down));
        add_bias(&mut s.y, moe.down_bias.as_deref(), x, e);
        for (r, &(t, j)) in rows.iter().enumerate() {
            let (t, j) = (t as usize, j as usize);
            let w = s.weights[t * k + j];
            let o = &mut s.out[(t * k + j) * e..(t * k + j + 1) * e];
            for (ov, &yv) in o.iter_mut().zip(&s.y[r * e..(r + 1) * e]) {
                *ov = yv * w;
            }
        }
        s.rows[x] = rows;
    }
    // the experts' outputs summed in the order they were chosen (ggml_add of the views)
    for t in 0..n {
        let d = &mut dst[t * e..(t + 1) * e];
        let base = &s.out[t * k * e..(t + 1) * k * e];
        for (i, dv) in d.iter_mut().enumerate() {
            let mut acc = base[i];
            for j in 1..k {
                acc += base[j * e + i];
            }
            *dv = if add { acc + *dv } else { acc };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_row_sums_to_one_and_keeps_order() {
        for n in [1usize, 5, 8, 16, 17, 40, 128] {
            let mut x: Vec<f32> = (0..n).map(|i| ((i * 37 % 11) as f32 - 5.0) * 0.7).collect();
            let before = x.clone();
            softmax_row_ggml(&mut x);
            let s: f64 = x.iter().map(|&v| v as f64).sum();
            assert!((s - 1.0).abs() < 1e-5, "n={n}: sum {s}");
            for i in 0..n {
                for j in 0..n {
                    if before[i] > before[j] {
                        assert!(x[i] >= x[j]);
                    }
                }
            }
        }
    }

    #[test]
    fn tiled_rows_count_per_chunk() {
        // tokens 0..12 one prompt chunk, 12..20 another sequence's chunk, 20 a decode token
        let mut groups = vec![0u32; 12];
        groups.extend([1; 8]);
        groups.push(2);
        let mut batch = vec![true; 20];
        batch.push(false);
        let mut m = Vec::new();
        // 8 rows of chunk 0, 7 of chunk 1, the decode token
        let rows: Vec<(u32, u32)> = (0..8).chain(12..19).chain([20]).map(|t| (t, 0)).collect();
        tiled_rows(&rows, &groups, &batch, &mut m);
        assert_eq!(m[..8], [true; 8]);
        assert_eq!(m[8..15], [false; 7]);
        assert!(!m[15]);
        // a chunk that is not a prompt batch never takes the tiled order
        let rows: Vec<(u32, u32)> = (12..20).map(|t| (t, 1)).collect();
        batch[12..20].fill(false);
        tiled_rows(&rows, &groups, &batch, &mut m);
        assert!(m.iter().all(|&b| !b));
    }

    #[test]
    fn routing_picks_the_top_k_and_renormalises() {
        let cfg = MoeConfig { n_expert: 4, n_used: 2, n_ff_exp: 8, n_ff_shexp: 0, gating: Gating::Softmax, norm_w: true, w_scale: 1.0, act: ExpertAct::Swiglu };
        let mut s = MoeScratch::default();
        route(&cfg, &[0.1, 2.0, -1.0, 1.5, 3.0, 0.0, 0.0, 0.0], 2, &mut s);
        assert_eq!(&s.ids[..2], &[1, 3]);
        assert_eq!(s.ids[2], 0);
        assert!((s.weights[0] + s.weights[1] - 1.0).abs() < 1e-6);
        assert!(s.weights[0] > s.weights[1]);
        // not renormalised: the softmax probabilities themselves
        let cfg = MoeConfig { norm_w: false, ..cfg };
        route(&cfg, &[0.0, 0.0, 0.0, 0.0], 1, &mut s);
        assert!((s.weights[0] - 0.25).abs() < 1e-6 && (s.weights[1] - 0.25).abs() < 1e-6);
        assert_eq!(&s.ids[..2], &[0, 1]);
        // the top-k logits' own softmax (gpt-oss)
        let cfg = MoeConfig { gating: Gating::SoftmaxWeight, ..cfg };
        route(&cfg, &[1.0, 3.0, 3.0, 0.0], 1, &mut s);
        assert_eq!(&s.ids[..2], &[1, 2]);
        assert!((s.weights[0] - 0.5).abs() < 1e-6);
    }
}
