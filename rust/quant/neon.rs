//! NEON (aarch64 baseline) dot kernels for Q8_0, Q5_0, Q4_K, Q6_K and the table types
//! IQ4_NL, MXFP4 (against Q8_0) and IQ4_XS (against Q8_K): 16 codes looked up at once with
//! `vqtbl1q_s8`. The grid i-quants and the ternary types are in `neon_iq.rs`.
//!
//! Byte dots use `vmull_s8` + `vpaddlq_s16` (ggml's `ggml_vdotq_s32` fallback for CPUs
//! without the dotprod extension), so they run on every aarch64 CPU. Integer block sums are
//! exact; only the f32 accumulation order differs from `scalar.rs`.
//!
//! Soundness: NEON is part of the aarch64 baseline (the target enables it), so the only
//! obligations of the `unsafe` code are the pointer bounds, which the wrappers establish.
use super::blocks::*;
use super::f16::f16_to_f32;
use super::neon_iq::{self as iq, dot_grid, dot_ternary};
use super::scalar_k::{e8m0_half, KVALUES_IQ4NL, KVALUES_MXFP4};
use super::{DotFn, GgmlType};
use core::arch::aarch64::*;
use core::ptr::read_unaligned;

/// The NEON kernel for `ty`, or `None`.
pub(super) fn dot(ty: GgmlType) -> Option<DotFn> {
    use GgmlType::*;
    Some(match ty {
        Q8_0 => dot_q8_0,
        Q5_0 => dot_q5_0,
        Q4_K => dot_q4_k,
        Q6_K => dot_q6_k,
        IQ4_NL => dot_iq4_nl,
        MXFP4 => dot_mxfp4,
        IQ4_XS => dot_iq4_xs,
        IQ2_XXS => dot_iq2_xxs,
        IQ2_XS => dot_iq2_xs,
        IQ2_S => dot_iq2_s,
        IQ3_XXS => dot_iq3_xxs,
        IQ3_S => dot_iq3_s,
        IQ1_S => dot_iq1_s,
        IQ1_M => dot_iq1_m,
        TQ1_0 => dot_tq1_0,
        TQ2_0 => dot_tq2_0,
        _ => return None,
    })
}

macro_rules! wrappers {
    ($($name:ident => $kernel:ident, $bs:expr, $wts:expr, $ats:expr;)*) => {$(
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let nb = nblocks(n, $bs, w, $wts, a, $ats);
            // SAFETY: NEON is baseline on aarch64; the kernel reads `nb` blocks of each side,
            // which `nblocks` bounds to the slices.
            unsafe { $kernel(nb, w.as_ptr(), a.as_ptr()) }
        }
    )*};
}

wrappers! {
    dot_q8_0 => q8_0_q8_0, 32, 34, 34;
    dot_q5_0 => q5_0_q8_0, 32, 22, 34;
    dot_q4_k => q4_k_q8_k, QK_K, Q4_K_BYTES, Q8_K_BYTES;
    dot_q6_k => q6_k_q8_k, QK_K, Q6_K_BYTES, Q8_K_BYTES;
    dot_iq4_nl => iq4_nl_q8_0, 32, IQ4_NL_BYTES, 34;
    dot_mxfp4 => mxfp4_q8_0, 32, MXFP4_BYTES, 34;
    dot_iq4_xs => iq4_xs_q8_k, QK_K, IQ4_XS_BYTES, Q8_K_BYTES;
}

/// The superblock types of `neon_iq.rs`: `$ty`'s blocks against Q8_K, `$kernel(nb, w, a,
/// block bytes, extra arguments)`.
macro_rules! iq_wrappers {
    ($($name:ident => $ty:ident, $kernel:path $(, $arg:expr)?;)*) => {$(
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let bytes = GgmlType::$ty.type_size();
            let nb = nblocks(n, QK_K, w, bytes, a, Q8_K_BYTES);
            // SAFETY: as `wrappers!`: `nb` blocks of each side are in the slices.
            unsafe { $kernel(nb, w.as_ptr(), a.as_ptr(), bytes $(, $arg)?) }
        }
    )*};
}

