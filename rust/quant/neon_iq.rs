//! NEON dot kernels (against block_q8_K activations) for the grid i-quants IQ2_XXS, IQ2_XS,
//! IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M and the ternary TQ1_0, TQ2_0.
//!
//! Per 32 elements the block's values are assembled as two vectors of signed bytes — grid
//! magnitudes (u64 / u32 loads from the tables of `iquant.rs` / `iquant1.rs`) times ±1
//! sign bytes (ggml's `keven_signs` table, or 32 sign bits spread to bytes); IQ1's
//! `8 · grid ± 1`; the ternary digits minus one — and multiplied with the activations by
//! `vmull_s8` + `vpaddlq_s16` (no dotprod extension needed), weighted by the odd
//! multipliers of each 16 elements into one i32 vector per superblock. Integer sums are
//! exact (|value| ≤ 62 or ≤ 9, activations in [-127, 127]); per superblock
//! `d_w · d_a · Σ` in f32, then the type's factor (`iquant::factor`, 1/8 for IQ1): the
//! order of ggml's NEON kernels, which differs from `scalar.rs` / ggml's x86 order only in
//! the f32 rounding (the tests bound it).
//!
//! Callers (`neon.rs` wrappers) guarantee that `nb` blocks are readable from `w` and `a`.
use super::blocks::{Q8_K_BYTES, Q8_K_QS};
use super::iquant::{grid4, grid8, rd_u16 as u16_at, rd_u32 as u32_at, IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS, KSIGN_BYTES};
use super::iquant1::IQ1S;
use super::neon::{dot_s8, fp16, ld_s8, rd_f32};
use core::arch::aarch64::*;

pub(super) const IQ2_XXS: u8 = 0;
pub(super) const IQ2_XS: u8 = 1;
pub(super) const IQ2_S: u8 = 2;
pub(super) const IQ3_XXS: u8 = 3;
pub(super) const IQ3_S: u8 = 4;
pub(super) const IQ1_S: u8 = 5;
pub(super) const IQ1_M: u8 = 6;

#[inline(always)]
unsafe fn bytes2(lo: u64, hi: u64) -> int8x16_t {
    vcombine_s8(vcreate_s8(lo), vcreate_s8(hi))
}

/// Row `i` of an 8-byte grid as the lane bits `vcreate_s8` takes.
#[inline(always)]
unsafe fn g8(grid: &[u8], i: usize) -> u64 {
    grid8(grid, i) as u64
}

/// 16 bytes from four IQ3 grid entries.
#[inline(always)]
unsafe fn g4x4(grid: &[u8], gi: impl Fn(usize) -> usize) -> int8x16_t {
    let v = [gi(0), gi(1), gi(2), gi(3)].map(|i| grid4(grid, i) as u32);
    vreinterpretq_s8_u32(vld1q_u32(v.as_ptr()))
}

/// ±1 bytes of the two groups of 8 whose 7-bit sign indices are `i0`, `i1`.
#[inline(always)]
unsafe fn ksigns2(i0: u32, i1: u32) -> int8x16_t {
    bytes2(KSIGN_BYTES[(i0 & 127) as usize] as u64, KSIGN_BYTES[(i1 & 127) as usize] as u64)
}

static BIT_MASK: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

/// ±1 bytes from the 16 sign bits at `p` (bit j set: byte j is -1).
#[inline(always)]
unsafe fn sign_bits16(p: *const u8) -> int8x16_t {
    let v = vcombine_u8(vdup_n_u8(*p), vdup_n_u8(*p.add(1)));
    let set = vtstq_u8(v, vld1q_u8(BIT_MASK.as_ptr()));
    vreinterpretq_s8_u8(vorrq_u8(set, vdupq_n_u8(1)))
}

