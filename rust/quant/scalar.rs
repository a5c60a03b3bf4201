//! Scalar reference kernels: dequantize and dot products, one per type.
//! These are the oracles every SIMD kernel is tested against. Layouts follow
//! ggml-common.h; the math follows ggml-quants.c (dequantize_row_*) and
//! ggml-cpu/quants.c (ggml_vec_dot_*_generic).
use super::blocks::*;
use super::f16::{bf16_to_f32, f16_to_f32, read_f16};
use super::{DotFn, GgmlType};

#[inline]
pub(super) fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[inline]
pub(super) fn rd_f32(b: &[u8], at: usize) -> f32 {
    f32::from_bits(rd_u32(b, at))
}

/// Dequantize whole blocks of `ty` from `src` into `out`.
pub fn dequantize(ty: GgmlType, src: &[u8], out: &mut [f32]) {
    use GgmlType::*;
    let (bs, ts) = ty.block();
    let nb = out.len() / bs;
    for i in 0..nb {
        let b = &src[i * ts..(i + 1) * ts];
        let y = &mut out[i * bs..(i + 1) * bs];
        match ty {
            F32 => y[0] = rd_f32(b, 0),
            F16 => y[0] = read_f16(b, 0),
            BF16 => y[0] = bf16_to_f32(u16::from_le_bytes([b[0], b[1]])),
            Q4_0 => deq_q4_0(b, y),
            Q4_1 => deq_q4_1(b, y),
            Q5_0 => deq_q5_0(b, y),
            Q5_1 => deq_q5_1(b, y),
            Q8_0 => deq_q8_0(b, y),
            Q8_1 => deq_q8_1(b, y),
            Q8_K => deq_q8_k(b, y),
            Q4_K => deq_q4_k(b, y),
            Q6_K => deq_q6_k(b, y),
            TQ1_0 => super::ternary::deq_tq1_0(b, y),
            TQ2_0 => super::ternary::deq_tq2_0(b, y),
            IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S => super::iquant::dequantize_block(ty, b, y),
            IQ1_S | IQ1_M => super::iquant1::dequantize_block(ty, b, y),
            _ => super::scalar_k::dequantize_block(ty, b, y),
        }
    }
}

fn deq_q4_0(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        y[j] = ((q & 0x0f) as i32 - 8) as f32 * d;
        y[j + 16] = ((q >> 4) as i32 - 8) as f32 * d;
    }
}

fn deq_q4_1(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let m = read_f16(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        y[j] = (q & 0x0f) as f32 * d + m;
        y[j + 16] = (q >> 4) as f32 * d + m;
    }
}

/// The 32 signed 5-bit values of a Q5_0 block (before scaling), in element order.
#[inline]
pub fn q5_0_values(b: &[u8]) -> [i8; 32] {
    let qh = rd_u32(b, 2);
    let mut v = [0i8; 32];
    for j in 0..16 {
        let q = b[6 + j];
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        v[j] = ((q & 0x0f) | h0) as i8 - 16;
        v[j + 16] = ((q >> 4) | h1) as i8 - 16;
    }
    v
}

fn deq_q5_0(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    for (o, q) in y.iter_mut().zip(q5_0_values(b)) {
        *o = q as f32 * d;
    }
}

fn deq_q5_1(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let m = read_f16(b, 2);
    let qh = rd_u32(b, 4);
    for j in 0..16 {
        let q = b[8 + j];
        let h0 = (((qh >> j) << 4) & 0x10) as u8;
        let h1 = ((qh >> (j + 12)) & 0x10) as u8;
        y[j] = ((q & 0x0f) | h0) as f32 * d + m;
        y[j + 16] = ((q >> 4) | h1) as f32 * d + m;
    }
}

