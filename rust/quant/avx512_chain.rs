//! The 32-element block types (Q4_0, IQ4_NL, MXFP4, Q5_0, Q8_0) in the block-chain order,
//! `fma(f32(Σ block), d_w·d_a, acc)` per output ([`scalar::dot_chain`]), for prefill on
//! AVX-512 VNNI machines: 16 weight rows in the 16 lanes of each vector, as the K-quant panels
//! of `avx512_packed` hold them.
//!
//! A panel's block is repacked (per matmul call, into a thread's scratch buffer) into eight
//! vectors whose lane r holds 4 signed values of row r, the rows' `d` as f32 lanes, and
//! `-128·Σ values` per lane. The activations stay Q8_0 rows: 4 bytes broadcast to every lane,
//! made unsigned by flipping their sign bit (`a + 128`), so that `vpdpbusd` sums
//! `(a + 128)·w` and the accumulator's initial `-128·Σ w` takes the offset back exactly. Each
//! block then costs 8 `vpdpbusd`, one conversion, one scale product and one FMA for 16 rows
//! of a token, where the `vec_dot` order spends a product, a conversion and an FMA on 8 lanes
//! of every (row, token) pair.
//!
//! For Q4_0, IQ4_NL and MXFP4 this is llama.cpp's own order (its repacked `*_8x8` kernels,
//! `quant::row_chain`, `LLAMARS_EXACT=1`); for Q5_0 and Q8_0 it is llamars' fast mode
//! (`quant::Exactness::Fast`, `LLAMARS_EXACT=0`), whose results differ from llama.cpp's in the last bits.
//! Fewer than [`PANEL_TOKENS`] tokens go through the AVX2 row kernels (the repack would not pay):
//! the chain order for the first three types, ggml's `vec_dot` order for Q5_0 / Q8_0.
//!
//! [`scalar::dot_chain`]: super::scalar::dot_chain
use super::avx512_packed::{packed_tile, put, Line, P, PF_BLOCKS, SCRATCH};
use super::avx512_tile::PAIR;
use super::blocks::*;
use super::scalar_k::{KVALUES_IQ4NL, KVALUES_MXFP4};
use super::tile::{TileFn, TileKernel};
use super::GgmlType;
use core::arch::x86_64::*;

pub(super) use super::PANEL_TOKENS;
/// Tokens sharing each loaded weight vector.
const T: usize = 4;

/// One 32-element block of 16 rows: `q[k]` lane r holds row r's values 4k..4k+4 (signed
/// bytes), `bias` lane r is `-128·Σ` of row r's 32 values, `d` its scale.
#[repr(C, align(64))]
pub(super) struct Packed32 {
    q: [__m512i; 8],
    bias: __m512i,
    d: __m512,
}

/// 4 bytes at `off` of the block at `b` in each of the masked rows (`idx`: row offsets).
#[inline(always)]
unsafe fn gather(b: *const u8, off: usize, idx: __m512i, mask: __mmask16) -> __m512i {
    _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), mask, idx, b.add(off) as *const i32)
}

/// The f16 in bits 0..16 of each lane, as f32.
#[inline(always)]
unsafe fn f16_lanes(v: __m512i) -> __m512 {
    _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v))
}

/// The low (`HI`: high) nibbles of each byte.
#[inline(always)]
unsafe fn nib<const HI: bool>(v: __m512i) -> __m512i {
    let v = if HI { _mm512_srli_epi32::<4>(v) } else { v };
    _mm512_and_si512(v, _mm512_set1_epi8(0x0f))
}

/// `bias` and the stores of `q` once its 8 vectors are decoded.
#[inline(always)]
unsafe fn finish(p: &mut Packed32, q: [__m512i; 8], d: __m512) {
    let ones = _mm512_set1_epi8(1);
    let mut s = _mm512_setzero_si512();
    for (k, v) in q.into_iter().enumerate() {
        s = _mm512_dpbusd_epi32(s, ones, v);
        p.q[k] = v;
    }
    p.bias = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32::<7>(s));
    p.d = d;
}

/// 4-bit codes through a 16-entry table (each 128-bit lane holds the table).
#[inline(always)]
unsafe fn nl_pack(b: *const u8, idx: __m512i, mask: __mmask16, p: *mut Packed32, qs: usize, table: &[i8; 16], d: __m512) {
    let tab = _mm512_broadcast_i32x4(_mm_loadu_si128(table.as_ptr() as *const __m128i));
    let mut q = [_mm512_setzero_si512(); 8];
    for k in 0..4 {
        let v = gather(b, qs + 4 * k, idx, mask);
        q[k] = _mm512_shuffle_epi8(tab, nib::<false>(v));
        q[4 + k] = _mm512_shuffle_epi8(tab, nib::<true>(v));
    }
    finish(&mut *p, q, d)
}

