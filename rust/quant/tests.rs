//! Parity tests: every ISA's dot kernel against the scalar reference, the scalar integer
//! dots against dequantize-then-dot, activation quantizers round-trip, and a few golden blocks.
// Index loops read like the block layouts they check.
#![allow(clippy::needless_range_loop)]
use super::activation::quantize;
use super::dispatch::{available, dot_fn_for, dot_rows_fn_for, Isa};
use super::f16::{f32_to_bf16, f32_to_f16};
use super::scalar::{self, dot_via_dequant};
use super::{dequantize, vec_dot_type, DotFn, DotRowsFn, GgmlType};

/// SIMD vs scalar: the integer block sums are identical; only the f32 accumulation order of
/// (scale × block sum) terms differs, so the error is a few ulps of the magnitude.
const REL_ISA: f32 = 1e-5;
/// Scalar integer dot vs dequantize-both-sides f32 dot (f32 rounding of each product).
const REL_VIA_DEQUANT: f32 = 1e-5;
/// Same, for Q8_1 activations: the integer dot uses the block's `s = f16(d·Σq)`, whose f16
/// rounding (2^-11 relative) multiplies the weight minimum.
const REL_VIA_DEQUANT_Q8_1: f32 = 1e-3;

pub(crate) const WEIGHT_TYPES: [GgmlType; 25] = {
    use GgmlType::*;
    [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, TQ1_0, TQ2_0, IQ2_XXS, IQ2_XS,
        IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M,
    ]
};

/// splitmix64: deterministic, no crate.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e3779b97f4a7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [-1, 1).
    pub(crate) fn sym(&mut self) -> f32 {
        2.0 * self.unit() - 1.0
    }
    /// Roughly normal (Irwin–Hall), with occasional 10× outliers like real activations.
    fn act(&mut self) -> f32 {
        let g = (0..4).map(|_| self.sym()).sum::<f32>();
        if self.next().is_multiple_of(64) {
            10.0 * g
        } else {
            g
        }
    }
    fn bytes(&mut self, out: &mut [u8]) {
        for b in out {
            *b = self.next() as u8;
        }
    }
    /// A sane f16 scale: ± [1e-3, 0.1).
    fn scale(&mut self) -> u16 {
        let m = 1e-3 + self.unit() * 0.099;
        f32_to_f16(if self.next() & 1 == 0 { m } else { -m })
    }
}

/// Offsets of the f16 scale fields (d, dmin / m) inside one block of each type.
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | IQ4_XS | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        TQ1_0 => &[52],
        TQ2_0 => &[64],
        _ => &[],
    }
}

/// Offsets of the "minimum" f16 fields (zeroed to get the pure d-part of a weight).
fn min_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[2],
        Q2_K => &[82],
        _ => &[],
    }
}

/// How the quantized bytes of a weight row are filled.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fill {
    Random,
    /// Every quant byte the same (0x00, 0xFF, 0x80, 0x7F…): extremes of every field.
    Const(u8),
}

/// `n` elements of weight type `ty`: random (or constant) bytes with sane f16 scales.
pub(crate) fn weight_row(ty: GgmlType, n: usize, rng: &mut Rng, fill: Fill) -> Vec<u8> {
    use GgmlType::*;
    match ty {
        F32 => (0..n).flat_map(|_| rng.sym().to_le_bytes()).collect(),
        F16 => (0..n).flat_map(|_| f32_to_f16(rng.sym()).to_le_bytes()).collect(),
        BF16 => (0..n).flat_map(|_| f32_to_bf16(rng.sym()).to_le_bytes()).collect(),
        _ => {
            let (_, ts) = ty.block();
            let mut v = vec![0u8; ty.row_bytes(n)];
            match fill {
                Fill::Random => rng.bytes(&mut v),
                Fill::Const(c) => v.fill(c),
            }
            for blk in v.chunks_exact_mut(ts) {
                for &o in f16_fields(ty) {
                    blk[o..o + 2].copy_from_slice(&rng.scale().to_le_bytes());
                }
                if ty == MXFP4 {
                    // an E8M0 scale of 2^-10 .. 2^-1 (random bytes reach 2^127)
                    blk[0] = 118 + (rng.next() % 10) as u8;
                }
                if ty == IQ1_M {
                    // the f16 scale lives in the top nibbles of the four u16 scale words
                    let h = rng.scale();
                    for k in 0..4 {
                        blk[49 + 2 * k] = (blk[49 + 2 * k] & 0x0f) | ((((h >> (4 * k)) & 15) as u8) << 4);
                    }
                }
            }
            v
        }
    }
}

