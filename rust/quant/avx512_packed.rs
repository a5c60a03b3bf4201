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
//! The grid i-quants (IQ2_XXS … IQ1_M) use the Q6_K panel in their tiled order: each row's
//! block is unpacked by its AVX2 decoder into `q + 128` bytes and 16 group multipliers
//! (`avx2_iq::unpack`), gathered into row lanes, and the bias taken back through the bsums
//! (`128·Σ_g m_g·bsum_g`), so `vpdpbusd` reads unsigned weights against signed activations.
//!
//! [`scalar::dot_q6_k_q8_k_tiled`]: super::scalar::dot_q6_k_q8_k_tiled
//! [`scalar::dot_q4_k_q8_k_gemm`]: super::scalar::dot_q4_k_q8_k_gemm
use super::blocks::{Q4_K_BYTES, Q6_K_BYTES, Q8_K_BSUMS, Q8_K_BYTES, Q8_K_QS, QK_K};
use super::avx2_iq::UnpackFn;
use super::tile::{rows_tile, TileFn, TileKernel};
use super::GgmlType;
use core::arch::x86_64::*;
use std::cell::RefCell;

/// Weight rows per panel (one per i32 / f32 lane).
pub(super) const P: usize = 16;
/// Tokens sharing each loaded weight vector.
const T: usize = 4;
/// Superblocks ahead that packing prefetches.
pub(super) const PF_BLOCKS: usize = 2;

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
pub(super) struct Line(pub(super) [u8; 64]);

