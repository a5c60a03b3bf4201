//! AVX2 kernels for the 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL).
//!
//! One weight block is decoded once (`Block32::weights`) and dotted with `C` activation rows
//! (`C` = 1 for `DotFn`, 4 for `DotRowsFn`), for `RW` weight rows (tiles, `avx2_tile.rs`);
//! every (row, token) sees the same operations in the same order, so its result does not
//! depend on `RW` or `C`. Generic over VNNI: `false` here
//! (`maddubs` + `madd`), `true` from `avx512.rs` (256-bit `vpdpbusd`, avx512vnni+vl).
//!
//! No closures in these generic bodies: a closure is compiled without the target features of
//! the function it ends up in, and its intrinsics then stay out-of-line calls (10x slower).
//! Callers (the `#[target_feature]` entry points) guarantee the CPU features and that `nb`
//! blocks are readable from `w` and from every `a[r]`.
use super::blocks::*;
use super::avx2::{bits32, fp16, fp16x2, hsum_f32x8, iq4_values, load256, mul_us8, nibbles32};
use core::arch::x86_64::*;

/// A 32-element weight block type and its activation format (Q8_0, or Q8_1 when `MIN`).
pub(super) trait Block32 {
    /// Weights carry a minimum (Q4_1, Q5_1): unsigned values, Q8_1 activations
    /// `{ f16 d; f16 s; i8 qs[32] }` and an `m·s` term. Otherwise signed values and Q8_0
    /// activations `{ f16 d; i8 qs[32] }`.
    const MIN: bool;
    /// Two accumulator chains (even / odd blocks, summed before the final `hsum`), as ggml's
    /// AVX2 IQ4_NL kernel does; every other type keeps ggml's single chain.
    const PAIRED: bool = false;
    /// Block `i`: the 32 values (i8, or u8 when `MIN`), d and m (0 when not `MIN`).
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32);
}

/// Σ unsigned×signed byte products, 4 bytes per i32 lane; VNNI: one `vpdpbusd`.
#[inline(always)]
pub(super) unsafe fn udot<const VNNI: bool>(ax: __m256i, sy: __m256i) -> __m256i {
    if VNNI {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), ax, sy)
    } else {
        mul_us8(ax, sy)
    }
}

/// Accumulates block `i` of weight row `w` against every token into `acc` / `summs`.
#[inline(always)]
unsafe fn step<B: Block32, const VNNI: bool, const C: usize>(
    w: *const u8,
    a: &[*const u8; C],
    i: usize,
    acc: &mut [__m256; C],
    summs: &mut [f32; C],
) {
    let (qx, dw, mw) = B::weights(w, i);
    // |x| for the unsigned side of maddubs; the sign moves onto the activations
    let ax = if B::MIN { qx } else { _mm256_sign_epi8(qx, qx) };
    for t in 0..C {
        if B::MIN {
            let ab = a[t].add(36 * i);
            let (da, sa) = fp16x2(ab, ab.add(2));
            let p = udot::<VNNI>(ax, load256(ab.add(4)));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * da), _mm256_cvtepi32_ps(p), acc[t]);
            summs[t] += mw * sa;
        } else {
            let ab = a[t].add(34 * i);
            let p = udot::<VNNI>(ax, _mm256_sign_epi8(load256(ab.add(2)), qx));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(dw * fp16(ab)), _mm256_cvtepi32_ps(p), acc[t]);
        }
    }
}

/// Σ over `nb` blocks of d_w·d_a·Σ(w·a) (+ m·s), for each of `RW` weight rows × `C` activation
/// rows (`[r][t]`), in ggml's order (`scalar::fma_lanes`: one FMA chain per (row, token),
/// block after block; two for `PAIRED` types); each (row, token) sees the same operations
/// for any `RW`, `C`.
#[inline(always)]
pub(super) unsafe fn blocks32<B: Block32, const VNNI: bool, const RW: usize, const C: usize>(
    nb: usize,
    w: [*const u8; RW],
    a: [*const u8; C],
) -> [[f32; C]; RW] {
    let mut acc0 = [[_mm256_setzero_ps(); C]; RW];
    let mut acc1 = [[_mm256_setzero_ps(); C]; RW];
    let mut summs = [[0f32; C]; RW];
    let mut i = 0;
    while i + 2 <= nb {
        for r in 0..RW {
            step::<B, VNNI, C>(w[r], &a, i, &mut acc0[r], &mut summs[r]);
            let odd = if B::PAIRED { &mut acc1[r] } else { &mut acc0[r] };
            step::<B, VNNI, C>(w[r], &a, i + 1, odd, &mut summs[r]);
        }
        i += 2;
    }
    if i < nb {
        for r in 0..RW {
            step::<B, VNNI, C>(w[r], &a, i, &mut acc0[r], &mut summs[r]);
        }
    }
    let mut out = [[0f32; C]; RW];
    for r in 0..RW {
        for t in 0..C {
            let v = if B::PAIRED { _mm256_add_ps(acc0[r][t], acc1[r][t]) } else { acc0[r][t] };
            out[r][t] = hsum_f32x8(v);
            if B::MIN {
                out[r][t] += summs[r][t];
            }
        }
    }
    out
}

