//! Scalar references for Q2_K, Q3_K, Q5_K, IQ4_NL, MXFP4 and IQ4_XS.
//!
//! Layouts: ggml-common.h. Dequantize: ggml-quants.c `dequantize_row_{q2_K,q3_K,q5_K,iq4_nl,iq4_xs}`.
//! Dots: the integer part of every block is computed exactly. Q3_K, Q5_K and IQ4_XS follow the
//! f32 orders llama.cpp runs on x86: ggml's AVX2 `vec_dot` for fewer than 8 tokens ([`k_lanes`]),
//! its tiled K-quant kernel for 8 or more (`*_tiled`, see `quant::batch_tokens`); Q2_K the
//! orders of its repacked gemv / gemm (AVX-512 machines), IQ4_NL ggml's AVX2 `vec_dot` or its
//! repacked rows-of-8 kernels (`quant::row_chain`), and MXFP4 the same two orders (llama.cpp
//! runs it through the IQ4_NL code paths with another codebook and an E8M0 scale).
use super::blocks::*;
use super::f16::read_f16;
use super::scalar::{fma_lanes, hsum8, q8_k_bsum, rd_f32, scale_min_k4};
use super::{DotFn, GgmlType};

/// The IQ4_NL / IQ4_XS codebook (ggml-common.h `kvalues_iq4nl`).
pub const KVALUES_IQ4NL: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113];
/// The MXFP4 codebook: E2M1's values doubled (ggml-common.h `kvalues_mxfp4`).
pub const KVALUES_MXFP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

/// ggml's `ggml_e8m0_to_fp32_half`: 2^(x-128), denormal for x < 2.
#[inline]
pub fn e8m0_half(x: u8) -> f32 {
    let bits: u32 = if x < 2 { 0x0020_0000 << x } else { ((x as u32) - 1) << 23 };
    f32::from_bits(bits)
}

/// Dequantize one block of `ty` (one of the types this file owns) into `y`.
pub fn dequantize_block(ty: GgmlType, b: &[u8], y: &mut [f32]) {
    use GgmlType::*;
    match ty {
        Q2_K => deq_q2_k(b, y),
        Q3_K => deq_q3_k(b, y),
        Q5_K => deq_q5_k(b, y),
        IQ4_NL => deq_iq4_nl(b, y),
        MXFP4 => deq_mxfp4(b, y),
        IQ4_XS => deq_iq4_xs(b, y),
        // Types without a reference produce NaN so nothing silently uses them.
        _ => y.fill(f32::NAN),
    }
}

/// The scalar dot kernel for the types this file owns.
pub fn dot(ty: GgmlType) -> Option<DotFn> {
    use GgmlType::*;
    Some(match ty {
        Q2_K => dot_q2_k_q8_k,
        Q3_K => dot_q3_k_q8_k,
        Q5_K => dot_q5_k_q8_k,
        IQ4_NL => dot_iq4_nl_q8_0,
        MXFP4 => dot_mxfp4_q8_0,
        IQ4_XS => dot_iq4_xs_q8_k,
        _ => return None,
    })
}

// ---------------------------------------------------------------- Q2_K
// block_q2_K { u8 scales[16] (low 4 bits: scale, high 4: min); u8 qs[64]; f16 d; f16 dmin; } = 84 bytes
// Element e: 128-chunk n = e/128, r = e%128, shift 2*(r/32), byte qs[32n + r%32]; scale/min index e/16.

/// The 256 unsigned 2-bit values of a Q2_K block, in element order.
#[inline]
pub fn q2_k_values(b: &[u8]) -> [u8; 256] {
    let mut v = [0u8; 256];
    let qs = &b[16..80];
    for (e, o) in v.iter_mut().enumerate() {
        let (n, r) = (e / 128, e % 128);
        *o = (qs[32 * n + r % 32] >> (2 * (r / 32))) & 3;
    }
    v
}

fn deq_q2_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 80);
    let dmin = read_f16(b, 82);
    let v = q2_k_values(b);
    for g in 0..16 {
        let sc = b[g];
        let dl = d * (sc & 0x0f) as f32;
        let ml = dmin * (sc >> 4) as f32;
        for l in 0..16 {
            y[16 * g + l] = dl * v[16 * g + l] as f32 - ml;
        }
    }
}