thread_local! {
    pub(super) static SCRATCH: RefCell<Vec<Line>> = const { RefCell::new(Vec::new()) };
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
unsafe fn pack_q4_k(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut PackedQ4K) {
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
unsafe fn pack_q6_k(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut PackedQ6K) {
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

/// Transposes a 16 × 16 matrix of i32 (`m[r]` lane c → `m[c]` lane r).
#[inline(always)]
unsafe fn transpose16(m: &mut [__m512i; 16]) {
    let z = _mm512_setzero_si512();
    // t[2i] lane L: (r2i[4L], r2i+1[4L], r2i[4L+1], r2i+1[4L+1]); t[2i+1] the same for 4L+2, 4L+3
    let mut t = [z; 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_epi32(m[2 * i], m[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(m[2 * i], m[2 * i + 1]);
    }
    // u[4i + e] lane L: element 4L + e of rows 4i..4i+4
    let mut u = [z; 16];
    for i in 0..4 {
        u[4 * i] = _mm512_unpacklo_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i], t[4 * i + 2]);
        u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
        u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
    }
    // column 4L + e: lane L of u[e], u[4 + e], u[8 + e], u[12 + e]
    for e in 0..4 {
        let v0 = _mm512_shuffle_i32x4::<0x44>(u[e], u[4 + e]);
        let v1 = _mm512_shuffle_i32x4::<0xEE>(u[e], u[4 + e]);
        let w0 = _mm512_shuffle_i32x4::<0x44>(u[8 + e], u[12 + e]);
        let w1 = _mm512_shuffle_i32x4::<0xEE>(u[8 + e], u[12 + e]);
        m[e] = _mm512_shuffle_i32x4::<0x88>(v0, w0);
        m[4 + e] = _mm512_shuffle_i32x4::<0xDD>(v0, w0);
        m[8 + e] = _mm512_shuffle_i32x4::<0x88>(v1, w1);
        m[12 + e] = _mm512_shuffle_i32x4::<0xDD>(v1, w1);
    }
}

/// One block of 16 grid i-quant rows (`ws` bytes apart; the rows in `mask`) as a
/// [`PackedQ6K`]: each row unpacked to `q + 128` bytes and group multipliers
/// (`avx2_iq::unpack`), then transposed into row lanes (rows past the mask are zeros);
/// `d` holds `d · FACTOR` per row.
#[inline(always)]
unsafe fn pack_iq(unpack: UnpackFn, b: *const u8, ws: usize, mask: __mmask16, p: *mut PackedQ6K) {
    #[repr(C, align(64))]
    struct Rows {
        q: [[__m512i; 4]; P],
        sc: [__m512i; P],
        d: [f32; P],
    }
    let mut t = core::mem::MaybeUninit::<Rows>::uninit();
    let tp = t.as_mut_ptr();
    let n = mask.count_ones() as usize;
    for r in 0..P {
        let (q, sc) = (core::ptr::addr_of_mut!((*tp).q[r]) as *mut u8, core::ptr::addr_of_mut!((*tp).sc[r]) as *mut i32);
        let d = if r < n {
            unpack(b.add(r * ws), q, sc)
        } else {
            core::ptr::write_bytes(q, 0, QK_K);
            core::ptr::write_bytes(sc, 0, 16);
            0.0
        };
        core::ptr::addr_of_mut!((*tp).d[r]).write(d);
    }
    // SAFETY: every field of every row was written above
    let t = t.assume_init_mut();
    let p = &mut *p;
    for k in 0..4 {
        let mut m = [_mm512_setzero_si512(); 16];
        for (r, v) in m.iter_mut().enumerate() {
            *v = t.q[r][k];
        }
        transpose16(&mut m);
        p.q[16 * k..16 * k + 16].copy_from_slice(&m);
    }
    transpose16(&mut t.sc);
    p.sc = t.sc;
    for m in 0..8 {
        let (lo, hi) = (p.sc[2 * m], p.sc[2 * m + 1]);
        p.scp[m] = _mm512_or_si512(_mm512_and_si512(lo, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32::<16>(hi));
    }
    p.d = _mm512_loadu_ps(t.d.as_ptr());
}

macro_rules! iq_packers {
    ($($name:ident => $unpack:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
        unsafe fn $name(b: *const u8, ws: usize, _idx: __m512i, mask: __mmask16, p: *mut PackedQ6K) {
            pack_iq(super::avx2_iq::$unpack, b, ws, mask, p)
        }
    )*};
}

#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(core::ptr::read_unaligned(p as *const i32))
}

#[inline(always)]
unsafe fn d_a(ab: *const u8) -> __m512 {
    _mm512_set1_ps(core::ptr::read_unaligned(ab as *const f32))
}

/// 16 rows × `C` tokens, Q6_K in the tiled order.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn panel_q6_k<const C: usize>(nb: usize, p: *const PackedQ6K, a: [*const u8; C]) -> [__m512; C] {
    panel_biased::<C, 5>(nb, p, a)
}

/// 16 rows × `C` tokens, a grid i-quant in the tiled order (packed by [`pack_iq`]).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn panel_iq<const C: usize>(nb: usize, p: *const PackedQ6K, a: [*const u8; C]) -> [__m512; C] {
    panel_biased::<C, 7>(nb, p, a)
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
/// `fma(f32(Σ) · d_w, d_a, sum)`, Σ = Σ_g sc_g·Σ q·y − 2^B·Σ_g sc_g·bsum_g (exact integers;
/// the packed values are the weights plus 2^B: 32 for Q6_K, 128 for the grid i-quants).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn panel_biased<const C: usize, const B: u32>(nb: usize, p: *const PackedQ6K, a: [*const u8; C]) -> [__m512; C] {
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
            let tot = _mm512_sub_epi32(tot[t], _mm512_slli_epi32::<B>(c));
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
pub(super) unsafe fn put(v: &[__m512], t0: usize, r0: usize, n_rows: usize, out: &mut [f32], os: usize) {
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
    ($($run:ident: $packed:ty, $wts:expr, $pack:ident, $panel:ident, $fallback:expr, $bk:expr, $abytes:expr;)*) => {$(
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
            let nb = (n / $bk).min(w_last / $wts).min(a_last / $abytes);
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
                            // the rows' blocks PF_BLOCKS ahead on their way to L1 (16 strided
                            // streams: the hardware prefetchers leave the first loads waiting)
                            if i + PF_BLOCKS < nb {
                                let ahead = w.as_ptr().add(r0 * ws + $wts * (i + PF_BLOCKS));
                                for r in 0..n_rows {
                                    _mm_prefetch::<_MM_HINT_T0>(ahead.add(r * ws) as *const i8);
                                    _mm_prefetch::<_MM_HINT_T0>(ahead.add(r * ws + $wts - 1) as *const i8);
                                }
                            }
                            $pack(w.as_ptr().add(r0 * ws + $wts * i), ws, idx, mask, pk.add(i));
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

pub(super) use packed_tile;

packed_tile! {
    run_q4_k_gemm_packed: PackedQ4K, Q4_K_BYTES, pack_q4_k, panel_q4_k, super::avx512::Q4_K_GEMM_ROWWISE_VNNI, QK_K, Q8_K_BYTES;
    run_q6_k_tiled_packed: PackedQ6K, Q6_K_BYTES, pack_q6_k, panel_q6_k, super::avx512::Q6_K_TILED_ROWWISE_VNNI, QK_K, Q8_K_BYTES;
}

iq_packers! {
    pack_iq2_xxs => unpack_iq2_xxs;
    pack_iq2_xs => unpack_iq2_xs;
    pack_iq2_s => unpack_iq2_s;
    pack_iq3_xxs => unpack_iq3_xxs;
    pack_iq3_s => unpack_iq3_s;
    pack_iq1_s => unpack_iq1_s;
    pack_iq1_m => unpack_iq1_m;
}

/// `TileFn`s of the grid i-quants over their AVX2 multi-row kernels: the `vec_dot` order
/// (`$vec`) and the tiled one (`$tiled`, the packed kernels' fallback).
macro_rules! iq_row_tiles {
    ($($vec:ident, $tiled:ident => $ty:ident;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        fn $vec(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            if let (Some(d), Some(f)) = (super::avx2::dot(GgmlType::$ty), super::avx2::dot_rows(GgmlType::$ty)) {
                rows_tile(GgmlType::$ty, (d, f), n, w, ws, rows, a, as_, cols, out, os)
            }
        }
        #[allow(clippy::too_many_arguments)]
        fn $tiled(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            if let (Some(d), Some(f)) = (super::avx2::dot_batch(GgmlType::$ty), super::avx2::dot_batch_rows(GgmlType::$ty)) {
                rows_tile(GgmlType::$ty, (d, f), n, w, ws, rows, a, as_, cols, out, os)
            }
        }
    )*};
}

iq_row_tiles! {
    vec_iq2_xxs, tiled_iq2_xxs => IQ2_XXS;
    vec_iq2_xs, tiled_iq2_xs => IQ2_XS;
    vec_iq2_s, tiled_iq2_s => IQ2_S;
    vec_iq3_xxs, tiled_iq3_xxs => IQ3_XXS;
    vec_iq3_s, tiled_iq3_s => IQ3_S;
    vec_iq1_s, tiled_iq1_s => IQ1_S;
    vec_iq1_m, tiled_iq1_m => IQ1_M;
}

packed_tile! {
    run_iq2_xxs_packed: PackedQ6K, 66, pack_iq2_xxs, panel_iq, tiled_iq2_xxs, QK_K, Q8_K_BYTES;
    run_iq2_xs_packed: PackedQ6K, 74, pack_iq2_xs, panel_iq, tiled_iq2_xs, QK_K, Q8_K_BYTES;
    run_iq2_s_packed: PackedQ6K, 82, pack_iq2_s, panel_iq, tiled_iq2_s, QK_K, Q8_K_BYTES;
    run_iq3_xxs_packed: PackedQ6K, 98, pack_iq3_xxs, panel_iq, tiled_iq3_xxs, QK_K, Q8_K_BYTES;
    run_iq3_s_packed: PackedQ6K, 110, pack_iq3_s, panel_iq, tiled_iq3_s, QK_K, Q8_K_BYTES;
    run_iq1_s_packed: PackedQ6K, 50, pack_iq1_s, panel_iq, tiled_iq1_s, QK_K, Q8_K_BYTES;
    run_iq1_m_packed: PackedQ6K, 56, pack_iq1_m, panel_iq, tiled_iq1_m, QK_K, Q8_K_BYTES;
}

/// The grid i-quants' tile kernel on AVX-512 VNNI machines: the `vec_dot` order through the
/// AVX2 multi-row kernels (decode, fewer than 8 tokens), the tiled order (prefill) in 16-row
/// lane panels; `None` elsewhere (those machines loop over the `DotFn` / `DotRowsFn`).
pub(super) fn iq_kernel(ty: GgmlType) -> Option<TileKernel> {
    if !super::avx512::has_vnni() {
        return None;
    }
    use GgmlType::*;
    let (run, batch): (TileFn, TileFn) = match ty {
        IQ2_XXS => (vec_iq2_xxs, run_iq2_xxs_packed),
        IQ2_XS => (vec_iq2_xs, run_iq2_xs_packed),
        IQ2_S => (vec_iq2_s, run_iq2_s_packed),
        IQ3_XXS => (vec_iq3_xxs, run_iq3_xxs_packed),
        IQ3_S => (vec_iq3_s, run_iq3_s_packed),
        IQ1_S => (vec_iq1_s, run_iq1_s_packed),
        IQ1_M => (vec_iq1_m, run_iq1_m_packed),
        _ => return None,
    };
    Some(TileKernel { run, act_bytes: |n| Q8_K.row_bytes(n), prep: None, packs: true, batch: Some(batch) })
}
