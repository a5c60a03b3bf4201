//! AVX-512 VNNI tile kernels for the 32-element block types (Q8_0, Q5_0, Q4_0, IQ4_NL, Q4_1,
//! Q5_1), and the table of AVX-512 tile kernels (`kernel`).
//!
//! Two blocks per 512-bit register: lanes 0..8 carry block 2p, lanes 8..16 block 2p+1, with
//! the same per-lane integer sums and block scales as the 256-bit single-row kernel
//! (`avx2_q::blocks32` with VNNI, which `dot_fn` hands out). The f32 accumulation follows it
//! too: one 8-lane FMA chain per (row, token), block 2p then block 2p+1 (ggml's order,
//! `scalar::fma_lanes`), or for IQ4_NL the even / odd chain pair summed before the final
//! `hsum`. Every output element is bit-identical to that `DotFn`.
//!
//! Signed weights are made unsigned for `vpdpbusd` by an offset (`q = w + 2^SHIFT`), and the
//! offset is taken back exactly through the accumulator's initial value
//! `-2^SHIFT · Σ(4 activation bytes)` per lane (Σ(q - off)·a = Σ w·a): no per-token sign
//! instructions. That initial value, the activation scales as f32 vectors and the bytes are
//! prepared once per token ([`PAIR`]-byte packed layout, `prep_*`), not once per weight row.
//!
//! Soundness: every `unsafe fn` needs avx512f+bw+vl+vnni (+avx2, fma, f16c); they are reachable
//! only through `kernel`, which checks the CPU first.
use super::blocks::*;
use super::avx2::{fp16, hsum_f32x8, load128, load256, nibbles32, rd_f32};
use super::avx512::{has_avx512, has_vnni};
use super::scalar_k::{e8m0_half, KVALUES_IQ4NL, KVALUES_MXFP4};
use super::tile::{drive, Tile, TileKernel};
use super::GgmlType;
use core::arch::x86_64::*;
use core::ptr::read_unaligned;

/// Bytes of one packed pair of activation blocks (64 elements):
/// `[0, 64)` the 64 i8 values (block 2p, then 2p+1);
/// `[64, 128)` 16 f32: the scale of block 2p ×8, of block 2p+1 ×8;
/// `[128, 192)` signed types: 16 i32, `MAGIC - 2^SHIFT · Σ` of the 4 values of each lane;
/// Q8_1 (Q4_1, Q5_1): f32 `s` of block 2p and 2p+1, then zeros.
/// A missing odd last block is all zeros.
pub(super) const PAIR: usize = 192;

/// Packed bytes of one token of `n` elements.
pub(super) fn packed_bytes(n: usize) -> usize {
    (n / 32).div_ceil(2) * PAIR
}

/// The AVX-512 tile kernel for `ty` (see `tile.rs`), or `None`.
pub(super) fn kernel(ty: GgmlType) -> Option<TileKernel> {
    if !has_avx512() {
        return None;
    }
    if let Some(k) = super::avx512::tile_kernel(ty) {
        return Some(k);
    }
    let (run, prep) = parts(ty)?;
    Some(TileKernel { run, act_bytes: packed_bytes, prep: Some(prep), packs: false, batch: None })
}

/// The VNNI tile kernel of a 32-element type and the preparation of its packed activation
/// layout ([`PAIR`]), or `None` (no VNNI, another type).
pub(super) fn parts(ty: GgmlType) -> Option<(super::tile::TileFn, super::tile::PrepFn)> {
    use GgmlType::*;
    if !has_vnni() {
        return None;
    }
    Some(match ty {
        Q8_0 => (run_q8_0, prep_q8_0::<7>),
        Q5_0 => (run_q5_0, prep_q8_0::<4>),
        Q4_0 => (run_q4_0, prep_q8_0::<3>),
        IQ4_NL => (run_iq4_nl, prep_q8_0::<7>),
        MXFP4 => (run_mxfp4, prep_q8_0::<7>),
        Q4_1 => (run_q4_1, prep_q8_1),
        Q5_1 => (run_q5_1, prep_q8_1),
        _ => return None,
    })
}

