//! The fast mode's (`Exactness::Fast`) arithmetic for F32 / F16 matmul weights: both sides
//! rounded to bf16 and multiplied in pairs into 16 f32 lanes, as AVX-512 BF16's `vdpbf16ps`
//! does, then the lanes summed by [`reduce16`]. Half the instructions of the f32 FMA chains
//! per weight (the tiles: `bf16_tile.rs`); the scalar definition here is their reference twin
//! (`tests_tile.rs` holds them to it bit for bit). llama.cpp does not use this order for F32 /
//! F16 weights, so results differ from its bits; `tests/test_fast_mode.py` bounds how much.
use super::f16::f16_to_f32;
use super::scalar::reduce16;

/// f32 → bf16 bits as `vcvtne2ps2bf16`: round to nearest even, a NaN quieted, and (like the
/// instruction, which ignores MXCSR and treats denormals as zero) a denormal input becomes a
/// zero of its sign.
#[inline]
pub fn round_bf16(f: f32) -> u16 {
    let u = f.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    if u & 0x7f80_0000 == 0 {
        return ((u >> 16) & 0x8000) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

/// f32 with denormals flushed to a zero of their sign (`vdpbf16ps`'s DAZ / FTZ).
#[inline]
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

/// Element `i` of a weight or `vec_dot_type` row of F16 (`F16`) or F32 values.
#[inline]
pub(super) fn elem<const F16: bool>(b: &[u8], i: usize) -> f32 {
    if F16 {
        f16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]))
    } else {
        f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    }
}

/// One output of the fast mode's F16 (`F16`) / F32 matmul from the weight row `w` and the
/// activation row `a` (both of that type, `n` elements, `n` a multiple of 32; the tiles take
/// the activations pre-rounded, `prep`): lane j takes, per 32 elements from k, the product of
/// elements k+2j+1, then that of k+2j (each product exact, each sum rounded to f32, denormals
/// flushed), and the lanes are summed by [`reduce16`].
pub fn dot<const F16: bool>(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let el = if F16 { 2 } else { 4 };
    let n = n.min(w.len() / el).min(a.len() / el) / 32 * 32;
    let b = |x: f32| ftz(f32::from_bits((round_bf16(x) as u32) << 16));
    let mut lanes = [0f32; 16];
    for k in (0..n).step_by(32) {
        for (j, l) in lanes.iter_mut().enumerate() {
            for e in [k + 2 * j + 1, k + 2 * j] {
                *l = ftz(*l + ftz(b(elem::<F16>(w, e)) * b(elem::<F16>(a, e))));
            }
        }
    }
    reduce16(&lanes)
}

/// [`dot`] for weights of `ty` (F16, F32), or `None`.
pub fn dot_fn(ty: super::GgmlType) -> Option<super::DotFn> {
    match ty {
        super::GgmlType::F16 => Some(dot::<true>),
        super::GgmlType::F32 => Some(dot::<false>),
        _ => None,
    }
}

/// `vec_dot_type` row (F16 or F32, `n` elements) → the bf16 row the tiles read.
pub fn round_row<const F16: bool>(n: usize, q: &[u8], out: &mut [u8]) {
    let n = n.min(q.len() / if F16 { 2 } else { 4 }).min(out.len() / 2);
    for (i, o) in out.chunks_exact_mut(2).take(n).enumerate() {
        o.copy_from_slice(&round_bf16(elem::<F16>(q, i)).to_le_bytes());
    }
}
