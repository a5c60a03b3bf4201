//! AVX2 kernels for the K-quants and IQ4_XS (against block_q8_K activations).
//!
//! ggml-cpu/arch/x86/quants.c semantics: `maddubs` of unsigned weight values with signed
//! activations, `madd` with the 16-bit sub-block scales, block sums in i32, one FMA per block.
//! Q4_K and Q6_K (the hot types) are generic over `RW` weight rows × `C` activation rows.
//! Callers (`avx2.rs` wrappers) guarantee avx2+fma+f16c and that `nb` blocks are readable
//! from `w` and from every activation row.
use super::blocks::*;
use super::avx2::{
    bcast_i16, fp16, fp16x2, hsum_f32x8, hsum_i32x4, hsum_i32x8, iq4_values, q4_k_gemm_step, k4_mins_dot, k4_scales_mins, load128, load256,
    q3_k_scales, rd_f32, scale_pair, shr2s,
};
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

// block_q8_K { f32 d; i8 qs[256] @4; i16 bsums[16] @260; } = 292 bytes

// block_q2_K { u8 scales[16]; u8 qs[64] @16; f16 d @80; f16 dmin @82; }
// f32 in the order of llama.cpp's repacked Q2_K kernels: `BATCH = false` its gemv
// (`scalar_k::dot_q2_k_q8_k`: per superblock), `BATCH = true` its gemm (per 128-element half).
#[inline(always)]
unsafe fn q2_k_q8_k<const BATCH: bool>(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0f);
    let (mut acc, mut acc_m) = (0f32, 0f32);
    for i in 0..nb {
        let (wb, ab) = (w.add(Q2_K_BYTES * i), a.add(Q8_K_BYTES * i));
        let dy = rd_f32(ab);
        let (dw, mw) = fp16x2(wb.add(80), wb.add(82));
        let ms = load128(wb);
        let scales = _mm_and_si128(ms, m4);
        let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16::<4>(ms), m4));
        // i32 lane k: groups 2k, 2k+1; half c: lanes 4c..4c+4
        let prod = _mm256_madd_epi16(mins, load256(ab.add(260)));
        let m_half = [hsum_i32x4(_mm256_castsi256_si128(prod)), hsum_i32x4(_mm256_extracti128_si256::<1>(prod))];
        let mut i_half = [0i32; 2];
        for c in 0..2 {
            let bits = load256(wb.add(16 + 32 * c));
            let mut sumi = _mm256_setzero_si256();
            for s in 0..4 {
                let q = _mm256_and_si256(shr2s(bits, s), m3);
                let p = _mm256_maddubs_epi16(q, load256(ab.add(4 + 128 * c + 32 * s)));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale_pair(scales, 8 * c + 2 * s), p));
            }
            i_half[c] = hsum_i32x8(sumi);
        }
        if BATCH {
            for c in 0..2 {
                acc = (i_half[c] as f32).mul_add(dw * dy, acc);
                acc_m = (m_half[c] as f32).mul_add(mw * dy, acc_m);
            }
        } else {
            acc = ((i_half[0] + i_half[1]) as f32).mul_add(dw * dy, acc);
            acc_m = ((m_half[0] + m_half[1]) as f32).mul_add(mw * dy, acc_m);
        }
    }
    acc - acc_m
}

// block_q3_K { u8 hmask[32]; u8 qs[64] @32; u8 scales[12] @96; f16 d @108; }
// value = low2 - (hmask bit ? 0 : 4): two maddubs (low bits, and the 4 where the bit is clear).
// f32: `BATCH = false` in the order of ggml's AVX2 `ggml_vec_dot_q3_K_q8_K`
// (`scalar_k::dot_q3_k_q8_k`), `BATCH = true` llama.cpp's tiled kernel (`dot_q3_k_q8_k_tiled`).
#[inline(always)]
unsafe fn q3_k_q8_k<const BATCH: bool>(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m3 = _mm256_set1_epi8(3);
    let four = _mm256_set1_epi8(4);
    let zero = _mm256_setzero_si256();
    let mut acc = _mm256_setzero_ps();
    let mut total = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(Q3_K_BYTES * i), a.add(Q8_K_BYTES * i));
        let scales = q3_k_scales(wb.add(96));
        let hbits = load256(wb);
        let mut sumi = _mm256_setzero_si256();
        for c in 0..2 {
            let bits = load256(wb.add(32 + 32 * c));
            for s in 0..4 {
                let ql = _mm256_and_si256(shr2s(bits, s), m3);
                let bit = _mm256_set1_epi8((1u8 << (4 * c + s)) as i8);
                let qh = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, bit), zero), four);
                let q8 = load256(ab.add(4 + 128 * c + 32 * s));
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(ql, q8), _mm256_maddubs_epi16(qh, q8));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(scale_pair(scales, 8 * c + 2 * s), p));
            }
        }
        if BATCH {
            total = tiled_step(total, hsum_i32x8(sumi), fp16(wb.add(108)), rd_f32(ab));
        } else {
            let d = rd_f32(ab) * fp16(wb.add(108));
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    if BATCH {
        total
    } else {
        hsum_f32x8(acc)
    }
}

