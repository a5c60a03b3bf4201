//! Q4_K and Q6_K prefill in llama.cpp's batch orders with weight rows in vector lanes
//! (AVX-512 VNNI).
//!
//! The gemm order ([`scalar::dot_q4_k_q8_k_gemm`]) rounds every 64-element group's integer sum
//! into an f32 chain, so a kernel that keeps one weight row per register must reduce 16 lanes
//! to one number per group, row and token — more work than the products themselves. Here a
//! panel of 16 weight rows is first repacked (per call, into a thread's scratch buffer) so
//! that lane r of every vector belongs to row r: 4 consecutive 4-bit values per lane for
//! `vpdpbusd` against 4 activation bytes broadcast to all lanes, the sub-block scales, the
//! mins and `d` / `dmin` as 16-lane vectors. Each group's sums then land in the lanes of its
//! rows, and the chains of 16 rows advance in one f32 FMA with the operations of the scalar
//! chain per lane (`fma(f32(Σ), d_w·d_a, acc)`, `fma(f32(min term), dmin_w·d_a, acc_m)`,
//! `acc - acc_m`): bit-identical. The repack is paid once per panel for all the call's tokens
//! (prefill tasks pass dozens), like llama.cpp's load-time `q4_K_8x8` repack but without a
//! second copy of the model. Q6_K's tiled order (one f32 step per superblock,
//! [`scalar::dot_q6_k_q8_k_tiled`]) gains the same way: its 16 scale groups need no reduction
//! across lanes either. The repack gathers each 4-byte column of 16 rows with one
//! `vpgatherdd` and decodes 16 rows' scales at once.
//!
//! [`scalar::dot_q6_k_q8_k_tiled`]: super::scalar::dot_q6_k_q8_k_tiled
//! [`scalar::dot_q4_k_q8_k_gemm`]: super::scalar::dot_q4_k_q8_k_gemm
use super::blocks::{Q4_K_BYTES, Q6_K_BYTES, Q8_K_BSUMS, Q8_K_BYTES, Q8_K_QS, QK_K};
use super::tile::TileFn;
use core::arch::x86_64::*;
use std::cell::RefCell;

/// Weight rows per panel (one per i32 / f32 lane).
const P: usize = 16;
/// Tokens sharing each loaded weight vector.
const T: usize = 4;

/// One Q4_K superblock of a panel: `q[8·sb + k]` lane r holds row r's values 4k..4k+4 of
/// sub-block sb (a byte each), `sc[sb]` its scale, `mins[sb]` its min twice (two i16),
/// `d` / `dmin` its f32 super-scales.
#[repr(C, align(64))]
struct PackedQ4K {
    q: [__m512i; 64],
    sc: [__m512i; 8],
    mins: [__m512i; 8],
    d: __m512,
    dmin: __m512,
}

/// One Q6_K superblock of a panel: `q[4·g + k]` lane r holds row r's values 4k..4k+4 of
/// scale group g (6-bit, unsigned: the `-32` is applied through the bsums), `sc[g]` its scale,
/// `scp[m]` scales 2m and 2m+1 as two i16, `d` the f32 super-scale.
#[repr(C, align(64))]
struct PackedQ6K {
    q: [__m512i; 64],
    sc: [__m512i; 16],
    scp: [__m512i; 8],
    d: __m512,
}

/// Scratch lines for one panel's superblocks (any packed type: their sizes are multiples of 64).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct Line([u8; 64]);

thread_local! {
    static SCRATCH: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
}

/// 4 bytes at `off` of the block at `b` in each of the masked rows (`idx`: row offsets).
#[inline(always)]
unsafe fn gather(b: *const u8, off: usize, idx: __m512i, mask: __mmask16) -> __m512i {
    _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), mask, idx, b.add(off) as *const i32)
}

/// The f16 in bits 0..16 (`HI`: 16..32) of each lane, as f32.
#[inline(always)]
unsafe fn f16_lanes<const HI: bool>(v: __m512i) -> __m512 {
    let v = if HI { _mm512_srli_epi32::<16>(v) } else { v };
    _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v))
}