fn deq_q8_0(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    for j in 0..32 {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

// block_q8_1 { f16 d; f16 s; i8 qs[32]; } (s is only used by the dots)
fn deq_q8_1(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    for j in 0..32 {
        y[j] = b[4 + j] as i8 as f32 * d;
    }
}

fn deq_q8_k(b: &[u8], y: &mut [f32]) {
    let d = rd_f32(b, 0);
    for j in 0..256 {
        y[j] = b[4 + j] as i8 as f32 * d;
    }
}

/// Unpack the 8 6-bit (scale, min) pairs of a Q4_K / Q5_K block (get_scale_min_k4).
#[inline]
pub fn scale_min_k4(q: &[u8]) -> ([u8; 8], [u8; 8]) {
    let mut sc = [0u8; 8];
    let mut m = [0u8; 8];
    for j in 0..8 {
        if j < 4 {
            sc[j] = q[j] & 63;
            m[j] = q[j + 4] & 63;
        } else {
            sc[j] = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
            m[j] = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
        }
    }
    (sc, m)
}

// block_q4_K { f16 d; f16 dmin; u8 scales[12]; u8 qs[128]; }
fn deq_q4_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 0);
    let dmin = read_f16(b, 2);
    let (sc, m) = scale_min_k4(&b[4..16]);
    let qs = &b[16..144];
    for j in 0..4 {
        let q = &qs[j * 32..j * 32 + 32];
        let (d1, m1) = (d * sc[2 * j] as f32, dmin * m[2 * j] as f32);
        let (d2, m2) = (d * sc[2 * j + 1] as f32, dmin * m[2 * j + 1] as f32);
        for l in 0..32 {
            y[j * 64 + l] = d1 * (q[l] & 0x0f) as f32 - m1;
            y[j * 64 + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

/// The 256 signed 6-bit values of a Q6_K block (before scaling), in element order.
// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d; }
#[inline]
pub fn q6_k_values(b: &[u8]) -> [i8; 256] {
    let mut v = [0i8; 256];
    for n in 0..2 {
        let ql = &b[n * 64..n * 64 + 64];
        let qh = &b[128 + n * 32..128 + n * 32 + 32];
        let y = &mut v[n * 128..n * 128 + 128];
        for l in 0..32 {
            y[l] = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            y[l + 32] = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            y[l + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            y[l + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
        }
    }
    v
}

fn deq_q6_k(b: &[u8], y: &mut [f32]) {
    let d = read_f16(b, 208);
    let v = q6_k_values(b);
    for (i, o) in y.iter_mut().enumerate() {
        *o = d * (b[192 + i / 16] as i8) as f32 * v[i] as f32;
    }
}

// ---------------------------------------------------------------- dot products

/// The scalar dot kernel for a weight type (against `vec_dot_type(ty)` activations).
pub fn dot(ty: GgmlType) -> Option<DotFn> {
    use GgmlType::*;
    Some(match ty {
        F32 => dot_f32,
        F16 => dot_f16,
        BF16 => dot_bf16,
        Q4_0 => dot_q4_0_q8_0,
        Q4_1 => dot_q4_1_q8_1,
        Q5_0 => dot_q5_0_q8_0,
        Q5_1 => dot_q5_1_q8_1,
        Q8_0 => dot_q8_0_q8_0,
        Q4_K => dot_q4_k_q8_k,
        Q6_K => dot_q6_k_q8_k,
        TQ1_0 => super::ternary::dot_tq1_0_q8_k,
        TQ2_0 => super::ternary::dot_tq2_0_q8_k,
        IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M => return super::iquant::dots(ty).map(|(vec, _)| vec),
        _ => return super::scalar_k::dot(ty),
    })
}

/// The scalar kernel in the block-chain order, `fma(f32(Σ block), d_w·d_a, acc)`: llama.cpp's
/// repacked rows-of-8 kernels' for Q4_0 / IQ4_NL / MXFP4 (`quant::row_chain`), and the fast
/// mode's for Q5_0 / Q8_0 (`quant::Exactness::Fast`); `None` for other types.
pub fn dot_chain(ty: GgmlType) -> Option<DotFn> {
    match ty {
        GgmlType::Q4_0 => Some(dot_q4_0_q8_0_chain),
        GgmlType::IQ4_NL => Some(super::scalar_k::dot_iq4_nl_q8_0_chain),
        GgmlType::MXFP4 => Some(super::scalar_k::dot_mxfp4_q8_0_chain),
        // the fast mode's order; no llama.cpp kernel has it for these two
        GgmlType::Q5_0 => Some(super::scalar_k::dot_q5_0_q8_0_chain),
        GgmlType::Q8_0 => Some(super::scalar_k::dot_q8_0_q8_0_chain),
        _ => None,
    }
}

/// `_mm512_reduce_add_ps` (GCC's tree): halves, then quarters, then pairs.
#[inline]
pub fn reduce16(x: &[f32; 16]) -> f32 {
    let mut t = [0f32; 8];
    for i in 0..8 {
        t[i] = x[i] + x[i + 8];
    }
    let u = [t[0] + t[4], t[1] + t[5], t[2] + t[6], t[3] + t[7]];
    (u[0] + u[2]) + (u[1] + u[3])
}

/// 64 lanes → 16 as `GGML_F32x16_REDUCE` does (x0+=x2, x1+=x3, x0+=x1), then [`reduce16`].
#[inline]
pub fn reduce64(x: &[f32; 64]) -> f32 {
    let mut r = [0f32; 16];
    for (l, v) in r.iter_mut().enumerate() {
        *v = (x[l] + x[l + 32]) + (x[l + 16] + x[l + 48]);
    }
    reduce16(&r)
}

/// llama.cpp's F32 / F16 dot as its x86 AVX-512 build runs it. One token
/// (`ggml_vec_dot_f32` / `_f16`): 4 × 16 lanes per 64 elements, [`reduce64`], the elements
/// past the last 64 added after it (in f32 for F32, in f64 for F16). Two tokens or more
/// (`tiny`: llamafile's tinyBLAS, which takes rows of a multiple of 16): 16 lanes, lane l an
/// FMA chain over elements l, l+16, …, then [`reduce16`]. `x(i)` / `y(i)`: element i as f32.
#[inline]
pub fn dot_float_ggml(n: usize, x: impl Fn(usize) -> f32, y: impl Fn(usize) -> f32, f64_tail: bool, tiny: bool) -> f32 {
    if tiny && n % 16 == 0 {
        let mut acc = [0f32; 16];
        for i in (0..n).step_by(16) {
            for (l, a) in acc.iter_mut().enumerate() {
                *a = x(i + l).mul_add(y(i + l), *a);
            }
        }
        return reduce16(&acc);
    }
    let np = n / 64 * 64;
    let mut acc = [0f32; 64];
    for i in (0..np).step_by(64) {
        for (l, a) in acc.iter_mut().enumerate() {
            *a = x(i + l).mul_add(y(i + l), *a);
        }
    }
    let r = reduce64(&acc);
    if f64_tail {
        let mut s = r as f64;
        for i in np..n {
            s += (x(i) * y(i)) as f64;
        }
        s as f32
    } else {
        let mut s = r;
        for i in np..n {
            s += x(i) * y(i);
        }
        s
    }
}

pub fn dot_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 4).min(a.len() / 4);
    dot_float_ggml(n, |i| rd_f32(w, 4 * i), |i| rd_f32(a, 4 * i), false, false)
}

pub fn dot_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    dot_float_ggml(n, |i| read_f16(w, 2 * i), |i| read_f16(a, 2 * i), true, false)
}

/// [`dot_f32`] in llama.cpp's batch order (tinyBLAS).
pub fn dot_f32_tiny(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 4).min(a.len() / 4);
    dot_float_ggml(n, |i| rd_f32(w, 4 * i), |i| rd_f32(a, 4 * i), false, true)
}

/// [`dot_f16`] in llama.cpp's batch order (tinyBLAS).
pub fn dot_f16_tiny(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    dot_float_ggml(n, |i| read_f16(w, 2 * i), |i| read_f16(a, 2 * i), true, true)
}

/// Two bf16 vectors in llama.cpp's batch order (tinyBLAS: 16 FMA lanes, `n` a multiple of 16).
pub fn dot_bf16_tiny(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let r = |b: &[u8], i: usize| bf16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
    dot_float_ggml(n, |i| r(w, i), |i| r(a, i), false, true)
}

pub fn dot_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let r = |b: &[u8], i: usize| bf16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
    (0..n).map(|i| r(w, i) * r(a, i)).sum()
}

/// ggml's x86 accumulation for the 32-element block types (`ggml_vec_dot_q8_0_q8_0` and its
/// kin under AVX2, and llamafile's tinyBLAS that llama.cpp uses for prompt batches): eight
/// f32 lanes; block after block, lane k takes `fma(d, Σ elements 4k..4k+3, lane)`; then
/// [`hsum8`]. Every SIMD kernel of these types reproduces this bit for bit.
#[inline]
pub fn fma_lanes(acc: &mut [f32; 8], d: f32, prod: impl Fn(usize) -> i32) {
    for (k, l) in acc.iter_mut().enumerate() {
        let s: i32 = (4 * k..4 * k + 4).map(&prod).sum();
        *l = d.mul_add(s as f32, *l);
    }
}

/// ggml's `hsum_float_8`: (x4+x0 + x6+x2) + (x5+x1 + x7+x3), in that association.
#[inline]
pub fn hsum8(x: &[f32; 8]) -> f32 {
    let r = [x[4] + x[0], x[5] + x[1], x[6] + x[2], x[7] + x[3]];
    (r[0] + r[2]) + (r[1] + r[3])
}

/// The 32 values of a Q4_0 / Q4_1 block's nibbles (low nibbles are elements 0..16).
#[inline]
fn nibbles(qs: &[u8]) -> [i32; 32] {
    let mut v = [0i32; 32];
    for j in 0..16 {
        v[j] = (qs[j] & 0x0f) as i32;
        v[j + 16] = (qs[j] >> 4) as i32;
    }
    v
}

pub fn dot_q8_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(34).zip(a.chunks_exact(34)).take(n / 32) {
        let d = read_f16(wb, 0) * read_f16(ab, 0);
        fma_lanes(&mut acc, d, |j| wb[2 + j] as i8 as i32 * ab[2 + j] as i8 as i32);
    }
    hsum8(&acc)
}