iq_wrappers! {
    dot_iq2_xxs => IQ2_XXS, dot_grid::<{ iq::IQ2_XXS }>, 0.125;
    dot_iq2_xs => IQ2_XS, dot_grid::<{ iq::IQ2_XS }>, 0.125;
    dot_iq2_s => IQ2_S, dot_grid::<{ iq::IQ2_S }>, 0.125;
    dot_iq3_xxs => IQ3_XXS, dot_grid::<{ iq::IQ3_XXS }>, 0.25;
    dot_iq3_s => IQ3_S, dot_grid::<{ iq::IQ3_S }>, 1.0;
    dot_iq1_s => IQ1_S, dot_grid::<{ iq::IQ1_S }>, 0.125;
    dot_iq1_m => IQ1_M, dot_grid::<{ iq::IQ1_M }>, 0.125;
    dot_tq1_0 => TQ1_0, dot_ternary::<false>;
    dot_tq2_0 => TQ2_0, dot_ternary::<true>;
}

// ---------------------------------------------------------------- helpers (callers: pointers valid)

#[inline(always)]
pub(super) unsafe fn fp16(p: *const u8) -> f32 {
    f16_to_f32(read_unaligned(p as *const u16))
}

#[inline(always)]
pub(super) unsafe fn rd_f32(p: *const u8) -> f32 {
    read_unaligned(p as *const f32)
}

#[inline(always)]
pub(super) unsafe fn ld_s8(p: *const u8) -> int8x16_t {
    vld1q_s8(p as *const i8)
}

/// Σ x·y over each group of 4 bytes (16 i8 × 16 i8 → 4 i32).
#[inline(always)]
pub(super) unsafe fn dot_s8(x: int8x16_t, y: int8x16_t) -> int32x4_t {
    let p0 = vmull_s8(vget_low_s8(x), vget_low_s8(y));
    let p1 = vmull_high_s8(x, y);
    vaddq_s32(vpaddlq_s16(p0), vpaddlq_s16(p1))
}

// ---------------------------------------------------------------- Q8_0 · Q8_0

unsafe fn q8_0_q8_0(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc0 = vdupq_n_f32(0.0);
    let mut acc1 = vdupq_n_f32(0.0);
    let block = |i: usize| -> (f32, int32x4_t) {
        let (wb, ab) = (w.add(Q8_0_BYTES * i), a.add(34 * i));
        let p = vaddq_s32(dot_s8(ld_s8(wb.add(2)), ld_s8(ab.add(2))), dot_s8(ld_s8(wb.add(18)), ld_s8(ab.add(18))));
        (fp16(wb) * fp16(ab), p)
    };
    let mut i = 0;
    while i + 2 <= nb {
        let (d0, p0) = block(i);
        let (d1, p1) = block(i + 1);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(p0), vdupq_n_f32(d0));
        acc1 = vfmaq_f32(acc1, vcvtq_f32_s32(p1), vdupq_n_f32(d1));
        i += 2;
    }
    if i < nb {
        let (d0, p0) = block(i);
        acc0 = vfmaq_f32(acc0, vcvtq_f32_s32(p0), vdupq_n_f32(d0));
    }
    vaddvq_f32(vaddq_f32(acc0, acc1))
}

// ---------------------------------------------------------------- Q5_0 · Q8_0
// block_q5_0 { f16 d; u32 qh @2; u8 qs[16] @6; }: value = (nibble | bit<<4) - 16.

static BIT_MASK: [u8; 16] = [1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128];

/// 16 bytes of 0x10 where bits `b0` (elements 0..8) / `b1` (elements 8..16) are set.
#[inline(always)]
unsafe fn high_bits(b0: u8, b1: u8, mask: uint8x16_t) -> uint8x16_t {
    let v = vcombine_u8(vdup_n_u8(b0), vdup_n_u8(b1));
    vandq_u8(vtstq_u8(v, mask), vdupq_n_u8(0x10))
}