/// Per 128-element half of a Q2_K superblock: (Σ scale·value·q8, Σ min·bsum), exact.
#[inline]
fn q2_k_halves(wb: &[u8], ab: &[u8]) -> [(i32, i32); 2] {
    let v = q2_k_values(wb);
    let q8 = &ab[4..260];
    core::array::from_fn(|h| {
        let (mut isum, mut summ) = (0i32, 0i32);
        for g in 8 * h..8 * h + 8 {
            summ += q8_k_bsum(ab, g) * (wb[g] >> 4) as i32;
            let s: i32 = (0..16).map(|l| v[16 * g + l] as i32 * q8[16 * g + l] as i8 as i32).sum();
            isum += (wb[g] & 0x0f) as i32 * s;
        }
        (isum, summ)
    })
}

/// In the order of llama.cpp's repacked Q2_K gemv (`ggml_gemv_q2_K_8x8_q8_K`, what it runs for
/// Q2_K weights on AVX-512 machines): per superblock the whole integer sum and the whole min
/// term, each into its own f32 FMA chain (`d_w·d_a`, `dmin_w·d_a`); the two subtracted at the end.
pub fn dot_q2_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut acc_m) = (0f32, 0f32);
    for (wb, ab) in w.chunks_exact(Q2_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let dy = rd_f32(ab, 0);
        let [(i0, m0), (i1, m1)] = q2_k_halves(wb, ab);
        acc = ((i0 + i1) as f32).mul_add(read_f16(wb, 80) * dy, acc);
        acc_m = ((m0 + m1) as f32).mul_add(read_f16(wb, 82) * dy, acc_m);
    }
    acc - acc_m
}

/// Q2_K in the order of llama.cpp's repacked gemm (`ggml_gemm_q2_K_8x8_q8_K`, groups of 4
/// tokens): as [`dot_q2_k_q8_k`] with each 128-element half's sums going into the chains.
pub fn dot_q2_k_q8_k_gemm(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut acc_m) = (0f32, 0f32);
    for (wb, ab) in w.chunks_exact(Q2_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let dy = rd_f32(ab, 0);
        for (isum, summ) in q2_k_halves(wb, ab) {
            acc = (isum as f32).mul_add(read_f16(wb, 80) * dy, acc);
            acc_m = (summ as f32).mul_add(read_f16(wb, 82) * dy, acc_m);
        }
    }
    acc - acc_m
}

// ---------------------------------------------------------------- Q3_K
// block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d; } = 110 bytes
// Element e: n = e/128, r = e%128, j = r/32, l = r%32: low 2 bits (qs[32n+l] >> 2j) & 3,
// minus 4 unless hmask[l] has bit 4n+j set. 16 6-bit scales (minus 32), index e/16.

/// The 16 signed scales of a Q3_K block (already minus 32), unpacked as ggml does with kmask1/kmask2.
#[inline]
pub fn q3_k_scales(b: &[u8]) -> [i8; 16] {
    let s = &b[96..108];
    let mut out = [0i8; 16];
    for (j, o) in out.iter_mut().enumerate() {
        let low = if j < 8 { s[j] & 0x0f } else { s[j - 8] >> 4 };
        let high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        *o = (low | (high << 4)) as i8 - 32;
    }
    out
}

/// The 256 signed 3-bit values (-4..=3) of a Q3_K block, in element order.
#[inline]
pub fn q3_k_values(b: &[u8]) -> [i8; 256] {
    let hm = &b[0..32];
    let qs = &b[32..96];
    let mut v = [0i8; 256];
    for (e, o) in v.iter_mut().enumerate() {
        let (n, r) = (e / 128, e % 128);
        let (j, l) = (r / 32, r % 32);
        let low = ((qs[32 * n + l] >> (2 * j)) & 3) as i8;
        let high_set = hm[l] & (1u8 << (4 * n + j)) != 0;
        *o = low - if high_set { 0 } else { 4 };
    }
    v
}