/// Activations for weight type `ty`: random floats quantized to `vec_dot_type(ty)`.
pub(super) fn act_row(ty: GgmlType, n: usize, rng: &mut Rng, extreme: bool) -> (Vec<f32>, Vec<u8>) {
    let x: Vec<f32> = (0..n)
        .map(|i| {
            if extreme {
                if i % 3 == 0 {
                    -1.0
                } else {
                    1.0
                }
            } else {
                rng.act()
            }
        })
        .collect();
    let mut q = Vec::new();
    quantize(vec_dot_type(ty), &x, &mut q);
    (x, q)
}

pub(super) fn deq(ty: GgmlType, b: &[u8], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; n];
    dequantize(ty, b, &mut y);
    y
}

/// Σ|x_i·y_i| over both the full weight and its d-part (min fields zeroed): bounds every
/// partial sum any kernel forms, so tolerances scale with it.
fn magnitude(ty: GgmlType, w: &[u8], a: &[u8], n: usize) -> f32 {
    let y = deq(vec_dot_type(ty), a, n);
    let x = deq(ty, w, n);
    let mut w0 = w.to_vec();
    if !min_fields(ty).is_empty() {
        let ts = ty.type_size();
        for blk in w0.chunks_exact_mut(ts) {
            for &o in min_fields(ty) {
                blk[o..o + 2].fill(0);
            }
        }
    }
    if matches!(ty, GgmlType::TQ1_0 | GgmlType::TQ2_0) {
        // ternary codes are value + 1: the kernels subtract the activation sums (the `- 1`,
        // lane by lane), a term of |d| · |a| per element; all-zero codes dequantize to -d
        let ts = ty.type_size();
        for blk in w0.chunks_exact_mut(ts) {
            blk[..ts - 2].fill(0);
        }
    }
    let x0 = deq(ty, &w0, n);
    (0..n).map(|i| (x[i].abs() + x0[i].abs()) * y[i].abs()).sum::<f32>() + f32::MIN_POSITIVE
}

fn lengths(ty: GgmlType) -> Vec<usize> {
    let bs = ty.block_size();
    if bs == 1 {
        vec![1, 7, 8, 31, 32, 33, 100, 256, 1000, 4096]
    } else {
        [1, 2, 3, 4, 5, 7, 8, 16].iter().map(|k| k * bs.max(32)).filter(|n| n % bs == 0).collect()
    }
}

/// Every kernel this machine can run for `ty`: the dispatched one per available ISA, plus
/// both AVX-512 builds (plain and VNNI) where the CPU has them.
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
fn kernels(ty: GgmlType) -> Vec<(String, super::DotFn)> {
    let mut v: Vec<(String, super::DotFn)> = available()
        .into_iter()
        .map(|isa| {
            let f = dot_fn_for(ty, isa).unwrap_or_else(|| panic!("no {} kernel for {}", isa.name(), ty.name()));
            (isa.name().to_string(), f)
        })
        .collect();
    #[cfg(target_arch = "x86_64")]
    {
        v.extend(super::avx512::variants(ty).into_iter().map(|(name, f, _)| (name.to_string(), f)));
    }
    v
}

#[test]
fn kernels_under_test_cover_the_machine() {
    let names: Vec<String> = kernels(GgmlType::Q4_K).into_iter().map(|(n, _)| n).collect();
    eprintln!("Q4_K kernels under test: {names:?}");
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
        assert!(names.iter().any(|n| n == "avx2"));
    }
}

