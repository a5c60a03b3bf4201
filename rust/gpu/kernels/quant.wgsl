// Raw GGUF blocks read from `W: array<u32>` at byte offsets (uploads come straight from
// the mmap, so nothing is repacked). `dq4_<type>(rb, k)` dequantizes elements k..k+3
// (k % 4 == 0) of the row starting at byte `rb`; layouts and formulas follow ggml's
// `dequantize_row_*` (ggml/src/ggml-quants.c), the same as rust/quant/scalar*.rs.
// The shader that includes this file declares `W` and defines `dq4` as one of these.

fn ld_u8(off: u32) -> u32 {
    return (W[off >> 2u] >> ((off & 3u) * 8u)) & 0xffu;
}

// `off` even (every f16 / u16 field of a block sits at an even offset).
fn ld_u16(off: u32) -> u32 {
    return (W[off >> 2u] >> ((off & 2u) * 8u)) & 0xffffu;
}

fn ld_u32(off: u32) -> u32 {
    let s = (off & 3u) * 8u;
    let a = W[off >> 2u];
    if (s == 0u) {
        return a;
    }
    return (a >> s) | (W[(off >> 2u) + 1u] << (32u - s));
}

fn ld_f16(off: u32) -> f32 {
    return unpack2x16float(ld_u16(off)).x;
}

fn ld_i8(off: u32) -> i32 {
    return bitcast<i32>(ld_u8(off) << 24u) >> 24u;
}

// Four consecutive bytes as unsigned lanes.
fn b4(off: u32) -> vec4<u32> {
    let w = ld_u32(off);
    return vec4<u32>(w & 0xffu, (w >> 8u) & 0xffu, (w >> 16u) & 0xffu, w >> 24u);
}

fn nib4(off: u32, hi: bool) -> vec4<u32> {
    let b = b4(off);
    if (hi) {
        return b >> vec4<u32>(4u);
    }
    return b & vec4<u32>(0xfu);
}

fn dq4_f32(rb: u32, k: u32) -> vec4<f32> {
    let o = rb + k * 4u;
    return vec4<f32>(bitcast<f32>(ld_u32(o)), bitcast<f32>(ld_u32(o + 4u)), bitcast<f32>(ld_u32(o + 8u)), bitcast<f32>(ld_u32(o + 12u)));
}

fn dq4_f16(rb: u32, k: u32) -> vec4<f32> {
    let o = rb + k * 2u;
    return vec4<f32>(unpack2x16float(ld_u32(o)), unpack2x16float(ld_u32(o + 4u)));
}

fn dq4_bf16(rb: u32, k: u32) -> vec4<f32> {
    let o = rb + k * 2u;
    let a = ld_u32(o);
    let b = ld_u32(o + 4u);
    return vec4<f32>(bitcast<f32>(a << 16u), bitcast<f32>(a & 0xffff0000u), bitcast<f32>(b << 16u), bitcast<f32>(b & 0xffff0000u));
}

// Q4_0: d f16, qs[16]; element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of qs[j-16].
fn dq4_q4_0(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * Q4_0_BYTES;
    let j = k % 32u;
    let q = nib4(bo + Q4_0_QS + (j % 16u), j >= 16u);
    return ld_f16(bo) * (vec4<f32>(q) - 8.0);
}

// Q4_1: d f16, m f16, qs[16].
fn dq4_q4_1(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * Q4_1_BYTES;
    let j = k % 32u;
    let q = nib4(bo + Q4_1_QS + (j % 16u), j >= 16u);
    return ld_f16(bo) * vec4<f32>(q) + ld_f16(bo + Q4_1_M);
}

