//! Bidirectional attention of encoders over the batch itself, in f32 as llama.cpp's no-cache
//! path computes it (no KV cache, no f16 roundings). One task per (sequence, head): its keys
//! transposed once, then per query the scores as FMA chains across the keys (no horizontal
//! sums), ggml's softmax, and P·V as FMA chains across the value lanes. On x86 the two loops
//! run in an AVX2 + FMA build of the same code (elsewhere the plain build; `mul_add` is
//! fused either way, so every ISA computes the same bits).
use super::attention::{AttnShape, SendPtr};
use super::f16vec::softmax_ggml;
use super::pool::ThreadPool;

/// Every token of a sequence (`spans`: (first row, length)) sees every token of it. q, k, v:
/// [n_tokens, heads·dim]; out: [n_tokens, n_head·v_head_dim]. With ALiBi (`alibi`: a slope
/// per head, else empty), head h adds slope_h · -|i - j| to the scaled score, as ggml's
/// soft_max does with llama.cpp's ALiBi mask. A window (`s.window`, ModernBERT's local
/// layers) is symmetric: keys with |i - j| > window / 2 are masked (llama.cpp's
/// LLAMA_SWA_TYPE_SYMMETRIC).
#[allow(clippy::too_many_arguments)]
pub fn attention_bidirectional(pool: &ThreadPool, s: &AttnShape, q: &[f32], k: &[f32], v: &[f32], spans: &[(usize, usize)], alibi: &[f32], out: &mut [f32]) {
    let (hd, vd) = (s.head_dim, s.v_head_dim);
    let (kdim, vdim) = (s.n_head_kv * hd, s.n_head_kv * vd);
    let group = s.n_head / s.n_head_kv;
    let tasks: Vec<(usize, usize, usize)> = spans.iter().flat_map(|&(t0, n)| (0..s.n_head).map(move |h| (t0, n, h))).collect();
    let optr = SendPtr(out.as_mut_ptr());
    pool.run(tasks.len(), |task| {
        #[allow(clippy::redundant_locals)]
        let optr = optr;
        let (t0, n, h) = tasks[task];
        let g = h / group;
        let slope = alibi.get(h).copied();
        // rows of `np` keys (a multiple of 8, zeros past n)
        let np = n.next_multiple_of(8);
        let mut kt = vec![0f32; hd * np];
        for j in 0..n {
            for (d, &x) in k[(t0 + j) * kdim + g * hd..][..hd].iter().enumerate() {
                kt[d * np + j] = x;
            }
        }
        let mut padded = vec![0f32; np];
        for i in 0..n {
            let qi = &q[(t0 + i) * s.n_head * hd + h * hd..][..hd];
            scores_into(qi, &kt, np, &mut padded);
            let scores = &mut padded[..n];
            for (j, sc) in scores.iter_mut().enumerate() {
                *sc = if s.window.is_some_and(|w| i.abs_diff(j) > w / 2) {
                    f32::NEG_INFINITY
                } else {
                    let x = s.score(*sc);
                    match slope {
                        Some(m) => x + m * -(i.abs_diff(j) as f32),
                        None => x,
                    }
                };
            }
            softmax_ggml(scores, 0, None);
            // SAFETY: the output slice of (token t0 + i, head h) is written only by this task.
            let o = unsafe { std::slice::from_raw_parts_mut(optr.0.add((t0 + i) * s.n_head * vd + h * vd), vd) };
            pv_into(scores, &v[t0 * vdim + g * vd..], vdim, o);
        }
    });
}

/// `out[j] = Σ_d q[d]·kt[d·n + j]` for `j < n`, each an FMA chain over d in order.
fn scores_into(q: &[f32], kt: &[f32], n: usize, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: AVX2 and FMA checked.
        return unsafe { scores_fma(q, kt, n, out) };
    }
    scores_body(q, kt, n, out)
}

/// `o[e] = Σ_j p[j]·v[j·stride + e]`, each an FMA chain over the keys in order (zero
/// probabilities skipped, as a masked key reads no value).
fn pv_into(p: &[f32], v: &[f32], stride: usize, o: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_fma() {
        // SAFETY: AVX2 and FMA checked.
        return unsafe { pv_fma(p, v, stride, o) };
    }
    pv_body(p, v, stride, o)
}

#[cfg(target_arch = "x86_64")]
fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

#[inline(always)]
fn scores_body(q: &[f32], kt: &[f32], n: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (d, &qd) in q.iter().enumerate() {
        for (sc, &kk) in out.iter_mut().zip(&kt[d * n..(d + 1) * n]) {
            *sc = qd.mul_add(kk, *sc);
        }
    }
}

#[inline(always)]
fn pv_body(p: &[f32], v: &[f32], stride: usize, o: &mut [f32]) {
    o.fill(0.0);
    for (j, &pj) in p.iter().enumerate() {
        if pj == 0.0 {
            continue;
        }
        for (a, &b) in o.iter_mut().zip(&v[j * stride..]) {
            *a = pj.mul_add(b, *a);
        }
    }
}