fn deq_q3_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 108);
    let sc = q3_k_scales(b);
    let v = q3_k_values(b);
    for g in 0..16 {
        let dl = d * sc[g] as f32;
        for l in 0..16 {
            y[16 * g + l] = dl * v[16 * g + l] as f32;
        }
    }
}

/// ggml's AVX2 K-quant accumulation: 8 i32 lanes per superblock, lane k summing the products
/// of the elements with `(e % 32) / 4 == k` (a `madd` over each 32-byte chunk).
#[inline]
pub fn k_lanes(prod: impl Fn(usize) -> i32) -> [i32; 8] {
    let mut l = [0i32; 8];
    for e in 0..256 {
        l[(e % 32) / 4] += prod(e);
    }
    l
}

/// `lane = fma(d, f32(lanes[k]), lane)` for the 8 f32 lanes of ggml's `acc`.
#[inline]
pub fn fma_k_lanes(acc: &mut [f32; 8], d: f32, lanes: &[i32; 8]) {
    for (x, &l) in acc.iter_mut().zip(lanes) {
        *x = d.mul_add(l as f32, *x);
    }
}

/// llama.cpp's tiled kernel without mins: per superblock `fma(f32(Σ) · d_w, d_a, total)`.
#[inline]
fn tiled_step(sum: f32, isum: i32, d_w: f32, d_a: f32) -> f32 {
    (isum as f32 * d_w).mul_add(d_a, sum)
}

/// Σ scale · value · q8 of one Q3_K superblock, per element.
#[inline]
fn q3_k_prod(wb: &[u8], ab: &[u8]) -> impl Fn(usize) -> i32 {
    let sc = q3_k_scales(wb);
    let v = q3_k_values(wb);
    let q8: [i8; 256] = core::array::from_fn(|e| ab[4 + e] as i8);
    move |e| sc[e / 16] as i32 * v[e] as i32 * q8[e] as i32
}

/// In the order of ggml's AVX2 `ggml_vec_dot_q3_K_q8_K` ([`k_lanes`], `hsum_float_8`).
pub fn dot_q3_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(Q3_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let d = rd_f32(ab, 0) * read_f16(wb, 108);
        fma_k_lanes(&mut acc, d, &k_lanes(q3_k_prod(wb, ab)));
    }
    hsum8(&acc)
}

/// Q3_K in the order of llama.cpp's tiled kernel (8 tokens or more).
pub fn dot_q3_k_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (wb, ab) in w.chunks_exact(Q3_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let p = q3_k_prod(wb, ab);
        sum = tiled_step(sum, (0..256).map(p).sum(), read_f16(wb, 108), rd_f32(ab, 0));
    }
    sum
}

// ---------------------------------------------------------------- Q5_K
// block_q5_K { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]; } = 176 bytes
// 64-element group j: low nibbles of qs[32j..32j+32] (+16 if qh bit 2j) then high nibbles
// (+16 if qh bit 2j+1); scale/min pair index e/32 (get_scale_min_k4).

/// The 256 unsigned 5-bit values of a Q5_K block, in element order.
#[inline]
pub fn q5_k_values(b: &[u8]) -> [u8; 256] {
    let qh = &b[16..48];
    let qs = &b[48..176];
    let mut v = [0u8; 256];
    for j in 0..4 {
        for l in 0..32 {
            let q = qs[32 * j + l];
            let h0 = ((qh[l] >> (2 * j)) & 1) << 4;
            let h1 = ((qh[l] >> (2 * j + 1)) & 1) << 4;
            v[64 * j + l] = (q & 0x0f) | h0;
            v[64 * j + 32 + l] = (q >> 4) | h1;
        }
    }
    v
}

fn deq_q5_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let dmin = read_f16(b, 2);
    let (sc, m) = scale_min_k4(&b[4..16]);
    let v = q5_k_values(b);
    for s in 0..8 {
        let (dl, ml) = (d * sc[s] as f32, dmin * m[s] as f32);
        for l in 0..32 {
            y[32 * s + l] = dl * v[32 * s + l] as f32 - ml;
        }
    }
}