pub fn dot_q4_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(n / 32) {
        let v = nibbles(&wb[2..18]);
        let d = read_f16(wb, 0) * read_f16(ab, 0);
        fma_lanes(&mut acc, d, |j| (v[j] - 8) * ab[2 + j] as i8 as i32);
    }
    hsum8(&acc)
}

/// Q4_0 in the order of llama.cpp's repacked `q4_0_8x8` gemv / gemm (x86, rows in groups of
/// 8; `quant::row_chain`): one f32 chain, `fma(f32(Σ block), d_w·d_a, acc)` block after block.
pub fn dot_q4_0_q8_0_chain(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = 0f32;
    for (wb, ab) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(n / 32) {
        let v = nibbles(&wb[2..18]);
        let s: i32 = (0..32).map(|j| (v[j] - 8) * ab[2 + j] as i8 as i32).sum();
        acc = (s as f32).mul_add(read_f16(wb, 0) * read_f16(ab, 0), acc);
    }
    acc
}

/// `hsum8(lanes) + Σ m·s`, the `m·s` terms summed in f32 block after block (ggml's `summs`).
pub fn dot_q4_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut summs) = ([0f32; 8], 0f32);
    for (wb, ab) in w.chunks_exact(20).zip(a.chunks_exact(36)).take(n / 32) {
        let v = nibbles(&wb[4..20]);
        summs += read_f16(wb, 2) * read_f16(ab, 2);
        let d = read_f16(wb, 0) * read_f16(ab, 0);
        fma_lanes(&mut acc, d, |j| v[j] * ab[4 + j] as i8 as i32);
    }
    hsum8(&acc) + summs
}