fn hbits4(qh: u32, j: u32) -> vec4<u32> {
    return (vec4<u32>(qh) >> (vec4<u32>(j) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
}

// Q5_0: d f16, qh u32 (bit j = high bit of element j), qs[16].
fn dq4_q5_0(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * Q5_0_BYTES;
    let j = k % 32u;
    let q = nib4(bo + Q5_0_QS + (j % 16u), j >= 16u) | (hbits4(ld_u32(bo + Q5_0_QH), j) << vec4<u32>(4u));
    return ld_f16(bo) * (vec4<f32>(q) - 16.0);
}

// Q5_1: d f16, m f16, qh u32, qs[16].
fn dq4_q5_1(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * Q5_1_BYTES;
    let j = k % 32u;
    let q = nib4(bo + Q5_1_QS + (j % 16u), j >= 16u) | (hbits4(ld_u32(bo + Q5_1_QH), j) << vec4<u32>(4u));
    return ld_f16(bo) * vec4<f32>(q) + ld_f16(bo + Q5_1_M);
}

// Q8_0: d f16, qs[32] i8.
fn dq4_q8_0(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * Q8_0_BYTES;
    let w = ld_u32(bo + Q8_0_QS + (k % 32u));
    let q = vec4<i32>(bitcast<i32>(w << 24u) >> 24u, bitcast<i32>(w << 16u) >> 24u, bitcast<i32>(w << 8u) >> 24u, bitcast<i32>(w) >> 24u);
    return ld_f16(bo) * vec4<f32>(q);
}

// Q2_K (256): scales[16] (low nibble scale, high nibble min), qs[64], d f16 @80, dmin f16 @82.
fn dq4_q2_k(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * Q2_K_BYTES;
    let kk = k % 256u;
    let n = kk / 128u;
    let j = (kk % 128u) / 32u;
    let l = kk % 32u;
    let q = (b4(bo + Q2_K_QS + n * 32u + l) >> vec4<u32>(2u * j)) & vec4<u32>(3u);
    let sc = ld_u8(bo + n * 8u + j * 2u + l / 16u);
    let dl = ld_f16(bo + Q2_K_D) * f32(sc & 0xfu);
    let ml = ld_f16(bo + Q2_K_DMIN) * f32(sc >> 4u);
    return dl * vec4<f32>(q) - ml;
}

// Q3_K (256): hmask[32], qs[64], scales[12] (16 packed 6-bit scales), d f16 @108.
fn dq4_q3_k(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * Q3_K_BYTES;
    let kk = k % 256u;
    let n = kk / 128u;
    let j = (kk % 128u) / 32u;
    let l = kk % 32u;
    let q = (b4(bo + Q3_K_QS + n * 32u + l) >> vec4<u32>(2u * j)) & vec4<u32>(3u);
    let hb = (b4(bo + l) >> vec4<u32>(n * 4u + j)) & vec4<u32>(1u);
    let is = n * 8u + 2u * j + l / 16u;
    var lo: u32;
    if (is < 8u) {
        lo = ld_u8(bo + Q3_K_SCALES + is) & 0xfu;
    } else {
        lo = ld_u8(bo + Q3_K_SCALES + is - 8u) >> 4u;
    }
    let hi = (ld_u8(bo + Q3_K_SCALES + 8u + (is % 4u)) >> (2u * (is / 4u))) & 3u;
    let s = f32(i32(lo | (hi << 4u)) - 32);
    return ld_f16(bo + Q3_K_D) * s * (vec4<f32>(q) - 4.0 + 4.0 * vec4<f32>(hb));
}

// 6-bit (scale, min) pair `j` of the 12 packed bytes at `so` (ggml's get_scale_min_k4).
fn scale_min_k4(j: u32, so: u32) -> vec2<f32> {
    if (j < 4u) {
        return vec2<f32>(f32(ld_u8(so + j) & 63u), f32(ld_u8(so + j + 4u) & 63u));
    }
    let sc = (ld_u8(so + j + 4u) & 0xfu) | ((ld_u8(so + j - 4u) >> 6u) << 4u);
    let m = (ld_u8(so + j + 4u) >> 4u) | ((ld_u8(so + j) >> 6u) << 4u);
    return vec2<f32>(f32(sc), f32(m));
}

// Q4_K (256): d f16, dmin f16, scales[12], qs[128].
fn dq4_q4_k(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * Q4_K_BYTES;
    let kk = k % 256u;
    let g = kk / 64u;
    let h = (kk % 64u) / 32u;
    let l = kk % 32u;
    let q = nib4(bo + Q4_K_QS + g * 32u + l, h == 1u);
    let sm = scale_min_k4(2u * g + h, bo + Q4_K_SCALES);
    return ld_f16(bo) * sm.x * vec4<f32>(q) - ld_f16(bo + Q4_K_DMIN) * sm.y;
}

// Q5_K (256): d f16, dmin f16, scales[12], qh[32], qs[128].
fn dq4_q5_k(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * Q5_K_BYTES;
    let kk = k % 256u;
    let g = kk / 64u;
    let h = (kk % 64u) / 32u;
    let l = kk % 32u;
    let hb = (b4(bo + Q5_K_QH + l) >> vec4<u32>(2u * g + h)) & vec4<u32>(1u);
    let q = nib4(bo + Q5_K_QS + g * 32u + l, h == 1u) + 16u * hb;
    let sm = scale_min_k4(2u * g + h, bo + Q5_K_SCALES);
    return ld_f16(bo) * sm.x * vec4<f32>(q) - ld_f16(bo + Q5_K_DMIN) * sm.y;
}

// Q6_K (256): ql[128], qh[64], scales[16] i8, d f16 @208.
fn dq4_q6_k(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * Q6_K_BYTES;
    let kk = k % 256u;
    let n = kk / 128u;
    let qq = (kk % 128u) / 32u;
    let l = kk % 32u;
    let lo = nib4(bo + n * 64u + l + (qq & 1u) * 32u, qq >= 2u);
    let hi = (b4(bo + Q6_K_QH + n * 32u + l) >> vec4<u32>(2u * qq)) & vec4<u32>(3u);
    let q = vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32);
    let sc = f32(ld_i8(bo + Q6_K_SCALES + n * 8u + l / 16u + 2u * qq));
    return ld_f16(bo + Q6_K_D) * sc * vec4<f32>(q);
}

var<private> KV_IQ4NL: array<f32, 16> = array<f32, 16>(-127.0, -104.0, -83.0, -65.0, -49.0, -35.0, -22.0, -10.0, 1.0, 13.0, 25.0, 38.0, 53.0, 69.0, 89.0, 113.0);

fn iq4_lut(q: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(KV_IQ4NL[q.x], KV_IQ4NL[q.y], KV_IQ4NL[q.z], KV_IQ4NL[q.w]);
}

// IQ4_NL: d f16, qs[16] (nibbles index the non-linear table).
fn dq4_iq4_nl(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * IQ4_NL_BYTES;
    let j = k % 32u;
    return ld_f16(bo) * iq4_lut(nib4(bo + IQ4_NL_QS + (j % 16u), j >= 16u));
}

var<private> KV_MXFP4: array<f32, 16> = array<f32, 16>(0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 0.0, -1.0, -2.0, -3.0, -4.0, -6.0, -8.0, -12.0);

// MXFP4: e (E8M0, the scale 2^(e-128), ggml_e8m0_to_fp32_half), qs[16] (nibbles index
// E2M1's values doubled).
fn dq4_mxfp4(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 32u) * MXFP4_BYTES;
    let j = k % 32u;
    let e = ld_u8(bo);
    let d = bitcast<f32>(select((e - 1u) << 23u, 0x00200000u << e, e < 2u));
    let q = nib4(bo + MXFP4_QS + (j % 16u), j >= 16u);
    return d * vec4<f32>(KV_MXFP4[q.x], KV_MXFP4[q.y], KV_MXFP4[q.z], KV_MXFP4[q.w]);
}

