//! The vector kernels of attention over an f16 KV cache, in llama.cpp's (x86) order of f32
//! operations, so scores, probabilities and outputs match it bit for bit:
//!
//! - a dot product of f16 vectors is `W` lanes of FMA chains (lane `i % W` takes element
//!   `i`), folded to 16 lanes and reduced by [`reduce16`] (`_mm512_reduce_add_ps`). `W` = 16
//!   is llamafile's tinyBLAS (what ggml's matmul uses for two or more query tokens), `W` = 64
//!   is `ggml_vec_dot_f16` / `_f32` (four 16-lane accumulators; one query token), `W` = 32
//!   is `ggml_vec_dot_bf16` (two 16-lane accumulators, reduced each and added in f64);
//! - `out += p·v` over key positions keeps the same lanes per output element ([`Lanes`]);
//! - softmax exponentials are ggml's `ggml_v_expf` ([`expf_ggml`]), summed 16 at a time.
//!
//! Every function has a scalar body; on x86-64 with AVX2+FMA+F16C the same operations run
//! 8 wide (bit-identical: FMA and single adds in the same association).
use crate::quant::f16::f16_to_f32;
#[cfg(target_arch = "x86_64")]
use crate::quant::{isa, Isa};

/// Lanes of the FMA chains: tinyBLAS (batches) or `ggml_vec_dot_f16` / `_f32` (one token),
/// or `ggml_vec_dot_bf16` (one token over bf16 values, whose products are exact in f32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Tiny16,
    Vec64,
    Bf16x32,
}

impl Order {
    pub fn width(self) -> usize {
        match self {
            Order::Tiny16 => 16,
            Order::Vec64 => 64,
            Order::Bf16x32 => 32,
        }
    }
}

pub use crate::quant::scalar::{reduce16, reduce64};

/// Σ a[i]·b[i] in `order` (lengths equal; `Tiny16` needs a multiple of 16; `Vec64` sums
/// elements past the last multiple of 64 in f64 after the reduction, as ggml does).
pub fn dot_f16(a: &[u16], b: &[u16], order: Order) -> f32 {
    let n = a.len().min(b.len());
    let q = widen(&a[..n]);
    let mut out = [0f32];
    dot_f16_rows(&q, &b[..n], n, order, &mut out);
    out[0]
}

fn widen(a: &[u16]) -> Vec<f32> {
    a.iter().map(|&x| f16_to_f32(x)).collect()
}

/// `out[h] = dot_f16(q[h·d..(h+1)·d], k, order)` for the `out.len()` rows of `q` (the query
/// heads that share one key row), `q` given widened to f32 (f16 values: ggml converts Q to
/// K's type; widened once per query, not once per key): the same bits as one call per row,
/// with the rows' FMA chains interleaved.
pub fn dot_f16_rows(q: &[f32], k: &[u16], d: usize, order: Order, out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa() >= Isa::Avx2 && d <= k.len() && q.len() >= out.len() * d {
            let mut h = 0;
            while h < out.len() {
                let m = (out.len() - h).min(4);
                // SAFETY: the ISA check guarantees AVX2/FMA/F16C; rows are in bounds (checked above).
                let r = unsafe { x86::dot_qk_x4(&q[h * d..(h + m) * d], &k[..d], d, order) };
                out[h..h + m].copy_from_slice(&r[..m]);
                h += m;
            }
            return;
        }
    }
    for (i, o) in out.iter_mut().enumerate() {
        *o = dot_qk_scalar(&q[i * d..(i + 1) * d], k, order);
    }
}

pub fn dot_f16_scalar(a: &[u16], b: &[u16], order: Order) -> f32 {
    dot_qk_scalar(&widen(a), b, order)
}

