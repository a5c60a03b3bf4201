// f32 arithmetic in llama.cpp's CPU order (rust/quant/scalar.rs, rust/cpu/f16vec.rs): a
// fused multiply-add that rounds once, and the reduction trees of ggml's x86 kernels.
// `fmaf` is the device's `fma` where that rounds once (checked when the device is opened,
// gpu/device.rs), else `fma_emulated` (its error-free emulation, exact under WGSL's
// correctly rounded + - ×). Where neither holds `fmaf` is the device's `fma`, and results
// differ from the CPU's in the last bits.

// The compiler may simplify float expressions as if they were real numbers ((a + b) - a
// to b): the error-free transforms below multiply by `one()`, a 1.0 it cannot see (from the
// step uniform), where such a rewrite would lose the rounding error they measure.
fn one() -> f32 {
    return f32(min(S.n_tok, 1u));
}

// a = hi + lo exactly, each with at most 12 significant bits.
fn split12(a: f32) -> vec2<f32> {
    let hi = bitcast<f32>(bitcast<u32>(a) & 0xfffff000u);
    return vec2<f32>(hi, a - hi);
}

// (s, e) with s = RN(a + b), s + e = a + b exactly (Knuth's TwoSum).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = a + b;
    let bb = s * one() - a;
    return vec2<f32>(s, (a - (s - bb)) + (b - bb));
}

// RN(a·b + c) from the exact product p + e (Dekker) and round-to-odd of the low parts
// (Boldo & Melquiond, "Emulation of FMA and correctly rounded sums", 2008).
fn fma_emulated(a: f32, b: f32, c: f32) -> f32 {
    let p = a * b;
    let sa = split12(a);
    let sb = split12(b);
    let e = ((sa.x * sb.x - p) + sa.x * sb.y + sa.y * sb.x) + sa.y * sb.y;
    let t = two_sum(c, p);
    let w = two_sum(t.y, e);
    var v = w.x;
    if (w.y != 0.0 && (bitcast<u32>(v) & 1u) == 0u) {
        // round to odd: the neighbour of v on the side of the exact sum
        if ((w.y > 0.0) == (v > 0.0)) {
            v = bitcast<f32>(bitcast<u32>(v) + 1u);
        } else {
            v = bitcast<f32>(bitcast<u32>(v) - 1u);
        }
    }
    return t.x + v;
}

// ggml's `hsum_float_8`: (x4+x0 + x6+x2) + (x5+x1 + x7+x3).
fn hsum8(x: array<f32, 8>) -> f32 {
    return ((x[4] + x[0]) + (x[6] + x[2])) + ((x[5] + x[1]) + (x[7] + x[3]));
}

// `_mm512_reduce_add_ps`: halves, quarters, then pairs.
fn reduce16(x: array<f32, 16>) -> f32 {
    var t: array<f32, 8>;
    for (var i = 0u; i < 8u; i++) {
        t[i] = x[i] + x[i + 8u];
    }
    return ((t[0] + t[4]) + (t[2] + t[6])) + ((t[1] + t[5]) + (t[3] + t[7]));
}

// An f64 accumulator as an unevaluated sum hi + lo of f32 (error-free additions): holds
// sums of f32 terms to ~48 bits, so the f32 rounding of a quotient of it is the f64
// path's (ggml's ggml_float sums) save at rare double-rounding ties.
fn df_add(acc: vec2<f32>, x: f32) -> vec2<f32> {
    let s = two_sum(acc.x, x);
    let lo = acc.y + s.y;
    let r = two_sum(s.x, lo);
    return r;
}

// RN_f32((hi + lo) / d) for d > 0, from the f32 quotient corrected by its exact remainder.
fn df_div(acc: vec2<f32>, d: f32) -> f32 {
    let q = acc.x / d;
    let r = fmaf(-q, d, acc.x) + acc.y;
    return q + r / d;
}

// RN(a / b): the device's quotient corrected by its exact remainder (WGSL allows division
// 2.5 ulp off).
fn div_rn(a: f32, b: f32) -> f32 {
    let q = a / b;
    return q + fmaf(-q, b, a) / b;
}

// RN(sqrt(x)) for x > 0, the device's root corrected by its exact remainder.
fn sqrt_rn(x: f32) -> f32 {
    let s = sqrt(x);
    return s + fmaf(-s, s, x) / (2.0 * s);
}

// RN_f32(1 / (hi + lo)) for a positive (hi, lo) sum.
fn df_recip(acc: vec2<f32>) -> f32 {
    let q = div_rn(1.0, acc.x);
    let r = fmaf(-q, acc.x, 1.0) - q * acc.y;
    return q + q * r;
}

// ggml's `ggml_v_expf` (rust/cpu/f16vec.rs `expf_ggml`): a degree-5 polynomial on the reduced
// argument, scaled by 2^n; 0 below n = -192, +inf above 192.
fn expf_ggml(x: f32) -> f32 {
    let r = bitcast<f32>(0x4B400000u);
    let z = fmaf(x, bitcast<f32>(0x3FB8AA3Bu), r);
    let n = z * one() - r;
    let b = fmaf(-n, bitcast<f32>(0x35BFBE8Eu), fmaf(-n, bitcast<f32>(0x3F317200u), x));
    let u = b * b;
    let j = fmaf(fmaf(fmaf(bitcast<f32>(0x3C072010u), b, bitcast<f32>(0x3D2B9F17u)), u, fmaf(bitcast<f32>(0x3E2AAF33u), b, bitcast<f32>(0x3EFFFEDBu))), u, fmaf(bitcast<f32>(0x3F7FFFF6u), b, 1.0));
    if (abs(n) > 192.0) {
        if (n <= 0.0) {
            return 0.0;
        }
        return bitcast<f32>(0x7f800000u);
    }
    return ldexp(j, i32(n));
}