/// Per element scale · value · q8 of one Q5_K superblock, and its integer min term
/// Σ_s min_s · (bsum_2s + bsum_2s+1).
#[inline]
fn q5_k_prod(wb: &[u8], ab: &[u8]) -> (impl Fn(usize) -> i32, i32) {
    let (sc, m) = scale_min_k4(&wb[4..16]);
    let v = q5_k_values(wb);
    let q8: [i8; 256] = core::array::from_fn(|e| ab[4 + e] as i8);
    let summ = (0..8).map(|s| m[s] as i32 * (q8_k_bsum(ab, 2 * s) + q8_k_bsum(ab, 2 * s + 1))).sum();
    (move |e: usize| sc[e / 32] as i32 * v[e] as i32 * q8[e] as i32, summ)
}

/// In the order of ggml's AVX2 `ggml_vec_dot_q5_K_q8_K`: [`k_lanes`] with `d_a·d_w`, the min
/// terms `-d_a·dmin_w · f32(Σ)` in one f32 chain (`summs`), `hsum_float_8(acc) + summs`.
pub fn dot_q5_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut summs) = ([0f32; 8], 0f32);
    for (wb, ab) in w.chunks_exact(Q5_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let dy = rd_f32(ab, 0);
        let (p, summ) = q5_k_prod(wb, ab);
        summs = (-dy * read_f16(wb, 2)).mul_add(summ as f32, summs);
        fma_k_lanes(&mut acc, dy * read_f16(wb, 0), &k_lanes(p));
    }
    hsum8(&acc) + summs
}

/// Q5_K in the order of llama.cpp's tiled kernel (8 tokens or more): per superblock
/// `r = fma(-dmin_w, f32(Σ mins), f32(Σ) · d_w)`, `total = fma(r, d_a, total)`.
pub fn dot_q5_k_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (wb, ab) in w.chunks_exact(Q5_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let (p, summ) = q5_k_prod(wb, ab);
        let sumi: i32 = (0..256).map(p).sum();
        let r = (-read_f16(wb, 2)).mul_add(summ as f32, sumi as f32 * read_f16(wb, 0));
        sum = r.mul_add(rd_f32(ab, 0), sum);
    }
    sum
}

// ---------------------------------------------------------------- IQ4_NL
// block_iq4_nl { f16 d; u8 qs[16]; } = 18 bytes; element j: kvalues[qs[j] & 15], j+16: kvalues[qs[j] >> 4].

fn deq_iq4_nl(b: &[u8], y: &mut [f32]) {
    NL_IQ4.dequantize(b, y)
}

/// A 32-element block of 4-bit codes into a 16-value codebook: IQ4_NL (f16 scale) or MXFP4
/// (E8M0 scale), which llama.cpp runs through the same kernels.
struct Nl4 {
    bytes: usize,
    /// where the 16 code bytes start
    qs: usize,
    table: &'static [i8; 16],
    scale: fn(&[u8]) -> f32,
}

const NL_IQ4: Nl4 = Nl4 { bytes: IQ4_NL_BYTES, qs: 2, table: &KVALUES_IQ4NL, scale: |b| read_f16(b, 0) };
const NL_MXFP4: Nl4 = Nl4 { bytes: MXFP4_BYTES, qs: 1, table: &KVALUES_MXFP4, scale: |b| e8m0_half(b[0]) };

impl Nl4 {
    /// The 32 signed values of a block times its Q8_0 activations, per element.
    #[inline]
    fn prod(&self, wb: &[u8], ab: &[u8]) -> impl Fn(usize) -> i32 {
        let v: [i8; 32] = core::array::from_fn(|e| {
            let q = wb[self.qs + e % 16];
            self.table[(if e < 16 { q & 0x0f } else { q >> 4 }) as usize]
        });
        let q8: [i8; 32] = core::array::from_fn(|e| ab[2 + e] as i8);
        move |e| v[e] as i32 * q8[e] as i32
    }