/// The scalar reference: lane `i % W` takes `fma(q[i], k[i], lane)`, then the reduction.
fn dot_qk_scalar(q: &[f32], k: &[u16], order: Order) -> f32 {
    let w = order.width();
    let n = q.len().min(k.len());
    let np = n / w * w;
    let mut acc = [0f32; 64];
    for (i, (&x, &y)) in q[..np].iter().zip(&k[..np]).enumerate() {
        acc[i % w] = x.mul_add(f16_to_f32(y), acc[i % w]);
    }
    let r16 = |l: usize| reduce16(acc[l..l + 16].try_into().unwrap_or(&[0.0; 16]));
    match order {
        Order::Tiny16 => r16(0),
        Order::Vec64 | Order::Bf16x32 => {
            let mut s = if order == Order::Vec64 { reduce64(&acc) as f64 } else { r16(0) as f64 + r16(16) as f64 };
            for (&x, &y) in q[np..n].iter().zip(&k[np..n]) {
                s += (x * f16_to_f32(y)) as f64;
            }
            s as f32
        }
    }
}

/// Per-lane accumulators of `out[d] = Σ_j p_j · v_j[d]` over key positions j: position j
/// goes to lane `j % W`, `fma(p, v, lane)`, positions in increasing order. A lane no position
/// reached counts as zeros (as ggml's zeroed accumulators), without being cleared.
pub struct Lanes {
    order: Order,
    dim: usize,
    used: u64,
    acc: Vec<f32>,
}