/// Byte `k` of each lane, zero-extended (`SIGNED`: sign-extended).
#[inline(always)]
unsafe fn byte_lanes<const SIGNED: bool>(v: __m512i, k: u32) -> __m512i {
    let top = _mm512_sll_epi32(v, _mm_cvtsi32_si128(24 - 8 * k as i32));
    if SIGNED {
        _mm512_srai_epi32::<24>(top)
    } else {
        _mm512_srli_epi32::<24>(top)
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_q4_k(b: *const u8, idx: __m512i, mask: __mmask16, p: *mut PackedQ4K) {
    let p = &mut *p;
    let dm = gather(b, 0, idx, mask);
    p.d = f16_lanes::<false>(dm);
    p.dmin = f16_lanes::<true>(dm);
    // ggml's get_scale_min_k4 (kmask1..3) on 16 rows at once
    let (m1, m2, m3) = (_mm512_set1_epi32(0x3f3f_3f3f), _mm512_set1_epi32(0x0f0f_0f0f), _mm512_set1_epi32(0x0303_0303));
    let (u0, u1, u2) = (gather(b, 4, idx, mask), gather(b, 8, idx, mask), gather(b, 12, idx, mask));
    let (hi0, hi1) = (_mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u0), m3)), _mm512_slli_epi32::<4>(_mm512_and_si512(_mm512_srli_epi32::<6>(u1), m3)));
    let t = [
        _mm512_and_si512(u0, m1),
        _mm512_or_si512(_mm512_and_si512(u2, m2), hi0),
        _mm512_and_si512(u1, m1),
        _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32::<4>(u2), m2), hi1),
    ];
    for sb in 0..8 {
        p.sc[sb] = byte_lanes::<false>(t[sb / 4], (sb % 4) as u32);
        let m = byte_lanes::<false>(t[2 + sb / 4], (sb % 4) as u32);
        p.mins[sb] = _mm512_or_si512(m, _mm512_slli_epi32::<16>(m));
    }
    let m4 = _mm512_set1_epi8(0x0f);
    for dw in 0..32 {
        let v = gather(b, 16 + 4 * dw, idx, mask);
        let (j, k) = (dw / 8, dw % 8);
        p.q[8 * (2 * j) + k] = _mm512_and_si512(v, m4);
        p.q[8 * (2 * j + 1) + k] = _mm512_and_si512(_mm512_srli_epi32::<4>(v), m4);
    }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_q6_k(b: *const u8, idx: __m512i, mask: __mmask16, p: *mut PackedQ6K) {
    let p = &mut *p;
    p.d = f16_lanes::<false>(gather(b, 208, idx, mask));
    for m in 0..4 {
        let v = gather(b, 192 + 4 * m, idx, mask);
        for k in 0..4 {
            p.sc[4 * m + k] = byte_lanes::<true>(v, k as u32);
        }
        for h in 0..2 {
            let (lo, hi) = (p.sc[4 * m + 2 * h], p.sc[4 * m + 2 * h + 1]);
            p.scp[2 * m + h] = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32::<16>(hi));
        }
    }
    // ggml's layout: per 128-element half n, element 32s + l takes the low (s < 2) or high
    // nibble of ql[64n + 32(s % 2) + l] and bits 2s, 2s+1 of qh[32n + l]
    let (m4, m3) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(3));
    for n in 0..2 {
        for l in 0..8 {
            let qa = gather(b, 64 * n + 4 * l, idx, mask);
            let qb = gather(b, 64 * n + 32 + 4 * l, idx, mask);
            let h = gather(b, 128 + 32 * n + 4 * l, idx, mask);
            // quad (4 values) 32n + 8s + l: element 128n + 32s + 4l..
            let hb = [h, _mm512_srli_epi32::<2>(h), _mm512_srli_epi32::<4>(h), _mm512_srli_epi32::<6>(h)];
            let lo = [qa, qb, _mm512_srli_epi32::<4>(qa), _mm512_srli_epi32::<4>(qb)];
            for s in 0..4 {
                p.q[32 * n + 8 * s + l] = _mm512_or_si512(_mm512_and_si512(lo[s], m4), _mm512_slli_epi32::<4>(_mm512_and_si512(hb[s], m3)));
            }
        }
    }
}

