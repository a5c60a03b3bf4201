//! The element types a KV cache may hold (`-ctk` / `-ctv`, llama-server's values), how a
//! row is written (ggml-cpu's `from_float` of the type, as llama.cpp's `ggml_cpy` into the
//! cache) and read back. Every type's row is a whole number of 2-byte units (the blocks are
//! 18 to 34 bytes), so rows live in `Vec<u16>` storage whatever the type.
use crate::error::{Error, Result};
use crate::quant::{activation, quantize_ref, GgmlType};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[allow(non_camel_case_types)]
pub enum KvType {
    F32,
    #[default]
    F16,
    BF16,
    Q8_0,
    Q4_0,
    Q4_1,
    IQ4_NL,
    Q5_0,
    Q5_1,
}

pub const KV_TYPES: [KvType; 9] =
    [KvType::F32, KvType::F16, KvType::BF16, KvType::Q8_0, KvType::Q4_0, KvType::Q4_1, KvType::IQ4_NL, KvType::Q5_0, KvType::Q5_1];

impl KvType {
    pub fn ggml(self) -> GgmlType {
        match self {
            KvType::F32 => GgmlType::F32,
            KvType::F16 => GgmlType::F16,
            KvType::BF16 => GgmlType::BF16,
            KvType::Q8_0 => GgmlType::Q8_0,
            KvType::Q4_0 => GgmlType::Q4_0,
            KvType::Q4_1 => GgmlType::Q4_1,
            KvType::IQ4_NL => GgmlType::IQ4_NL,
            KvType::Q5_0 => GgmlType::Q5_0,
            KvType::Q5_1 => GgmlType::Q5_1,
        }
    }

    /// llama-server's spelling (`f16`, `q8_0`, `iq4_nl`, …).
    pub fn name(self) -> &'static str {
        match self {
            KvType::F32 => "f32",
            KvType::F16 => "f16",
            KvType::BF16 => "bf16",
            KvType::Q8_0 => "q8_0",
            KvType::Q4_0 => "q4_0",
            KvType::Q4_1 => "q4_1",
            KvType::IQ4_NL => "iq4_nl",
            KvType::Q5_0 => "q5_0",
            KvType::Q5_1 => "q5_1",
        }
    }

    pub fn parse(s: &str, what: &str) -> Result<KvType> {
        let s = s.trim().to_ascii_lowercase();
        KV_TYPES.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            let all: Vec<&str> = KV_TYPES.iter().map(|t| t.name()).collect();
            Error::InvalidRequest(format!("{what}: unknown KV cache type {s:?} (one of {})", all.join(", ")))
        })
    }

    /// Values per block (1 for the float types).
    pub fn block(self) -> usize {
        self.ggml().block().0
    }

    /// 2-byte units of a row of `n` values (n a multiple of `block`).
    pub fn units(self, n: usize) -> usize {
        self.ggml().row_bytes(n) / 2
    }

    /// A quantized type (its V rows need flash attention in llama.cpp).
    pub fn is_quantized(self) -> bool {
        !matches!(self, KvType::F32 | KvType::F16 | KvType::BF16)
    }
}

/// The dot of a K row against Q converted to the type's dot format, as ggml-cpu's `vec_dot`
/// for the type (bf16: its AVX-512F order).
pub fn k_dot(ty: KvType) -> Option<crate::quant::DotFn> {
    match ty {
        KvType::BF16 => Some(crate::quant::scalar::dot_bf16_ggml),
        _ => crate::quant::dot_fn(ty.ggml()),
    }
}

/// The dot of K rows against Q in ggml's matmul of two or more query tokens: tinyBLAS for
/// the types whose queries it converts (bf16: 16 FMA lanes; IQ4_NL: one chain where
/// `ggml_vec_dot_iq4_nl_q8_0` keeps two), else the one-token dot ([`k_dot`]): Q8_0, Q4_0 and
/// Q5_0's tinyBLAS order is their dot's, and an f32 K gets no tinyBLAS (Q needs no conversion
/// and is not contiguous). `head_dim` a multiple of 16 (tinyBLAS' lanes).
pub fn k_dot_batch(ty: KvType) -> Option<crate::quant::DotFn> {
    match ty {
        KvType::BF16 => Some(crate::quant::scalar::dot_bf16_tiny),
        KvType::IQ4_NL => Some(crate::quant::scalar_k::dot_iq4_nl_q8_0_tiny),
        _ => k_dot(ty),
    }
}

/// The Walsh-Hadamard rotation llama.cpp applies around a quantized cache (its `attn_rot_k`
/// / `attn_rot_v`): Q and K in blocks of the largest power of two (from 64) dividing the K
/// head size, V and the attention output in blocks of 64; None when the type is not
/// quantized or the head size is not a multiple of 64.
pub fn rotation(ty: KvType, head_dim: usize, is_k: bool) -> Option<usize> {
    if !ty.is_quantized() || head_dim == 0 || head_dim % 64 != 0 {
        return None;
    }
    if !is_k {
        return Some(64);
    }
    let mut n = 64;
    while head_dim % (n * 2) == 0 {
        n *= 2;
    }
    Some(n)
}

/// Rotate each block of `n` values of `x` by the orthonormal Walsh-Hadamard matrix
/// (its own inverse), as ggml-cpu's `ggml_compute_forward_fwht`: scaled by 1/sqrt(n) first,
/// then the butterflies (u + v, u − v) with strides 1, 2, 4, … n/2.
pub fn hadamard(x: &mut [f32], n: usize) {
    let scale = 1.0 / (n as f32).sqrt();
    for row in x.chunks_exact_mut(n) {
        row.iter_mut().for_each(|v| *v *= scale);
        let mut len = 1;
        while len < n {
            for i in (0..n).step_by(2 * len) {
                for j in i..i + len {
                    let (u, v) = (row[j], row[j + len]);
                    row[j] = u + v;
                    row[j + len] = u - v;
                }
            }
            len <<= 1;
        }
    }
}