unsafe fn q5_0_q8_0(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let mask = vld1q_u8(BIT_MASK.as_ptr());
    let m4 = vdupq_n_u8(0x0f);
    let s16 = vdupq_n_s8(16);
    let mut acc = vdupq_n_f32(0.0);
    for i in 0..nb {
        let (wb, ab) = (w.add(Q5_0_BYTES * i), a.add(34 * i));
        let qh = read_unaligned(wb.add(2) as *const u32).to_le_bytes();
        let qs = vld1q_u8(wb.add(6));
        let lo = vorrq_u8(vandq_u8(qs, m4), high_bits(qh[0], qh[1], mask));
        let hi = vorrq_u8(vshrq_n_u8::<4>(qs), high_bits(qh[2], qh[3], mask));
        let x0 = vsubq_s8(vreinterpretq_s8_u8(lo), s16);
        let x1 = vsubq_s8(vreinterpretq_s8_u8(hi), s16);
        let p = vaddq_s32(dot_s8(x0, ld_s8(ab.add(2))), dot_s8(x1, ld_s8(ab.add(18))));
        acc = vfmaq_f32(acc, vcvtq_f32_s32(p), vdupq_n_f32(fp16(wb) * fp16(ab)));
    }
    vaddvq_f32(acc)
}

// ---------------------------------------------------------------- Q4_K · Q8_K
// block_q4_K { f16 d; f16 dmin; u8 scales[12] @4; u8 qs[128] @16; }; block_q8_K { f32 d; i8 qs[256] @4; i16 bsums[16] @260; }

unsafe fn q4_k_q8_k(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m4 = vdupq_n_u8(0x0f);
    let mut sum = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(Q4_K_BYTES * i), a.add(Q8_K_BYTES * i));
        let dy = rd_f32(ab);
        let d = dy * fp16(wb);
        let dmin = dy * fp16(wb.add(2));
        let (sc, m) = super::scalar::scale_min_k4(core::slice::from_raw_parts(wb.add(4), 12));
        let mut summ = 0i32;
        for (j, &mj) in m.iter().enumerate() {
            let b0 = read_unaligned(ab.add(260 + 4 * j) as *const i16) as i32;
            let b1 = read_unaligned(ab.add(262 + 4 * j) as *const i16) as i32;
            summ += mj as i32 * (b0 + b1);
        }
        let mut sumi = vdupq_n_s32(0);
        for j in 0..4 {
            let q = wb.add(16 + 32 * j);
            let y = ab.add(4 + 64 * j);
            let (b0, b1) = (vld1q_u8(q), vld1q_u8(q.add(16)));
            let lo = vaddq_s32(
                dot_s8(vreinterpretq_s8_u8(vandq_u8(b0, m4)), ld_s8(y)),
                dot_s8(vreinterpretq_s8_u8(vandq_u8(b1, m4)), ld_s8(y.add(16))),
            );
            let hi = vaddq_s32(
                dot_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(b0)), ld_s8(y.add(32))),
                dot_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(b1)), ld_s8(y.add(48))),
            );
            sumi = vmlaq_n_s32(sumi, lo, sc[2 * j] as i32);
            sumi = vmlaq_n_s32(sumi, hi, sc[2 * j + 1] as i32);
        }
        sum += d * vaddvq_s32(sumi) as f32 - dmin * summ as f32;
    }
    sum
}

// ---------------------------------------------------------------- Q6_K · Q8_K
// block_q6_K { u8 ql[128]; u8 qh[64] @128; i8 scales[16] @192; f16 d @208; }

unsafe fn q6_k_q8_k(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let m4 = vdupq_n_u8(0x0f);
    let m3 = vdupq_n_u8(3);
    let s32 = vdupq_n_s8(32);
    let mut sum = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(Q6_K_BYTES * i), a.add(Q8_K_BYTES * i));
        let d = rd_f32(ab) * fp16(wb.add(208));
        let sc = wb.add(192) as *const i8;
        let mut sumi = vdupq_n_s32(0);
        for c in 0..2 {
            let ql = wb.add(64 * c);
            let qh = wb.add(128 + 32 * c);
            let y = ab.add(4 + 128 * c);
            // 16-byte halves h (0, 1) of the 32-element pieces
            for h in 0..2 {
                let l0 = vld1q_u8(ql.add(16 * h));
                let l1 = vld1q_u8(ql.add(32 + 16 * h));
                let hb = vld1q_u8(qh.add(16 * h));
                let q = [
                    vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8::<4>(vandq_u8(hb, m3))),
                    vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<2>(hb), m3))),
                    vorrq_u8(vshrq_n_u8::<4>(l0), vshlq_n_u8::<4>(vandq_u8(vshrq_n_u8::<4>(hb), m3))),
                    vorrq_u8(vshrq_n_u8::<4>(l1), vshlq_n_u8::<4>(vshrq_n_u8::<6>(hb))),
                ];
                for (k, qk) in q.into_iter().enumerate() {
                    // elements 128c + 32k + 16h .. +16: scale group 8c + 2k + h
                    let x = vsubq_s8(vreinterpretq_s8_u8(qk), s32);
                    let p = dot_s8(x, ld_s8(y.add(32 * k + 16 * h)));
                    sumi = vmlaq_n_s32(sumi, p, *sc.add(8 * c + 2 * k + h) as i32);
                }
            }
        }
        sum += d * vaddvq_s32(sumi) as f32;
    }
    sum
}