/// Register tiles (weight rows × tokens), measured on Sapphire/Emerald Rapids (`tile_shapes`):
/// rows of up to `SHORT_N` elements: 1 × 16 (the weights decoded once per 16 tokens; the
/// activations of 16 tokens stay in L1 and are read as memory operands), 12.0 ns per 640-long
/// Q5_0 dot vs 12.8 for 2 × 6 and 13.9 for 2 × 4; longer rows: 3 × 6 (activations reused from
/// registers by 3 rows: 77 ns per 4096-long dot vs 106 for 1 × 16, whose activations no longer
/// fit in L1). One token: `GEMV_ROWS` row at a time (one sequential stream; see `tile.rs`).
const SHORT_N: usize = 1024;
const COLS: usize = 16;
const GEMV_ROWS: usize = 1;

// ---------------------------------------------------------------- weight blocks

/// A 32-element weight type, two blocks per 512-bit register.
trait BlockZ {
    /// Bytes per block.
    const WTS: usize;
    /// Unsigned values with a minimum `m` (Q4_1, Q5_1: Q8_1 activations, `m·s` term);
    /// otherwise signed values stored as `w + 2^SHIFT`.
    const MIN: bool;
    /// Even / odd blocks in two chains (ggml's AVX2 IQ4_NL); otherwise one chain.
    const PAIRED: bool = false;
    /// Blocks i and i+1: values (u8), `[d_i ×8 | d_(i+1) ×8]`, `m_i`, `m_(i+1)` (0 unless MIN).
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32);
    /// Block i alone: values in lanes 0..8 (the rest zero), `d` broadcast, `m`.
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32);
}

#[inline(always)]
unsafe fn load512(p: *const u8) -> __m512i {
    _mm512_loadu_si512(p as *const _)
}

/// `[d(p) ×8 | d(q) ×8]` from the f16 at `p` and `q` (exact, like F16C / `fp16`).
#[inline(always)]
unsafe fn dvec(p: *const u8, q: *const u8) -> __m512 {
    let x = read_unaligned(p as *const u16) as u32 | (read_unaligned(q as *const u16) as u32) << 16;
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(x as i32));
    _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(v))
}

/// `(d, m)` pairs at `p` and `q` → (`[d(p) ×8 | d(q) ×8]`, m(p), m(q)).
#[inline(always)]
unsafe fn dmvec(p: *const u8, q: *const u8) -> (__m512, f32, f32) {
    let x = read_unaligned(p as *const u32) as u64 | (read_unaligned(q as *const u32) as u64) << 32;
    let v = _mm_cvtph_ps(_mm_cvtsi64_si128(x as i64)); // d_p, m_p, d_q, m_q
    let d = _mm512_permutexvar_ps(_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(v));
    let m = _mm_movehdup_ps(v); // m_p, m_p, m_q, m_q
    (d, _mm_cvtss_f32(m), _mm_cvtss_f32(_mm_movehl_ps(m, m)))
}

/// Nibbles of the 16 bytes at `p` and at `q` → 64 bytes: low / high nibbles of `p` (block
/// elements 0..16, 16..32), then those of `q`.
#[inline(always)]
unsafe fn nib_pair(p: *const u8, q: *const u8) -> __m512i {
    let x = _mm256_broadcastsi128_si256(load128(p));
    let y = _mm256_broadcastsi128_si256(load128(q));
    let z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(x), y); // [p p q q]
    let z = _mm512_mask_srli_epi16::<4>(z, 0xFF00_FF00, z); // [p p>>4 q q>>4]
    _mm512_and_si512(z, _mm512_set1_epi8(0x0f))
}

/// Nibbles of one block (16 bytes at `p`) in lanes 0..8.
#[inline(always)]
unsafe fn nib_one(p: *const u8) -> __m512i {
    _mm512_zextsi256_si512(nibbles32(p))
}

#[inline(always)]
unsafe fn rd_u32(p: *const u8) -> u32 {
    read_unaligned(p as *const u32)
}

/// `v + 16` where the bit of `bits` is set (the fifth bit of Q5_0 / Q5_1).
#[inline(always)]
unsafe fn add_bit5(v: __m512i, bits: u64) -> __m512i {
    _mm512_mask_add_epi8(v, bits, v, _mm512_set1_epi8(16))
}