pub fn dot_q5_0_q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(22).zip(a.chunks_exact(34)).take(n / 32) {
        let v = q5_0_values(wb);
        let d = read_f16(wb, 0) * read_f16(ab, 0);
        fma_lanes(&mut acc, d, |j| v[j] as i32 * ab[2 + j] as i8 as i32);
    }
    hsum8(&acc)
}

pub fn dot_q5_1_q8_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut summs) = ([0f32; 8], 0f32);
    for (wb, ab) in w.chunks_exact(24).zip(a.chunks_exact(36)).take(n / 32) {
        let qh = rd_u32(wb, 4);
        let mut v = nibbles(&wb[8..24]);
        for (j, x) in v.iter_mut().enumerate() {
            *x |= (((qh >> j) & 1) << 4) as i32;
        }
        summs += read_f16(wb, 2) * read_f16(ab, 2);
        let d = read_f16(wb, 0) * read_f16(ab, 0);
        fma_lanes(&mut acc, d, |j| v[j] * ab[4 + j] as i8 as i32);
    }
    hsum8(&acc) + summs
}

#[inline]
pub fn q8_k_bsum(a: &[u8], j: usize) -> i32 {
    i16::from_le_bytes([a[260 + 2 * j], a[261 + 2 * j]]) as i32
}

