//! Element-wise and row-wise f32 operations, with ggml's numerics where they matter
//! (RMSNorm sums in f64, GELU through the f16 table, iterative RoPE angles).
use crate::quant::f16::{f16_to_f32, f32_to_f16};
use std::sync::OnceLock;

/// y = x / sqrt(mean(x²) + eps) * w   (ggml_rms_norm then ggml_mul)
pub fn rms_norm(x: &mut [f32], w: &[f32], eps: f32) {
    let sum: f64 = x.iter().map(|&v| (v * v) as f64).sum();
    let mean = (sum / x.len() as f64) as f32;
    let scale = 1.0 / (mean + eps).sqrt();
    for (v, &g) in x.iter_mut().zip(w) {
        *v = *v * scale * g;
    }
}

/// RMSNorm into a separate output.
pub fn rms_norm_to(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    out.copy_from_slice(x);
    rms_norm(out, w, eps);
}

/// y = (x - mean) / sqrt(var + eps) * w + b, as ggml_norm computes it (its AVX-512
/// build): the sum in f64 rounded to f32 before the division by n, the squared deviations
/// in f32 summed 16 at a time (`_mm512_reduce_add_ps`) into an f64 total, then ggml_mul and,
/// with a bias, ggml_add.
pub fn layer_norm(x: &mut [f32], w: &[f32], b: Option<&[f32]>, eps: f32) {
    use crate::quant::scalar::reduce16;
    let n = x.len();
    let mean = (x.iter().map(|&v| v as f64).sum::<f64>() as f32) / n as f32;
    x.iter_mut().for_each(|v| *v -= mean);
    let vec = n - n % 16;
    let mut sum2 = 0f64;
    for c in x[..vec].chunks_exact(16) {
        let sq: [f32; 16] = core::array::from_fn(|k| c[k] * c[k]);
        sum2 += reduce16(&sq) as f64;
    }
    for &v in &x[vec..] {
        sum2 += (v * v) as f64;
    }
    let var = (sum2 / n as f64) as f32;
    let scale = 1.0 / (var + eps).sqrt();
    match b {
        Some(b) => x.iter_mut().zip(w).zip(b).for_each(|((v, &wi), &bi)| *v = *v * scale * wi + bi),
        None => x.iter_mut().zip(w).for_each(|(v, &wi)| *v = *v * scale * wi),
    }
}

#[inline]
fn gelu_f32(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const GELU_COEF_A: f32 = 0.044715;
    // as ggml's C compiles it: 1 + A·x·x contracted to fma(A·x, x, 1)
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (GELU_COEF_A * x).mul_add(x, 1.0)).tanh())
}

/// GELU by f16 input bits (the GPU kernel reads the same table).
pub fn gelu_table() -> &'static [f32] {
    static T: OnceLock<Vec<f32>> = OnceLock::new();
    T.get_or_init(|| (0..=u16::MAX).map(|h| f16_to_f32(f32_to_f16(gelu_f32(f16_to_f32(h))))).collect())
}

/// GELU (tanh approximation) as ggml-cpu computes it: through a table indexed by the
/// input rounded to f16, exact outside [-10, 10].
#[inline]
pub fn gelu(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_table()[f32_to_f16(x) as usize]
    }
}

/// x = gelu(x) for every element ([`gelu`]; on x86 with F16C the f16 rounding of 8 values
/// at a time by `vcvtps2ph`, the same round-to-nearest-even as `f32_to_f16`).
pub fn gelu_inplace(x: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: AVX2 and F16C checked; the table has an entry for every u16.
        return unsafe { gelu_f16c(x, gelu_table()) };
    }
    x.iter_mut().for_each(|v| *v = gelu(*v));
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
unsafe fn gelu_f16c(x: &mut [f32], t: &[f32]) {
    use core::arch::x86_64::*;
    let mut c = x.chunks_exact_mut(8);
    for v in &mut c {
        let xv = _mm256_loadu_ps(v.as_ptr());
        let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(xv);
        let idx = _mm256_cvtepu16_epi32(h);
        let y = _mm256_i32gather_ps::<4>(t.as_ptr(), idx);
        // x <= -10: 0; x >= 10: x (NaN stays the table's NaN, as `gelu`)
        let y = _mm256_andnot_ps(_mm256_cmp_ps::<_CMP_LE_OQ>(xv, _mm256_set1_ps(-10.0)), y);
        let y = _mm256_blendv_ps(y, xv, _mm256_cmp_ps::<_CMP_GE_OQ>(xv, _mm256_set1_ps(10.0)));
        _mm256_storeu_ps(v.as_mut_ptr(), y);
    }
    c.into_remainder().iter_mut().for_each(|v| *v = gelu(*v));
}

