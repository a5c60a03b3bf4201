// Grid ("i-quant") loaders, as rust/quant/iquant.rs and iquant1.rs (ggml-quants.c's
// `dequantize_row_iq*`): elements k..k+3 (k % 4 == 0) of the row at byte `rb`. Groups of 8
// (IQ2, IQ1) or 4 (IQ3) elements are one grid entry; `G` holds the grids (grids.rs), two
// words per 8-byte entry, one per 4-byte entry.

// Bytes of word `w` of G as unsigned lanes.
fn g4(w: u32) -> vec4<f32> {
    let v = G[w];
    return vec4<f32>(vec4<u32>(v & 0xffu, (v >> 8u) & 0xffu, (v >> 16u) & 0xffu, v >> 24u));
}

// ggml's `ksigns_iq2xs`: 7 sign bits and an eighth that makes the count of minus signs even.
fn ksigns(i: u32) -> u32 {
    let s = i & 127u;
    return s | ((countOneBits(s) & 1u) << 7u);
}

// `db · mag`, negated where bit j of `signs` is set (j = the lane's place in `signs`).
fn signed4(db: f32, mag: vec4<f32>, signs: u32) -> vec4<f32> {
    let neg = ((vec4<u32>(signs) >> vec4<u32>(0u, 1u, 2u, 3u)) & vec4<u32>(1u)) == vec4<u32>(1u);
    let v = db * mag;
    return select(v, -v, neg);
}

// `d · (0.5 + ls) · f`, ggml's order.
fn db_half(d: f32, ls: u32, f: f32) -> f32 {
    return d * (0.5 + f32(ls)) * f;
}

// IQ2_XXS (256): d f16, then per 32 elements 4 grid bytes and a word of 4 × 7 sign bits
// and the 4-bit scale.
fn dq4_iq2_xxs(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ2_XXS_BYTES;
    let kk = k % 256u;
    let ib = kk / 32u;
    let l = (kk % 32u) / 8u;
    let j = kk % 8u;
    let gi = ld_u8(bo + 2u + 8u * ib + l);
    let s = ld_u32(bo + 6u + 8u * ib);
    let signs = ksigns(s >> (7u * l)) >> j;
    return signed4(db_half(ld_f16(bo), s >> 28u, 0.25), g4(IQ2XXS_G + 2u * gi + j / 4u), signs);
}

// 4-bit scale of 16 elements `g` (low nibble first) at byte `so`.
fn scale16(so: u32, g: u32) -> u32 {
    return (ld_u8(so + g / 2u) >> (4u * (g % 2u))) & 15u;
}

// IQ2_XS (256): d f16, u16 qs[32] (9-bit grid index, 7 sign bits), scales[8] @66.
fn dq4_iq2_xs(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ2_XS_BYTES;
    let kk = k % 256u;
    let q = ld_u16(bo + 2u + 2u * (kk / 8u));
    let j = kk % 8u;
    let db = db_half(ld_f16(bo), scale16(bo + 66u, kk / 16u), 0.25);
    return signed4(db, g4(IQ2XS_G + 2u * (q & 511u) + j / 4u), ksigns(q >> 9u) >> j);
}

// IQ2_S (256): d f16, qs[32] @2, signs[32] @34, qh[8] @66 (2 index bits each), scales[8] @74.
fn dq4_iq2_s(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ2_S_BYTES;
    let kk = k % 256u;
    let g = kk / 8u;
    let j = kk % 8u;
    let gi = ld_u8(bo + 2u + g) | (((ld_u8(bo + 66u + g / 4u) >> (2u * (g % 4u))) & 3u) << 8u);
    let db = db_half(ld_f16(bo), scale16(bo + 74u, kk / 16u), 0.25);
    return signed4(db, g4(IQ2S_G + 2u * gi + j / 4u), ld_u8(bo + 34u + g) >> j);
}