fn check_isas(ty: GgmlType, fill: Fill, extreme_act: bool, seed: u64) {
    let mut rng = Rng(seed);
    let reference = scalar::dot(ty).unwrap_or_else(|| panic!("no scalar dot for {}", ty.name()));
    for n in lengths(ty) {
        let w = weight_row(ty, n, &mut rng, fill);
        let (_, a) = act_row(ty, n, &mut rng, extreme_act);
        let want = reference(n, &w, &a);
        assert!(want.is_finite(), "{} n={n}: scalar dot not finite", ty.name());
        let tol = REL_ISA * magnitude(ty, &w, &a, n);
        for (name, f) in kernels(ty) {
            let got = f(n, &w, &a);
            assert!(
                (got - want).abs() <= tol,
                "{} {name} n={n} fill={fill:?}: got {got}, scalar {want}, diff {} > tol {tol}",
                ty.name(),
                (got - want).abs()
            );
        }
    }
}

/// Types whose kernels reproduce ggml's x86 accumulation order (see `scalar::fma_lanes`,
/// `scalar::dot_q4_k_q8_k`, `scalar::dot_q6_k_q8_k`): every ISA equals the scalar reference
/// bit for bit (NEON keeps its own order).
#[test]
fn ggml_order_kernels_equal_scalar_bit_for_bit() {
    use GgmlType::*;
    let mut rng = Rng(77);
    for ty in [Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS] {
        let reference = scalar::dot(ty).unwrap_or_else(|| panic!("no scalar dot for {}", ty.name()));
        for n in lengths(ty) {
            for extreme in [false, true] {
                let w = weight_row(ty, n, &mut rng, if extreme { Fill::Const(0xFF) } else { Fill::Random });
                let (_, a) = act_row(ty, n, &mut rng, extreme);
                let want = reference(n, &w, &a);
                for (name, f) in kernels(ty) {
                    if name == "neon" {
                        continue;
                    }
                    let got = f(n, &w, &a);
                    assert_eq!(got.to_bits(), want.to_bits(), "{} {name} n={n}: {got} vs scalar {want}", ty.name());
                }
            }
        }
    }
}

/// `f` (and `rows`, one activation row at a time) equal `reference` bit for bit on random and
/// all-ones rows of every test length.
fn equal_bit_for_bit(ty: GgmlType, reference: DotFn, f: DotFn, rows: Option<DotRowsFn>, rng: &mut Rng) {
    for n in lengths(ty) {
        for extreme in [false, true] {
            let w = weight_row(ty, n, rng, if extreme { Fill::Const(0xFF) } else { Fill::Random });
            let (_, a) = act_row(ty, n, rng, extreme);
            let (got, want) = (f(n, &w, &a), reference(n, &w, &a));
            assert_eq!(got.to_bits(), want.to_bits(), "{} n={n}: {got} vs scalar {want}", ty.name());
            if let Some(rows) = rows {
                let mut out = [0f32; 1];
                rows(n, &w, &a, a.len(), &mut out);
                assert_eq!(out[0].to_bits(), want.to_bits(), "{} rows n={n}", ty.name());
            }
        }
    }
}

/// The batch-order `DotFn`s (`dispatch::dot_batch_fn`: the tiled K-quant kernel's order, the
/// float types' tinyBLAS order) equal the scalar batch-order references bit for bit.
#[test]
fn batch_order_dots_equal_scalar_bit_for_bit() {
    use GgmlType::*;
    let mut rng = Rng(78);
    for ty in [F32, F16, Q2_K, Q3_K, Q5_K, IQ4_XS, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M] {
        let reference = scalar::dot_batch(ty).unwrap_or_else(|| panic!("no scalar batch dot for {}", ty.name()));
        if let Some(f) = super::dot_batch_fn(ty) {
            equal_bit_for_bit(ty, reference, f, None, &mut rng);
        }
    }
}