thread_local! {
    static LANES: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl Lanes {
    /// Runs `f` with empty lanes (a per-thread buffer, no allocation after the first call).
    pub fn with<R>(order: Order, dim: usize, f: impl FnOnce(&mut Lanes) -> R) -> R {
        LANES.with(|b| {
            let mut acc = std::mem::take(&mut *b.borrow_mut());
            acc.resize(order.width() * dim, 0.0);
            let mut l = Lanes { order, dim, used: 0, acc };
            let r = f(&mut l);
            *b.borrow_mut() = l.acc;
            r
        })
    }

    /// Forget every position (the lanes count as zeros again).
    pub fn reset(&mut self) {
        self.used = 0;
    }

    /// The lane of position `pos`: whether it is still unused, and its accumulators.
    #[inline]
    fn lane(&mut self, pos: usize) -> (bool, &mut [f32]) {
        let lane = pos % self.order.width();
        let first = self.used & (1u64 << lane) == 0;
        self.used |= 1u64 << lane;
        (first, &mut self.acc[lane * self.dim..(lane + 1) * self.dim])
    }

    /// Accumulate position `pos` with probability `p` and values `v` (f32, `dim` long).
    #[inline]
    pub fn add_f32(&mut self, pos: usize, p: f32, v: &[f32]) {
        let (first, acc) = self.lane(pos);
        #[cfg(target_arch = "x86_64")]
        {
            if isa() >= Isa::Avx2 {
                // SAFETY: the ISA check guarantees AVX2/FMA.
                return unsafe { x86::fma_f32(acc, p, v, first) };
            }
        }
        for (o, &x) in acc.iter_mut().zip(v) {
            *o = p.mul_add(x, if first { 0.0 } else { *o });
        }
    }

    /// Accumulate position `pos` with probability `p` and values `v` (f16, `dim` long).
    #[inline]
    pub fn add(&mut self, pos: usize, p: f32, v: &[u16]) {
        let (first, acc) = self.lane(pos);
        #[cfg(target_arch = "x86_64")]
        {
            if isa() >= Isa::Avx2 {
                // SAFETY: the ISA check guarantees AVX2/FMA/F16C.
                return unsafe { x86::fma_f16(acc, p, v, first) };
            }
        }
        for (o, &x) in acc.iter_mut().zip(v) {
            *o = p.mul_add(f16_to_f32(x), if first { 0.0 } else { *o });
        }
    }

    /// The reduced sums into `out` (`dim` long): [`reduce16`] / [`reduce64`] per element, 8
    /// elements at a time, in the same association.
    pub fn reduce_into(&self, out: &mut [f32]) {
        type V = [f32; 8];
        let d = self.dim.min(out.len());
        let add = |a: V, b: V| -> V { std::array::from_fn(|k| a[k] + b[k]) };
        let mut i = 0;
        while i < d {
            let m = (d - i).min(8);
            let ld = |l: usize| -> V {
                if self.used & (1u64 << l) == 0 {
                    return [0.0; 8];
                }
                let r = &self.acc[l * self.dim + i..l * self.dim + i + m];
                std::array::from_fn(|k| if k < m { r[k] } else { 0.0 })
            };
            let red = |x: [V; 16]| -> V {
                let t: [V; 8] = std::array::from_fn(|k| add(x[k], x[k + 8]));
                add(add(add(t[0], t[4]), add(t[2], t[6])), add(add(t[1], t[5]), add(t[3], t[7])))
            };
            let v = match self.order {
                Order::Tiny16 => red(std::array::from_fn(ld)),
                Order::Vec64 => red(std::array::from_fn(|l| add(add(ld(l), ld(l + 32)), add(ld(l + 16), ld(l + 48))))),
                Order::Bf16x32 => {
                    let (a, b) = (red(std::array::from_fn(ld)), red(std::array::from_fn(|l| ld(l + 16))));
                    std::array::from_fn(|k| (a[k] as f64 + b[k] as f64) as f32)
                }
            };
            out[i..i + m].copy_from_slice(&v[..m]);
            i += m;
        }
    }
}

/// ggml's `ggml_v_expf` (its AVX-512 form) for one value: a degree-5 polynomial on the
/// reduced argument, scaled by 2^n; 0 below n = -192 (and +inf above 192).
#[inline]
pub fn expf_ggml(x: f32) -> f32 {
    let r = f32::from_bits(0x4B40_0000); // 0x1.8p23
    let z = x.mul_add(f32::from_bits(0x3FB8_AA3B), r); // 0x1.715476p+0
    let n = z - r;
    let b = (-n).mul_add(f32::from_bits(0x35BF_BE8E), (-n).mul_add(f32::from_bits(0x3F31_7200), x));
    let u = b * b;
    let j = f32::from_bits(0x3C07_2010)
        .mul_add(b, f32::from_bits(0x3D2B_9F17))
        .mul_add(u, f32::from_bits(0x3E2A_AF33).mul_add(b, f32::from_bits(0x3EFF_FEDB)))
        .mul_add(u, f32::from_bits(0x3F7F_FFF6).mul_add(b, 1.0));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    // scalef: one rounding of j·2^n (f64 holds the product exactly)
    // (n is an integer in [-192, 192]: 2^n as an f64 is built from its exponent bits)
    let p2 = f64::from_bits(((n as i64 + 1023) as u64) << 52);
    (j as f64 * p2) as f32
}

/// ggml's softmax of one score row, in place: `x[i]` is the score of key position
/// `pos0 + i`; positions are grouped 16 at a time from position 0 (ggml's KV cells) and each
/// group's exponentials are summed by [`reduce16`] into an f64 total. Masked keys (not in
/// `x`) count as 0. A `sink` logit (gpt-oss) takes part in the max and, through libm's
/// `expf`, in the total, and gets no output (ggml_soft_max_add_sinks).
pub fn softmax_ggml(x: &mut [f32], pos0: usize, sink: Option<f32>) {
    let mut max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if let Some(s) = sink {
        max = max.max(s);
    }
    if max == f32::NEG_INFINITY {
        x.fill(0.0);
        return;
    }
    exp_sub(x, max);
    let mut sum = 0f64;
    let mut chunk = [0f32; 16];
    let mut i = 0;
    while i < x.len() {
        let lane0 = (pos0 + i) % 16;
        let take = (16 - lane0).min(x.len() - i);
        chunk.fill(0.0);
        chunk[lane0..lane0 + take].copy_from_slice(&x[i..i + take]);
        sum += reduce16(&chunk) as f64;
        i += take;
    }
    if let Some(s) = sink {
        sum += (s - max).exp() as f64;
    }
    let inv = (1.0 / sum) as f32;
    x.iter_mut().for_each(|v| *v *= inv);
}

/// x[i] = expf_ggml(x[i] - max)
fn exp_sub(x: &mut [f32], max: f32) {
    #[cfg(target_arch = "x86_64")]
    {
        if isa() >= Isa::Avx2 {
            // SAFETY: the ISA check guarantees AVX2/FMA.
            return unsafe { x86::exp_sub(x, max) };
        }
    }
    x.iter_mut().for_each(|v| *v = expf_ggml(*v - max));
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{expf_ggml, Order};
    use crate::quant::f16::f16_to_f32;
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn ld(p: *const u16) -> __m256 {
        _mm256_cvtph_ps(_mm_loadu_si128(p as *const __m128i))
    }

    /// ggml's `hsum_float_8`
    #[inline(always)]
    unsafe fn hsum8(x: __m256) -> f32 {
        let h = _mm_add_ps(_mm256_extractf128_ps::<1>(x), _mm256_castps256_ps128(x));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
    }

    /// Up to 4 rows of `q` (f32, `d` apart, `q.len() / d` of them) against `k`, chains
    /// interleaved. [`super::reduce16`] of lanes 0..16 is `hsum8(lanes 0..8 + lanes 8..16)`,
    /// and [`super::reduce64`] first folds registers (0+4)+(2+6) and (1+5)+(3+7) of 8 lanes.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn dot_qk_x4(q: &[f32], k: &[u16], d: usize, order: Order) -> [f32; 4] {
        let rows = (q.len() / d.max(1)).min(4);
        let w = order.width();
        let np = d / w * w;
        let regs = w / 8;
        let pk = k.as_ptr();
        let mut acc = [[_mm256_setzero_ps(); 8]; 4];
        let mut i = 0;
        while i < np {
            for (r, ar) in acc.iter_mut().enumerate().take(rows) {
                let pq = q.as_ptr().add(r * d);
                for (j, s) in ar.iter_mut().enumerate().take(regs) {
                    *s = _mm256_fmadd_ps(_mm256_loadu_ps(pq.add(i + 8 * j)), ld(pk.add(i + 8 * j)), *s);
                }
            }
            i += w;
        }
        let mut out = [0f32; 4];
        for r in 0..rows {
            let a = &acc[r];
            out[r] = match order {
                Order::Tiny16 => hsum8(_mm256_add_ps(a[0], a[1])),
                Order::Vec64 | Order::Bf16x32 => {
                    let mut s = if order == Order::Vec64 {
                        let r0 = _mm256_add_ps(_mm256_add_ps(a[0], a[4]), _mm256_add_ps(a[2], a[6]));
                        let r1 = _mm256_add_ps(_mm256_add_ps(a[1], a[5]), _mm256_add_ps(a[3], a[7]));
                        hsum8(_mm256_add_ps(r0, r1)) as f64
                    } else {
                        hsum8(_mm256_add_ps(a[0], a[1])) as f64 + hsum8(_mm256_add_ps(a[2], a[3])) as f64
                    };
                    for j in np..d {
                        s += (q[r * d + j] * f16_to_f32(k[j])) as f64;
                    }
                    s as f32
                }
            };
        }
        out
    }

    /// acc[i] = fma(p, v[i], acc[i]) (`first`: fma(p, v[i], 0)), f32 values
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn fma_f32(acc: &mut [f32], p: f32, v: &[f32], first: bool) {
        let n = acc.len().min(v.len());
        let pv = _mm256_set1_ps(p);
        let mut i = 0;
        while i + 8 <= n {
            let o = if first { _mm256_setzero_ps() } else { _mm256_loadu_ps(acc.as_ptr().add(i)) };
            _mm256_storeu_ps(acc.as_mut_ptr().add(i), _mm256_fmadd_ps(pv, _mm256_loadu_ps(v.as_ptr().add(i)), o));
            i += 8;
        }
        while i < n {
            acc[i] = p.mul_add(v[i], if first { 0.0 } else { acc[i] });
            i += 1;
        }
    }

    /// acc[i] = fma(p, v[i], acc[i]) (`first`: fma(p, v[i], 0))
    #[target_feature(enable = "avx2,fma,f16c")]
    pub unsafe fn fma_f16(acc: &mut [f32], p: f32, v: &[u16], first: bool) {
        let n = acc.len().min(v.len());
        let pv = _mm256_set1_ps(p);
        let mut i = 0;
        while i + 8 <= n {
            let o = if first { _mm256_setzero_ps() } else { _mm256_loadu_ps(acc.as_ptr().add(i)) };
            _mm256_storeu_ps(acc.as_mut_ptr().add(i), _mm256_fmadd_ps(pv, ld(v.as_ptr().add(i)), o));
            i += 8;
        }
        while i < n {
            acc[i] = p.mul_add(crate::quant::f16::f16_to_f32(v[i]), if first { 0.0 } else { acc[i] });
            i += 1;
        }
    }

    /// [`expf_ggml`] of 8 lanes when every lane's result is a normal number (|n| ≤ 126),
    /// else `None` (the caller takes the scalar path for those 8).
    #[inline(always)]
    unsafe fn expf8(v: __m256) -> Option<__m256> {
        let c = |b: u32| _mm256_set1_ps(f32::from_bits(b));
        let r = c(0x4B40_0000);
        let z = _mm256_fmadd_ps(v, c(0x3FB8_AA3B), r);
        let nn = _mm256_sub_ps(z, r);
        let b = _mm256_fnmadd_ps(nn, c(0x35BF_BE8E), _mm256_fnmadd_ps(nn, c(0x3F31_7200), v));
        let u = _mm256_mul_ps(b, b);
        let j = _mm256_fmadd_ps(
            _mm256_fmadd_ps(_mm256_fmadd_ps(c(0x3C07_2010), b, c(0x3D2B_9F17)), u, _mm256_fmadd_ps(c(0x3E2A_AF33), b, c(0x3EFF_FEDB))),
            u,
            _mm256_fmadd_ps(c(0x3F7F_FFF6), b, _mm256_set1_ps(1.0)),
        );
        let far = _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_GT_OQ>(_mm256_andnot_ps(_mm256_set1_ps(-0.0), nn), _mm256_set1_ps(126.0)));
        if far != 0 {
            return None;
        }
        // 2^n for normal n: exponent bits (n + 127) << 23
        let ni = _mm256_cvtps_epi32(nn);
        Some(_mm256_mul_ps(j, _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(ni, _mm256_set1_epi32(127))))))
    }

    /// `expf_ggml(x - max)` 8 at a time (lanes leaving the normal range: the scalar path).
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn exp_sub(x: &mut [f32], max: f32) {
        let n = x.len();
        let mut i = 0;
        let mx = _mm256_set1_ps(max);
        while i + 8 <= n {
            match expf8(_mm256_sub_ps(_mm256_loadu_ps(x.as_ptr().add(i)), mx)) {
                Some(e) => _mm256_storeu_ps(x.as_mut_ptr().add(i), e),
                None => x[i..i + 8].iter_mut().for_each(|v| *v = expf_ggml(*v - max)),
            }
            i += 8;
        }
        for v in &mut x[i..] {
            *v = expf_ggml(*v - max);
        }
    }

    /// `g[i] = g[i] / (1 + expf_ggml(0 - g[i])) · u[i]` for the first `n` values (a multiple
    /// of 8), 8 at a time with the scalar expression's operations.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn silu_mul(g: &mut [f32], u: &[f32], n: usize) {
        let n = n.min(g.len()).min(u.len()) / 8 * 8;
        let one = _mm256_set1_ps(1.0);
        let mut i = 0;
        while i < n {
            let x = _mm256_loadu_ps(g.as_ptr().add(i));
            match expf8(_mm256_sub_ps(_mm256_setzero_ps(), x)) {
                Some(e) => {
                    let s = _mm256_div_ps(x, _mm256_add_ps(one, e));
                    _mm256_storeu_ps(g.as_mut_ptr().add(i), _mm256_mul_ps(s, _mm256_loadu_ps(u.as_ptr().add(i))));
                }
                None => {
                    for k in i..i + 8 {
                        g[k] = g[k] / (1.0 + expf_ggml(0.0 - g[k])) * u[k];
                    }
                }
            }
            i += 8;
        }
    }
}

