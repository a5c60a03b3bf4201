//! Scalar references for the grid ("i-quant") types IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and
//! IQ3_S: groups of 8 (IQ2) or 4 (IQ3) magnitudes looked up in a fixed grid
//! (`grids/*.bin`, ggml-common.h's tables, written by scripts/gen_iq_grids.py), a sign per
//! element, a 4-bit scale per 32 (IQ2_XXS, IQ3_XXS, IQ3_S) or 16 (IQ2_XS, IQ2_S) elements.
//!
//! Dequantize: ggml-quants.c `dequantize_row_iq*` / gguf-py, the same f32 operations
//! (`db = d · (0.5 + ls) · 0.25` and kin, then `db · grid`, negated by the sign).
//! Dots against Q8_K, integer parts exact (`Σ (2·ls + 1) · ±grid · q8`), in the two orders
//! llama.cpp runs on x86: ggml's AVX2 `vec_dot` for fewer than 8 tokens — 8 i32 lanes, lane
//! k the elements with `(e % 32) / 4 == k` ([`k_lanes`]), `fma(d_w · d_a, lane, acc)` per
//! superblock, then `FACTOR · hsum_float_8` — and its tiled kernel for 8 or more
//! (`quant::batch_tokens`): per superblock `fma(f32(Σ) · (d_w · FACTOR), d_a, total)`.
use super::blocks::QK_K;
use super::f16::read_f16;
use super::scalar::{hsum8, rd_f32};
use super::scalar_k::{fma_k_lanes, k_lanes};
use super::GgmlType;

pub(crate) static IQ2XXS: &[u8; 256 * 8] = include_bytes!("grids/iq2xxs.bin");
pub(crate) static IQ2XS: &[u8; 512 * 8] = include_bytes!("grids/iq2xs.bin");
pub(crate) static IQ2S: &[u8; 1024 * 8] = include_bytes!("grids/iq2s.bin");
pub(crate) static IQ3XXS: &[u8; 256 * 4] = include_bytes!("grids/iq3xxs.bin");
pub(crate) static IQ3S: &[u8; 512 * 4] = include_bytes!("grids/iq3s.bin");

/// ggml's `ksigns_iq2xs`: 7 sign bits and an eighth that makes the count of minus signs even.
#[inline]
pub fn ksigns(i: u32) -> u8 {
    let i = (i & 127) as u8;
    i | (((i.count_ones() & 1) as u8) << 7)
}

/// Little-endian u16 / u32 at `p` (block fields), for the SIMD kernels. Safety: readable.
#[inline(always)]
pub(crate) unsafe fn rd_u16(p: *const u8) -> u32 {
    core::ptr::read_unaligned(p as *const u16) as u32
}

#[inline(always)]
pub(crate) unsafe fn rd_u32(p: *const u8) -> u32 {
    core::ptr::read_unaligned(p as *const u32)
}

/// Row `i` of a grid of 8-byte rows (IQ2, IQ1) / 4-byte rows (IQ3), the index masked to
/// the grid. Safety: `grid` holds a power of two of rows (every grid here does), so the
/// masked row is inside it.
#[inline(always)]
pub(crate) unsafe fn grid8(grid: &[u8], i: usize) -> i64 {
    core::ptr::read_unaligned(grid.as_ptr().add(8 * (i & (grid.len() / 8 - 1))) as *const i64)
}

#[inline(always)]
pub(crate) unsafe fn grid4(grid: &[u8], i: usize) -> i32 {
    core::ptr::read_unaligned(grid.as_ptr().add(4 * (i & (grid.len() / 4 - 1))) as *const i32)
}

/// ggml's `ksigns_iq2xs` as ±1 bytes (its `keven_signs_q2xs`): byte j of entry i is -1
/// where bit j of `ksigns(i)` is set (element negative), else 1.
pub(crate) static KSIGN_BYTES: [i64; 128] = {
    let mut t = [0i64; 128];
    let mut i = 0;
    while i < 128 {
        let k = i as u32 | ((i as u32).count_ones() & 1) << 7;
        let mut j = 0;
        while j < 8 {
            t[i] |= (if k >> j & 1 != 0 { 0xFF } else { 0x01 }) << (8 * j);
            j += 1;
        }
        i += 1;
    }
    t
};

/// One superblock decoded: magnitudes (grid values), signs, the odd integer multiplier
/// `2·ls + 1` of each 16 elements and the f32 dequantization scale of each 16.
pub struct Parts {
    pub mag: [u8; 256],
    pub neg: [bool; 256],
    pub mult: [i32; 16],
    pub db: [f32; 16],
}