#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(core::ptr::read_unaligned(p as *const i32))
}

#[inline(always)]
unsafe fn d_a(ab: *const u8) -> __m512 {
    _mm512_set1_ps(core::ptr::read_unaligned(ab as *const f32))
}

/// 16 rows × `C` tokens, Q4_K in the gemm order: per token, `acc - acc_m` in row lanes.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn panel_q4_k<const C: usize>(nb: usize, p: *const PackedQ4K, a: [*const u8; C]) -> [__m512; C] {
    let mut acc = [_mm512_setzero_ps(); C];
    let mut acc_m = [_mm512_setzero_ps(); C];
    for i in 0..nb {
        let pk = &*p.add(i);
        let ab: [*const u8; C] = core::array::from_fn(|t| a[t].add(Q8_K_BYTES * i));
        // (loops, not closures: a closure does not inherit the function's target features)
        let (mut dd, mut dm) = ([_mm512_setzero_ps(); C], [_mm512_setzero_ps(); C]);
        for t in 0..C {
            dd[t] = _mm512_mul_ps(pk.d, d_a(ab[t]));
            dm[t] = _mm512_mul_ps(pk.dmin, d_a(ab[t]));
        }
        for j in 0..4 {
            let mut g = [_mm512_setzero_si512(); C];
            for h in 0..2 {
                let sb = 2 * j + h;
                let mut s = [_mm512_setzero_si512(); C];
                for k in 0..8 {
                    let wq = pk.q[8 * sb + k];
                    for t in 0..C {
                        s[t] = _mm512_dpbusd_epi32(s[t], wq, bcast(ab[t].add(Q8_K_QS + 32 * sb + 4 * k)));
                    }
                }
                for t in 0..C {
                    g[t] = _mm512_add_epi32(g[t], _mm512_mullo_epi32(s[t], pk.sc[sb]));
                }
            }
            for t in 0..C {
                let bs = ab[t].add(Q8_K_BSUMS + 8 * j);
                let mm = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(_mm512_setzero_si512(), pk.mins[2 * j], bcast(bs)), pk.mins[2 * j + 1], bcast(bs.add(4)));
                acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(g[t]), dd[t], acc[t]);
                acc_m[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mm), dm[t], acc_m[t]);
            }
        }
    }
    let mut out = [_mm512_setzero_ps(); C];
    for t in 0..C {
        out[t] = _mm512_sub_ps(acc[t], acc_m[t]);
    }
    out
}

/// 16 rows × `C` tokens, Q6_K in the tiled order: per superblock
/// `fma(f32(Σ) · d_w, d_a, sum)`, Σ = Σ_g sc_g·Σ q·y − 32·Σ_g sc_g·bsum_g (exact integers).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn panel_q6_k<const C: usize>(nb: usize, p: *const PackedQ6K, a: [*const u8; C]) -> [__m512; C] {
    let mut sum = [_mm512_setzero_ps(); C];
    for i in 0..nb {
        let pk = &*p.add(i);
        let ab: [*const u8; C] = core::array::from_fn(|t| a[t].add(Q8_K_BYTES * i));
        let mut tot = [_mm512_setzero_si512(); C];
        for g in 0..16 {
            let mut s = [_mm512_setzero_si512(); C];
            for k in 0..4 {
                let wq = pk.q[4 * g + k];
                for t in 0..C {
                    s[t] = _mm512_dpbusd_epi32(s[t], wq, bcast(ab[t].add(Q8_K_QS + 16 * g + 4 * k)));
                }
            }
            for t in 0..C {
                tot[t] = _mm512_add_epi32(tot[t], _mm512_mullo_epi32(s[t], pk.sc[g]));
            }
        }
        for t in 0..C {
            let mut c = _mm512_setzero_si512();
            for m in 0..8 {
                c = _mm512_dpwssd_epi32(c, pk.scp[m], bcast(ab[t].add(Q8_K_BSUMS + 4 * m)));
            }
            let tot = _mm512_sub_epi32(tot[t], _mm512_slli_epi32::<5>(c));
            sum[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(tot), pk.d), d_a(ab[t]), sum[t]);
        }
    }
    sum
}