/// [`scores_body`] with the sums of up to 64 keys held in registers across d (`n` a
/// multiple of 8).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scores_fma(q: &[f32], kt: &[f32], n: usize, out: &mut [f32]) {
    if n % 8 != 0 || kt.len() < q.len() * n || out.len() < n {
        return scores_body(q, kt, n, out);
    }
    let mut j0 = 0;
    while j0 < n {
        by_eights!((n - j0) / 8, scores_chunk(q, kt, n, j0, out));
        j0 += 64.min(n - j0);
    }
}

/// `f::<K>(args)` for K = `eights` vectors of 8 lanes, at most 8.
#[cfg(target_arch = "x86_64")]
macro_rules! by_eights {
    ($eights:expr, $f:ident($($a:expr),*)) => {
        match $eights {
            1 => $f::<1>($($a),*),
            2 => $f::<2>($($a),*),
            3 => $f::<3>($($a),*),
            4 => $f::<4>($($a),*),
            5 => $f::<5>($($a),*),
            6 => $f::<6>($($a),*),
            7 => $f::<7>($($a),*),
            _ => $f::<8>($($a),*),
        }
    };
}
#[cfg(target_arch = "x86_64")]
use by_eights;

/// Keys j0 .. j0 + 8K. Caller: AVX2 + FMA; kt holds q.len() rows of n ≥ j0 + 8K; out too.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn scores_chunk<const K: usize>(q: &[f32], kt: &[f32], n: usize, j0: usize, out: &mut [f32]) {
    use core::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); K];
    for (d, &qd) in q.iter().enumerate() {
        let (qv, row) = (_mm256_set1_ps(qd), kt.as_ptr().add(d * n + j0));
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(qv, _mm256_loadu_ps(row.add(8 * k)), *a);
        }
    }
    for (k, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(out.as_mut_ptr().add(j0 + 8 * k), *a);
    }
}

/// [`pv_body`] with up to 64 value lanes held in registers across the keys (`o.len()` a
/// multiple of 8).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pv_fma(p: &[f32], v: &[f32], stride: usize, o: &mut [f32]) {
    let vd = o.len();
    if vd % 8 != 0 || (!p.is_empty() && v.len() < (p.len() - 1) * stride + vd) {
        return pv_body(p, v, stride, o);
    }
    let mut e0 = 0;
    while e0 < vd {
        by_eights!((vd - e0) / 8, pv_chunk(p, v, stride, e0, o));
        e0 += 64.min(vd - e0);
    }
}

/// Value lanes e0 .. e0 + 8K. Caller: AVX2 + FMA; every key's row holds e0 + 8K values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn pv_chunk<const K: usize>(p: &[f32], v: &[f32], stride: usize, e0: usize, o: &mut [f32]) {
    use core::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); K];
    for (j, &pj) in p.iter().enumerate() {
        if pj == 0.0 {
            continue;
        }
        let (pv, row) = (_mm256_set1_ps(pj), v.as_ptr().add(j * stride + e0));
        for (k, a) in acc.iter_mut().enumerate() {
            *a = _mm256_fmadd_ps(pv, _mm256_loadu_ps(row.add(8 * k)), *a);
        }
    }
    for (k, a) in acc.iter().enumerate() {
        _mm256_storeu_ps(o.as_mut_ptr().add(e0 + 8 * k), *a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2 + FMA build and the plain build of both loops give the same bits, and both
    /// agree with a float64 evaluation.
    #[test]
    fn builds_agree_and_match_f64() {
        let mut seed = 5u64;
        let mut r = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        };
        for (hd, n, vd) in [(32usize, 7usize, 32usize), (64, 33, 64), (8, 1, 24), (32, 72, 96), (16, 136, 40), (24, 16, 8)] {
            let q: Vec<f32> = (0..hd).map(|_| r()).collect();
            let kt: Vec<f32> = (0..hd * n).map(|_| r()).collect();
            let mut plain = vec![0f32; n];
            let mut fast = vec![1f32; n];
            scores_body(&q, &kt, n, &mut plain);
            scores_into(&q, &kt, n, &mut fast);
            assert_eq!(plain.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), fast.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            for (j, &x) in plain.iter().enumerate() {
                let want: f64 = (0..hd).map(|d| q[d] as f64 * kt[d * n + j] as f64).sum();
                assert!((x as f64 - want).abs() < 1e-5, "score {j}: {x} vs {want}");
            }
            let stride = vd + 3;
            let v: Vec<f32> = (0..n * stride).map(|_| r()).collect();
            let mut p: Vec<f32> = (0..n).map(|_| r().abs()).collect();
            p[0] = 0.0;
            let (mut a, mut b) = (vec![0f32; vd], vec![7f32; vd]);
            pv_body(&p, &v, stride, &mut a);
            pv_into(&p, &v, stride, &mut b);
            assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            for (e, &x) in a.iter().enumerate() {
                let want: f64 = (0..n).map(|j| p[j] as f64 * v[j * stride + e] as f64).sum();
                assert!((x as f64 - want).abs() < 1e-5, "value {e}: {x} vs {want}");
            }
        }
    }
}