/// The types this file owns, with the f32 factor of their dots (see the module docs).
pub fn factor(ty: GgmlType) -> Option<f32> {
    use GgmlType::*;
    Some(match ty {
        IQ2_XXS | IQ2_XS | IQ2_S => 0.125,
        IQ3_XXS => 0.25,
        IQ3_S => 1.0,
        _ => return None,
    })
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// `d · (0.5 + ls) · f` in ggml's f32 order.
#[inline]
fn db_half(d: f32, ls: u32, f: f32) -> f32 {
    d * (0.5 + ls as f32) * f
}

fn set_group(p: &mut Parts, e0: usize, grid: &[u8], signs: u8) {
    for (j, &g) in grid.iter().enumerate() {
        p.mag[e0 + j] = g;
        p.neg[e0 + j] = signs & (1 << j) != 0;
    }
}

/// Decode one block of `ty` (one of [`factor`]'s types).
pub fn parts(ty: GgmlType, b: &[u8]) -> Parts {
    use GgmlType::*;
    let mut p = Parts { mag: [0; 256], neg: [false; 256], mult: [0; 16], db: [0.0; 16] };
    let d = read_f16(b, 0);
    match ty {
        // { f16 d; u16 qs[32] }: per 32, 4 grid bytes then 4 × 7 sign bits and ls
        IQ2_XXS => {
            for ib in 0..8 {
                let (g, s) = (u32_at(b, 2 + 8 * ib), u32_at(b, 6 + 8 * ib));
                for l in 0..4 {
                    let gi = ((g >> (8 * l)) & 255) as usize;
                    set_group(&mut p, 32 * ib + 8 * l, &IQ2XXS[8 * gi..8 * gi + 8], ksigns(s >> (7 * l)));
                }
                p.mult[2 * ib..2 * ib + 2].fill(2 * (s >> 28) as i32 + 1);
                p.db[2 * ib..2 * ib + 2].fill(db_half(d, s >> 28, 0.25));
            }
        }
        // { f16 d; u16 qs[32] (9-bit grid index, 7 sign bits); u8 scales[8] }
        IQ2_XS => {
            for k in 0..32 {
                let q = u16::from_le_bytes([b[2 + 2 * k], b[3 + 2 * k]]) as usize;
                set_group(&mut p, 8 * k, &IQ2XS[8 * (q & 511)..8 * (q & 511) + 8], ksigns((q >> 9) as u32));
            }
            scales_by_16(&mut p, d, &b[66..74]);
        }
        // { f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8 scales[8] }: 10-bit grid indices
        IQ2_S => {
            for k in 0..32 {
                let gi = b[2 + k] as usize | (((b[66 + k / 4] as usize >> (2 * (k % 4))) & 3) << 8);
                set_group(&mut p, 8 * k, &IQ2S[8 * gi..8 * gi + 8], b[34 + k]);
            }
            scales_by_16(&mut p, d, &b[74..82]);
        }
        // { f16 d; u8 qs[64] (grid indices, 4 elements each); u32 scales_and_signs[8] }
        IQ3_XXS => {
            for ib in 0..8 {
                let s = u32_at(b, 66 + 4 * ib);
                for l in 0..4 {
                    let signs = ksigns(s >> (7 * l));
                    for h in 0..2 {
                        let gi = b[2 + 8 * ib + 2 * l + h] as usize;
                        set_group(&mut p, 32 * ib + 8 * l + 4 * h, &IQ3XXS[4 * gi..4 * gi + 4], signs >> (4 * h));
                    }
                }
                p.mult[2 * ib..2 * ib + 2].fill(2 * (s >> 28) as i32 + 1);
                p.db[2 * ib..2 * ib + 2].fill(db_half(d, s >> 28, 0.5));
            }
        }
        // { f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4] }: 9-bit grid indices
        IQ3_S => {
            for k in 0..64 {
                let gi = b[2 + k] as usize | (((b[66 + k / 8] as usize >> (k % 8)) & 1) << 8);
                set_group(&mut p, 4 * k, &IQ3S[4 * gi..4 * gi + 4], b[74 + k / 2] >> (4 * (k % 2)));
            }
            for ib in 0..8 {
                let ls = (b[106 + ib / 2] >> (4 * (ib % 2))) & 15;
                let m = 1 + 2 * ls as i32;
                p.mult[2 * ib..2 * ib + 2].fill(m);
                p.db[2 * ib..2 * ib + 2].fill(d * m as f32);
            }
        }
        // not a type of this file: NaN scales, so nothing silently uses the values
        _ => p.db.fill(f32::NAN),
    }
    p
}

/// IQ2_XS / IQ2_S: a 4-bit scale per 16 elements, low nibble first.
fn scales_by_16(p: &mut Parts, d: f32, scales: &[u8]) {
    for g in 0..16 {
        let ls = ((scales[g / 2] >> (4 * (g % 2))) & 15) as u32;
        p.mult[g] = 2 * ls as i32 + 1;
        p.db[g] = db_half(d, ls, 0.25);
    }
}

/// Dequantize one block.
pub fn dequantize_block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    let p = parts(ty, b);
    for (e, o) in y.iter_mut().enumerate().take(QK_K) {
        let v = p.db[e / 16] * p.mag[e] as f32;
        *o = if p.neg[e] { -v } else { v };
    }
}