/// The multi-row batch-order kernels (`dispatch::dot_batch_rows_fn`) equal the batch-order
/// `DotFn` row by row, across the kernels' 16-row groups and with padding between rows.
#[test]
fn batch_order_rows_equal_batch_dots_bit_for_bit() {
    let mut rng = Rng(80);
    let mut covered = 0;
    for &ty in &WEIGHT_TYPES {
        let (Some(dot), Some(dot_rows)) = (super::dot_batch_fn(ty), super::dot_batch_rows_fn(ty)) else { continue };
        let vt = vec_dot_type(ty);
        for n in [ty.block_size(), 3 * ty.block_size()] {
            for extreme in [false, true] {
                let w = weight_row(ty, n, &mut rng, if extreme { Fill::Const(0xFF) } else { Fill::Random });
                let row_bytes = vt.row_bytes(n);
                for rows in [1usize, 2, 15, 16, 17, 33] {
                    let stride = row_bytes + 24;
                    let mut a = vec![0x5Au8; stride * rows];
                    for r in 0..rows {
                        let (_, q) = act_row(ty, n, &mut rng, extreme);
                        a[r * stride..r * stride + row_bytes].copy_from_slice(&q);
                    }
                    let mut out = vec![f32::NAN; rows];
                    dot_rows(n, &w, &a, stride, &mut out);
                    for (r, o) in out.iter().enumerate() {
                        let want = dot(n, &w, &a[r * stride..r * stride + row_bytes]);
                        assert_eq!(o.to_bits(), want.to_bits(), "{} n={n} rows={rows} row {r}: {o} vs {want}", ty.name());
                    }
                    covered += 1;
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
        assert_eq!(covered, 7 * 2 * 2 * 6, "every grid i-quant has a multi-row batch-order kernel");
    }
    let _ = covered;
}

/// The repacked rows-of-8 orders (`quant::row_chain`: Q4_0, IQ4_NL, MXFP4): this machine's
/// kernels (single- and multi-row) equal the scalar chain reference bit for bit.
#[test]
fn row_chain_dots_equal_scalar_bit_for_bit() {
    use GgmlType::*;
    let mut rng = Rng(79);
    for ty in [Q4_0, IQ4_NL, MXFP4] {
        let reference = scalar::dot_chain(ty).unwrap_or_else(|| panic!("no scalar chain dot for {}", ty.name()));
        if let Some((f, rows, _)) = super::chain_kernels(ty) {
            equal_bit_for_bit(ty, reference, f, rows, &mut rng);
        }
    }
}

#[test]
fn every_isa_matches_scalar_random_blocks() {
    for (k, &ty) in WEIGHT_TYPES.iter().enumerate() {
        check_isas(ty, Fill::Random, false, 1000 + k as u64);
    }
}

#[test]
fn every_isa_matches_scalar_extreme_blocks() {
    // Saturation traps: all-ones / all-zero / sign-bit bytes against ±127 activations.
    for (k, &ty) in WEIGHT_TYPES.iter().enumerate() {
        for (j, c) in [0x00u8, 0xFF, 0x80, 0x7F, 0x55].into_iter().enumerate() {
            check_isas(ty, Fill::Const(c), true, 2000 + 10 * k as u64 + j as u64);
        }
    }
}

#[test]
fn every_isa_handles_short_slices_like_scalar() {
    // The kernels stop at the shortest of n / w / a (no out-of-bounds reads).
    let mut rng = Rng(7);
    for &ty in &WEIGHT_TYPES {
        let bs = ty.block_size().max(32);
        let n = 5 * bs;
        let w = weight_row(ty, n, &mut rng, Fill::Random);
        let (_, a) = act_row(ty, n, &mut rng, false);
        let w_short = &w[..ty.row_bytes(3 * bs)];
        let reference = scalar::dot(ty).unwrap()(3 * bs, &w, &a);
        let tol = REL_ISA * magnitude(ty, &w[..ty.row_bytes(3 * bs)], &a[..vec_dot_type(ty).row_bytes(3 * bs)], 3 * bs);
        for (name, f) in kernels(ty) {
            let got = f(n, w_short, &a);
            assert!((got - reference).abs() <= tol, "{} {name}: {got} vs {reference}", ty.name());
        }
    }
}

#[test]
fn scalar_dot_matches_dequantized_dot() {
    let mut rng = Rng(42);
    for &ty in &WEIGHT_TYPES {
        let rel = if vec_dot_type(ty) == GgmlType::Q8_1 { REL_VIA_DEQUANT_Q8_1 } else { REL_VIA_DEQUANT };
        for n in lengths(ty) {
            for fill in [Fill::Random, Fill::Const(0xFF), Fill::Const(0x80)] {
                let w = weight_row(ty, n, &mut rng, fill);
                let (_, a) = act_row(ty, n, &mut rng, false);
                let got = scalar::dot(ty).unwrap()(n, &w, &a);
                let want = dot_via_dequant(ty, n, &w, &a);
                let tol = rel * magnitude(ty, &w, &a, n);
                assert!(
                    (got - want).abs() <= tol,
                    "{} n={n} {fill:?}: integer dot {got}, dequantized dot {want}, tol {tol}",
                    ty.name()
                );
            }
        }
    }
}

#[test]
fn dispatch_covers_every_supported_type() {
    for &ty in &WEIGHT_TYPES {
        assert!(ty.is_supported());
        for isa in [Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon] {
            // ISAs the CPU lacks fall back (never to a kernel it cannot run).
            assert!(dot_fn_for(ty, isa).is_some(), "{} {}", ty.name(), isa.name());
        }
    }
    assert!(dot_fn_for(GgmlType::I32, Isa::Scalar).is_none());
    assert!(dot_fn_for(GgmlType::I32, super::isa()).is_none());
    assert_eq!(available()[0], Isa::Scalar);
}

#[test]
fn unsupported_types_dequantize_to_nan() {
    let mut y = [0f32; 256];
    dequantize(GgmlType::I32, &[0u8; 4 * 256], &mut y);
    assert!(y.iter().all(|v| v.is_nan()));
}

// ---------------------------------------------------------------- activations round-trip

#[test]
fn activation_quantizers_round_trip() {
    let mut rng = Rng(99);
    let n = 1024;
    let mut x: Vec<f32> = (0..n).map(|_| rng.act()).collect();
    x[0..32].fill(0.0); // an all-zero Q8_0 block
    x[256..512].fill(0.0); // an all-zero Q8_K block
    let f16_step = 2f32.powi(-11); // half an f16 ulp, relative
    for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K, GgmlType::F16, GgmlType::BF16, GgmlType::F32] {
        let mut q = Vec::new();
        quantize(ty, &x, &mut q);
        assert_eq!(q.len(), ty.row_bytes(n));
        let y = deq(ty, &q, n);
        let bs = ty.block_size();
        for (b, (xb, yb)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (xi, yi) in xb.iter().zip(yb) {
                // half a quantization step, plus the f16 rounding of the stored scale × 127
                let tol = match ty {
                    GgmlType::Q8_0 | GgmlType::Q8_1 => amax / 127.0 * (0.5 + 127.0 * f16_step) + 1e-7,
                    GgmlType::Q8_K => amax / 127.0 * 0.5 * (1.0 + 1e-5) + 1e-7,
                    GgmlType::F16 => xi.abs() * f16_step + 1e-7,
                    GgmlType::BF16 => xi.abs() * 2f32.powi(-8),
                    _ => 0.0,
                };
                assert!((xi - yi).abs() <= tol, "{} block {b}: {xi} -> {yi} (tol {tol})", ty.name());
            }
        }
        if ty == GgmlType::Q8_1 {
            // s = f16(d · Σq) with the unrounded d = amax/127 (ggml-cpu quantize_row_q8_1, x86)
            for (blk, xb) in q.chunks_exact(36).zip(x.chunks(32)) {
                let d = xb.iter().fold(0f32, |m, v| m.max(v.abs())) / 127.0;
                assert_eq!(u16::from_le_bytes([blk[0], blk[1]]), f32_to_f16(d));
                let sum: i32 = blk[4..].iter().map(|&v| v as i8 as i32).sum();
                assert_eq!(u16::from_le_bytes([blk[2], blk[3]]), f32_to_f16(d * sum as f32));
            }
        }
        if ty == GgmlType::Q8_K {
            for blk in q.chunks_exact(292) {
                for j in 0..16 {
                    let s: i32 = blk[4 + 16 * j..20 + 16 * j].iter().map(|&v| v as i8 as i32).sum();
                    assert_eq!(scalar::q8_k_bsum(blk, j), s, "bsums[{j}]");
                }
                assert!(blk[4..260].iter().all(|&v| v as i8 != -128));
            }
        }
    }
}

// ---------------------------------------------------------------- golden blocks
// Hand-built blocks whose value follows from ggml's definitions (ggml-quants.c).

/// (name, single-row kernel, its multi-row twin) for every multi-row kernel on this machine.
fn row_kernels(ty: GgmlType) -> Vec<(String, super::DotFn, super::DotRowsFn)> {
    let mut v = Vec::new();
    for isa in available() {
        if let (Some(d), Some(r)) = (dot_fn_for(ty, isa), dot_rows_fn_for(ty, isa)) {
            v.push((isa.name().to_string(), d, r));
        }
    }
    #[cfg(target_arch = "x86_64")]
    v.extend(super::avx512::variants(ty).into_iter().map(|(name, d, r)| (name.to_string(), d, r)));
    v
}

#[test]
fn dot_rows_equal_single_row_dots_bit_for_bit() {
    let mut rng = Rng(77);
    let mut covered = 0;
    for &ty in &WEIGHT_TYPES {
        let kernels = row_kernels(ty);
        if kernels.is_empty() {
            continue;
        }
        let vt = vec_dot_type(ty);
        for n in [ty.block_size().max(32), 3 * 256, 8 * 256] {
            if n % ty.block_size() != 0 {
                continue;
            }
            let w = weight_row(ty, n, &mut rng, Fill::Random);
            let row_bytes = vt.row_bytes(n);
            for rows in [1usize, 2, 3, 4, 5, 7, 8, 9] {
                for pad in [0usize, 40] {
                    // rows `stride` bytes apart (padding between rows must be ignored)
                    let stride = row_bytes + pad;
                    let mut a = vec![0xA5u8; stride * rows];
                    for r in 0..rows {
                        let (_, q) = act_row(ty, n, &mut rng, false);
                        a[r * stride..r * stride + row_bytes].copy_from_slice(&q);
                    }
                    for (name, dot, dot_rows) in &kernels {
                        let mut out = vec![f32::NAN; rows];
                        dot_rows(n, &w, &a, stride, &mut out);
                        for r in 0..rows {
                            let want = dot(n, &w, &a[r * stride..r * stride + row_bytes]);
                            assert_eq!(
                                out[r].to_bits(),
                                want.to_bits(),
                                "{} {name} n={n} rows={rows} pad={pad} row {r}: {} vs {want}",
                                ty.name(),
                                out[r]
                            );
                        }
                        covered += 1;
                    }
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
        assert!(covered > 0, "no multi-row kernel was tested");
    }
    let _ = covered;
}

#[test]
fn dot_rows_stop_at_short_activation_buffers() {
    // The last row shorter than n: every row stops at the blocks the last row holds,
    // like the single-row kernels stop at the shortest slice.
    let mut rng = Rng(78);
    for &ty in &[GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q5_0] {
        let n = 4 * 256;
        let vt = vec_dot_type(ty);
        let row_bytes = vt.row_bytes(n);
        let w = weight_row(ty, n, &mut rng, Fill::Random);
        let mut a = Vec::new();
        for _ in 0..3 {
            a.extend_from_slice(&act_row(ty, n, &mut rng, false).1);
        }
        let short = 2 * row_bytes + vt.row_bytes(n / 2);
        let n_short = n / 2;
        for (name, dot, dot_rows) in row_kernels(ty) {
            let mut out = [0f32; 3];
            dot_rows(n, &w, &a[..short], row_bytes, &mut out);
            for (r, &o) in out.iter().enumerate() {
                let want = dot(n_short, &w, &a[r * row_bytes..]);
                assert_eq!(o.to_bits(), want.to_bits(), "{} {name} row {r}", ty.name());
            }
            // zero rows: nothing written, nothing read
            dot_rows(n, &w, &a, row_bytes, &mut []);
        }
    }
}
