//! ggml's reference quantizers (`quantize_row_*_ref` in ggml-quants.c), what ggml-cpu's
//! `from_float` runs for these types: the KV cache stores K/V rows through them
//! (`-ctk/-ctv q4_0 …`). Block layouts as `blocks.rs`: 32 values per block, `d` (and `m`)
//! as f16 first, then (q5_*) the 32 high bits, then the nibbles (value j low, j + 16 high).
//! Plain f32 arithmetic, no fused multiply-adds (ggml-base is built without them).
use super::f16::f32_to_f16;
use super::scalar_k::KVALUES_IQ4NL;

const QK: usize = 32;

fn put_f16(out: &mut [u8], at: usize, x: f32) {
    out[at..at + 2].copy_from_slice(&f32_to_f16(x).to_le_bytes());
}

/// The value of largest magnitude (the first of equal ones).
fn signed_max(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    x.iter().fold((f32::MAX, -f32::MAX), |(lo, hi), &v| (if v < lo { v } else { lo }, if v > hi { v } else { hi }))
}

/// `block_q4_0`: d = max / -8, q = min(15, (i8)(x/d + 8.5)).
pub fn q4_0(x: &[f32], out: &mut [u8]) {
    for (xb, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(18)) {
        let d = signed_max(xb) / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(o, 0, d);
        for j in 0..16 {
            let q0 = ((xb[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = ((xb[16 + j] * id + 8.5) as i8).min(15) as u8;
            o[2 + j] = q0 | (q1 << 4);
        }
    }
}

/// `block_q4_1`: d = (max - min) / 15, m = min, q = min(15, (i8)((x - min)/d + 0.5)).
pub fn q4_1(x: &[f32], out: &mut [u8]) {
    for (xb, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(20)) {
        let (lo, hi) = min_max(xb);
        let d = (hi - lo) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(o, 0, d);
        put_f16(o, 2, lo);
        for j in 0..16 {
            let q0 = (((xb[j] - lo) * id + 0.5) as i8).min(15) as u8;
            let q1 = (((xb[16 + j] - lo) * id + 0.5) as i8).min(15) as u8;
            o[4 + j] = q0 | (q1 << 4);
        }
    }
}

/// `block_q5_0`: d = max / -16, q = min(31, (i8)(x/d + 16.5)), bit 4 of each in qh.
pub fn q5_0(x: &[f32], out: &mut [u8]) {
    for (xb, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(22)) {
        let d = signed_max(xb) / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(o, 0, d);
        let mut qh = 0u32;
        for j in 0..16 {
            let q0 = ((xb[j] * id + 16.5) as i8).min(31) as u8;
            let q1 = ((xb[16 + j] * id + 16.5) as i8).min(31) as u8;
            o[6 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
            qh |= (((q0 & 0x10) >> 4) as u32) << j;
            qh |= (((q1 & 0x10) >> 4) as u32) << (j + 16);
        }
        o[2..6].copy_from_slice(&qh.to_le_bytes());
    }
}

/// `block_q5_1`: d = (max - min) / 31, m = min, q = (u8)((x - min)/d + 0.5).
pub fn q5_1(x: &[f32], out: &mut [u8]) {
    for (xb, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(24)) {
        let (lo, hi) = min_max(xb);
        let d = (hi - lo) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        put_f16(o, 0, d);
        put_f16(o, 2, lo);
        let mut qh = 0u32;
        for j in 0..16 {
            let q0 = ((xb[j] - lo) * id + 0.5) as u8;
            let q1 = ((xb[16 + j] - lo) * id + 0.5) as u8;
            o[8 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
            qh |= (((q0 & 0x10) >> 4) as u32) << j;
            qh |= (((q1 & 0x10) >> 4) as u32) << (j + 16);
        }
        o[4..8].copy_from_slice(&qh.to_le_bytes());
    }
}

/// ggml's `best_index_int8`: the index of the table value nearest `x` (ties to the upper).
fn best_index(values: &[i8; 16], x: f32) -> usize {
    if x <= values[0] as f32 {
        return 0;
    }
    if x >= values[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < values[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (values[mu - 1] as f32) < (values[mu] as f32) - x {
        mu - 1
    } else {
        mu
    }
}

/// `block_iq4_nl` as `quantize_row_iq4_nl_ref` (one 32-value block per scale, no search
/// over scales: ntry = -1): d = max / kvalues[0] gives the codes, then the least-squares
/// scale Σ w·q·x / Σ w·q² with w = x².
pub fn iq4_nl(x: &[f32], out: &mut [u8]) {
    let values = &KVALUES_IQ4NL;
    for (xb, o) in x.chunks_exact(QK).zip(out.chunks_exact_mut(18)) {
        let mut l = [0u8; QK];
        let (mut amax, mut max) = (0f32, 0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        let mut d = 0f32;
        if amax >= 1e-15 {
            let id = 1.0 / (max / values[0] as f32);
            let (mut sumqx, mut sumq2) = (0f32, 0f32);
            for (j, &v) in xb.iter().enumerate() {
                let li = best_index(values, id * v);
                l[j] = li as u8;
                let q = values[li] as f32;
                let w = v * v;
                sumqx += w * q * v;
                sumq2 += w * q * q;
            }
            d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
        }
        put_f16(o, 0, d);
        for j in 0..16 {
            o[2 + j] = l[j] | (l[16 + j] << 4);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::{dequantize, GgmlType};

    #[test]
    fn rows_come_back_within_half_a_step() {
        let x: Vec<f32> = (0..256).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013 + (i as f32 * 0.7).sin()).collect();
        let cases: [(GgmlType, fn(&[f32], &mut [u8]), f32); 5] = [
            (GgmlType::Q4_0, q4_0, 8.0),
            (GgmlType::Q4_1, q4_1, 15.0),
            (GgmlType::Q5_0, q5_0, 16.0),
            (GgmlType::Q5_1, q5_1, 31.0),
            (GgmlType::IQ4_NL, iq4_nl, 8.0),
        ];
        for (ty, f, levels) in cases {
            let mut b = vec![0u8; ty.row_bytes(x.len())];
            f(&x, &mut b);
            let mut y = vec![0f32; x.len()];
            dequantize(ty, &b, &mut y);
            for (xb, yb) in x.chunks(32).zip(y.chunks(32)) {
                let span = xb.iter().fold(0f32, |m, v| m.max(v.abs())) * 2.0;
                let worst = xb.iter().zip(yb).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
                assert!(worst <= span / levels, "{ty:?}: error {worst} over a block spanning {span}");
            }
        }
        // an all-zero block stays zero
        let mut b = vec![0xffu8; 18];
        q4_0(&[0.0; 32], &mut b);
        let mut y = vec![1f32; 32];
        dequantize(GgmlType::Q4_0, &b, &mut y);
        assert!(y.iter().all(|&v| v == 0.0));
    }
}
