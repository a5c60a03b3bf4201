//! Bidirectional attention of encoders over the batch itself, in f32 as llama.cpp's no-cache
//! path computes it (no KV cache, no f16 roundings). One task per (sequence, head): its keys
//! transposed once, then per query the scores as FMA chains across the keys (no horizontal
//! sums), ggml's softmax, and P·V as FMA chains across the value lanes: both one weighted sum
//! of rows (`weighted_rows`), on x86 with AVX2 + FMA its sums held in registers (elsewhere the
//! plain loop; `mul_add` is fused either way, so every ISA computes the same bits).
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
        // two queries at a time (their chains side by side; each the bits it gets alone)
        let (mut pa, mut pb) = (vec![0f32; np], vec![0f32; np]);
        let qrow = |i: usize| &q[(t0 + i) * s.n_head * hd + h * hd..][..hd];
        let probs = |i: usize, p: &mut [f32]| {
            let scores = &mut p[..n];
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
        };
        // SAFETY: the output slice of (token t0 + i, head h) is written only by this task.
        let orow = |i: usize| unsafe { std::slice::from_raw_parts_mut(optr.0.add((t0 + i) * s.n_head * vd + h * vd), vd) };
        let vrows = &v[t0 * vdim + g * vd..];
        let mut i = 0;
        while i + 1 < n {
            weighted_rows::<false, 2>([qrow(i), qrow(i + 1)], &kt, np, [&mut pa[..], &mut pb[..]]);
            probs(i, &mut pa);
            probs(i + 1, &mut pb);
            weighted_rows::<true, 2>([&pa[..n], &pb[..n]], vrows, vdim, [orow(i), orow(i + 1)]);
            i += 2;
        }
        if i < n {
            scores_into(qrow(i), &kt, np, &mut pa);
            probs(i, &mut pa);
            pv_into(&pa[..n], vrows, vdim, orow(i));
        }
    });
}

/// `out[j] = Σ_d q[d]·kt[d·n + j]` for `j < n`, each an FMA chain over d in order.
fn scores_into(q: &[f32], kt: &[f32], n: usize, out: &mut [f32]) {
    weighted_rows::<false, 1>([q], kt, n, [&mut out[..n]])
}

/// `o[e] = Σ_j p[j]·v[j·stride + e]`, each an FMA chain over the keys in order (zero
/// probabilities skipped, as a masked key reads no value).
fn pv_into(p: &[f32], v: &[f32], stride: usize, o: &mut [f32]) {
    weighted_rows::<true, 1>([p], v, stride, [o])
}

/// `out[q][c] = Σ_i w[q][i]·rows[i·stride + c]` for every c < width (the length of every
/// `out[q]`) and each of `Q` weight vectors (of one length), each an FMA chain over i in order
/// (`SKIP_ZERO`: terms with w[q][i] == 0 left out). On x86 with AVX2 + FMA the sums of up to
/// 64 lanes (32 per vector for two) stay in registers across i, and two vectors share each
/// row load: twice the independent chains for the FMA latency. The plain loop computes the
/// same chains.
fn weighted_rows<const SKIP_ZERO: bool, const Q: usize>(w: [&[f32]; Q], rows: &[f32], stride: usize, out: [&mut [f32]; Q]) {
    let (n, width) = (w[0].len(), out[0].len());
    if w.iter().any(|x| x.len() != n) || out.iter().any(|o| o.len() != width) {
        // (callers pass equal lengths) one vector at a time
        return w.into_iter().zip(out).for_each(|(w, o)| weighted_rows::<SKIP_ZERO, 1>([w], rows, stride, [o]));
    }
    #[cfg(target_arch = "x86_64")]
    if width % 8 == 0 && (n == 0 || rows.len() >= (n - 1) * stride + width) && has_fma() {
        let o: [*mut f32; Q] = core::array::from_fn(|q| out[q].as_ptr() as *mut f32);
        let per = 64 / Q;
        let mut c0 = 0;
        while c0 < width {
            // SAFETY: AVX2 and FMA checked; every row and output holds c0 + 8K ≤ width values
            // (bound above); the outputs are distinct slices.
            unsafe {
                match ((width - c0) / 8).min(per / 8) {
                    1 => weighted_chunk::<1, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    2 => weighted_chunk::<2, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    3 => weighted_chunk::<3, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    4 => weighted_chunk::<4, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    5 => weighted_chunk::<5, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    6 => weighted_chunk::<6, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    7 => weighted_chunk::<7, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                    _ => weighted_chunk::<8, SKIP_ZERO, Q>(w, rows, stride, c0, o),
                }
            }
            c0 += per.min(width - c0);
        }
        return;
    }
    w.into_iter().zip(out).for_each(|(w, o)| weighted_rows_plain::<SKIP_ZERO>(w, rows, stride, o));
}