/// `block_q8_0 { f16 d; i8 qs[32]; }`: q = w + 128
#[allow(non_camel_case_types)]
struct ZQ8_0;
impl BlockZ for ZQ8_0 {
    const WTS: usize = Q8_0_BYTES;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(Q8_0_BYTES * i), w.add(Q8_0_BYTES * i + Q8_0_BYTES));
        let v = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(load256(b0.add(2))), load256(b1.add(2)));
        (_mm512_xor_si512(v, _mm512_set1_epi8(0x80u8 as i8)), dvec(b0, b1), 0.0, 0.0)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(Q8_0_BYTES * i);
        let v = _mm256_xor_si256(load256(b0.add(2)), _mm256_set1_epi8(0x80u8 as i8));
        (_mm512_zextsi256_si512(v), _mm512_set1_ps(fp16(b0)), 0.0)
    }
}

/// `block_q5_0 { f16 d; u32 qh; u8 qs[16]; }`: q = nibble | bit << 4 = w + 16
#[allow(non_camel_case_types)]
struct ZQ5_0;
impl BlockZ for ZQ5_0 {
    const WTS: usize = Q5_0_BYTES;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(Q5_0_BYTES * i), w.add(Q5_0_BYTES * i + Q5_0_BYTES));
        let bits = rd_u32(b0.add(2)) as u64 | (rd_u32(b1.add(2)) as u64) << 32;
        (add_bit5(nib_pair(b0.add(6), b1.add(6)), bits), dvec(b0, b1), 0.0, 0.0)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(Q5_0_BYTES * i);
        (add_bit5(nib_one(b0.add(6)), rd_u32(b0.add(2)) as u64), _mm512_set1_ps(fp16(b0)), 0.0)
    }
}

/// `block_q4_0 { f16 d; u8 qs[16]; }`: q = nibble = w + 8
#[allow(non_camel_case_types)]
struct ZQ4_0;
impl BlockZ for ZQ4_0 {
    const WTS: usize = Q4_0_BYTES;
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(Q4_0_BYTES * i), w.add(Q4_0_BYTES * i + Q4_0_BYTES));
        (nib_pair(b0.add(2), b1.add(2)), dvec(b0, b1), 0.0, 0.0)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(Q4_0_BYTES * i);
        (nib_one(b0.add(2)), _mm512_set1_ps(fp16(b0)), 0.0)
    }
}

/// `block_iq4_nl { f16 d; u8 qs[16]; }`: q = kvalues_iq4nl[code] + 128
#[allow(non_camel_case_types)]
struct ZIQ4_NL;
impl ZIQ4_NL {
    #[inline(always)]
    unsafe fn lut(codes: __m512i) -> __m512i {
        let t = _mm512_broadcast_i32x4(load128(KVALUES_IQ4NL.as_ptr() as *const u8));
        _mm512_shuffle_epi8(_mm512_xor_si512(t, _mm512_set1_epi8(0x80u8 as i8)), codes)
    }
}
impl BlockZ for ZIQ4_NL {
    const WTS: usize = IQ4_NL_BYTES;
    const MIN: bool = false;
    const PAIRED: bool = true;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(IQ4_NL_BYTES * i), w.add(IQ4_NL_BYTES * i + IQ4_NL_BYTES));
        (Self::lut(nib_pair(b0.add(2), b1.add(2))), dvec(b0, b1), 0.0, 0.0)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(IQ4_NL_BYTES * i);
        // lanes 8..16 become lut[0]; the tail step masks them out
        (Self::lut(nib_one(b0.add(2))), _mm512_set1_ps(fp16(b0)), 0.0)
    }
}

/// `block_mxfp4 { u8 e; u8 qs[16]; }`: q = kvalues_mxfp4[code] + 128, d = 2^(e-128)
#[allow(non_camel_case_types)]
struct ZMXFP4;
impl ZMXFP4 {
    #[inline(always)]
    unsafe fn lut(codes: __m512i) -> __m512i {
        let t = _mm512_broadcast_i32x4(load128(KVALUES_MXFP4.as_ptr() as *const u8));
        _mm512_shuffle_epi8(_mm512_xor_si512(t, _mm512_set1_epi8(0x80u8 as i8)), codes)
    }
}
impl BlockZ for ZMXFP4 {
    const WTS: usize = MXFP4_BYTES;
    const MIN: bool = false;
    const PAIRED: bool = true;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(MXFP4_BYTES * i), w.add(MXFP4_BYTES * i + MXFP4_BYTES));
        // [d0 ×8 | d1 ×8] (insertf64x4 is AVX-512F; the f32x8 form needs DQ)
        let d = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
            _mm512_castps_pd(_mm512_set1_ps(e8m0_half(*b0))),
            _mm256_castps_pd(_mm256_set1_ps(e8m0_half(*b1))),
        ));
        (Self::lut(nib_pair(b0.add(1), b1.add(1))), d, 0.0, 0.0)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(MXFP4_BYTES * i);
        // lanes 8..16 become lut[0]; the tail step masks them out
        (Self::lut(nib_one(b0.add(1))), _mm512_set1_ps(e8m0_half(*b0)), 0.0)
    }
}