/// `g[i] = silu_ggml(g[i]) · u[i]` for the first `n` values (a multiple of 8): the vector
/// path of [`crate::cpu::ops::swiglu_ggml`]; false where the machine has no AVX2 (nothing done).
pub fn silu_mul_ggml(g: &mut [f32], u: &[f32], n: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if isa() >= Isa::Avx2 {
            // SAFETY: the ISA check guarantees AVX2/FMA.
            unsafe { x86::silu_mul(g, u, n) };
            return true;
        }
    }
    let _ = (g, u, n);
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::f16::f32_to_f16;

    fn vecs(n: usize) -> (Vec<u16>, Vec<u16>) {
        let a = (0..n).map(|i| f32_to_f16(((i * 37 % 101) as f32 - 50.0) / 17.0)).collect();
        let b = (0..n).map(|i| f32_to_f16(((i * 53 % 89) as f32 - 44.0) / 13.0)).collect();
        (a, b)
    }

    #[test]
    fn simd_matches_scalar_bit_for_bit() {
        for n in [16, 64, 80, 256] {
            let (a, b) = vecs(n);
            for order in [Order::Tiny16, Order::Vec64, Order::Bf16x32] {
                if order == Order::Tiny16 && n % 16 != 0 {
                    continue;
                }
                let (x, y) = (dot_f16(&a, &b, order), dot_f16_scalar(&a, &b, order));
                assert_eq!(x.to_bits(), y.to_bits(), "n={n} {order:?}");
                let exact: f64 = a.iter().zip(&b).map(|(&p, &q)| f16_to_f32(p) as f64 * f16_to_f32(q) as f64).sum();
                assert!((x as f64 - exact).abs() <= 1e-5 * exact.abs().max(1.0));
            }
        }
        // several query rows against one key row: each the single dot's bits
        for (rows, d) in [(1usize, 256usize), (3, 80), (4, 64), (6, 256), (9, 16)] {
            let (a, k) = vecs(rows * d);
            let q: Vec<f32> = a.iter().map(|&x| f16_to_f32(x)).collect();
            for order in [Order::Tiny16, Order::Vec64, Order::Bf16x32] {
                if order == Order::Tiny16 && d % 16 != 0 {
                    continue;
                }
                let mut out = vec![0f32; rows];
                dot_f16_rows(&q, &k[..d], d, order, &mut out);
                for (h, o) in out.iter().enumerate() {
                    assert_eq!(o.to_bits(), dot_f16_scalar(&a[h * d..(h + 1) * d], &k[..d], order).to_bits(), "rows={rows} d={d} h={h} {order:?}");
                }
            }
        }
        let xs: Vec<f32> = (0..203).map(|i| -(i as f32) * 0.37 + 3.0).collect();
        let mut simd = xs.clone();
        exp_sub(&mut simd, 3.0);
        for (i, (&s, &x)) in simd.iter().zip(&xs).enumerate() {
            assert_eq!(s.to_bits(), expf_ggml(x - 3.0).to_bits(), "exp at {i}");
            let want = ((x - 3.0) as f64).exp();
            assert!((s as f64 - want).abs() <= 2e-7 * want + 1e-37, "exp({}) = {s} vs {want}", x - 3.0);
        }
    }

    #[test]
    fn lanes_reduce_like_dot() {
        let (a, b) = vecs(128);
        let bf: Vec<f32> = b.iter().map(|&x| f16_to_f32(x)).collect();
        for order in [Order::Tiny16, Order::Vec64, Order::Bf16x32] {
            Lanes::with(order, 1, |l| {
                for round in 0..4 {
                    l.reset();
                    for (j, &p) in a.iter().enumerate() {
                        if round < 2 {
                            l.add(j, f16_to_f32(p), &b[j..j + 1]);
                        } else {
                            l.add_f32(j, f16_to_f32(p), &bf[j..j + 1]);
                        }
                    }
                    let mut out = [0f32];
                    l.reduce_into(&mut out);
                    assert_eq!(out[0].to_bits(), dot_f16_scalar(&a, &b, order).to_bits(), "round {round} {order:?}");
                }
            });
        }
    }
}