// IQ4_XS (256): d f16, scales_h u16, scales_l[4], qs[128].
fn dq4_iq4_xs(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ4_XS_BYTES;
    let kk = k % 256u;
    let ib = kk / 32u;
    let j = kk % 32u;
    let ls = ((ld_u8(bo + IQ4_XS_SCALES_L + ib / 2u) >> (4u * (ib % 2u))) & 0xfu) | (((ld_u16(bo + IQ4_XS_SCALES_H) >> (2u * ib)) & 3u) << 4u);
    let dl = ld_f16(bo) * f32(i32(ls) - 32);
    return dl * iq4_lut(nib4(bo + IQ4_XS_QS + ib * 16u + (j % 16u), j >= 16u));
}

var<private> POW3: array<u32, 5> = array<u32, 5>(1u, 3u, 9u, 27u, 81u);

// TQ1_0 (256): qs[48] (five base-3 digits per byte: elements 32n + m of bytes 0..32, then
// 160 + 16n + m of bytes 32..48), qh[4] (four digits: elements 240 + 4n + j), d f16; the
// digit n of byte q is ((q · 3^n mod 256) · 3) >> 8, the value digit − 1.
fn dq4_tq1_0(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * TQ1_0_BYTES;
    let kk = k % 256u;
    var at = bo + kk % 32u;
    var n = kk / 32u;
    if (kk >= 240u) {
        at = bo + TQ1_0_QH;
        n = (kk - 240u) / 4u;
    } else if (kk >= 160u) {
        at = bo + 32u + (kk - 160u) % 16u;
        n = (kk - 160u) / 16u;
    }
    let q = (((b4(at) * POW3[n]) & vec4<u32>(0xffu)) * 3u) >> vec4<u32>(8u);
    return ld_f16(bo + TQ1_0_D) * (vec4<f32>(q) - 1.0);
}

// TQ2_0 (256): qs[64] (byte 32c + m holds elements 128c + 32l + m at bits 2l), d f16; the
// value is the 2-bit code − 1.
fn dq4_tq2_0(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * TQ2_0_BYTES;
    let kk = k % 256u;
    let q = (b4(bo + 32u * (kk / 128u) + kk % 32u) >> vec4<u32>(2u * ((kk % 128u) / 32u))) & vec4<u32>(3u);
    return ld_f16(bo + TQ2_0_D) * (vec4<f32>(q) - 1.0);
}
