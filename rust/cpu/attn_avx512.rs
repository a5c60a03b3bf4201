//! AVX-512 kernels of the non-fused attention's batch order (`Order::Tiny16`: tinyBLAS's 16
//! lanes) over an f16 cache: the same per-lane FMA chains and reductions as the AVX2 / scalar
//! paths of `f16vec.rs` (bit for bit; `tests` below), with the work arranged for throughput:
//! QK^T takes two keys against up to four query heads per pass (each widened K vector feeds
//! four chains, each Q vector two), and P·V keeps the 16 lanes of a 16-value slice of the
//! output in registers over all keys instead of reading and writing them per key.
//!
//! Soundness: the `unsafe fn`s need avx512f+bw+vl, avx2, fma and f16c; the safe entry points
//! check `isa() == Avx512` (which implies them) and every length before calling them.
use crate::quant::{isa, Isa};
use core::arch::x86_64::*;

/// ggml's `hsum_float_8`.
#[inline(always)]
unsafe fn hsum8(x: __m256) -> f32 {
    let h = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
    let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
}

/// `reduce16` of the 16 lanes of `v` (lanes l and l + 8 first, then `hsum_float_8`).
#[inline(always)]
unsafe fn reduce16(v: __m512) -> f32 {
    let hi = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    hsum8(_mm256_add_ps(_mm512_castps512_ps256(v), hi))
}

#[inline(always)]
unsafe fn ld16(p: *const u16) -> __m512 {
    _mm512_cvtph_ps(_mm256_loadu_si256(p as *const __m256i))
}

/// Dots of `R` query rows (`q`, `d` apart) with two keys, 16-lane chains over `d` (a multiple
/// of 16): `[row][key]`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn qk_pair<const R: usize>(q: *const f32, d: usize, k0: *const u16, k1: *const u16) -> [[f32; 2]; R] {
    let mut acc = [[_mm512_setzero_ps(); 2]; R];
    let mut i = 0;
    while i < d {
        let (a, b) = (ld16(k0.add(i)), ld16(k1.add(i)));
        for (r, ar) in acc.iter_mut().enumerate() {
            let x = _mm512_loadu_ps(q.add(r * d + i));
            ar[0] = _mm512_fmadd_ps(x, a, ar[0]);
            ar[1] = _mm512_fmadd_ps(x, b, ar[1]);
        }
        i += 16;
    }
    let mut out = [[0f32; 2]; R];
    for r in 0..R {
        out[r] = [reduce16(acc[r][0]), reduce16(acc[r][1])];
    }
    out
}

/// `scores[h·n + i] = dot(q[h·d..][..d], keys[i][..d])` in the Tiny16 order for `h < heads`,
/// `i < keys.len() = n`. Returns false (nothing written) where this kernel does not apply:
/// not AVX-512, `d` not a multiple of 16, or a short row or buffer.
pub fn qk_tiny16(q: &[f32], heads: usize, d: usize, keys: &[&[u16]], scores: &mut [f32]) -> bool {
    let n = keys.len();
    if isa() != Isa::Avx512 || d % 16 != 0 || q.len() < heads * d || scores.len() < heads * n || keys.iter().any(|k| k.len() < d) {
        return false;
    }
    let mut h = 0;
    while h < heads {
        let m = (heads - h).min(4);
        let qp = q[h * d..].as_ptr();
        let mut i = 0;
        while i < n {
            // an odd last key pairs with itself
            let (k0, k1) = (keys[i].as_ptr(), keys[(i + 1).min(n - 1)].as_ptr());
            // SAFETY: AVX-512 checked above; rows h..h + m of q and both keys hold d values.
            let r: [[f32; 2]; 4] = unsafe {
                match m {
                    1 => pad(qk_pair::<1>(qp, d, k0, k1)),
                    2 => pad(qk_pair::<2>(qp, d, k0, k1)),
                    3 => pad(qk_pair::<3>(qp, d, k0, k1)),
                    _ => qk_pair::<4>(qp, d, k0, k1),
                }
            };
            for (hh, rr) in r.iter().enumerate().take(m) {
                scores[(h + hh) * n + i] = rr[0];
                if i + 1 < n {
                    scores[(h + hh) * n + i + 1] = rr[1];
                }
            }
            i += 2;
        }
        h += m;
    }
    true
}