/// In the order of llama.cpp's repacked Q4_K kernels (`ggml_gemv/gemm_q4_K_8x8_q8_K`, what
/// it runs for Q4_K weights on x86 with AVX2): per superblock the whole integer sum and the
/// whole integer min term, each into its own f32 FMA chain; the two chains subtracted at the end.
pub fn dot_q4_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut acc_m) = (0f32, 0f32);
    for (wb, ab) in w.chunks_exact(Q4_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let dy = rd_f32(ab, 0);
        let (sc, m) = scale_min_k4(&wb[4..16]);
        let qs = &wb[16..144];
        let q8 = &ab[4..260];
        let mut sumi = 0i32;
        let mut summ = 0i32;
        for j in 0..4 {
            let q = &qs[j * 32..j * 32 + 32];
            let (mut s1, mut s2) = (0i32, 0i32);
            for l in 0..32 {
                s1 += (q[l] & 0x0f) as i32 * q8[j * 64 + l] as i8 as i32;
                s2 += (q[l] >> 4) as i32 * q8[j * 64 + 32 + l] as i8 as i32;
            }
            sumi += sc[2 * j] as i32 * s1 + sc[2 * j + 1] as i32 * s2;
        }
        for (j, &mj) in m.iter().enumerate() {
            summ += mj as i32 * (q8_k_bsum(ab, 2 * j) + q8_k_bsum(ab, 2 * j + 1));
        }
        acc = (sumi as f32).mul_add(read_f16(wb, 0) * dy, acc);
        acc_m = (summ as f32).mul_add(read_f16(wb, 2) * dy, acc_m);
    }
    acc - acc_m
}

/// In the order of ggml's AVX2 `ggml_vec_dot_q6_K_q8_K` (what llama.cpp runs for fewer than 8
/// tokens): 8 i32 lanes, lane m taking elements with `(e % 32) / 4 == m` and the `-32` offset
/// of scale groups 2m, 2m+1; `fma(d_a·d_w, lane, acc)` per superblock; [`hsum8`].
pub fn dot_q6_k_q8_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = [0f32; 8];
    for (wb, ab) in w.chunks_exact(Q6_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let v = q6_k_values(wb);
        let sc = |g: usize| (wb[192 + g] as i8) as i32;
        let mut lanes = [0i32; 8];
        for (m, l) in lanes.iter_mut().enumerate() {
            *l = -32 * (sc(2 * m) * q8_k_bsum(ab, 2 * m) + sc(2 * m + 1) * q8_k_bsum(ab, 2 * m + 1));
        }
        for (e, &q) in v.iter().enumerate() {
            lanes[(e % 32) / 4] += sc(e / 16) * (q as i32 + 32) * ab[4 + e] as i8 as i32;
        }
        let d = rd_f32(ab, 0) * read_f16(wb, 208);
        for (x, &l) in acc.iter_mut().zip(&lanes) {
            *x = d.mul_add(l as f32, *x);
        }
    }
    hsum8(&acc)
}

/// Q4_K in the order of llama.cpp's repacked gemm (`ggml_gemm_q4_K_8x8_q8_K`, groups of 4
/// tokens): as [`dot_q4_k_q8_k`] but each 64-element group's integer sum and min term go into
/// the chains separately.
pub fn dot_q4_k_q8_k_gemm(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let (mut acc, mut acc_m) = (0f32, 0f32);
    for (wb, ab) in w.chunks_exact(Q4_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        let dy = rd_f32(ab, 0);
        let (dd, dm) = (read_f16(wb, 0) * dy, read_f16(wb, 2) * dy);
        let (sc, m) = scale_min_k4(&wb[4..16]);
        for j in 0..4 {
            let q = &wb[16 + j * 32..16 + j * 32 + 32];
            let (mut s1, mut s2) = (0i32, 0i32);
            for l in 0..32 {
                s1 += (q[l] & 0x0f) as i32 * ab[4 + j * 64 + l] as i8 as i32;
                s2 += (q[l] >> 4) as i32 * ab[4 + j * 64 + 32 + l] as i8 as i32;
            }
            let sumi = sc[2 * j] as i32 * s1 + sc[2 * j + 1] as i32 * s2;
            let summ = m[2 * j] as i32 * (q8_k_bsum(ab, 4 * j) + q8_k_bsum(ab, 4 * j + 1))
                + m[2 * j + 1] as i32 * (q8_k_bsum(ab, 4 * j + 2) + q8_k_bsum(ab, 4 * j + 3));
            acc = (sumi as f32).mul_add(dd, acc);
            acc_m = (summ as f32).mul_add(dm, acc_m);
        }
    }
    acc - acc_m
}