/// Chunk `c` (elements 32c..32c+32) of a sign-grid block of `T`: its two halves as signed
/// bytes and their odd multipliers.
#[inline(always)]
unsafe fn chunk<const T: u8>(b: *const u8, c: usize) -> (int8x16_t, int8x16_t, i32, i32) {
    let odd = |ls: u32| (2 * (ls & 15) + 1) as i32;
    let (mag0, mag1, s0, s1, m0, m1) = match T {
        IQ2_XXS => {
            let (g, s) = (u32_at(b.add(2 + 8 * c)), u32_at(b.add(6 + 8 * c)));
            let e = |l: u32| g8(IQ2XXS, ((g >> (8 * l)) & 255) as usize);
            (bytes2(e(0), e(1)), bytes2(e(2), e(3)), ksigns2(s, s >> 7), ksigns2(s >> 14, s >> 21), odd(s >> 28), odd(s >> 28))
        }
        IQ2_XS => {
            let q = |l: usize| u16_at(b.add(2 + 8 * c + 2 * l));
            let e = |l: usize| g8(IQ2XS, (q(l) & 511) as usize);
            let sc = *b.add(66 + c) as u32;
            let s = |l: usize| q(l) >> 9;
            (bytes2(e(0), e(1)), bytes2(e(2), e(3)), ksigns2(s(0), s(1)), ksigns2(s(2), s(3)), odd(sc), odd(sc >> 4))
        }
        IQ2_S => {
            let qh = *b.add(66 + c) as usize;
            let e = |l: usize| g8(IQ2S, *b.add(2 + 4 * c + l) as usize | (((qh >> (2 * l)) & 3) << 8));
            let sc = *b.add(74 + c) as u32;
            let signs = b.add(34 + 4 * c);
            (bytes2(e(0), e(1)), bytes2(e(2), e(3)), sign_bits16(signs), sign_bits16(signs.add(2)), odd(sc), odd(sc >> 4))
        }
        IQ3_XXS => {
            let s = u32_at(b.add(66 + 4 * c));
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize;
            let m = odd(s >> 28);
            (g4x4(IQ3XXS, gi), g4x4(IQ3XXS, |i| gi(i + 4)), ksigns2(s, s >> 7), ksigns2(s >> 14, s >> 21), m, m)
        }
        _ => {
            // IQ3_S
            let qh = *b.add(66 + c) as usize;
            let gi = |i: usize| *b.add(2 + 8 * c + i) as usize | (((qh >> i) & 1) << 8);
            let m = odd((*b.add(106 + c / 2) as u32) >> (4 * (c % 2)));
            let signs = b.add(74 + 4 * c);
            (g4x4(IQ3S, gi), g4x4(IQ3S, |i| gi(i + 4)), sign_bits16(signs), sign_bits16(signs.add(2)), m, m)
        }
    };
    (vmulq_s8(mag0, s0), vmulq_s8(mag1, s1), m0, m1)
}

/// Chunk `ib` of an IQ1_S / IQ1_M block: `8 · grid + shift sign` per element (two halves)
/// and the multipliers of the halves.
#[inline(always)]
unsafe fn chunk1<const T: u8>(b: *const u8, ib: usize) -> (int8x16_t, int8x16_t, i32, i32) {
    let one = 0x0101_0101_0101_0101u64;
    let (e, delta, m0, m1): ([u64; 4], [u64; 4], i32, i32) = if T == IQ1_S {
        let qh = u16_at(b.add(34 + 2 * ib)) as usize;
        let e = core::array::from_fn(|l| g8(IQ1S, *b.add(2 + 4 * ib + l) as usize | (((qh >> (3 * l)) & 7) << 8)));
        let m = (2 * ((qh >> 12) & 7) + 1) as i32;
        (e, [if qh & 0x8000 != 0 { u64::MAX } else { one }; 4], m, m)
    } else {
        let h = |l: usize| (*b.add(32 + 2 * ib + l / 2) >> (4 * (l % 2))) as usize;
        let e = core::array::from_fn(|l| g8(IQ1S, *b.add(4 * ib + l) as usize | ((h(l) & 7) << 8)));
        let delta = core::array::from_fn(|l| if h(l) & 8 != 0 { u64::MAX } else { one });
        let sc = u16_at(b.add(48 + 2 * (ib / 2)));
        let m = |k: u32| (2 * ((sc >> (6 * (ib as u32 % 2) + 3 * k)) & 7) + 1) as i32;
        (e, delta, m(0), m(1))
    };
    let half = |k: usize| vaddq_s8(vshlq_n_s8::<3>(bytes2(e[2 * k], e[2 * k + 1])), bytes2(delta[2 * k], delta[2 * k + 1]));
    (half(0), half(1), m0, m1)
}

/// The f32 scale of an IQ1_S / IQ1_M block.
#[inline(always)]
unsafe fn d1<const T: u8>(b: *const u8) -> f32 {
    super::iquant1::block_d(T == IQ1_S, b)
}

/// Σ over a superblock of `mult · value · q8`, the values of chunk `c` from `chunk(c)`.
#[inline(always)]
unsafe fn block_sum(ab: *const u8, chunk: impl Fn(usize) -> (int8x16_t, int8x16_t, i32, i32)) -> i32 {
    let mut acc = vdupq_n_s32(0);
    for c in 0..8 {
        let (v0, v1, m0, m1) = chunk(c);
        let q = ab.add(Q8_K_QS + 32 * c);
        acc = vmlaq_n_s32(acc, dot_s8(v0, ld_s8(q)), m0);
        acc = vmlaq_n_s32(acc, dot_s8(v1, ld_s8(q.add(16))), m1);
    }
    vaddvq_s32(acc)
}