#[cfg(target_arch = "x86_64")]
fn has_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

fn weighted_rows_plain<const SKIP_ZERO: bool>(w: &[f32], rows: &[f32], stride: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (i, &wi) in w.iter().enumerate() {
        if SKIP_ZERO && wi == 0.0 {
            continue;
        }
        for (a, &b) in out.iter_mut().zip(&rows[i * stride..]) {
            *a = wi.mul_add(b, *a);
        }
    }
}

/// Lanes c0 .. c0 + 8K of `Q` outputs. Caller: AVX2 + FMA; every row holds c0 + 8K values;
/// every output too, and no two outputs overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn weighted_chunk<const K: usize, const SKIP_ZERO: bool, const Q: usize>(w: [&[f32]; Q], rows: &[f32], stride: usize, c0: usize, out: [*mut f32; Q]) {
    use core::arch::x86_64::*;
    let mut acc = [[_mm256_setzero_ps(); K]; Q];
    for i in 0..w[0].len() {
        let row = rows.as_ptr().add(i * stride + c0);
        let x: [__m256; K] = core::array::from_fn(|k| _mm256_loadu_ps(row.add(8 * k)));
        for (wq, aq) in w.iter().zip(acc.iter_mut()) {
            let wi = wq[i];
            if SKIP_ZERO && wi == 0.0 {
                continue;
            }
            let wv = _mm256_set1_ps(wi);
            for (a, &xk) in aq.iter_mut().zip(&x) {
                *a = _mm256_fmadd_ps(wv, xk, *a);
            }
        }
    }
    for (aq, &o) in acc.iter().zip(&out) {
        for (k, a) in aq.iter().enumerate() {
            _mm256_storeu_ps(o.add(c0 + 8 * k), *a);
        }
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
            weighted_rows_plain::<false>(&q, &kt, n, &mut plain);
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
            weighted_rows_plain::<true>(&p, &v, stride, &mut a);
            pv_into(&p, &v, stride, &mut b);
            assert_eq!(a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            for (e, &x) in a.iter().enumerate() {
                let want: f64 = (0..n).map(|j| p[j] as f64 * v[j * stride + e] as f64).sum();
                assert!((x as f64 - want).abs() < 1e-5, "value {e}: {x} vs {want}");
            }
            // two weight vectors at once (zeros in different places): each its bits alone
            let bits = |x: &[f32]| x.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            let q2: Vec<f32> = (0..hd).map(|_| r()).collect();
            let (mut s1, mut s2, mut alone) = (vec![0f32; n], vec![3f32; n], vec![0f32; n]);
            weighted_rows::<false, 2>([&q, &q2], &kt, n, [&mut s1, &mut s2]);
            weighted_rows_plain::<false>(&q2, &kt, n, &mut alone);
            assert_eq!((bits(&s1), bits(&s2)), (bits(&plain), bits(&alone)));
            let mut p2: Vec<f32> = (0..n).map(|_| r().abs()).collect();
            p2[n - 1] = 0.0;
            let (mut o1, mut o2, mut alone) = (vec![0f32; vd], vec![5f32; vd], vec![0f32; vd]);
            weighted_rows::<true, 2>([&p, &p2], &v, stride, [&mut o1, &mut o2]);
            weighted_rows_plain::<true>(&p2, &v, stride, &mut alone);
            assert_eq!((bits(&o1), bits(&o2)), (bits(&a), bits(&alone)));
        }
    }
}