/// Stores token t's first `n_rows` lanes of `v` at `out[(t0 + t)·os + r0..]` (a masked store,
/// clipped to `out`).
/// # Safety
/// avx512f.
#[target_feature(enable = "avx512f")]
unsafe fn put(v: &[__m512], t0: usize, r0: usize, n_rows: usize, out: &mut [f32], os: usize) {
    for (t, &x) in v.iter().enumerate() {
        let at = (t0 + t) * os + r0;
        let n = n_rows.min(out.len().saturating_sub(at));
        if n > 0 {
            // lanes 0..n land in out[at..at + n], within the slice
            _mm512_mask_storeu_ps(out.as_mut_ptr().add(at), ((1u32 << n) - 1) as __mmask16, x);
        }
    }
}

macro_rules! packed_tile {
    ($($run:ident: $packed:ty, $wts:expr, $pack:ident, $panel:ident, $fallback:expr;)*) => {$(
        /// The `TileFn` (see `tile.rs`) over 16-row packed panels; rows too far apart for
        /// 32-bit gather offsets go through the row-wise kernel.
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $run(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            if rows == 0 || cols == 0 {
                return;
            }
            if ws > i32::MAX as usize / P {
                let fallback: TileFn = $fallback;
                return fallback(n, w, ws, rows, a, as_, cols, out, os);
            }
            // whole blocks present in n, in the last weight row and in the last token
            let w_last = (rows - 1).checked_mul(ws).map_or(0, |off| w.len().saturating_sub(off));
            let a_last = (cols - 1).checked_mul(as_).map_or(0, |off| a.len().saturating_sub(off));
            let nb = (n / QK_K).min(w_last / $wts).min(a_last / Q8_K_BYTES);
            let lines = core::mem::size_of::<$packed>() / 64;
            SCRATCH.with(|s| {
                let mut buf = s.borrow_mut();
                if buf.len() < nb * lines {
                    buf.resize(nb * lines, Line([0; 64]));
                }
                let pk = buf.as_mut_ptr() as *mut $packed;
                // SAFETY: avx512f (checked before this kernel is handed out, as below)
                let idx = unsafe { _mm512_mullo_epi32(_mm512_set1_epi32(ws as i32), _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)) };
                let mut r0 = 0;
                while r0 < rows {
                    let n_rows = (rows - r0).min(P);
                    let mask = ((1u32 << n_rows) - 1) as __mmask16;
                    // SAFETY: `tile_kernel` hands this kernel out only after `has_vnni()`;
                    // `buf` holds `nb` packed superblocks (64-byte aligned lines); every row <
                    // rows holds `nb` blocks (the last one does, and rows are `ws` apart), the
                    // masked lanes are rows r0..r0 + n_rows, whose offsets fit in i32 (above);
                    // every token < cols holds `nb` blocks likewise.
                    unsafe {
                        for i in 0..nb {
                            $pack(w.as_ptr().add(r0 * ws + $wts * i), idx, mask, pk.add(i));
                        }
                        let mut t0 = 0;
                        while t0 + T <= cols {
                            let ap: [*const u8; T] = core::array::from_fn(|t| a.as_ptr().add((t0 + t) * as_));
                            put(&$panel::<T>(nb, pk, ap), t0, r0, n_rows, out, os);
                            t0 += T;
                        }
                        while t0 < cols {
                            put(&$panel::<1>(nb, pk, [a.as_ptr().add(t0 * as_)]), t0, r0, n_rows, out, os);
                            t0 += 1;
                        }
                    }
                    r0 += n_rows;
                }
            });
        }
    )*};
}

packed_tile! {
    run_q4_k_gemm_packed: PackedQ4K, Q4_K_BYTES, pack_q4_k, panel_q4_k, super::avx512::Q4_K_GEMM_ROWWISE_VNNI;
    run_q6_k_tiled_packed: PackedQ6K, Q6_K_BYTES, pack_q6_k, panel_q6_k, super::avx512::Q6_K_TILED_ROWWISE_VNNI;
}