/// out = gelu(gate) * up
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    gelu_inplace(gate);
    gate.iter_mut().zip(up).for_each(|(g, &u)| *g *= u);
}

#[inline]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// out = silu(gate) * up
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = silu(*g) * u;
    }
}

/// out = silu(gate) * up over rows of `width`, as ggml's `ggml_vec_swiglu_f32` (its AVX-512
/// form) computes each row: 16 values at a time `x / (1 + ggml_v_expf(-x))` (see
/// [`expf_ggml`](super::f16vec::expf_ggml)), the row's last `width % 16` values with libm's
/// `expf`. ([`swiglu`] is the plain reference.)
pub fn swiglu_ggml(gate: &mut [f32], up: &[f32], width: usize) {
    use super::f16vec::expf_ggml;
    if width == 0 {
        return;
    }
    let vec = width - width % 16;
    for (grow, urow) in gate.chunks_mut(width).zip(up.chunks(width)) {
        // the vector part 8 at a time where the machine can (the same operations per value)
        let done = if super::f16vec::silu_mul_ggml(grow, urow, vec) { vec } else { 0 };
        for (i, (g, &u)) in grow.iter_mut().zip(urow).enumerate().skip(done) {
            let x = *g;
            let s = if i < vec { x / (1.0 + expf_ggml(0.0 - x)) } else { silu(x) };
            *g = s * u;
        }
    }
}

pub fn add_inplace(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Softmax in place (max-subtracted, f64 sum as ggml).
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    let mut sum = 0f64;
    for v in x.iter_mut() {
        let e = (*v - max).exp();
        *v = e;
        sum += e as f64;
    }
    let inv = (1.0 / sum) as f32;
    for v in x.iter_mut() {
        *v *= inv;
    }
}

/// ggml_rope_ext's parameters besides the position: rotated dimensions, frequency base and
/// scale, per-pair frequency factors (Llama 3.1 `rope_freqs`), and YaRN's terms
/// (`ext_factor` 0: plain or linear scaling).
#[derive(Clone, Copy, Debug)]
pub struct RopeParams<'a> {
    pub n_rot: usize,
    pub base: f32,
    pub freq_scale: f32,
    pub factors: Option<&'a [f32]>,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    pub n_ctx_orig: usize,
    /// cos / sin without YaRN's magnitude factor: a rotation only (context shift)
    pub rotation_only: bool,
}

impl RopeParams<'_> {
    /// Plain RoPE (no YaRN) with `base` and `freq_scale`.
    pub fn plain(n_rot: usize, base: f32, freq_scale: f32) -> RopeParams<'static> {
        RopeParams { n_rot, base, freq_scale, factors: None, ext_factor: 0.0, attn_factor: 1.0, beta_fast: 32.0, beta_slow: 1.0, n_ctx_orig: 0, rotation_only: false }
    }

    /// ggml_rope_yarn_corr_dims: the first and last dimension pair index YaRN blends over.
    fn corr_dims(&self) -> [f32; 2] {
        let dim = |beta: f32| {
            let n = self.n_rot as f32;
            n * (self.n_ctx_orig as f32 / (beta * 2.0 * std::f32::consts::PI)).ln() / (2.0 * self.base.ln())
        };
        [dim(self.beta_fast).floor().max(0.0), dim(self.beta_slow).ceil().min(self.n_rot as f32 - 1.0)]
    }
}

