//! ggml's block layouts, once: a `#[repr(C)]` struct per quantized GGUF type (ggml's
//! `block_*` in ggml-common.h), its size asserted at compile time, and the byte sizes and
//! field offsets every kernel (scalar, SIMD, tile) and `GgmlType::block` take from here.
//! Kernels read blocks from byte slices at these offsets; the structs are the layout's
//! definition, not a type anything is cast to.
#![allow(dead_code)]
use std::mem::{offset_of, size_of};

/// Elements per block of the 32-element types.
pub const QK: usize = 32;
/// Elements per super-block of the K-quants and IQ4_XS.
pub const QK_K: usize = 256;

type F16 = u16;

#[repr(C)]
pub struct BlockQ4_0 {
    pub d: F16,
    pub qs: [u8; QK / 2],
}

#[repr(C)]
pub struct BlockQ4_1 {
    pub d: F16,
    pub m: F16,
    pub qs: [u8; QK / 2],
}

#[repr(C)]
pub struct BlockQ5_0 {
    pub d: F16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
pub struct BlockQ5_1 {
    pub d: F16,
    pub m: F16,
    pub qh: [u8; 4],
    pub qs: [u8; QK / 2],
}

#[repr(C)]
pub struct BlockQ8_0 {
    pub d: F16,
    pub qs: [i8; QK],
}

/// Activations for Q4_1 / Q5_1: `s` = d · Σ qs.
#[repr(C)]
pub struct BlockQ8_1 {
    pub d: F16,
    pub s: F16,
    pub qs: [i8; QK],
}

#[repr(C)]
pub struct BlockQ2K {
    pub scales: [u8; QK_K / 16],
    pub qs: [u8; QK_K / 4],
    pub d: F16,
    pub dmin: F16,
}

#[repr(C)]
pub struct BlockQ3K {
    pub hmask: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 4],
    pub scales: [u8; 12],
    pub d: F16,
}

#[repr(C)]
pub struct BlockQ4K {
    pub d: F16,
    pub dmin: F16,
    pub scales: [u8; 12],
    pub qs: [u8; QK_K / 2],
}

#[repr(C)]
pub struct BlockQ5K {
    pub d: F16,
    pub dmin: F16,
    pub scales: [u8; 12],
    pub qh: [u8; QK_K / 8],
    pub qs: [u8; QK_K / 2],
}

#[repr(C)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: F16,
}

/// Activations for the K-quants and IQ4_XS: f32 scale, values, and the sums of each 16.
#[repr(C)]
pub struct BlockQ8K {
    pub d: f32,
    pub qs: [i8; QK_K],
    pub bsums: [i16; QK_K / 16],
}

#[repr(C)]
pub struct BlockIQ4NL {
    pub d: F16,
    pub qs: [u8; QK / 2],
}

/// MXFP4 (gpt-oss experts): an E8M0 exponent `e` (the scale is 2^(e-128), half of
/// 2^(e-127), against codes that are twice E2M1's values) and 32 4-bit codes.
#[repr(C)]
pub struct BlockMXFP4 {
    pub e: u8,
    pub qs: [u8; QK / 2],
}

#[repr(C)]
pub struct BlockIQ4XS {
    pub d: F16,
    pub scales_h: u16,
    pub scales_l: [u8; QK_K / 64],
    pub qs: [u8; QK_K / 2],
}

/// TQ1_0 (ternary, 1.6875 bits): 48 bytes of five base-3 digits each (elements 0..240, as
/// `q · 3^n` fixed-point fractions), 4 bytes of four digits (elements 240..256), f16 `d`.
#[repr(C)]
pub struct BlockTQ1_0 {
    pub qs: [u8; (QK_K - 4 * QK_K / 64) / 5],
    pub qh: [u8; QK_K / 64],
    pub d: F16,
}

/// TQ2_0 (ternary, 2.0625 bits): 2-bit codes 0..2 (value = code - 1), f16 `d`.
#[repr(C)]
pub struct BlockTQ2_0 {
    pub qs: [u8; QK_K / 4],
    pub d: F16,
}

pub const Q4_0_BYTES: usize = size_of::<BlockQ4_0>();
pub const Q4_1_BYTES: usize = size_of::<BlockQ4_1>();
pub const Q5_0_BYTES: usize = size_of::<BlockQ5_0>();
pub const Q5_1_BYTES: usize = size_of::<BlockQ5_1>();
pub const Q8_0_BYTES: usize = size_of::<BlockQ8_0>();
pub const Q8_1_BYTES: usize = size_of::<BlockQ8_1>();
pub const Q2_K_BYTES: usize = size_of::<BlockQ2K>();
pub const Q3_K_BYTES: usize = size_of::<BlockQ3K>();
pub const Q4_K_BYTES: usize = size_of::<BlockQ4K>();
pub const Q5_K_BYTES: usize = size_of::<BlockQ5K>();
pub const Q6_K_BYTES: usize = size_of::<BlockQ6K>();
pub const Q8_K_BYTES: usize = size_of::<BlockQ8K>();
pub const IQ4_NL_BYTES: usize = size_of::<BlockIQ4NL>();
pub const IQ4_XS_BYTES: usize = size_of::<BlockIQ4XS>();
pub const MXFP4_BYTES: usize = size_of::<BlockMXFP4>();
pub const TQ1_0_BYTES: usize = size_of::<BlockTQ1_0>();
pub const TQ2_0_BYTES: usize = size_of::<BlockTQ2_0>();