/// llama.cpp's tiled kernel without mins: per superblock `fma(f32(Σ) · d_w, d_a, total)`.
#[inline(always)]
fn tiled_step(total: f32, isum: i32, d_w: f32, d_a: f32) -> f32 {
    (isum as f32 * d_w).mul_add(d_a, total)
}

// block_q4_K { f16 d; f16 dmin; u8 scales[12] @4; u8 qs[128] @16; }
// One weight block decoded once, dotted with C activation rows, for RW weight rows (same ops
// per (row, token) for any RW, C). f32 in the order of llama.cpp's repacked Q4_K kernels:
// `BATCH = false` its gemv (`scalar::dot_q4_k_q8_k`), `BATCH = true` its gemm
// (`scalar::dot_q4_k_q8_k_gemm`).
#[inline(always)]
pub(super) unsafe fn q4_k_q8_k<const BATCH: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    let m4 = _mm256_set1_epi8(0x0f);
    let mut acc = [[0f32; C]; RW];
    let mut acc_m = [[0f32; C]; RW];
    for i in 0..nb {
        for r in 0..RW {
            let wb = w[r].add(144 * i);
            let (dw, mw) = fp16x2(wb, wb.add(2));
            let sm = k4_scales_mins(wb.add(4));
            let sc = _mm_cvtepu8_epi16(sm);
            let scales = _mm256_set_m128i(sc, sc);
            let mut sumi = [_mm256_setzero_si256(); C];
            // llama.cpp's gemm takes the min term per 64-element group: lane j of these
            let mut mins_v = [_mm_setzero_si128(); C];
            if BATCH {
                for t in 0..C {
                    mins_v[t] = k4_mins_dot(sm, a[t].add(Q8_K_BYTES * i + Q8_K_BSUMS));
                }
            }
            for j in 0..4 {
                let bits = load256(wb.add(16 + 32 * j));
                let q4l = _mm256_and_si256(bits, m4);
                let q4h = _mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4);
                let (sl, sh) = (bcast_i16(scales, 2 * j), bcast_i16(scales, 2 * j + 1));
                for t in 0..C {
                    let y = a[t].add(Q8_K_BYTES * i + Q8_K_QS + 64 * j);
                    let pl = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(q4l, load256(y)));
                    let ph = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(q4h, load256(y.add(32))));
                    sumi[t] = _mm256_add_epi32(sumi[t], _mm256_add_epi32(pl, ph));
                }
                if BATCH {
                    // gemm: each 64-element group into the chains
                    for t in 0..C {
                        let dy = rd_f32(a[t].add(Q8_K_BYTES * i));
                        let (c, m) = (&mut acc[r][t], &mut acc_m[r][t]);
                        q4_k_gemm_step(c, m, hsum_i32x8(sumi[t]), mins_v[t], j, dw * dy, mw * dy);
                        sumi[t] = _mm256_setzero_si256();
                    }
                }
            }
            if BATCH {
                continue;
            }
            for t in 0..C {
                let ab = a[t].add(Q8_K_BYTES * i);
                let dy = rd_f32(ab);
                let mins = hsum_i32x4(k4_mins_dot(sm, ab.add(260)));
                acc_m[r][t] = (mins as f32).mul_add(mw * dy, acc_m[r][t]);
                acc[r][t] = (hsum_i32x8(sumi[t]) as f32).mul_add(dw * dy, acc[r][t]);
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            out[r][t] = acc[r][t] - acc_m[r][t];
        }
    }
    out
}