/// Bytes of a row of units.
pub fn as_bytes(u: &[u16]) -> &[u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length covers the same memory.
    unsafe { std::slice::from_raw_parts(u.as_ptr() as *const u8, u.len() * 2) }
}

pub fn as_bytes_mut(u: &mut [u16]) -> &mut [u8] {
    // SAFETY: as `as_bytes`; the exclusive borrow of `u` is carried over.
    unsafe { std::slice::from_raw_parts_mut(u.as_mut_ptr() as *mut u8, u.len() * 2) }
}

/// Write `x` into a row of type `ty` (ggml-cpu's `from_float`).
pub fn store_row(ty: KvType, x: &[f32], out: &mut [u16]) {
    let o = as_bytes_mut(out);
    match ty {
        KvType::F16 | KvType::BF16 | KvType::F32 | KvType::Q8_0 => activation::quantize_into(ty.ggml(), x, o),
        KvType::Q4_0 => quantize_ref::q4_0(x, o),
        KvType::Q4_1 => quantize_ref::q4_1(x, o),
        KvType::Q5_0 => quantize_ref::q5_0(x, o),
        KvType::Q5_1 => quantize_ref::q5_1(x, o),
        KvType::IQ4_NL => quantize_ref::iq4_nl(x, o),
    }
}

/// Read a row of type `ty` back as f32 (`to_float`).
pub fn load_row(ty: KvType, row: &[u16], out: &mut [f32]) {
    crate::quant::dequantize(ty.ggml(), as_bytes(row), out);
}

/// `-fa on|off|auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlashAttn {
    On,
    Off,
    #[default]
    Auto,
}

impl FlashAttn {
    pub fn parse(s: &str) -> Result<FlashAttn> {
        match s.trim().to_ascii_lowercase().as_str() {
            "on" | "1" | "true" | "enabled" => Ok(FlashAttn::On),
            "off" | "0" | "false" | "disabled" => Ok(FlashAttn::Off),
            "auto" | "-1" => Ok(FlashAttn::Auto),
            other => Err(Error::InvalidRequest(format!("flash_attn: {other:?} is not on, off or auto"))),
        }
    }
}

/// The KV cache's types and attention path.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvConfig {
    pub k_type: KvType,
    pub v_type: KvType,
    pub flash_attn: FlashAttn,
}

impl KvConfig {
    /// Whether attention runs as flash attention, by llama.cpp's rules: a quantized V needs
    /// it (`-fa auto` turns it on, `-fa off` is refused). `auto` otherwise means: on for a
    /// cache of other types than f16, off for f16 (llamars' f16 path follows llama.cpp's
    /// non-fused arithmetic bit for bit; llama.cpp's own `auto` picks flash attention on CPUs).
    pub fn resolve(&self) -> Result<bool> {
        if self.v_type.is_quantized() && self.flash_attn == FlashAttn::Off {
            return Err(Error::InvalidRequest(format!(
                "cache_type_v: a quantized V cache ({}) requires flash attention; use -fa on (or auto)",
                self.v_type.name()
            )));
        }
        Ok(match self.flash_attn {
            FlashAttn::On => true,
            FlashAttn::Off => false,
            FlashAttn::Auto => self.k_type != KvType::F16 || self.v_type != KvType::F16,
        })
    }

    /// A cache of these types and attention path.
    #[allow(clippy::too_many_arguments)]
    pub fn store(&self, n_slots: usize, slot_ctx: usize, caps: &[usize], k_dim: usize, v_dim: usize) -> Result<super::KvStore> {
        let flash = self.resolve()?;
        let mut kv = super::KvStore::with_types(n_slots, slot_ctx, caps, k_dim, v_dim, self.k_type, self.v_type)?;
        kv.flash_attn = flash;
        Ok(kv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_is_its_own_inverse() {
        let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.3).cos() * (1 + i % 5) as f32).collect();
        for n in [64, 128, 256] {
            let mut y = x.clone();
            hadamard(&mut y, n);
            assert!(x.iter().zip(&y).any(|(a, b)| (a - b).abs() > 1e-3));
            hadamard(&mut y, n);
            assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() <= 1e-5 * (1.0 + a.abs())), "n = {n}");
        }
        assert_eq!((rotation(KvType::Q8_0, 256, true), rotation(KvType::Q8_0, 256, false)), (Some(256), Some(64)));
        assert_eq!((rotation(KvType::Q4_0, 192, true), rotation(KvType::F16, 256, true), rotation(KvType::Q4_0, 80, true)), (Some(64), None, None));
    }

    #[test]
    fn rows_round_trip_through_every_type() {
        let x: Vec<f32> = (0..256).map(|i| ((i as f32) * 0.37).sin() * (1.0 + (i % 7) as f32)).collect();
        for ty in KV_TYPES {
            let mut row = vec![0u16; ty.units(x.len())];
            store_row(ty, &x, &mut row);
            let mut y = vec![0f32; x.len()];
            load_row(ty, &row, &mut y);
            let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
            let worst = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            let bound = match ty {
                KvType::F32 => 0.0,
                KvType::F16 | KvType::BF16 => amax / 128.0,
                KvType::Q8_0 => amax / 127.0,
                _ => amax / 7.0,
            };
            assert!(worst <= bound, "{}: worst error {worst}, bound {bound}", ty.name());
        }
    }
}