#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_q8_0(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut Packed32) {
    let q: [__m512i; 8] = core::array::from_fn(|k| gather(b, 2 + 4 * k, idx, mask));
    finish(&mut *p, q, f16_lanes(gather(b, 0, idx, mask)))
}

/// `block_q4_0 { f16 d; u8 qs[16]; }`: element j the low nibble of qs[j], j + 16 the high one, minus 8.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_q4_0(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut Packed32) {
    let eight = _mm512_set1_epi8(8);
    let mut q = [_mm512_setzero_si512(); 8];
    for k in 0..4 {
        let v = gather(b, 2 + 4 * k, idx, mask);
        q[k] = _mm512_sub_epi8(nib::<false>(v), eight);
        q[4 + k] = _mm512_sub_epi8(nib::<true>(v), eight);
    }
    finish(&mut *p, q, f16_lanes(gather(b, 0, idx, mask)))
}

/// `block_q5_0 { f16 d; u32 qh; u8 qs[16]; }`: as Q4_0 with bit j of qh as the fifth bit of
/// element j, minus 16.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_q5_0(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut Packed32) {
    let qh = gather(b, 2, idx, mask);
    // byte 0 of each lane copied to its 4 bytes, byte i then tested against bit i
    let first = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
    let bit = _mm512_set1_epi32(0x0804_0201);
    let (h16, sixteen) = (_mm512_set1_epi8(0x10), _mm512_set1_epi8(16));
    let mut q = [_mm512_setzero_si512(); 8];
    for k in 0..4 {
        let v = gather(b, 6 + 4 * k, idx, mask);
        for (half, lo) in [(0usize, nib::<false>(v)), (1, nib::<true>(v))] {
            let e = 16 * half + 4 * k;
            let hb = _mm512_shuffle_epi8(_mm512_srl_epi32(qh, _mm_cvtsi32_si128(e as i32)), first);
            let m = _mm512_test_epi8_mask(hb, bit);
            q[4 * half + k] = _mm512_sub_epi8(_mm512_mask_add_epi8(lo, m, lo, h16), sixteen);
        }
    }
    finish(&mut *p, q, f16_lanes(gather(b, 0, idx, mask)))
}

/// `block_iq4_nl { f16 d; u8 qs[16]; }`: Q4_0's nibbles through `kvalues_iq4nl`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_iq4_nl(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut Packed32) {
    nl_pack(b, idx, mask, p, 2, &KVALUES_IQ4NL, f16_lanes(gather(b, 0, idx, mask)))
}

/// `block_mxfp4 { u8 e; u8 qs[16]; }`: the nibbles through `kvalues_mxfp4`, `d` = 2^(e-128)
/// (ggml's `ggml_e8m0_to_fp32_half`, `scalar_k::e8m0_half`).
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn pack_mxfp4(b: *const u8, _ws: usize, idx: __m512i, mask: __mmask16, p: *mut Packed32) {
    let e = _mm512_and_si512(gather(b, 0, idx, mask), _mm512_set1_epi32(0xff));
    let normal = _mm512_slli_epi32::<23>(_mm512_sub_epi32(e, _mm512_set1_epi32(1)));
    let tiny = _mm512_sllv_epi32(_mm512_set1_epi32(0x0020_0000), e);
    let d = _mm512_castsi512_ps(_mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2)), normal, tiny));
    nl_pack(b, idx, mask, p, 1, &KVALUES_MXFP4, d)
}

#[inline(always)]
unsafe fn bcast(p: *const u8) -> __m512i {
    _mm512_set1_epi32(core::ptr::read_unaligned(p as *const i32))
}

/// Where block `i`'s 32 activation bytes and its scale lie in a token's row: Q8_0 blocks
/// (`PAIRED = false`: `f16 d` then the bytes) or `avx512_tile`'s packed pairs (`true`: the
/// bytes of blocks 2p, 2p+1 at 0 and 32 of pair p, their f32 scales at 64 and 96).
#[inline(always)]
unsafe fn act<const PAIRED: bool>(a: *const u8, i: usize) -> (*const u8, __m512) {
    if PAIRED {
        let b = a.add(PAIR * (i / 2) + 32 * (i % 2));
        (b, _mm512_set1_ps(core::ptr::read_unaligned(b.add(64) as *const f32)))
    } else {
        let b = a.add(Q8_0_BYTES * i);
        (b.add(2), _mm512_broadcastss_ps(_mm_cvtph_ps(_mm_cvtsi32_si128(core::ptr::read_unaligned(b as *const u16) as i32))))
    }
}