// IQ3_XXS (256): d f16, qs[64] @2 (one grid byte per 4 elements), u32 scales_and_signs[8] @66.
fn dq4_iq3_xxs(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ3_XXS_BYTES;
    let kk = k % 256u;
    let ib = kk / 32u;
    let l = (kk % 32u) / 8u;
    let h = (kk % 8u) / 4u;
    let s = ld_u32(bo + 66u + 4u * ib);
    let gi = ld_u8(bo + 2u + 8u * ib + 2u * l + h);
    return signed4(db_half(ld_f16(bo), s >> 28u, 0.5), g4(IQ3XXS_G + gi), ksigns(s >> (7u * l)) >> (4u * h));
}

// IQ3_S (256): d f16, qs[64] @2, qh[8] @66 (the ninth index bit), signs[32] @74, scales[4] @106.
fn dq4_iq3_s(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ3_S_BYTES;
    let kk = k % 256u;
    let g = kk / 4u;
    let gi = ld_u8(bo + 2u + g) | (((ld_u8(bo + 66u + g / 8u) >> (g % 8u)) & 1u) << 8u);
    let ib = kk / 32u;
    let ls = (ld_u8(bo + 106u + ib / 2u) >> (4u * (ib % 2u))) & 15u;
    let db = ld_f16(bo) * f32(1u + 2u * ls);
    return signed4(db, g4(IQ3S_G + gi), ld_u8(bo + 74u + g / 2u) >> (4u * (g % 2u)));
}

// Entry `gi` of iq1s_grid (values -1, 0, 1 as signed bytes), elements j..j+3 (j % 4 == 0).
fn iq1_grid4(gi: u32, j: u32) -> vec4<f32> {
    let v = G[IQ1S_G + 2u * gi + j / 4u];
    return vec4<f32>(vec4<i32>(bitcast<i32>(v << 24u), bitcast<i32>(v << 16u), bitcast<i32>(v << 8u), bitcast<i32>(v)) >> vec4<u32>(24u));
}

// `(d · (2s + 1)) · (grid ± 1/8)`.
fn iq1_val(d: f32, s: u32, grid: vec4<f32>, minus: bool) -> vec4<f32> {
    let delta = select(0.125, -0.125, minus);
    return (d * f32(2u * s + 1u)) * (grid + delta);
}

// IQ1_S (256): d f16, qs[32] @2, u16 qh[8] @34 (4 × 3 index bits, the scale in bits 12..14,
// the shift's sign in bit 15).
fn dq4_iq1_s(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ1_S_BYTES;
    let kk = k % 256u;
    let ib = kk / 32u;
    let l = (kk % 32u) / 8u;
    let qh = ld_u16(bo + 34u + 2u * ib);
    let gi = ld_u8(bo + 2u + 4u * ib + l) | (((qh >> (3u * l)) & 7u) << 8u);
    return iq1_val(ld_f16(bo), (qh >> 12u) & 7u, iq1_grid4(gi, kk % 8u), (qh & 0x8000u) != 0u);
}

// IQ1_M (256): qs[32] @0, qh[16] @32 (a nibble per 8: 3 index bits, the shift's sign),
// u16 scales[4] @48 (3-bit scales per 16; the f16 scale in their top nibbles).
fn dq4_iq1_m(rb: u32, k: u32) -> vec4<f32> {
    let bo = rb + (k / 256u) * IQ1_M_BYTES;
    let kk = k % 256u;
    let ib = kk / 32u;
    let l = (kk % 32u) / 8u;
    let s0 = ld_u16(bo + 48u);
    let s1 = ld_u16(bo + 50u);
    let s2 = ld_u16(bo + 52u);
    let s3 = ld_u16(bo + 54u);
    let d = unpack2x16float((s0 >> 12u) | ((s1 >> 8u) & 0xf0u) | ((s2 >> 4u) & 0xf00u) | (s3 & 0xf000u)).x;
    let h = ld_u8(bo + 32u + 2u * ib + l / 2u) >> (4u * (l % 2u));
    let gi = ld_u8(bo + 4u * ib + l) | ((h & 7u) << 8u);
    let sc = ld_u16(bo + 48u + 2u * (ib / 2u));
    let s = (sc >> (6u * (ib % 2u) + 3u * ((kk % 32u) / 16u))) & 7u;
    return iq1_val(d, s, iq1_grid4(gi, kk % 8u), (h & 8u) != 0u);
}