/// `block_q4_1 { f16 d; f16 m; u8 qs[16]; }`: q = nibble
#[allow(non_camel_case_types)]
struct ZQ4_1;
impl BlockZ for ZQ4_1 {
    const WTS: usize = Q4_1_BYTES;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(Q4_1_BYTES * i), w.add(Q4_1_BYTES * i + Q4_1_BYTES));
        let (d, m0, m1) = dmvec(b0, b1);
        (nib_pair(b0.add(4), b1.add(4)), d, m0, m1)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(Q4_1_BYTES * i);
        (nib_one(b0.add(4)), _mm512_set1_ps(fp16(b0)), fp16(b0.add(2)))
    }
}

/// `block_q5_1 { f16 d; f16 m; u32 qh; u8 qs[16]; }`: q = nibble | bit << 4
#[allow(non_camel_case_types)]
struct ZQ5_1;
impl BlockZ for ZQ5_1 {
    const WTS: usize = Q5_1_BYTES;
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn pair(w: *const u8, i: usize) -> (__m512i, __m512, f32, f32) {
        let (b0, b1) = (w.add(Q5_1_BYTES * i), w.add(Q5_1_BYTES * i + Q5_1_BYTES));
        let (d, m0, m1) = dmvec(b0, b1);
        let bits = rd_u32(b0.add(4)) as u64 | (rd_u32(b1.add(4)) as u64) << 32;
        (add_bit5(nib_pair(b0.add(8), b1.add(8)), bits), d, m0, m1)
    }
    #[inline(always)]
    unsafe fn single(w: *const u8, i: usize) -> (__m512i, __m512, f32) {
        let b0 = w.add(Q5_1_BYTES * i);
        (add_bit5(nib_one(b0.add(8)), rd_u32(b0.add(4)) as u64), _mm512_set1_ps(fp16(b0)), fp16(b0.add(2)))
    }
}

// ---------------------------------------------------------------- the tile body

/// `1.5·2^23` as f32 bits: `f32::from_bits(MAGIC + s) - 1.5·2^23 == s as f32` exactly for
/// |s| < 2^22 (every lane sum here is below 2^17), without `vcvtdq2ps` (port 0 only, which the
/// `vpdpbusd`s already saturate).
const MAGIC: i32 = 0x4B40_0000;
const MAGIC_F: f32 = 12_582_912.0;

/// One block pair of one (row, token): per lane the scale `d_w·d_a` and `f32(Σ w·a)`.
#[inline(always)]
unsafe fn terms<B: BlockZ>(q: __m512i, dw: __m512, ab: *const u8) -> (__m512, __m512) {
    // the packed initial value holds MAGIC + the offset correction; Q8_1 types start at MAGIC
    let init = if B::MIN { _mm512_set1_epi32(MAGIC) } else { load512(ab.add(128)) };
    let s = _mm512_castsi512_ps(_mm512_dpbusd_epi32(init, q, load512(ab)));
    let s = _mm512_sub_ps(s, _mm512_set1_ps(MAGIC_F));
    (_mm512_mul_ps(dw, _mm512_loadu_ps(ab.add(64) as *const f32)), s)
}

#[inline(always)]
unsafe fn hi256(v: __m512) -> __m256 {
    _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)))
}