/// 16 rows × `C` tokens: per block and lane, `fma(f32(Σ), d_w·d_a, acc)`.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn panel<const C: usize, const PAIRED: bool>(nb: usize, p: *const Packed32, a: [*const u8; C]) -> [__m512; C] {
    let flip = _mm512_set1_epi8(-128);
    let mut acc = [_mm512_setzero_ps(); C];
    for i in 0..nb {
        let pk = &*p.add(i);
        let mut ab = [core::ptr::null::<u8>(); C];
        let mut da = [_mm512_setzero_ps(); C];
        for t in 0..C {
            (ab[t], da[t]) = act::<PAIRED>(a[t], i);
        }
        let mut s = [pk.bias; C];
        for k in 0..8 {
            let wq = pk.q[k];
            for t in 0..C {
                s[t] = _mm512_dpbusd_epi32(s[t], _mm512_xor_si512(bcast(ab[t].add(4 * k)), flip), wq);
            }
        }
        for t in 0..C {
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), _mm512_mul_ps(pk.d, da[t]), acc[t]);
        }
    }
    acc
}

/// [`panel`] over Q8_0 activation rows.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn panel_q8<const C: usize>(nb: usize, p: *const Packed32, a: [*const u8; C]) -> [__m512; C] {
    panel::<C, false>(nb, p, a)
}

/// [`panel`] over `avx512_tile`'s packed pairs.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c")]
unsafe fn panel_pairs<const C: usize>(nb: usize, p: *const Packed32, a: [*const u8; C]) -> [__m512; C] {
    panel::<C, true>(nb, p, a)
}

/// Every element through a `DotFn` (the panels' fallback for rows too far apart for 32-bit
/// gather offsets), within the tile contract's bounds.
#[allow(clippy::too_many_arguments)]
fn each_dot(dot: super::DotFn, n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    for t in 0..cols {
        for r in 0..rows {
            if let (Some(wr), Some(at), Some(o)) = (w.get(r * ws..), a.get(t * as_..), out.get_mut(t * os + r)) {
                *o = dot(n, wr, at);
            }
        }
    }
}

macro_rules! fallbacks {
    ($each:ident: $($name:ident => $dot:path;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        fn $name(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            $each($dot, n, w, ws, rows, a, as_, cols, out, os)
        }
    )*};
}

fallbacks! { each_dot:
    chain_q4_0 => super::scalar::dot_q4_0_q8_0_chain;
    chain_iq4_nl => super::scalar_k::dot_iq4_nl_q8_0_chain;
    chain_mxfp4 => super::scalar_k::dot_mxfp4_q8_0_chain;
}

fallbacks! { each_dot_pairs:
    pairs_q4_0 => super::scalar::dot_q4_0_q8_0_chain;
    pairs_iq4_nl => super::scalar_k::dot_iq4_nl_q8_0_chain;
    pairs_mxfp4 => super::scalar_k::dot_mxfp4_q8_0_chain;
    pairs_q5_0 => super::scalar_k::dot_q5_0_q8_0_chain;
    pairs_q8_0 => super::scalar_k::dot_q8_0_q8_0_chain;
}

/// Fallbacks for the packed-pair layout: the element's bytes and scale as a Q8_0 row first.
#[allow(clippy::too_many_arguments)]
fn each_dot_pairs(dot: super::DotFn, n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
    let nb = n / QK;
    let mut q = vec![0u8; nb * Q8_0_BYTES];
    for t in 0..cols {
        let Some(at) = a.get(t * as_..) else { continue };
        let nbt = nb.min(at.len() / (PAIR / 2));
        for (i, qb) in q.chunks_exact_mut(Q8_0_BYTES).take(nbt).enumerate() {
            let b = &at[PAIR * (i / 2) + 32 * (i % 2)..];
            let d = f32::from_le_bytes([b[64], b[65], b[66], b[67]]);
            qb[..2].copy_from_slice(&super::f16::f32_to_f16(d).to_le_bytes());
            qb[2..].copy_from_slice(&b[..32]);
        }
        for r in 0..rows {
            if let (Some(wr), Some(o)) = (w.get(r * ws..), out.get_mut(t * os + r)) {
                *o = dot(nbt * QK, wr, &q[..nbt * Q8_0_BYTES]);
            }
        }
    }
}

// over Q8_0 activation rows (the chain order throughout: `kernel_chain`)
packed_tile! {
    panels_q4_0: Packed32, Q4_0_BYTES, pack_q4_0, panel_q8, chain_q4_0, QK, Q8_0_BYTES;
    panels_iq4_nl: Packed32, IQ4_NL_BYTES, pack_iq4_nl, panel_q8, chain_iq4_nl, QK, Q8_0_BYTES;
    panels_mxfp4: Packed32, MXFP4_BYTES, pack_mxfp4, panel_q8, chain_mxfp4, QK, Q8_0_BYTES;
}