/// `block_q8_0 { f16 d; i8 qs[32]; }`
#[allow(non_camel_case_types)]
pub(super) struct BQ8_0;

impl Block32 for BQ8_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q8_0_BYTES * i);
        (load256(wb.add(2)), fp16(wb), 0.0)
    }
}

/// `block_q4_0 { f16 d; u8 qs[16]; }`: nibble - 8
#[allow(non_camel_case_types)]
pub(super) struct BQ4_0;

impl Block32 for BQ4_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q4_0_BYTES * i);
        (_mm256_sub_epi8(nibbles32(wb.add(2)), _mm256_set1_epi8(8)), fp16(wb), 0.0)
    }
}

/// `block_q4_1 { f16 d; f16 m; u8 qs[16]; }`: d·nibble + m
#[allow(non_camel_case_types)]
pub(super) struct BQ4_1;

impl Block32 for BQ4_1 {
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q4_1_BYTES * i);
        let (d, m) = fp16x2(wb, wb.add(2));
        (nibbles32(wb.add(4)), d, m)
    }
}

/// `block_q5_0 { f16 d; u32 qh; u8 qs[16]; }`: (nibble | bit<<4) - 16, formed as
/// nibble | (bit ? 0 : 0xF0) in i8.
#[allow(non_camel_case_types)]
pub(super) struct BQ5_0;

impl Block32 for BQ5_0 {
    const MIN: bool = false;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q5_0_BYTES * i);
        let hi = _mm256_andnot_si256(bits32(wb.add(2)), _mm256_set1_epi8(0xF0u8 as i8));
        (_mm256_or_si256(nibbles32(wb.add(6)), hi), fp16(wb), 0.0)
    }
}

/// `block_q5_1 { f16 d; f16 m; u32 qh; u8 qs[16]; }`: d·(nibble | bit<<4) + m
#[allow(non_camel_case_types)]
pub(super) struct BQ5_1;

impl Block32 for BQ5_1 {
    const MIN: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(Q5_1_BYTES * i);
        let (d, m) = fp16x2(wb, wb.add(2));
        let hi = _mm256_and_si256(bits32(wb.add(4)), _mm256_set1_epi8(0x10));
        (_mm256_or_si256(nibbles32(wb.add(8)), hi), d, m)
    }
}

/// `block_iq4_nl { f16 d; u8 qs[16]; }`: `kvalues_iq4nl[code]`
#[allow(non_camel_case_types)]
pub(super) struct BIQ4_NL;

impl Block32 for BIQ4_NL {
    const MIN: bool = false;
    const PAIRED: bool = true;
    #[inline(always)]
    unsafe fn weights(w: *const u8, i: usize) -> (__m256i, f32, f32) {
        let wb = w.add(IQ4_NL_BYTES * i);
        (iq4_values(wb.add(2)), fp16(wb), 0.0)
    }
}

macro_rules! entry_points {
    ($($kernel:ident => $blk:ident;)*) => {$(
        #[target_feature(enable = "avx2,fma,f16c")]
        pub(super) unsafe fn $kernel<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
            blocks32::<$blk, false, RW, C>(nb, w, a)
        }
    )*};
}

entry_points! {
    q8_0_q8_0 => BQ8_0;
    q4_0_q8_0 => BQ4_0;
    q4_1_q8_1 => BQ4_1;
    q5_0_q8_0 => BQ5_0;
    q5_1_q8_1 => BQ5_1;
    iq4_nl_q8_0 => BIQ4_NL;
}
