//! Scalar references for IQ1_S and IQ1_M: groups of 8 ternary values (-1, 0, 1) from
//! ggml's `iq1s_grid` (`grids/iq1s.bin`), shifted by ±1/8 (`IQ1S_DELTA`; per 32 elements in
//! IQ1_S, per 8 in IQ1_M), an odd 3-bit multiplier `2·s + 1` per 32 (IQ1_S) or 16 (IQ1_M)
//! elements and one f16 scale (IQ1_M's spread over the high nibbles of its scale bytes).
//!
//! Dequantize: ggml-quants.c / gguf-py, `(d · (2s + 1)) · (grid + delta)` in f32.
//! Dots against Q8_K, integer parts exact, in llama.cpp's two x86 orders: its AVX2 `vec_dot`
//! (the grid part in 8 lanes as [`k_lanes`]; the delta part from the activation sums as one
//! scalar for IQ1_S, in 8 more lanes for IQ1_M; `grid + 0.125 · delta` at the end) and its
//! tiled kernel for 8 tokens or more (codes `8 · grid ± 1`, `d / 8`, one chain per row).
use super::blocks::QK_K;
use super::f16::{f16_to_f32, read_f16};
use super::scalar::{hsum8, q8_k_bsum, rd_f32};
use super::scalar_k::{fma_k_lanes, k_lanes};
use super::GgmlType;

pub(crate) static IQ1S: &[u8; 2048 * 8] = include_bytes!("grids/iq1s.bin");

const DELTA: f32 = 0.125;

/// One superblock decoded.
struct Parts {
    /// grid values, -1..=1
    v: [i8; 256],
    /// the sign of the ±1/8 shift of each 8 elements
    delta: [i8; 32],
    /// `2·s + 1` of each 16 elements
    mult: [i32; 16],
    d: f32,
}

/// IQ1_M's f16 scale, spread over the top nibbles of its four scale words.
#[inline(always)]
fn iq1_m_d(sc: [u16; 4]) -> f32 {
    f16_to_f32((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000))
}

/// The f32 scale of an IQ1_S (`iq1_s`) or IQ1_M block at `b`, for the SIMD kernels.
/// Safety: a whole block is readable at `b`.
#[inline(always)]
pub(crate) unsafe fn block_d(iq1_s: bool, b: *const u8) -> f32 {
    use super::iquant::rd_u16;
    if iq1_s {
        return f16_to_f32(rd_u16(b) as u16);
    }
    iq1_m_d(core::array::from_fn(|k| rd_u16(b.add(48 + 2 * k)) as u16))
}

fn grid(i: usize) -> [i8; 8] {
    core::array::from_fn(|j| IQ1S[8 * i + j] as i8)
}

fn parts(ty: GgmlType, b: &[u8]) -> Parts {
    let mut p = Parts { v: [0; 256], delta: [0; 32], mult: [0; 16], d: 0.0 };
    fn put(p: &mut Parts, g: usize, idx: usize, negative: bool) {
        p.v[8 * g..8 * g + 8].copy_from_slice(&grid(idx));
        p.delta[g] = if negative { -1 } else { 1 };
    }
    if ty == GgmlType::IQ1_S {
        // { f16 d; u8 qs[32]; u16 qh[8] }: qh = 4 × 3 index bits, the scale (bits 12..15),
        // the delta sign (bit 15)
        p.d = read_f16(b, 0);
        for ib in 0..8 {
            let qh = u16::from_le_bytes([b[34 + 2 * ib], b[35 + 2 * ib]]) as usize;
            for l in 0..4 {
                put(&mut p, 4 * ib + l, b[2 + 4 * ib + l] as usize | (((qh >> (3 * l)) & 7) << 8), qh & 0x8000 != 0);
            }
            p.mult[2 * ib..2 * ib + 2].fill(2 * ((qh >> 12) & 7) as i32 + 1);
        }
    } else {
        // { u8 qs[32]; u8 qh[16]; u16 scales[4] }: per 8, 3 index bits and a delta sign in a
        // nibble of qh; 3-bit scales per 16; the f16 scale in the scales' top nibbles
        let sc: [u16; 4] = core::array::from_fn(|k| u16::from_le_bytes([b[48 + 2 * k], b[49 + 2 * k]]));
        p.d = iq1_m_d(sc);
        for ib in 0..8 {
            for l in 0..4 {
                let h = (b[32 + 2 * ib + l / 2] >> (4 * (l % 2))) as usize;
                put(&mut p, 4 * ib + l, b[4 * ib + l] as usize | ((h & 7) << 8), h & 8 != 0);
            }
            for h in 0..2 {
                p.mult[2 * ib + h] = 2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3 * h)) & 7) as i32 + 1;
            }
        }
    }
    p
}

/// Dequantize one block of IQ1_S or IQ1_M.
pub fn dequantize_block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    let p = parts(ty, b);
    for (e, o) in y.iter_mut().enumerate().take(QK_K) {
        *o = (p.d * p.mult[e / 16] as f32) * (p.v[e] as f32 + p.delta[e / 8] as f32 * DELTA);
    }
}

fn q8(ab: &[u8], e: usize) -> i32 {
    ab[4 + e] as i8 as i32
}

/// In the order of ggml's AVX2 `ggml_vec_dot_iq1_{s,m}_q8_K`.
fn dot_vec(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut acc_d, mut acc1) = ([0f32; 8], [0f32; 8], 0f32);
    for (wb, ab) in w.chunks_exact(ty.type_size()).zip(a.chunks_exact(super::blocks::Q8_K_BYTES)).take(n / QK_K) {
        let p = parts(ty, wb);
        let d = rd_f32(ab, 0) * p.d;
        fma_k_lanes(&mut acc, d, &k_lanes(|e| p.mult[e / 16] * p.v[e] as i32 * q8(ab, e)));
        if ty == GgmlType::IQ1_S {
            let s: i32 = (0..8).map(|ib| (q8_k_bsum(ab, 2 * ib) + q8_k_bsum(ab, 2 * ib + 1)) * p.delta[4 * ib] as i32 * p.mult[2 * ib]).sum();
            acc1 = d.mul_add(s as f32, acc1);
        } else {
            fma_k_lanes(&mut acc_d, d, &k_lanes(|e| p.mult[e / 16] * p.delta[e / 8] as i32 * q8(ab, e)));
        }
    }
    let delta_part = if ty == GgmlType::IQ1_S { acc1 } else { hsum8(&acc_d) };
    DELTA.mul_add(delta_part, hsum8(&acc))
}

/// In the order of llama.cpp's tiled kernel.
fn dot_tiled(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut total = 0f32;
    for (wb, ab) in w.chunks_exact(ty.type_size()).zip(a.chunks_exact(super::blocks::Q8_K_BYTES)).take(n / QK_K) {
        let p = parts(ty, wb);
        let isum: i32 = (0..QK_K).map(|e| p.mult[e / 16] * (8 * p.v[e] as i32 + p.delta[e / 8] as i32) * q8(ab, e)).sum();
        total = (isum as f32 * (p.d * 0.125)).mul_add(rd_f32(ab, 0), total);
    }
    total
}

pub fn dot_iq1_s_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_vec(GgmlType::IQ1_S, n, w, a)
}

pub fn dot_iq1_s_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_tiled(GgmlType::IQ1_S, n, w, a)
}

pub fn dot_iq1_m_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_vec(GgmlType::IQ1_M, n, w, a)
}

pub fn dot_iq1_m_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_tiled(GgmlType::IQ1_M, n, w, a)
}