// over `avx512_tile`'s packed pairs (`kernel_prefill`, whose fewer tokens go to that kernel)
packed_tile! {
    pair_panels_q4_0: Packed32, Q4_0_BYTES, pack_q4_0, panel_pairs, pairs_q4_0, QK, PAIR / 2;
    pair_panels_iq4_nl: Packed32, IQ4_NL_BYTES, pack_iq4_nl, panel_pairs, pairs_iq4_nl, QK, PAIR / 2;
    pair_panels_mxfp4: Packed32, MXFP4_BYTES, pack_mxfp4, panel_pairs, pairs_mxfp4, QK, PAIR / 2;
    pair_panels_q5_0: Packed32, Q5_0_BYTES, pack_q5_0, panel_pairs, pairs_q5_0, QK, PAIR / 2;
    pair_panels_q8_0: Packed32, Q8_0_BYTES, pack_q8_0, panel_pairs, pairs_q8_0, QK, PAIR / 2;
}

/// `TileFn`s: the panels from `PANEL_TOKENS` tokens, a row kernel below.
macro_rules! by_tokens {
    ($($name:ident => $panels:ident, $rows:path;)*) => {$(
        #[allow(clippy::too_many_arguments)]
        fn $name(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            if cols >= PANEL_TOKENS {
                $panels(n, w, ws, rows, a, as_, cols, out, os)
            } else {
                $rows(n, w, ws, rows, a, as_, cols, out, os)
            }
        }
    )*};
}

by_tokens! {
    // the chain order throughout (`quant::row_chain`), fewer tokens in the AVX2 chain kernels
    chain_all_q4_0 => panels_q4_0, super::avx2_tile::run_q4_0x8;
    chain_all_iq4_nl => panels_iq4_nl, super::avx2_tile::run_iq4_nlx8;
    chain_all_mxfp4 => panels_mxfp4, super::avx2_tile::run_mxfp4x8;
    // the chain order for prefill, ggml's `vec_dot` order (`avx512_tile`) for fewer tokens
    prefill_q4_0 => pair_panels_q4_0, super::avx512_tile::run_q4_0;
    prefill_iq4_nl => pair_panels_iq4_nl, super::avx512_tile::run_iq4_nl;
    prefill_mxfp4 => pair_panels_mxfp4, super::avx512_tile::run_mxfp4;
    prefill_q5_0 => pair_panels_q5_0, super::avx512_tile::run_q5_0;
    prefill_q8_0 => pair_panels_q8_0, super::avx512_tile::run_q8_0;
}

/// The chain order for every token count (`quant::row_chain`: Q4_0, IQ4_NL, MXFP4), or `None`.
pub(super) fn kernel_chain(ty: GgmlType) -> Option<TileKernel> {
    let run: TileFn = match ty {
        GgmlType::Q4_0 => chain_all_q4_0,
        GgmlType::IQ4_NL => chain_all_iq4_nl,
        GgmlType::MXFP4 => chain_all_mxfp4,
        _ => return None,
    };
    super::avx512::has_vnni().then_some(TileKernel { run, act_bytes: |n| GgmlType::Q8_0.row_bytes(n), prep: None, packs: true, batch: None })
}

/// The chain order from `PANEL_TOKENS` tokens and ggml's `vec_dot` order below (Q4_0, IQ4_NL,
/// MXFP4: llama.cpp's bits for prefill; Q5_0, Q8_0: the fast mode), over `avx512_tile`'s
/// activation layout, or `None`.
pub(super) fn kernel_prefill(ty: GgmlType) -> Option<TileKernel> {
    let run: TileFn = match ty {
        GgmlType::Q4_0 => prefill_q4_0,
        GgmlType::IQ4_NL => prefill_iq4_nl,
        GgmlType::MXFP4 => prefill_mxfp4,
        GgmlType::Q5_0 => prefill_q5_0,
        GgmlType::Q8_0 => prefill_q8_0,
        _ => return None,
    };
    let (_, prep) = super::avx512_tile::parts(ty)?;
    Some(TileKernel { run, act_bytes: super::avx512_tile::packed_bytes, prep: Some(prep), packs: true, batch: None })
}

/// The panels' fallbacks (rows too far apart for gathers) of `kernel_prefill(ty)` and
/// `kernel_chain(ty)`, for the tests.
#[cfg(test)]
pub(super) fn fallbacks(ty: GgmlType) -> (TileFn, Option<TileFn>) {
    match ty {
        GgmlType::Q4_0 => (pairs_q4_0, Some(chain_q4_0)),
        GgmlType::IQ4_NL => (pairs_iq4_nl, Some(chain_iq4_nl)),
        GgmlType::MXFP4 => (pairs_mxfp4, Some(chain_mxfp4)),
        GgmlType::Q5_0 => (pairs_q5_0, None),
        _ => (pairs_q8_0, None),
    }
}
