//! Flash attention over a KV cache of any type (`-fa on`; `-ctk` / `-ctv`), as ggml-cpu's
//! reference kernel computes it (`ggml_compute_forward_flash_attn_ext_f16_one_chunk`, the
//! path llama.cpp takes whenever K or V is quantized): per query head, Q converted to K's
//! dot type (f16, bf16, Q8_0 or Q8_1), each visible key in cache-row order scored with the
//! type's dot, then an online softmax — a running maximum M and sum S, the accumulator
//! rescaled by expf(M_old − M) when the maximum grows — over V rows (an f16 accumulator,
//! rounded at every step, when V is f16; f32 rows dequantized otherwise), divided by S at
//! the end. No probabilities are materialised. An f32 K or V is read as f16, as llama.cpp
//! casts it before `ggml_flash_attn_ext`.
use super::attention::{AttnShape, QueryPos};
use super::pool::ThreadPool;
use crate::kv_cache::types::{as_bytes, k_dot, load_row, KvType};
use super::fa_accum::{mad_f16, mad_f32, scale_f16};
use crate::quant::f16::{f16_to_f32, f32_to_f16};
use crate::quant::{activation, vec_dot_type};

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// SAFETY: each task writes its own (token, head) slice of the output.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}

/// The cache a layer's attention reads: rows of `units` 2-byte units per position.
pub struct KvRows<'a> {
    pub k: &'a [u16],
    pub v: &'a [u16],
    pub k_type: KvType,
    pub v_type: KvType,
    pub k_units: usize,
    pub v_units: usize,
    /// Rows per slot (see `attention`).
    pub cap: usize,
    pub ring: bool,
}

/// The key positions query `qp` sees, in the order of their cache rows.
pub fn visible(s: &AttnShape, qp: &QueryPos, cap: usize, ring: bool) -> Vec<usize> {
    let start = match s.window {
        Some(w) if w > 0 => (qp.pos + 1).saturating_sub(w),
        _ => 0,
    };
    let start = if ring { start.max(qp.ring_lo.min(qp.pos)) } else { start };
    let mut keys: Vec<usize> = (start..=qp.pos).collect();
    if ring {
        keys.sort_by_key(|&j| j % cap);
    }
    keys
}

/// q: [n_tokens, n_head·head_dim]; out: [n_tokens, n_head·v_head_dim].
pub fn flash_attention(pool: &ThreadPool, s: &AttnShape, q: &[f32], kv: &KvRows, queries: &[QueryPos], out: &mut [f32]) {
    let (hd, vd) = (s.head_dim, s.v_head_dim);
    let group = s.n_head / s.n_head_kv;
    let f16_of = |t: KvType| if t == KvType::F32 { KvType::F16 } else { t };
    // the types attention computes in (f32 read as f16); bytes of one head's values in a stored row
    let (kt, vt) = (f16_of(kv.k_type), f16_of(kv.v_type));
    let (k_head, v_head) = (kv.k_type.ggml().row_bytes(hd), kv.v_type.ggml().row_bytes(vd));
    let (k_cast, v_cast) = (kv.k_type == KvType::F32, kv.v_type == KvType::F32);
    let qt = vec_dot_type(kt.ggml());
    let Some(dot) = k_dot(kt) else { return };
    let scale = if s.softcap != 0.0 { s.scale / s.softcap } else { s.scale };
    let optr = SendPtr(out.as_mut_ptr());
    pool.run(queries.len() * s.n_head, |task| {
        #[allow(clippy::redundant_locals)]
        let optr = optr;
        let (t, h) = (task / s.n_head, task % s.n_head);
        let qp = queries[t];
        let g = h / group;
        let mut q_q = Vec::new();
        activation::quantize(qt, &q[t * s.n_head * hd + h * hd..][..hd], &mut q_q);
        let (mut big_s, mut m) = (0f32, f32::NEG_INFINITY);
        let mut acc = vec![0f32; vd];
        let mut acc16 = vec![0u16; if vt == KvType::F16 { vd } else { 0 }];
        let mut v32 = vec![0f32; vd];
        let (mut k16, mut v16) = (vec![0u16; if k_cast { hd } else { 0 }], vec![0u16; if v_cast { vd } else { 0 }]);
        for j in visible(s, &qp, kv.cap, kv.ring) {
            let r = qp.slot * kv.cap + j % kv.cap;
            let mut krow = &as_bytes(&kv.k[r * kv.k_units..(r + 1) * kv.k_units])[g * k_head..(g + 1) * k_head];
            if k_cast {
                cast_f16(krow, &mut k16);
                krow = as_bytes(&k16);
            }
            let mut sc = dot(hd, krow, &q_q) * scale;
            if s.softcap != 0.0 {
                sc = s.softcap * sc.tanh();
            }
            let (mut ms, mut vs) = (1f32, 1f32);
            if sc > m {
                let m_old = m;
                m = sc;
                ms = (m_old - m).exp();
                if vt == KvType::F16 {
                    scale_f16(&mut acc16, ms);
                } else {
                    acc.iter_mut().for_each(|y| *y *= ms);
                }
            } else {
                vs = (sc - m).exp();
            }
            let vrow = &kv.v[r * kv.v_units..(r + 1) * kv.v_units];
            if vt == KvType::F16 {
                // ggml_vec_mad_f16: y = f16(y + x·v), fused
                let x = if v_cast {
                    cast_f16(&as_bytes(vrow)[g * v_head..(g + 1) * v_head], &mut v16);
                    &v16[..]
                } else {
                    &vrow[g * vd..(g + 1) * vd]
                };
                mad_f16(&mut acc16, x, vs);
            } else {
                let units = v_head / 2;
                load_row(vt, &vrow[g * units..(g + 1) * units], &mut v32);
                mad_f32(&mut acc, &v32, vs);
            }
            big_s = big_s.mul_add(ms, vs);
        }
        if vt == KvType::F16 {
            acc.iter_mut().zip(&acc16).for_each(|(y, &x)| *y = f16_to_f32(x));
        }
        if let Some(sinks) = s.sinks {
            let sk = sinks[h];
            let (mut ms, mut vs) = (1f32, 1f32);
            if sk > m {
                ms = (m - sk).exp();
                acc.iter_mut().for_each(|y| *y *= ms);
            } else {
                vs = (sk - m).exp();
            }
            big_s = big_s.mul_add(ms, vs);
        }
        let inv = if big_s == 0.0 { 0.0 } else { 1.0 / big_s };
        // SAFETY: the output slice of (t, h) is written only by this task.
        let o = unsafe { std::slice::from_raw_parts_mut(optr.0.add(t * s.n_head * vd + h * vd), vd) };
        for (d, &x) in o.iter_mut().zip(&acc) {
            *d = x * inv;
        }
    });
}

/// f32 values (bytes) to f16 (`ggml_cast`).
fn cast_f16(src: &[u8], out: &mut [u16]) {
    for (o, c) in out.iter_mut().zip(src.chunks_exact(4)) {
        *o = f32_to_f16(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
    }
}