// block_q5_K { f16 d; f16 dmin; u8 scales[12] @4; u8 qh[32] @16; u8 qs[128] @48; }
// f32: `BATCH = false` in the order of ggml's AVX2 `ggml_vec_dot_q5_K_q8_K` (8 lanes, the min
// terms in one scalar chain; `scalar_k::dot_q5_k_q8_k`), `BATCH = true` llama.cpp's tiled
// kernel (`dot_q5_k_q8_k_tiled`).
#[inline(always)]
unsafe fn q5_k_q8_k<const BATCH: bool>(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m4 = _mm256_set1_epi8(0x0f);
    let sixteen = _mm256_set1_epi8(16);
    let mut acc = _mm256_setzero_ps();
    let (mut summs, mut total) = (0f32, 0f32);
    for i in 0..nb {
        let (wb, ab) = (w.add(Q5_K_BYTES * i), a.add(Q8_K_BYTES * i));
        let dy = rd_f32(ab);
        let (dw, mw) = fp16x2(wb, wb.add(2));
        let sm = k4_scales_mins(wb.add(4));
        let summ = hsum_i32x4(k4_mins_dot(sm, ab.add(260))) as f32;
        let sc = _mm_cvtepu8_epi16(sm);
        let scales = _mm256_set_m128i(sc, sc);
        let hbits = load256(wb.add(16));
        let mut sumi = _mm256_setzero_si256();
        for j in 0..4 {
            let bits = load256(wb.add(48 + 32 * j));
            let b0 = _mm256_set1_epi8((1u8 << (2 * j)) as i8);
            let b1 = _mm256_set1_epi8((1u8 << (2 * j + 1)) as i8);
            let h0 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b0), b0), sixteen);
            let h1 = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hbits, b1), b1), sixteen);
            let q5l = _mm256_or_si256(_mm256_and_si256(bits, m4), h0);
            let q5h = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(bits), m4), h1);
            let pl = _mm256_maddubs_epi16(q5l, load256(ab.add(4 + 64 * j)));
            let ph = _mm256_maddubs_epi16(q5h, load256(ab.add(4 + 64 * j + 32)));
            let pl = _mm256_madd_epi16(bcast_i16(scales, 2 * j), pl);
            let ph = _mm256_madd_epi16(bcast_i16(scales, 2 * j + 1), ph);
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        if BATCH {
            let r = (-mw).mul_add(summ, hsum_i32x8(sumi) as f32 * dw);
            total = r.mul_add(dy, total);
        } else {
            summs = (-dy * mw).mul_add(summ, summs);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(dy * dw), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    if BATCH {
        total
    } else {
        hsum_f32x8(acc) + summs
    }
}

// block_q6_K { u8 ql[128]; u8 qh[64] @128; i8 scales[16] @192; f16 d @208; }
// Σ sc·(q6 - 32)·q8 = Σ sc·q6·q8 - 32·Σ_g sc[g]·bsums[g]  (q6 in 0..64 for maddubs).
// One weight block decoded once, dotted with C activation rows, for RW weight rows (same ops
// per (row, token) for any RW, C). f32: `BATCH = false` in the order of ggml's AVX2
// `ggml_vec_dot_q6_K_q8_K` (8 lanes, `fma(d, lanes, acc)`, `hsum`); `BATCH = true` in the
// order of llama.cpp's tiled kernel (`scalar::dot_q6_k_q8_k_tiled`).
#[inline(always)]
pub(super) unsafe fn q6_k_q8_k<const BATCH: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    let m4 = _mm256_set1_epi8(0x0f);
    let m3 = _mm256_set1_epi8(3);
    let mut acc = [[_mm256_setzero_ps(); C]; RW];
    let mut tot = [[0f32; C]; RW];
    for i in 0..nb {
        for r in 0..RW {
            let wb = w[r].add(210 * i);
            let dw = fp16(wb.add(208));
            let scales = load128(wb.add(192));
            let sc16 = _mm256_cvtepi8_epi16(scales);
            let mut sumi = [_mm256_setzero_si256(); C];
            for t in 0..C {
                let corr = _mm256_madd_epi16(sc16, load256(a[t].add(Q8_K_BYTES * i + Q8_K_BSUMS)));
                sumi[t] = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(corr));
            }
            for c in 0..2 {
                let ql0 = load256(wb.add(64 * c));
                let ql1 = load256(wb.add(64 * c + 32));
                let qh = load256(wb.add(128 + 32 * c));
                let q = [
                    _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_slli_epi16::<4>(_mm256_and_si256(qh, m3))),
                    _mm256_or_si256(
                        _mm256_and_si256(ql1, m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<2>(qh), m3)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<4>(qh), m3)),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                        _mm256_slli_epi16::<4>(_mm256_and_si256(_mm256_srli_epi16::<6>(qh), m3)),
                    ),
                ];
                for (k, &qk) in q.iter().enumerate() {
                    let s = scale_pair(scales, 8 * c + 2 * k);
                    for t in 0..C {
                        let p = _mm256_maddubs_epi16(qk, load256(a[t].add(Q8_K_BYTES * i + Q8_K_QS + 128 * c + 32 * k)));
                        sumi[t] = _mm256_add_epi32(sumi[t], _mm256_madd_epi16(s, p));
                    }
                }
            }
            for t in 0..C {
                let dy = rd_f32(a[t].add(Q8_K_BYTES * i));
                if BATCH {
                    tot[r][t] = (hsum_i32x8(sumi[t]) as f32 * dw).mul_add(dy, tot[r][t]);
                } else {
                    acc[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dw), _mm256_cvtepi32_ps(sumi[t]), acc[r][t]);
                }
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            out[r][t] = if BATCH { tot[r][t] } else { hsum_f32x8(acc[r][t]) };
        }
    }
    out
}