/// cos/sin of each rotated pair at `pos`, as ggml_rope_ext computes them (its
/// `ggml_rope_cache_init` and `rope_yarn`): theta multiplied iteratively by base^(-2/n_rot)
/// in f32, divided by the pair's frequency factor; with YaRN, the interpolated and
/// extrapolated angles blended by the ramp over the correction dims and the magnitude
/// scaled by `attn_factor · (1 + 0.1 ln(1 / freq_scale))`.
pub fn rope_cache(pos: usize, p: &RopeParams, cos: &mut [f32], sin: &mut [f32]) {
    let theta_scale = p.base.powf(-2.0 / p.n_rot as f32);
    let corr = if p.ext_factor != 0.0 { p.corr_dims() } else { [0.0; 2] };
    let mut theta = pos as f32;
    for i in 0..p.n_rot / 2 {
        let ff = p.factors.map(|f| f[i]).unwrap_or(1.0);
        let extrap = theta / ff;
        let interp = p.freq_scale * extrap;
        let (t, mut mscale) = if p.ext_factor != 0.0 {
            // rope_yarn_ramp: i0 / 2 is the pair index
            let y = (i as f32 - corr[0]) / 0.001f32.max(corr[1] - corr[0]);
            let mix = (1.0 - y.clamp(0.0, 1.0)) * p.ext_factor;
            // as ggml's C compiles: the blend contracted to fma(interp, 1 - mix, extrap · mix),
            // 1 + 0.1 · ln(·) to fma(0.1, ln(·), 1)
            (interp.mul_add(1.0 - mix, extrap * mix), p.attn_factor * 0.1f32.mul_add((1.0 / p.freq_scale).ln(), 1.0))
        } else {
            (interp, p.attn_factor)
        };
        if p.rotation_only {
            mscale = 1.0;
        }
        cos[i] = t.cos() * mscale;
        sin[i] = t.sin() * mscale;
        theta *= theta_scale;
    }
}

/// Rotate one head in place. NeoX style pairs (i, i + n_dims/2); normal style pairs (2i, 2i+1).
/// As ggml's rope compiles (contracted): `fma(x0, cos, -(x1·sin))`, `fma(x0, sin, x1·cos)`.
pub fn rope_apply(x: &mut [f32], n_dims: usize, neox: bool, cos: &[f32], sin: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU has FMA (checked above).
        return unsafe { rope_apply_fma(x, n_dims, neox, cos, sin) };
    }
    rope_body(x, n_dims, neox, cos, sin)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "fma")]
unsafe fn rope_apply_fma(x: &mut [f32], n_dims: usize, neox: bool, cos: &[f32], sin: &[f32]) {
    rope_body(x, n_dims, neox, cos, sin)
}