/// `factor · Σ_blocks d_w · d_a · Σ` for the grid types (T < IQ1_S) and IQ1 (factor 1/8).
pub(super) unsafe fn dot_grid<const T: u8>(nb: usize, w: *const u8, a: *const u8, bytes: usize, factor: f32) -> f32 {
    let mut sumf = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(bytes * i), a.add(Q8_K_BYTES * i));
        let (d, isum) = if T >= IQ1_S {
            (d1::<T>(wb), block_sum(ab, |c| chunk1::<T>(wb, c)))
        } else {
            (fp16(wb), block_sum(ab, |c| chunk::<T>(wb, c)))
        };
        sumf += d * rd_f32(ab) * isum as f32;
    }
    factor * sumf
}

// ---------------------------------------------------------------- TQ1_0 / TQ2_0

/// The base-3 digits `((q · pow3) mod 256 · 3) >> 8` of 16 bytes, minus one (values -1..=1).
#[inline(always)]
unsafe fn tq1_values(q: uint8x16_t, pow3: uint8x16_t) -> int8x16_t {
    let x = vmulq_u8(q, pow3);
    let three = vdup_n_u8(3);
    let lo = vshrn_n_u16::<8>(vmull_u8(vget_low_u8(x), three));
    let hi = vshrn_n_u16::<8>(vmull_high_u8(x, vdupq_n_u8(3)));
    vsubq_s8(vreinterpretq_s8_u8(vcombine_u8(lo, hi)), vdupq_n_s8(1))
}

/// Σ (value) · q8 of one TQ1_0 block (`ternary::tq1_0_codes`' element order).
#[inline(always)]
unsafe fn tq1_block(wb: *const u8, ab: *const u8) -> i32 {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let q8 = |e: usize| ld_s8(ab.add(Q8_K_QS + e));
    let mut acc = vdupq_n_s32(0);
    // qs[0..32]: five runs of 32 elements, one per power of three
    let (q0, q1) = (vld1q_u8(wb), vld1q_u8(wb.add(16)));
    for (k, &p) in POW3.iter().enumerate() {
        let pv = vdupq_n_u8(p);
        acc = vaddq_s32(acc, dot_s8(tq1_values(q0, pv), q8(32 * k)));
        acc = vaddq_s32(acc, dot_s8(tq1_values(q1, pv), q8(32 * k + 16)));
    }
    // qs[32..48]: five runs of 16
    let q2 = vld1q_u8(wb.add(32));
    for (k, &p) in POW3.iter().enumerate() {
        acc = vaddq_s32(acc, dot_s8(tq1_values(q2, vdupq_n_u8(p)), q8(160 + 16 * k)));
    }
    // qh[0..4]: four runs of 4 (powers 1, 3, 9, 27)
    let qh = vreinterpretq_u8_u32(vdupq_n_u32(u32_at(wb.add(48))));
    let pow = vreinterpretq_u8_u32(vld1q_u32([0x0101_0101u32, 0x0303_0303, 0x0909_0909, 0x1b1b_1b1b].as_ptr()));
    acc = vaddq_s32(acc, dot_s8(tq1_values(qh, pow), q8(240)));
    vaddvq_s32(acc)
}

/// Σ (value) · q8 of one TQ2_0 block: byte `32c + m` holds elements `128c + 32l + m` at
/// bits `2l`.
#[inline(always)]
unsafe fn tq2_block(wb: *const u8, ab: *const u8) -> i32 {
    let mut acc = vdupq_n_s32(0);
    for c in 0..2 {
        for h in 0..2 {
            let q = vld1q_u8(wb.add(32 * c + 16 * h));
            for l in 0..4usize {
                let code = vandq_u8(vshlq_u8(q, vdupq_n_s8(-2 * l as i8)), vdupq_n_u8(3));
                let v = vsubq_s8(vreinterpretq_s8_u8(code), vdupq_n_s8(1));
                acc = vaddq_s32(acc, dot_s8(v, ld_s8(ab.add(Q8_K_QS + 128 * c + 32 * l + 16 * h))));
            }
        }
    }
    vaddvq_s32(acc)
}

/// `Σ_blocks d_w · d_a · Σ` of a ternary type (`TQ2`: TQ2_0, else TQ1_0); the scale is the
/// block's last two bytes.
pub(super) unsafe fn dot_ternary<const TQ2: bool>(nb: usize, w: *const u8, a: *const u8, bytes: usize) -> f32 {
    let mut sumf = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(bytes * i), a.add(Q8_K_BYTES * i));
        let isum = if TQ2 { tq2_block(wb, ab) } else { tq1_block(wb, ab) };
        sumf += fp16(wb.add(bytes - 2)) * rd_f32(ab) * isum as f32;
    }
    sumf
}