fn pad<const R: usize>(r: [[f32; 2]; R]) -> [[f32; 2]; 4] {
    let mut o = [[0f32; 2]; 4];
    o[..R].copy_from_slice(&r);
    o
}

/// One group of 16 consecutive keys (lane l: probability `p[l]`, values at `rows[l] + off`)
/// into the lanes; a zero probability leaves its lane as it is (the key is skipped).
#[inline(always)]
unsafe fn pv_group(acc: &mut [__m512; 16], p: *const f32, rows: *const *const u16, off: usize) {
    for (l, a) in acc.iter_mut().enumerate() {
        let pl = *p.add(l);
        let keep: __mmask16 = if pl != 0.0 { 0xFFFF } else { 0 };
        *a = _mm512_mask3_fmadd_ps(_mm512_set1_ps(pl), ld16((*rows.add(l)).add(off)), *a, keep);
    }
}

/// One 16-value slice (`off`) of `Σ_j p_j · v_j`: lane `j % 16` of each output value an FMA
/// chain over the keys j = pos0 + i with `p[i] != 0`, in increasing j, then `reduce16`.
/// The lanes stay in registers: whole groups of 16 keys at a time, a partly filled group
/// padded with zero probabilities.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn pv_slice(p: &[f32], pos0: usize, rows: &[*const u16], off: usize) -> __m512 {
    let mut acc = [_mm512_setzero_ps(); 16];
    let end = pos0 + p.len();
    let mut base = pos0 - pos0 % 16;
    while base < end {
        if base >= pos0 && base + 16 <= end {
            pv_group(&mut acc, p.as_ptr().add(base - pos0), rows.as_ptr().add(base - pos0), off);
        } else {
            let (mut pp, mut rp) = ([0f32; 16], [rows[0]; 16]);
            for l in 0..16 {
                if base + l >= pos0 && base + l < end {
                    pp[l] = p[base + l - pos0];
                    rp[l] = rows[base + l - pos0];
                }
            }
            pv_group(&mut acc, pp.as_ptr(), rp.as_ptr(), off);
        }
        base += 16;
    }
    // reduce16 per value: t_k = x_k + x_(k+8), then ((t0+t4)+(t2+t6)) + ((t1+t5)+(t3+t7))
    let t: [__m512; 8] = [
        _mm512_add_ps(acc[0], acc[8]),
        _mm512_add_ps(acc[1], acc[9]),
        _mm512_add_ps(acc[2], acc[10]),
        _mm512_add_ps(acc[3], acc[11]),
        _mm512_add_ps(acc[4], acc[12]),
        _mm512_add_ps(acc[5], acc[13]),
        _mm512_add_ps(acc[6], acc[14]),
        _mm512_add_ps(acc[7], acc[15]),
    ];
    let e = _mm512_add_ps(_mm512_add_ps(t[0], t[4]), _mm512_add_ps(t[2], t[6]));
    let o = _mm512_add_ps(_mm512_add_ps(t[1], t[5]), _mm512_add_ps(t[3], t[7]));
    _mm512_add_ps(e, o)
}

/// `out[e] = Σ_j p[j - pos0] · rows[j - pos0][e]` for `e < vd` in the Tiny16 order (lane
/// `j % 16`; keys with `p == 0` skipped; lanes no key reached are zeros), as `Lanes` with
/// `Order::Tiny16` computes it. Returns false (nothing written) where this kernel does not
/// apply: not AVX-512, `vd` not a multiple of 16, or a short row or buffer.
pub fn pv_tiny16(p: &[f32], pos0: usize, rows: &[&[u16]], vd: usize, out: &mut [f32]) -> bool {
    if isa() != Isa::Avx512 || vd % 16 != 0 || p.is_empty() || rows.len() != p.len() || out.len() < vd || rows.iter().any(|r| r.len() < vd) {
        return false;
    }
    let ptrs: Vec<*const u16> = rows.iter().map(|r| r.as_ptr()).collect();
    for off in (0..vd).step_by(16) {
        // SAFETY: AVX-512 checked above; every row holds vd ≥ off + 16 values; out too.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(off), pv_slice(p, pos0, &ptrs, off)) };
    }
    true
}