/// The rotation; `mul_add` is one instruction where the caller enables FMA, else libm's `fmaf`
/// (the same value either way).
#[inline(always)]
fn rope_body(x: &mut [f32], n_dims: usize, neox: bool, cos: &[f32], sin: &[f32]) {
    let half = n_dims / 2;
    for i in 0..half {
        let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
        let (x0, x1) = (x[a], x[b]);
        x[a] = x0.mul_add(cos[i], -(x1 * sin[i]));
        x[b] = x0.mul_add(sin[i], x1 * cos[i]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cpu::f16vec::expf_ggml;

    #[test]
    fn gelu_inplace_equals_gelu_bit_for_bit() {
        // every f16 value, values between them, both ends of the table's range, NaN and ±inf
        let mut x: Vec<f32> = (0..=u16::MAX).map(f16_to_f32).collect();
        x.extend((0..20000).map(|i| (i as f32 - 10000.0) * 1.0009e-3));
        x.extend([-10.0, 10.0, -10.000001, 9.999999, f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -0.0, 1e-8, 65519.0, 70000.0]);
        let mut fast = x.clone();
        gelu_inplace(&mut fast);
        for (i, (&a, &v)) in fast.iter().zip(&x).enumerate() {
            let want = gelu(v);
            assert!(a.to_bits() == want.to_bits() || (a.is_nan() && want.is_nan()), "x[{i}] = {v}: {a} vs {want}");
        }
    }

    #[test]
    fn gelu_table_tracks_exact() {
        for i in -2000..2000 {
            let x = i as f32 * 0.005;
            assert!((gelu(x) - gelu_f32(x)).abs() < 2e-3 * (1.0 + x.abs()), "x={x}");
        }
        assert_eq!(gelu(-11.0), 0.0);
        assert_eq!(gelu(12.0), 12.0);
    }

    #[test]
    fn swiglu_ggml_tracks_the_reference_and_keeps_libm_for_row_tails() {
        // rows of 40: 32 values through ggml_v_expf, the last 8 through libm's expf
        let gate: Vec<f32> = (0..120).map(|i| (i as f32 - 60.0) * 0.37).chain([-200.0, 200.0, 0.0, -0.0]).collect();
        let up: Vec<f32> = (0..gate.len()).map(|i| 1.0 + i as f32 * 0.01).collect();
        let (mut fast, mut plain) = (gate.clone(), gate.clone());
        swiglu_ggml(&mut fast[..120], &up[..120], 40);
        swiglu(&mut plain, &up);
        for (i, (a, b)) in fast[..120].iter().zip(&plain).enumerate() {
            if i % 40 >= 32 {
                assert_eq!(a.to_bits(), b.to_bits(), "tail value {i}");
            } else {
                assert!((a - b).abs() <= 4.0 * f32::EPSILON * b.abs().max(1e-30), "i={i}: {a} vs {b}");
            }
        }
        // ggml_v_expf's range ends: exp(200) = +inf gives silu(-200) = -0, exp(-200) = 0 gives x
        let mut edge = vec![-200.0, 200.0, 0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 3.0, -3.0, 4.0, -4.0, 5.0, -5.0, 6.0, -6.0];
        swiglu_ggml(&mut edge, &[1.0; 16], 16);
        assert_eq!((edge[0], edge[1], edge[2]), (0.0, 200.0, 0.0));
        assert!(edge.iter().all(|v| v.is_finite()));
    }

    #[test]
    fn swiglu_ggml_vector_path_is_the_scalar_expression_bit_for_bit() {
        // a sweep through ggml_v_expf's whole range (normal, subnormal and overflowing
        // exponentials: the vector path hands those 8 lanes to the scalar one)
        let gate: Vec<f32> = (0..4096).map(|i| (i as f32 - 2048.0) * 0.0617 + (i % 7) as f32 * 1e-3).chain([-200.0, 200.0, 88.0, -88.0, 0.0, -0.0, 1e-30, -1e-30]).collect();
        let w = gate.len();
        let up: Vec<f32> = (0..w).map(|i| 0.5 + (i % 13) as f32 * 0.25).collect();
        let mut got = gate.clone();
        swiglu_ggml(&mut got, &up, w);
        let vec = w - w % 16;
        for i in 0..w {
            let x = gate[i];
            let s = if i < vec { x / (1.0 + expf_ggml(0.0 - x)) } else { silu(x) };
            assert_eq!(got[i].to_bits(), (s * up[i]).to_bits(), "value {i} ({x})");
        }
    }

    #[test]
    fn softmax_sums_to_one() {
        let mut v = vec![1.0, 2.0, 3.0, f32::NEG_INFINITY];
        softmax(&mut v);
        assert!((v.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert_eq!(v[3], 0.0);
    }

    #[test]
    fn rope_rotates_by_position() {
        let (mut c, mut s) = (vec![0.0; 2], vec![0.0; 2]);
        rope_cache(1, &RopeParams::plain(4, 10000.0, 1.0), &mut c, &mut s);
        let mut x = vec![1.0, 0.0, 0.0, 0.0];
        rope_apply(&mut x, 4, true, &c, &s);
        assert!((x[0] - 1f32.cos()).abs() < 1e-6 && (x[2] - 1f32.sin()).abs() < 1e-6);
    }
}