/// Q6_K in the order of llama.cpp's tiled K-quant kernel (its AVX2 microkernel; batches of 8
/// or more tokens): per superblock `fma(f32(Σ) · d_w, d_a, total)`.
pub fn dot_q6_k_q8_k_tiled(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (wb, ab) in w.chunks_exact(Q6_K_BYTES).zip(a.chunks_exact(Q8_K_BYTES)).take(n / 256) {
        sum = (q6_k_block_sum(wb, ab) as f32 * read_f16(wb, 208)).mul_add(rd_f32(ab, 0), sum);
    }
    sum
}

/// Σ scale·(q6 - 32)·q8 of one Q6_K superblock.
fn q6_k_block_sum(wb: &[u8], ab: &[u8]) -> i32 {
    let v = q6_k_values(wb);
    let q8 = &ab[4..260];
    let mut sumi = 0i32;
    for g in 0..16 {
        let s: i32 = (0..16).map(|l| v[g * 16 + l] as i32 * q8[g * 16 + l] as i8 as i32).sum();
        sumi += (wb[192 + g] as i8) as i32 * s;
    }
    sumi
}

/// The scalar kernel in llama.cpp's batch order for `ty` (see `quant::batch_tokens`), if it
/// has one.
pub fn dot_batch(ty: GgmlType) -> Option<DotFn> {
    match ty {
        GgmlType::Q4_K => Some(dot_q4_k_q8_k_gemm),
        GgmlType::Q2_K => Some(super::scalar_k::dot_q2_k_q8_k_gemm),
        GgmlType::Q6_K => Some(dot_q6_k_q8_k_tiled),
        GgmlType::Q3_K => Some(super::scalar_k::dot_q3_k_q8_k_tiled),
        GgmlType::Q5_K => Some(super::scalar_k::dot_q5_k_q8_k_tiled),
        GgmlType::IQ4_XS => Some(super::scalar_k::dot_iq4_xs_q8_k_tiled),
        GgmlType::F32 => Some(dot_f32_tiny),
        GgmlType::F16 => Some(dot_f16_tiny),
        ty => super::iquant::dots(ty).map(|(_, tiled)| tiled),
    }
}

/// Generic reference: dequantize both sides and dot in f32 (used where no integer kernel exists).
pub fn dot_via_dequant(wt: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    let at = super::vec_dot_type(wt);
    let mut x = vec![0f32; n];
    let mut y = vec![0f32; n];
    dequantize(wt, w, &mut x);
    dequantize(at, a, &mut y);
    x.iter().zip(&y).map(|(p, q)| p * q).sum()
}

#[allow(dead_code)]
fn _f16_used(h: u16) -> f32 {
    f16_to_f32(h)
}

/// `ggml_vec_dot_bf16` in the order of its AVX-512F path (the x86 build without AVX512-BF16):
/// two 16-lane accumulators over 32 values at a time (`c += x·y`, fused), each reduced as
/// `_mm512_reduce_add_ps` (halves added down to one lane) into an f64 sum, the tail in f64.
pub fn dot_bf16_ggml(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let n = n.min(w.len() / 2).min(a.len() / 2);
    let r = |b: &[u8], i: usize| bf16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
    let (mut c1, mut c2) = ([0f32; 16], [0f32; 16]);
    let mut i = 0;
    while i + 32 <= n {
        for l in 0..16 {
            c1[l] = r(w, i + l).mul_add(r(a, i + l), c1[l]);
            c2[l] = r(w, i + 16 + l).mul_add(r(a, i + 16 + l), c2[l]);
        }
        i += 32;
    }
    let reduce = |c: &[f32; 16]| {
        let t1: [f32; 8] = std::array::from_fn(|k| c[8 + k] + c[k]);
        let t2: [f32; 4] = std::array::from_fn(|k| t1[4 + k] + t1[k]);
        let t3 = [t2[2] + t2[0], t2[3] + t2[1]];
        t3[1] + t3[0]
    };
    let mut sum = reduce(&c1) as f64;
    sum += reduce(&c2) as f64;
    for j in i..n {
        sum += (r(w, j) * r(a, j)) as f64;
    }
    sum as f32
}