/// The V rows of one KV group as f32 columns for a batch's queries: value e of the key at
/// position j is `data[e * width + (j - j0)]` (j0 a multiple of 16; `width` a multiple of 16;
/// zeros where no key was written), so P·V runs over 16 keys per FMA with the values already
/// widened (built once per layer call and shared by every query of the batch).
pub struct VCols {
    pub j0: usize,
    pub width: usize,
    pub data: Vec<f32>,
}

impl VCols {
    pub fn new(j0: usize, width: usize, data: Vec<f32>) -> VCols {
        VCols { j0, width, data }
    }
}

/// `pv_tiny16` over [`VCols`]: the same chains (lane `j % 16` of each value, keys with
/// `p == 0` skipped) and the same `reduce16`, bit for bit. False (nothing written) where it
/// does not apply: not AVX-512, `vd` not a multiple of 16, keys outside the columns, or a
/// short buffer.
/// `pg` is scratch for the probabilities in groups of 16 (kept across calls).
pub fn pv_cols(p: &[f32], pos0: usize, cols: &VCols, vd: usize, out: &mut [f32], pg: &mut Vec<f32>) -> bool {
    let end = pos0 + p.len();
    if isa() != Isa::Avx512 || vd % 16 != 0 || p.is_empty() || out.len() < vd || pos0 < cols.j0 || end > cols.j0 + cols.width || cols.width % 16 != 0 || cols.data.len() < vd * cols.width {
        return false;
    }
    // probabilities in groups of 16 keys at positions aligned to 16, zeros outside the span
    let b0 = pos0 - pos0 % 16;
    pg.clear();
    pg.resize((end - b0).next_multiple_of(16), 0.0);
    pg[pos0 - b0..end - b0].copy_from_slice(p);
    for eb in (0..vd).step_by(16) {
        // SAFETY: AVX-512 checked; every column read lies in `data` (b0 ≥ j0 and b0 + pg.len()
        // ≤ j0 + width, both multiples of 16; eb + 16 ≤ vd), `out` holds vd values.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr().add(eb), pv_cols_slice(pg, cols.data.as_ptr().add(eb * cols.width + (b0 - cols.j0)), cols.width)) };
    }
    true
}