// ---------------------------------------------------------------- IQ4_NL / MXFP4 · Q8_0, IQ4_XS · Q8_K
// 16 code bytes: element j's code in the low nibble of byte j, element 16 + j's in the high.

/// The 32 values of 16 code bytes at `q`, looked up in `table`.
#[inline(always)]
unsafe fn nl4_values(q: *const u8, table: int8x16_t) -> (int8x16_t, int8x16_t) {
    let c = vld1q_u8(q);
    (vqtbl1q_s8(table, vandq_u8(c, vdupq_n_u8(0x0f))), vqtbl1q_s8(table, vshrq_n_u8::<4>(c)))
}

/// Σ_blocks scale(w) · d_a · Σ value · q8 over 32-element blocks against Q8_0.
#[inline(always)]
unsafe fn nl4_q8_0(nb: usize, w: *const u8, a: *const u8, bytes: usize, qs: usize, table: &[i8; 16], scale: impl Fn(*const u8) -> f32) -> f32 {
    let t = vld1q_s8(table.as_ptr());
    let mut sumf = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(bytes * i), a.add(34 * i));
        let (v0, v1) = nl4_values(wb.add(qs), t);
        let p = vaddq_s32(dot_s8(v0, ld_s8(ab.add(2))), dot_s8(v1, ld_s8(ab.add(18))));
        sumf += scale(wb) * fp16(ab) * vaddvq_s32(p) as f32;
    }
    sumf
}

unsafe fn iq4_nl_q8_0(nb: usize, w: *const u8, a: *const u8) -> f32 {
    nl4_q8_0(nb, w, a, IQ4_NL_BYTES, 2, &KVALUES_IQ4NL, |b| fp16(b))
}

unsafe fn mxfp4_q8_0(nb: usize, w: *const u8, a: *const u8) -> f32 {
    nl4_q8_0(nb, w, a, MXFP4_BYTES, 1, &KVALUES_MXFP4, |b| e8m0_half(*b))
}

/// block_iq4_xs { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128] }: per 32 elements a 6-bit
/// scale minus 32 and IQ4_NL codes.
unsafe fn iq4_xs_q8_k(nb: usize, w: *const u8, a: *const u8) -> f32 {
    let t = vld1q_s8(KVALUES_IQ4NL.as_ptr());
    let mut sumf = 0f32;
    for i in 0..nb {
        let (wb, ab) = (w.add(IQ4_XS_BYTES * i), a.add(Q8_K_BYTES * i));
        let sh = read_unaligned(wb.add(2) as *const u16) as i32;
        let mut acc = vdupq_n_s32(0);
        for ib in 0..8 {
            let ls = ((*wb.add(4 + ib / 2) as i32 >> (4 * (ib % 2))) & 0x0f) | (((sh >> (2 * ib)) & 3) << 4);
            let (v0, v1) = nl4_values(wb.add(8 + 16 * ib), t);
            let q = ab.add(Q8_K_QS + 32 * ib);
            acc = vmlaq_n_s32(acc, vaddq_s32(dot_s8(v0, ld_s8(q)), dot_s8(v1, ld_s8(q.add(16)))), ls - 32);
        }
        sumf += fp16(wb) * rd_f32(ab) * vaddvq_s32(acc) as f32;
    }
    sumf
}