/// One block pair (`FULL`; else the even block alone) of one (row, token) into its chain:
/// a single 8-lane chain in lanes 0..8 (block 2p, then block 2p+1), or for `PAIRED` types
/// the even / odd chains side by side.
#[inline(always)]
unsafe fn step<B: BlockZ, const FULL: bool>(acc: __m512, q: __m512i, dw: __m512, ab: *const u8) -> __m512 {
    let (scale, s) = terms::<B>(q, dw, ab);
    if B::PAIRED {
        return if FULL { _mm512_fmadd_ps(scale, s, acc) } else { _mm512_mask3_fmadd_ps(scale, s, acc, 0x00FF) };
    }
    let lo = _mm256_fmadd_ps(_mm512_castps512_ps256(scale), _mm512_castps512_ps256(s), _mm512_castps512_ps256(acc));
    let v = if FULL { _mm256_fmadd_ps(hi256(scale), hi256(s), lo) } else { lo };
    _mm512_castps256_ps512(v)
}

/// `RW` weight rows × `C` tokens over `nb` blocks. Callers guarantee the CPU features, `nb`
/// blocks in every `w[r]` and `packed_bytes(32·nb)` bytes in every `a[t]`.
#[inline(always)]
unsafe fn tile32<B: BlockZ, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    let mut acc = [[_mm512_setzero_ps(); C]; RW];
    let mut summs = [[0f32; C]; RW];
    for p in 0..nb / 2 {
        for r in 0..RW {
            if C == 1 {
                // decode streams the weights: one line ahead per block pair and row, spread
                // over the loop instead of bursts that stall on full fill buffers
                let pd = super::tile::pf_dist();
                if pd > 0 {
                    _mm_prefetch::<_MM_HINT_T0>(w[r].wrapping_add(2 * B::WTS * p + pd) as *const i8);
                }
            }
            let (q, dw, m0, m1) = B::pair(w[r], 2 * p);
            for t in 0..C {
                let ab = a[t].add(PAIR * p);
                acc[r][t] = step::<B, true>(acc[r][t], q, dw, ab);
                if B::MIN {
                    summs[r][t] += m0 * rd_f32(ab.add(128));
                    summs[r][t] += m1 * rd_f32(ab.add(132));
                }
            }
        }
    }
    if nb % 2 == 1 {
        // the last block alone goes to the even chain (lanes 0..8), as in `blocks32`
        let p = nb / 2;
        for r in 0..RW {
            let (q, dw, m0) = B::single(w[r], 2 * p);
            for t in 0..C {
                let ab = a[t].add(PAIR * p);
                acc[r][t] = step::<B, false>(acc[r][t], q, dw, ab);
                if B::MIN {
                    summs[r][t] += m0 * rd_f32(ab.add(128));
                }
            }
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            let v = acc[r][t];
            let lo = _mm512_castps512_ps256(v);
            out[r][t] = hsum_f32x8(if B::PAIRED { _mm256_add_ps(lo, hi256(v)) } else { lo });
            if B::MIN {
                out[r][t] += summs[r][t];
            }
        }
    }
    out
}

macro_rules! tiles {
    ($($run:ident, $tile:ident, $kernel:ident => $blk:ident;)*) => {$(
        #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
        unsafe fn $kernel<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            tile32::<$blk, RW, C>(nb, w, a)
        }
        #[allow(non_camel_case_types)]
        struct $tile;
        impl Tile for $tile {
            const BS: usize = 32;
            const WTS: usize = <$blk as BlockZ>::WTS;
            const SELF_PREFETCH: bool = true;
            fn act_blocks(bytes: usize) -> usize {
                bytes / PAIR * 2
            }
            #[inline(always)]
            unsafe fn run<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
                $kernel::<RW, C>(nb, w, a)
            }
        }
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $run(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            if n <= SHORT_N {
                drive::<$tile, 1, COLS, GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)
            } else {
                drive::<$tile, 3, 6, GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)
            }
        }
    )*};
}

// SAFETY (of the generated `unsafe fn`s): see the module's soundness note; `drive` bounds `nb`.
tiles! {
    run_q8_0, TQ8_0, k_q8_0 => ZQ8_0;
    run_q5_0, TQ5_0, k_q5_0 => ZQ5_0;
    run_q4_0, TQ4_0, k_q4_0 => ZQ4_0;
    run_iq4_nl, TIQ4_NL, k_iq4_nl => ZIQ4_NL;
    run_mxfp4, TMXFP4, k_mxfp4 => ZMXFP4;
    run_q4_1, TQ4_1, k_q4_1 => ZQ4_1;
    run_q5_1, TQ5_1, k_q5_1 => ZQ5_1;
}