    /// In the order of ggml's AVX2 `ggml_vec_dot_iq4_nl_q8_0` (and `_mxfp4_q8_0`):
    /// [`fma_lanes`] in two chains (even and odd blocks), added before `hsum_float_8`.
    fn dot(&self, n: usize, w: &[u8], a: &[u8]) -> f32 {
        let mut acc = [[0f32; 8]; 2];
        for (i, (wb, ab)) in w.chunks_exact(self.bytes).zip(a.chunks_exact(Q8_0_BYTES)).take(n / 32).enumerate() {
            fma_lanes(&mut acc[i % 2], (self.scale)(wb) * read_f16(ab, 0), self.prod(wb, ab));
        }
        hsum8(&core::array::from_fn(|k| acc[0][k] + acc[1][k]))
    }

    /// In the order of llamafile's tinyBLAS (`tinyBLAS_Q0_AVX`, ggml's matmul of two or more
    /// tokens): [`fma_lanes`] in one chain, then `hsum_float_8`.
    fn dot_tiny(&self, n: usize, w: &[u8], a: &[u8]) -> f32 {
        let mut acc = [0f32; 8];
        for (wb, ab) in w.chunks_exact(self.bytes).zip(a.chunks_exact(Q8_0_BYTES)).take(n / 32) {
            fma_lanes(&mut acc, (self.scale)(wb) * read_f16(ab, 0), self.prod(wb, ab));
        }
        hsum8(&acc)
    }

    /// In the order of llama.cpp's repacked `iq4_nl_8x8` / `mxfp4_8x8` kernels
    /// (`quant::row_chain`): one f32 chain, `fma(f32(Σ block), d_w·d_a, acc)`.
    fn dot_chain(&self, n: usize, w: &[u8], a: &[u8]) -> f32 {
        let mut acc = 0f32;
        for (wb, ab) in w.chunks_exact(self.bytes).zip(a.chunks_exact(Q8_0_BYTES)).take(n / 32) {
            let s: i32 = (0..32).map(self.prod(wb, ab)).sum();
            acc = (s as f32).mul_add((self.scale)(wb) * read_f16(ab, 0), acc);
        }
        acc
    }

    fn dequantize(&self, b: &[u8], y: &mut [f32]) {
        let d = (self.scale)(b);
        for j in 0..16 {
            let q = b[self.qs + j];
            y[j] = d * self.table[(q & 0x0f) as usize] as f32;
            y[j + 16] = d * self.table[(q >> 4) as usize] as f32;
        }
    }
}

pub fn dot_iq4_nl_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    NL_IQ4.dot(n, w, a)
}

/// [`dot_iq4_nl_q8_0`] in llama.cpp's batch order (tinyBLAS).
pub fn dot_iq4_nl_q8_0_tiny(n: usize, w: &[u8], a: &[u8]) -> f32 {
    NL_IQ4.dot_tiny(n, w, a)
}

pub fn dot_iq4_nl_q8_0_chain(n: usize, w: &[u8], a: &[u8]) -> f32 {
    NL_IQ4.dot_chain(n, w, a)
}

/// Q5_0 in the block-chain order of `scalar::dot_q4_0_q8_0_chain` (no llama.cpp kernel has it: the
/// order of llamars' fast mode, `quant::Exactness::Fast`).
pub fn dot_q5_0_q8_0_chain(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = 0f32;
    for (wb, ab) in w.chunks_exact(22).zip(a.chunks_exact(34)).take(n / 32) {
        let v = super::scalar::q5_0_values(wb);
        let s: i32 = (0..32).map(|j| v[j] as i32 * ab[2 + j] as i8 as i32).sum();
        acc = (s as f32).mul_add(read_f16(wb, 0) * read_f16(ab, 0), acc);
    }
    acc
}

/// Q8_0 in the block-chain order (the fast mode's, as [`dot_q5_0_q8_0_chain`]).
pub fn dot_q8_0_q8_0_chain(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = 0f32;
    for (wb, ab) in w.chunks_exact(34).zip(a.chunks_exact(34)).take(n / 32) {
        let s: i32 = (0..32).map(|j| wb[2 + j] as i8 as i32 * ab[2 + j] as i8 as i32).sum();
        acc = (s as f32).mul_add(read_f16(wb, 0) * read_f16(ab, 0), acc);
    }
    acc
}

// block_mxfp4 { u8 e; u8 qs[16]; } = 17 bytes; element j: kvalues_mxfp4[qs[j] & 15] · 2^(e-128),
// j+16: the high nibble.