// block_iq4_xs { f16 d; u16 scales_h @2; u8 scales_l[4] @4; u8 qs[128] @8; }
// f32: `BATCH = false` ggml's AVX2 `ggml_vec_dot_iq4_xs_q8_K`, `BATCH = true` the tiled kernel.
#[inline(always)]
unsafe fn iq4_xs_q8_k<const BATCH: bool>(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut total = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(IQ4_XS_BYTES * i), a.add(Q8_K_BYTES * i));
        let sh = read_unaligned(wb.add(2) as *const u16) as i32;
        let mut sumi = _mm256_setzero_si256();
        for ib in 0..8 {
            let qx = iq4_values(wb.add(8 + 16 * ib));
            let q8 = load256(ab.add(4 + 32 * ib));
            let p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(qx, qx), _mm256_sign_epi8(q8, qx));
            let ls = ((*wb.add(4 + ib / 2) as i32 >> (4 * (ib % 2))) & 0x0f) | (((sh >> (2 * ib)) & 3) << 4);
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p16, _mm256_set1_epi16((ls - 32) as i16)));
        }
        if BATCH {
            total = tiled_step(total, hsum_i32x8(sumi), fp16(wb), rd_f32(ab));
        } else {
            let d = rd_f32(ab) * fp16(wb);
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    if BATCH {
        total
    } else {
        hsum_f32x8(acc)
    }
}

/// The single-row kernels' two orders as entry points (ggml's `vec_dot` / the tiled kernel).
macro_rules! k_orders1 {
    ($($name:ident => $body:ident, $batch:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $name(nb: usize, w: *const u8, a: *const u8) -> f32 {
            $body::<{ $batch }>(nb, w, a)
        }
    )*};
}

k_orders1! {
    q2_k_gemv => q2_k_q8_k, false;
    q2_k_gemm => q2_k_q8_k, true;
    q3_k_vec => q3_k_q8_k, false;
    q3_k_tiled => q3_k_q8_k, true;
    q5_k_vec => q5_k_q8_k, false;
    q5_k_tiled => q5_k_q8_k, true;
    iq4_xs_vec => iq4_xs_q8_k, false;
    iq4_xs_tiled => iq4_xs_q8_k, true;
}

/// The four orders as entry points (ggml's vec / llama.cpp's batch kernels).
macro_rules! k_orders {
    ($($name:ident => $body:ident, $batch:expr;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $name<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            $body::<{ $batch }, RW, C>(nb, w, a)
        }
    )*};
}

k_orders! {
    q4_k_gemv => q4_k_q8_k, false;
    q4_k_gemm => q4_k_q8_k, true;
    q6_k_vec => q6_k_q8_k, false;
    q6_k_tiled => q6_k_q8_k, true;
}
