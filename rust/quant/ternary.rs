//! Scalar references for the ternary types TQ1_0 and TQ2_0 (weights in {-1, 0, 1} · d).
//!
//! Layouts: ggml-common.h `block_tq1_0` / `block_tq2_0`. Dequantize: ggml-quants.c
//! `dequantize_row_tq{1,2}_0` (and gguf-py's, equal to them). Dots against Q8_K in the order of
//! ggml's AVX2 `ggml_vec_dot_tq{1,2}_0_q8_K` (the kernel llama.cpp runs on x86 for every batch
//! size: neither type is repacked or tiled): per superblock 8 i32 lanes, lane k holding the
//! products `code · q8` of the elements with `(e % 32) / 4 == k` ([`k_lanes`]) minus the
//! activation sums of elements `32k..32k+32` (the `-1` of `code - 1`, taken from `bsums`);
//! `lane = fma(d_a · d_w, f32(lane), lane)`; [`hsum8`].
use super::blocks::*;
use super::f16::read_f16;
use super::scalar::{hsum8, q8_k_bsum, rd_f32};
use super::scalar_k::{fma_k_lanes, k_lanes};

/// `(q · 3) >> 8` of the byte `q · 3^n` (mod 256): the n-th base-3 digit of a TQ1_0 byte.
#[inline]
pub fn tq1_digit(q: u8, pow3: u8) -> u8 {
    ((q.wrapping_mul(pow3) as u16 * 3) >> 8) as u8
}

/// The 256 codes (0, 1, 2: value + 1) of a TQ1_0 block, in element order.
pub fn tq1_0_codes(b: &[u8]) -> [u8; 256] {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    let mut v = [0u8; 256];
    let mut e = 0;
    // qs[0..32] × 5 digits, qs[32..48] × 5 digits, each digit a run of 32 (16) elements
    for (start, len) in [(0usize, 32usize), (32, 16)] {
        for &p in &POW3 {
            for m in 0..len {
                v[e] = tq1_digit(b[start + m], p);
                e += 1;
            }
        }
    }
    for &p in &POW3[..4] {
        for j in 0..4 {
            v[e] = tq1_digit(b[48 + j], p);
            e += 1;
        }
    }
    v
}

/// The 256 codes (0..3: value + 1; 3 never written by a quantizer) of a TQ2_0 block, in
/// element order: byte `32c + m` holds elements `128c + 32l + m` at bits `2l`.
pub fn tq2_0_codes(b: &[u8]) -> [u8; 256] {
    core::array::from_fn(|e| (b[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3)
}

fn deq(codes: [u8; 256], d: f32, y: &mut [f32]) {
    for (o, &c) in y.iter_mut().zip(&codes) {
        *o = (c as i32 - 1) as f32 * d;
    }
}

pub(super) fn deq_tq1_0(b: &[u8], y: &mut [f32]) {
    deq(tq1_0_codes(b), read_f16(b, 52), y)
}

pub(super) fn deq_tq2_0(b: &[u8], y: &mut [f32]) {
    deq(tq2_0_codes(b), read_f16(b, 64), y)
}

fn dot_ternary(n: usize, w: &[u8], a: &[u8], bytes: usize, codes: fn(&[u8]) -> [u8; 256]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(bytes).zip(a.chunks_exact(Q8_K_BYTES)).take(n / QK_K) {
        let c = codes(wb);
        let mut lanes = k_lanes(|e| c[e] as i32 * ab[Q8_K_QS + e] as i8 as i32);
        for (k, l) in lanes.iter_mut().enumerate() {
            *l -= q8_k_bsum(ab, 2 * k) + q8_k_bsum(ab, 2 * k + 1);
        }
        fma_k_lanes(&mut acc, rd_f32(ab, 0) * read_f16(wb, bytes - 2), &lanes);
    }
    hsum8(&acc)
}

pub fn dot_tq1_0_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_ternary(n, w, a, TQ1_0_BYTES, tq1_0_codes)
}

pub fn dot_tq2_0_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    dot_ternary(n, w, a, TQ2_0_BYTES, tq2_0_codes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One TQ1_0 byte per code triple as gguf-py's quantizer writes it: digits → fixed point.
    fn pack(digits: &[u8]) -> u8 {
        let v = digits.iter().fold(0u16, |acc, &d| acc * 3 + d as u16);
        let v = v * 3u16.pow(5 - digits.len() as u32);
        (v * 256).div_ceil(243) as u8
    }

    #[test]
    fn tq1_0_digits_round_trip() {
        for x in 0..243u16 {
            let digits: Vec<u8> = (0..5).rev().map(|i| ((x / 3u16.pow(i)) % 3) as u8).collect();
            let q = pack(&digits);
            let got: Vec<u8> = [1u8, 3, 9, 27, 81].iter().map(|&p| tq1_digit(q, p)).collect();
            assert_eq!(got, digits, "x = {x}");
        }
    }

    #[test]
    fn tq2_0_element_order() {
        let mut b = [0u8; TQ2_0_BYTES];
        b[33] = 0b10_01_00_10; // elements 128+1, 160+1, 192+1, 224+1
        let c = tq2_0_codes(&b);
        assert_eq!((c[129], c[161], c[193], c[225]), (2, 0, 1, 2));
        assert_eq!(c.iter().filter(|&&x| x != 0).count(), 3);
    }
}