/// Where a Q8_K block's values and 16-element sums start.
pub const Q8_K_QS: usize = offset_of!(BlockQ8K, qs);
pub const Q8_K_BSUMS: usize = offset_of!(BlockQ8K, bsums);

// ggml's sizes (ggml-common.h static_asserts): a layout that drifts does not compile
const _: () = {
    assert!(Q4_0_BYTES == 18 && Q4_1_BYTES == 20 && Q5_0_BYTES == 22 && Q5_1_BYTES == 24);
    assert!(Q8_0_BYTES == 34 && Q8_1_BYTES == 36 && IQ4_NL_BYTES == 18 && MXFP4_BYTES == 17);
    assert!(Q2_K_BYTES == 84 && Q3_K_BYTES == 110 && Q4_K_BYTES == 144 && Q5_K_BYTES == 176 && Q6_K_BYTES == 210);
    assert!(Q8_K_BYTES == 292 && Q8_K_QS == 4 && Q8_K_BSUMS == 260 && IQ4_XS_BYTES == 136);
    assert!(TQ1_0_BYTES == 54 && TQ2_0_BYTES == 66);
};

/// The block sizes and field offsets above as WGSL constants (`<TYPE>_BYTES`,
/// `<TYPE>_<FIELD>`), prepended to the GPU loaders (`gpu/kernels/quant.wgsl`,
/// `qmatmul.wgsl`) so that they take their layouts from here.
pub fn wgsl_constants() -> String {
    let rows: &[(&str, usize)] = &[
        ("Q4_0_BYTES", Q4_0_BYTES),
        ("Q4_0_QS", offset_of!(BlockQ4_0, qs)),
        ("Q4_1_BYTES", Q4_1_BYTES),
        ("Q4_1_M", offset_of!(BlockQ4_1, m)),
        ("Q4_1_QS", offset_of!(BlockQ4_1, qs)),
        ("Q5_0_BYTES", Q5_0_BYTES),
        ("Q5_0_QH", offset_of!(BlockQ5_0, qh)),
        ("Q5_0_QS", offset_of!(BlockQ5_0, qs)),
        ("Q5_1_BYTES", Q5_1_BYTES),
        ("Q5_1_M", offset_of!(BlockQ5_1, m)),
        ("Q5_1_QH", offset_of!(BlockQ5_1, qh)),
        ("Q5_1_QS", offset_of!(BlockQ5_1, qs)),
        ("Q8_0_BYTES", Q8_0_BYTES),
        ("Q8_0_QS", offset_of!(BlockQ8_0, qs)),
        ("Q2_K_BYTES", Q2_K_BYTES),
        ("Q2_K_QS", offset_of!(BlockQ2K, qs)),
        ("Q2_K_D", offset_of!(BlockQ2K, d)),
        ("Q2_K_DMIN", offset_of!(BlockQ2K, dmin)),
        ("Q3_K_BYTES", Q3_K_BYTES),
        ("Q3_K_QS", offset_of!(BlockQ3K, qs)),
        ("Q3_K_SCALES", offset_of!(BlockQ3K, scales)),
        ("Q3_K_D", offset_of!(BlockQ3K, d)),
        ("Q4_K_BYTES", Q4_K_BYTES),
        ("Q4_K_DMIN", offset_of!(BlockQ4K, dmin)),
        ("Q4_K_SCALES", offset_of!(BlockQ4K, scales)),
        ("Q4_K_QS", offset_of!(BlockQ4K, qs)),
        ("Q5_K_BYTES", Q5_K_BYTES),
        ("Q5_K_DMIN", offset_of!(BlockQ5K, dmin)),
        ("Q5_K_SCALES", offset_of!(BlockQ5K, scales)),
        ("Q5_K_QH", offset_of!(BlockQ5K, qh)),
        ("Q5_K_QS", offset_of!(BlockQ5K, qs)),
        ("Q6_K_BYTES", Q6_K_BYTES),
        ("Q6_K_QH", offset_of!(BlockQ6K, qh)),
        ("Q6_K_SCALES", offset_of!(BlockQ6K, scales)),
        ("Q6_K_D", offset_of!(BlockQ6K, d)),
        ("IQ4_NL_BYTES", IQ4_NL_BYTES),
        ("IQ4_NL_QS", offset_of!(BlockIQ4NL, qs)),
        ("IQ4_XS_BYTES", IQ4_XS_BYTES),
        ("IQ4_XS_SCALES_H", offset_of!(BlockIQ4XS, scales_h)),
        ("IQ4_XS_SCALES_L", offset_of!(BlockIQ4XS, scales_l)),
        ("IQ4_XS_QS", offset_of!(BlockIQ4XS, qs)),
        ("MXFP4_BYTES", MXFP4_BYTES),
        ("MXFP4_QS", offset_of!(BlockMXFP4, qs)),
        ("TQ1_0_BYTES", TQ1_0_BYTES),
        ("TQ1_0_QH", offset_of!(BlockTQ1_0, qh)),
        ("TQ1_0_D", offset_of!(BlockTQ1_0, d)),
        ("TQ2_0_BYTES", TQ2_0_BYTES),
        ("TQ2_0_D", offset_of!(BlockTQ2_0, d)),
    ];
    rows.iter().map(|(name, v)| format!("const {name}: u32 = {v}u;\n")).collect()
}

/// Whole blocks present in `n` elements and in both byte slices (like the scalar kernels,
/// which stop at the shortest of the three).
#[inline(always)]
pub(crate) fn nblocks(n: usize, bs: usize, w: &[u8], wts: usize, a: &[u8], ats: usize) -> usize {
    (n / bs).min(w.len() / wts).min(a.len() / ats)
}