/// One 16-value slice: `acc[i]` holds value i's 16 key lanes over all groups, then each
/// value's `reduce16` (lanes l + l+8, then + 4, + 2, + 1: `reduce16`'s order) for all 16
/// values at once, returned in value order.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
unsafe fn pv_cols_slice(pg: &[f32], col: *const f32, width: usize) -> __m512 {
    let mut acc = [_mm512_setzero_ps(); 16];
    for (g, c) in pg.chunks_exact(16).enumerate() {
        let pv = _mm512_loadu_ps(c.as_ptr());
        let keep = _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(pv, _mm512_setzero_ps());
        let base = col.add(16 * g);
        for (i, a) in acc.iter_mut().enumerate() {
            *a = _mm512_mask3_fmadd_ps(pv, _mm512_loadu_ps(base.add(i * width)), *a, keep);
        }
    }
    // lanes k + k+8 (two values per vector)
    let s1: [__m512; 8] = core::array::from_fn(|m| {
        let (a, b) = (acc[2 * m], acc[2 * m + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b01_00_01_00>(a, b), _mm512_shuffle_f32x4::<0b11_10_11_10>(a, b))
    });
    // + 4 (four values per vector, one per 128-bit quarter)
    let s2: [__m512; 4] = core::array::from_fn(|m| {
        let (a, b) = (s1[2 * m], s1[2 * m + 1]);
        _mm512_add_ps(_mm512_shuffle_f32x4::<0b10_00_10_00>(a, b), _mm512_shuffle_f32x4::<0b11_01_11_01>(a, b))
    });
    // + 2, then + 1
    let s3: [__m512; 2] = core::array::from_fn(|m| {
        let (a, b) = (s2[2 * m], s2[2 * m + 1]);
        _mm512_add_ps(_mm512_shuffle_ps::<0b01_00_01_00>(a, b), _mm512_shuffle_ps::<0b11_10_11_10>(a, b))
    });
    let s4 = _mm512_add_ps(_mm512_shuffle_ps::<0b10_00_10_00>(s3[0], s3[1]), _mm512_shuffle_ps::<0b11_01_11_01>(s3[0], s3[1]));
    // lane l holds value [0, 4, 8, 12, 1, 5, ...][l]: back to value order
    _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), s4)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::f16vec::{dot_f16_rows, Lanes, Order};
    use crate::quant::f16::{f32_to_f16, round_f16};

    fn rng(seed: &mut u64) -> f32 {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((*seed >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// Both kernels give the bits of the general paths (`dot_f16_rows`, `Lanes`), over head
    /// counts 1..=6, odd and even key counts, keys starting off a multiple of 16 and zero
    /// probabilities.
    #[test]
    fn tiny16_kernels_match_general_paths() {
        if isa() != Isa::Avx512 {
            eprintln!("skipped: no AVX-512 on this machine");
            return;
        }
        let mut s = 7u64;
        for (d, heads, n, pos0) in [(64, 1, 1, 0), (64, 4, 37, 5), (128, 6, 64, 16), (256, 4, 19, 300), (256, 3, 200, 7)] {
            let q: Vec<f32> = (0..heads * d).map(|_| round_f16(rng(&mut s))).collect();
            let keys: Vec<Vec<u16>> = (0..n).map(|_| (0..d).map(|_| f32_to_f16(rng(&mut s) * 4.0)).collect()).collect();
            let kr: Vec<&[u16]> = keys.iter().map(|k| &k[..]).collect();
            let mut got = vec![0f32; heads * n];
            assert!(qk_tiny16(&q, heads, d, &kr, &mut got));
            for (i, k) in keys.iter().enumerate() {
                let mut want = vec![0f32; heads];
                dot_f16_rows(&q, k, d, Order::Tiny16, &mut want);
                for h in 0..heads {
                    assert_eq!(got[h * n + i].to_bits(), want[h].to_bits(), "qk d={d} head {h} key {i}");
                }
            }
            let p: Vec<f32> = (0..n).map(|i| if i % 7 == 3 { 0.0 } else { round_f16(rng(&mut s).abs()) }).collect();
            // an infinite value under a zero probability is skipped, not multiplied
            let mut keys = keys.clone();
            if n > 3 {
                keys[3][5] = 0x7C00;
            }
            let kr: Vec<&[u16]> = keys.iter().map(|k| &k[..]).collect();
            let mut got = vec![0f32; d];
            assert!(pv_tiny16(&p, pos0, &kr, d, &mut got));
            let mut want = vec![0f32; d];
            Lanes::with(Order::Tiny16, d, |l| {
                l.reset();
                for (i, k) in keys.iter().enumerate() {
                    if p[i] != 0.0 {
                        l.add(pos0 + i, p[i], k);
                    }
                }
                l.reduce_into(&mut want);
            });
            for e in 0..d {
                assert_eq!(got[e].to_bits(), want[e].to_bits(), "pv d={d} value {e}");
            }
            // the same from f32 columns starting below the keys and ending past them
            let j0 = pos0 - pos0 % 16 - if pos0 >= 16 { 16 } else { 0 };
            let width = (pos0 + n + 5 - j0).next_multiple_of(16);
            let mut data = vec![f32::NAN; d * width];
            for (i, k) in keys.iter().enumerate() {
                for e in 0..d {
                    data[e * width + pos0 + i - j0] = crate::quant::f16::f16_to_f32(k[e]);
                }
            }
            // columns no key was written to hold zeros, as `value_columns` leaves them
            data.iter_mut().filter(|x| x.is_nan()).for_each(|x| *x = 0.0);
            let cols = VCols { j0, width, data };
            let mut got = vec![0f32; d];
            assert!(pv_cols(&p, pos0, &cols, d, &mut got, &mut Vec::new()));
            for e in 0..d {
                assert_eq!(got[e].to_bits(), want[e].to_bits(), "pv from columns d={d} value {e}");
            }
        }
    }
}