// ---------------------------------------------------------------- packing activations

/// Q8_0 row (`block_q8_0 { f16 d; i8 qs[32]; }`) → packed pairs, offset `2^SHIFT`.
fn prep_q8_0<const SHIFT: u32>(n: usize, q: &[u8], out: &mut [u8]) {
    let nb = (n / 32).min(q.len() / 34).min(out.len() / PAIR * 2);
    // SAFETY: handed out by `kernel` after the CPU check; reads `nb` blocks of `q`, writes
    // `nb.div_ceil(2)` pairs of `out` (bounded above).
    unsafe { pack::<false, SHIFT>(nb, q.as_ptr(), out.as_mut_ptr()) }
}

/// Q8_1 row (`block_q8_1 { f16 d; f16 s; i8 qs[32]; }`) → packed pairs.
fn prep_q8_1(n: usize, q: &[u8], out: &mut [u8]) {
    let nb = (n / 32).min(q.len() / 36).min(out.len() / PAIR * 2);
    // SAFETY: as `prep_q8_0`.
    unsafe { pack::<true, 0>(nb, q.as_ptr(), out.as_mut_ptr()) }
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
unsafe fn pack<const Q8_1: bool, const SHIFT: u32>(nb: usize, q: *const u8, out: *mut u8) {
    let (ats, qs) = if Q8_1 { (36, 4) } else { (34, 2) };
    for p in 0..nb.div_ceil(2) {
        let b0 = q.add(2 * ats * p);
        let two = 2 * p + 1 < nb;
        let b1 = b0.add(ats);
        let lo = load256(b0.add(qs));
        let v = if two { _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), load256(b1.add(qs))) } else { _mm512_zextsi256_si512(lo) };
        // scales (and Q8_1 sums): f16 pairs → f32
        let h0 = rd_u32(b0) & if Q8_1 { u32::MAX } else { 0xFFFF };
        let h1 = if two { rd_u32(b1) & if Q8_1 { u32::MAX } else { 0xFFFF } } else { 0 };
        let f = _mm_cvtph_ps(_mm_cvtsi64_si128((h0 as u64 | (h1 as u64) << 32) as i64)); // d0 s0 d1 s1
        let d = _mm512_permutexvar_ps(_mm512_set_epi32(2, 2, 2, 2, 2, 2, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_castps128_ps512(f));
        let o = out.add(PAIR * p);
        _mm512_storeu_si512(o as *mut _, v);
        _mm512_storeu_ps(o.add(64) as *mut f32, d);
        if Q8_1 {
            let s = _mm_shuffle_ps::<0b11_11_11_01>(f, _mm_setzero_ps()); // s0 s1 0 0
            _mm512_storeu_ps(o.add(128) as *mut f32, _mm512_zextps128_ps512(s));
        } else {
            let sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), v);
            let corr = _mm512_sub_epi32(_mm512_set1_epi32(MAGIC), _mm512_slli_epi32::<SHIFT>(sums));
            _mm512_storeu_si512(o.add(128) as *mut _, corr);
        }
    }
}

/// Q5_0 and Q8_0 tiles with other register-tile shapes (rows × tokens), for `tile_shapes`.
#[cfg(test)]
#[allow(clippy::type_complexity)]
pub(super) fn shapes() -> Vec<(&'static str, super::tile::TileFn, super::tile::TileFn)> {
    macro_rules! shape {
        ($($name:expr => $rw:expr, $c:expr;)*) => {
            vec![$(($name,
                (|n, w, ws, rows, a, as_, cols, out, os| drive::<TQ5_0, { $rw }, { $c }, GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)) as super::tile::TileFn,
                (|n, w, ws, rows, a, as_, cols, out, os| drive::<TQ8_0, { $rw }, { $c }, GEMV_ROWS>(n, w, ws, rows, a, as_, cols, out, os)) as super::tile::TileFn,
            )),*]
        };
    }
    shape! {
        "1x8" => 1, 8;
        "1x12" => 1, 12;
        "1x16" => 1, 16;
        "2x4" => 2, 4;
        "2x6" => 2, 6;
        "2x8" => 2, 8;
        "3x4" => 3, 4;
        "3x6" => 3, 6;
        "4x4" => 4, 4;
        "4x3" => 4, 3;
    }
}