/// `mult · ±grid · q8` of element `e`.
#[inline]
fn prod(p: &Parts, ab: &[u8], e: usize) -> i32 {
    let v = p.mult[e / 16] * p.mag[e] as i32 * ab[4 + e] as i8 as i32;
    if p.neg[e] {
        -v
    } else {
        v
    }
}

fn dot_vec(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ts = ty.type_size();
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(ts).zip(a.chunks_exact(super::blocks::Q8_K_BYTES)).take(n / QK_K) {
        let p = parts(ty, wb);
        fma_k_lanes(&mut acc, read_f16(wb, 0) * rd_f32(ab, 0), &k_lanes(|e| prod(&p, ab, e)));
    }
    factor(ty).unwrap_or(f32::NAN) * hsum8(&acc)
}

fn dot_tiled(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let ts = ty.type_size();
    let f = factor(ty).unwrap_or(f32::NAN);
    let mut total = 0f32;
    for (wb, ab) in w.chunks_exact(ts).zip(a.chunks_exact(super::blocks::Q8_K_BYTES)).take(n / QK_K) {
        let p = parts(ty, wb);
        let isum: i32 = (0..QK_K).map(|e| prod(&p, ab, e)).sum();
        total = (isum as f32 * (read_f16(wb, 0) * f)).mul_add(rd_f32(ab, 0), total);
    }
    total
}

macro_rules! entry_points {
    ($($ty:ident => $vec:ident, $tiled:ident;)*) => {$(
        pub fn $vec(n: usize, w: &[u8], a: &[u8]) -> f32 {
            dot_vec(GgmlType::$ty, n, w, a)
        }
        pub fn $tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
            dot_tiled(GgmlType::$ty, n, w, a)
        }
    )*};
}

entry_points! {
    IQ2_XXS => dot_iq2_xxs_q8_k, dot_iq2_xxs_q8_k_tiled;
    IQ2_XS => dot_iq2_xs_q8_k, dot_iq2_xs_q8_k_tiled;
    IQ2_S => dot_iq2_s_q8_k, dot_iq2_s_q8_k_tiled;
    IQ3_XXS => dot_iq3_xxs_q8_k, dot_iq3_xxs_q8_k_tiled;
    IQ3_S => dot_iq3_s_q8_k, dot_iq3_s_q8_k_tiled;
}

/// The `vec_dot`-order kernel of `ty`, and its tiled-order twin (IQ1_S and IQ1_M from
/// `iquant1.rs` too).
pub fn dots(ty: GgmlType) -> Option<(super::DotFn, super::DotFn)> {
    use GgmlType::*;
    Some(match ty {
        IQ2_XXS => (dot_iq2_xxs_q8_k, dot_iq2_xxs_q8_k_tiled),
        IQ2_XS => (dot_iq2_xs_q8_k, dot_iq2_xs_q8_k_tiled),
        IQ2_S => (dot_iq2_s_q8_k, dot_iq2_s_q8_k_tiled),
        IQ3_XXS => (dot_iq3_xxs_q8_k, dot_iq3_xxs_q8_k_tiled),
        IQ3_S => (dot_iq3_s_q8_k, dot_iq3_s_q8_k_tiled),
        IQ1_S => (super::iquant1::dot_iq1_s_q8_k, super::iquant1::dot_iq1_s_q8_k_tiled),
        IQ1_M => (super::iquant1::dot_iq1_m_q8_k, super::iquant1::dot_iq1_m_q8_k_tiled),
        _ => return None,
    })
}