fn deq_mxfp4(b: &[u8], y: &mut [f32]) {
    NL_MXFP4.dequantize(b, y)
}

pub fn dot_mxfp4_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    NL_MXFP4.dot(n, w, a)
}

pub fn dot_mxfp4_q8_0_chain(n: usize, w: &[u8], a: &[u8]) -> f32 {
    NL_MXFP4.dot_chain(n, w, a)
}

// ---------------------------------------------------------------- IQ4_XS
// block_iq4_xs { f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]; } = 136 bytes
// Sub-block ib (32 elements): scale ((scales_l[ib/2] >> 4(ib%2)) & 15) | ((scales_h >> 2ib) & 3) << 4, minus 32;
// codes as IQ4_NL over qs[16ib..16ib+16].

/// The 8 signed sub-block scales (already minus 32) of an IQ4_XS block.
#[inline]
pub fn iq4_xs_scales(b: &[u8]) -> [i32; 8] {
    let sh = u16::from_le_bytes([b[2], b[3]]) as i32;
    let mut out = [0i32; 8];
    for (ib, o) in out.iter_mut().enumerate() {
        let ls = ((b[4 + ib / 2] as i32 >> (4 * (ib % 2))) & 0x0f) | (((sh >> (2 * ib)) & 3) << 4);
        *o = ls - 32;
    }
    out
}

fn deq_iq4_xs(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let sc = iq4_xs_scales(b);
    for ib in 0..8 {
        let dl = d * sc[ib] as f32;
        let qs = &b[8 + 16 * ib..8 + 16 * ib + 16];
        for j in 0..16 {
            y[32 * ib + j] = dl * KVALUES_IQ4NL[(qs[j] & 0x0f) as usize] as f32;
            y[32 * ib + j + 16] = dl * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
        }
    }
}

/// Per element scale · value · q8 of one IQ4_XS superblock.
#[inline]
fn iq4_xs_prod(wb: &[u8], ab: &[u8]) -> impl Fn(usize) -> i32 {
    let sc = iq4_xs_scales(wb);
    let v: [i8; 256] = core::array::from_fn(|e| {
        let q = wb[8 + 16 * (e / 32) + e % 16];
        KVALUES_IQ4NL[(if e % 32 < 16 { q & 0x0f } else { q >> 4 }) as usize]
    });
    let q8: [i8; 256] = core::array::from_fn(|e| ab[4 + e] as i8);
    move |e| sc[e / 32] * v[e] as i32 * q8[e] as i32
}

/// In the order of ggml's AVX2 `ggml_vec_dot_iq4_xs_q8_K` ([`k_lanes`], `hsum_float_8`).
pub fn dot_iq4_xs_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(IQ4_XS_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let d = rd_f32(ab, 0) * read_f16(wb, 0);
        fma_k_lanes(&mut acc, d, &k_lanes(iq4_xs_prod(wb, ab)));
    }
    hsum8(&acc)
}

/// IQ4_XS in the order of llama.cpp's tiled kernel (8 tokens or more).
pub fn dot_iq4_xs_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (wb, ab) in w.chunks_exact(IQ4_XS_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let p = iq4_xs_prod(wb, ab);
        sum = tiled_step(sum, (0..256).map(p).sum(), read_f16(wb, 0), rd_f32(ab, 0));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_mxfp4() {
        // e = 128 → scale 1 (2^(e-128)); code 0 → 0, code 15 → -12, code 7 → 12
        let mut b = vec![0u8; MXFP4_BYTES];
        b[0] = 128;
        b[1..17].fill(0xF0);
        b[1] = 0x07;
        let mut y = [0f32; 32];
        dequantize_block(GgmlType::MXFP4, &b, &mut y);
        assert!(y[0] == 12.0 && y[16] == 0.0 && y[1..16].iter().all(|&v| v == 0.0) && y[17..].iter().all(|&v| v == -12.0));
        // E8M0 corners: denormal 2^-128 and 2^-127, the largest 2^127
        assert_eq!((e8m0_half(0), e8m0_half(1), e8m0_half(255)), (2f32.powi(-128), 2f32.powi(-127), 2f32.powi(126) * 2.0));
    }
}
