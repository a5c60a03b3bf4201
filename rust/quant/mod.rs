//! Quantized tensor types: block layouts, scalar dequantize references, activation
//! quantization (Q8_0 / Q8_1 / Q8_K, as llama.cpp does it) and dot-product kernels.
//!
//! Every supported weight type `T` (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
//! Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, the ternary TQ1_0, TQ2_0 in
//! `ternary.rs` / `avx2_tq.rs`, and the grid i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S in
//! `iquant.rs` / `avx2_iq.rs`, IQ1_S, IQ1_M in `iquant1.rs`) has:
//! - `dequantize(T, blocks, out)`: the scalar reference (`scalar.rs`, `scalar_k.rs`), equal
//!   bit for bit to ggml's `dequantize_row_*` (and to gguf-py; see tests/test_quant.py);
//! - `vec_dot_type(T)`: the activation format it is dotted against (llama.cpp's `vec_dot_type`),
//!   produced by `activation::quantize`;
//! - `dot_fn(T)`: the fastest dot kernel for this machine; `scalar::dot(T)` is its oracle.
//!
//! Kernels by instruction set (`dispatch::dot_fn_for(T, isa)`; `LLAMARS_ISA` forces one):
//!
//! | ISA      | files                        | types |
//! |----------|------------------------------|-------|
//! | scalar   | scalar.rs, scalar_k.rs       | all supported types |
//! | avx2     | avx2.rs, avx2_q.rs, avx2_k.rs, avx2_tq.rs, avx2_iq.rs, avx2_float.rs | all supported types (AVX2 + FMA + F16C) |
//! | avx512   | avx512.rs                    | Q4_K, Q6_K (512-bit, plain or VNNI); with avx512vnni also Q8_0, Q5_0, Q4_0, Q4_1, Q5_1, IQ4_NL (256-bit `vpdpbusd`); every other type: the AVX2 kernel |
//! | neon     | neon.rs, neon_iq.rs          | Q8_0, Q5_0, Q4_K, Q6_K, IQ4_NL, IQ4_XS, MXFP4, the grid i-quants, TQ1_0, TQ2_0 (baseline aarch64 NEON); others scalar |
//!
//! Multi-row kernels (`dot_rows_fn`, [`DotRowsFn`]: one weight row against several
//! activation rows, weights decoded once; 1.4–1.9x faster per dot when several tokens share
//! the weights) exist for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q4_K, Q6_K under avx2/avx512.
//!
//! Tile kernels (`tile.rs`, [`TileKernel`]: a block of weight rows × a block of tokens per
//! call, register tiles of R rows × C tokens; what `cpu::matmul` uses) exist for the same
//! types and ISAs: `avx512_tile.rs` (VNNI, 512-bit, two 32-element blocks per register, with
//! a packed activation layout; 4–7x the single-row kernel per dot), the K-quant bodies of
//! `avx512.rs` (their one-token calls in `avx512_gemv.rs`), and `avx2_tile.rs`. Every element of a `DotRowsFn` or tile is bit-identical
//! to the `DotFn` of the same type and ISA (`tests.rs`, `tests_tile.rs`), so results do not
//! depend on batching. `activation_avx512.rs` quantizes activations (Q8_0 / Q8_1 / Q8_K) to
//! the same bytes as the scalar `activation.rs`.
//!
//! Integer block sums are exact in every kernel. For Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, Q2_K,
//! Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS, TQ1_0, TQ2_0 and the grid i-quants the f32 accumulation follows the kernel llama.cpp runs on x86 (see `scalar::fma_lanes`,
//! `scalar::dot_q4_k_q8_k`, `scalar::dot_q6_k_q8_k`, [`batch_tokens`] for its batch orders and
//! [`row_chain`] for its repacked Q4_0 / IQ4_NL),
//! and every x86 kernel equals the scalar reference bit for bit; the other types (and NEON)
//! differ from it only in the order of f32 accumulation (tests: `tests.rs`, tolerance `REL_ISA`).
//! Activations must come from `activation::quantize` (Q8 values in [-127, 127]; the sign
//! tricks of the SIMD kernels assume an activation byte is never -128).
pub mod activation;
#[cfg(target_arch = "x86_64")]
mod activation_avx512;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx2_k;
#[cfg(target_arch = "x86_64")]
mod avx2_float;
#[cfg(target_arch = "x86_64")]
mod avx2_q;
#[cfg(target_arch = "x86_64")]
mod avx2_tile;
#[cfg(target_arch = "x86_64")]
mod avx2_tq;
#[cfg(target_arch = "x86_64")]
mod avx2_iq;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(target_arch = "x86_64")]
mod avx512_chain;
#[cfg(target_arch = "x86_64")]
mod avx512_gemv;
#[cfg(target_arch = "x86_64")]
mod avx512_packed;
#[cfg(target_arch = "x86_64")]
mod avx512_tile;
#[cfg(target_arch = "x86_64")]
mod float_tile;
#[cfg(target_arch = "x86_64")]
mod bf16_tile;
pub mod bf16_dot;
pub mod blocks;
pub mod dispatch;
pub mod f16;
pub mod iquant;
pub mod iquant1;
pub mod quantize_ref;
#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "aarch64")]
mod neon_iq;
pub mod scalar;
pub mod scalar_k;
pub mod ternary;
#[cfg(test)]
pub(crate) mod tests;
#[cfg(test)]
mod tests_tile;
#[cfg(test)]
mod tests_golden;
pub mod tile;
pub mod types;

pub use dispatch::{chain_kernels, dot_batch_fn, dot_batch_rows_fn, dot_fn, dot_rows_fn, isa, Isa};

/// How many leading tokens of an `n_tokens`-token matmul llama.cpp (x86, AVX2 and up) computes
/// in another order than its one-token kernel, for weights of `ty`: Q4_K's and Q2_K's repacked gemm take
/// whole groups of 4 tokens (the rest go through its gemv), the tiled K-quant kernel (Q6_K,
/// Q5_K, Q3_K, IQ4_XS) takes every token once there are 8 or more; F32 and F16 go through tinyBLAS from 2 tokens. Other types have one order (`scalar::dot_batch`,
/// `TileKernel::batch`).
pub fn batch_tokens(ty: GgmlType, n_tokens: usize) -> usize {
    match ty {
        // the repacked gemm (Q2_K: on AVX-512 machines)
        GgmlType::Q4_K | GgmlType::Q2_K => n_tokens - n_tokens % 4,
        // the tiled K-quant kernel (Q4_K and Q2_K are repacked instead)
        ty if tiled_type(ty) && n_tokens >= 8 => n_tokens,
        // llamafile's tinyBLAS from 2 tokens, ggml_vec_dot for one
        GgmlType::F32 | GgmlType::F16 if n_tokens >= 2 => n_tokens,
        _ => 0,
    }
}
/// Whether llama.cpp (x86) multiplies weights of `ty` with its tiled K-quant kernel once a
/// matmul has 8 or more tokens (Q4_K and Q2_K, which it also tiles, are repacked instead).
pub fn tiled_type(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, Q6_K | Q5_K | Q3_K | IQ4_XS | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M)
}

/// Whether llama.cpp's batch order (see [`batch_tokens`]) can apply to an `n_out` × `n_in`
/// matrix of `ty` at all: tinyBLAS (F32, F16) takes only a multiple of 4 rows and of 16
/// columns (`llamafile_sgemm` on AVX-512), other shapes go through `ggml_vec_dot` (a
/// one-output gate, say).
pub fn batch_shape(ty: GgmlType, n_in: usize, n_out: usize) -> bool {
    match ty {
        GgmlType::F32 | GgmlType::F16 => n_out.is_multiple_of(4) && n_in.is_multiple_of(16),
        _ => true,
    }
}

/// How closely matmuls follow llama.cpp's arithmetic (`LLAMARS_EXACT`, `Engine(exact=…)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exactness {
    /// llama.cpp's orders except where they cost speed ([`row_chain`]).
    #[default]
    Default,
    /// `LLAMARS_EXACT=1` / `exact=True`: llama.cpp's orders also where that costs speed.
    Everywhere,
    /// `LLAMARS_EXACT=0` / `exact=False`: orders llama.cpp does not use where they are faster
    /// ([`prefill_kernel`]); results differ from llama.cpp's in the last bits.
    Fast,
}

impl Exactness {
    /// `Some(true)` / `Some(false)`: [`Exactness::Everywhere`] / [`Exactness::Fast`]; `None`: the
    /// `LLAMARS_EXACT` environment variable (read once; `1`/`true`/`on`/`yes`, `0`/`false`/
    /// `off`/`no`, anything else the default).
    pub fn new(exact: Option<bool>) -> Exactness {
        static ENV: std::sync::OnceLock<Exactness> = std::sync::OnceLock::new();
        match exact {
            Some(true) => Exactness::Everywhere,
            Some(false) => Exactness::Fast,
            None => *ENV.get_or_init(|| match std::env::var("LLAMARS_EXACT").ok().as_deref().map(str::trim) {
                Some("1" | "true" | "on" | "yes") => Exactness::Everywhere,
                Some("0" | "false" | "off" | "no") => Exactness::Fast,
                _ => Exactness::Default,
            }),
        }
    }
}

/// Whether a matmul weight of `ty` with `n_out` rows follows the order of llama.cpp's repacked
/// rows-of-8 kernels for every number of tokens: llama.cpp (x86, AVX2 and up) holds such
/// weights as `q4_0_8x8` / `iq4_nl_8x8` / `mxfp4_8x8` in its CPU_REPACK buffer, whose gemv and
/// gemm keep one f32 chain per output (`scalar::dot_q4_0_q8_0_chain`) for every batch size;
/// the token embedding table stays in its plain buffer even where it is also the output matrix.
///
/// Only under [`Exactness::Everywhere`]: llamars' one-token kernels in that order are slower
/// than in ggml's `vec_dot` order (a 1.2B Q4_0 model: tg 16 vs 28 tok/s on 2 threads), so by
/// default these types take the chain order for prefill only ([`prefill_kernel`]).
pub fn row_chain(ty: GgmlType, n_out: usize, mode: Exactness) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::IQ4_NL | GgmlType::MXFP4) && n_out % 8 == 0 && mode == Exactness::Everywhere
}

/// Tokens from which [`prefill_kernel`]'s kernels take the block-chain order (a matmul over
/// fewer keeps ggml's `vec_dot` order).
pub const PANEL_TOKENS: usize = 16;

/// The tile kernel a matmul weight of `ty` with `n_out` rows takes in place of the type's own
/// ([`tile_kernel`]) when [`row_chain`] does not apply, on AVX-512 VNNI machines: Q4_0, IQ4_NL
/// and MXFP4 (rows in multiples of 8) multiply [`PANEL_TOKENS`] or more tokens in the chain
/// order of llama.cpp's repacked kernels (its bits, and faster than their `vec_dot` order), and
/// in the fast mode Q5_0 and Q8_0 do the same, an order llama.cpp does not use for them.
/// `None`: the type's own kernel.
pub fn prefill_kernel(ty: GgmlType, n_out: usize, mode: Exactness) -> Option<TileKernel> {
    #[cfg(target_arch = "x86_64")]
    {
        use GgmlType::*;
        let chain = matches!(ty, Q4_0 | IQ4_NL | MXFP4) && n_out % 8 == 0;
        if isa() == Isa::Avx512 && (chain || (mode == Exactness::Fast && matches!(ty, Q5_0 | Q8_0))) {
            return avx512_chain::kernel_prefill(ty);
        }
    }
    let _ = (ty, n_out, mode);
    None
}

/// The fast mode's tile for F32 / F16 matmul weights with rows of a multiple of 32 elements
/// on AVX-512 BF16 machines, for every token count: both sides rounded to bf16, 32 products
/// per instruction ([`bf16_dot`]). `None` otherwise (the type's own kernels).
pub fn fast_float_kernel(ty: GgmlType, n_in: usize, mode: Exactness) -> Option<TileKernel> {
    #[cfg(target_arch = "x86_64")]
    if mode == Exactness::Fast && isa() == Isa::Avx512 {
        return bf16_tile::kernel(ty, n_in);
    }
    let _ = (ty, n_in, mode);
    None
}

pub use tile::{tile_kernel, tile_kernel_for, PrepFn, TileFn, TileKernel};
pub use types::GgmlType;

/// A dot product of one weight row (raw blocks) with one quantized activation row.
/// `n` is the number of elements; both slices hold `n` elements' worth of blocks (every
/// kernel stops at the shortest of `n`, `w` and `a`, in whole blocks, and never reads past
/// a slice).
pub type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// One weight row against several quantized activation rows:
/// `out[r] = dot(n, w, &a[r * a_stride..])` for `r < out.len()` (rows `a_stride` bytes apart,
/// usually `vec_dot_type(ty).row_bytes(n)`). The weight blocks are decoded once per group of
/// rows, which pays off when several tokens are multiplied by the same weights (prefill).
/// Each `out[r]` is bit-identical to the `DotFn` of the same type and ISA on that row.
/// Where `dot_rows_fn` has no kernel (`None`), loop over rows with the `DotFn`.
pub type DotRowsFn = fn(n: usize, w: &[u8], a: &[u8], a_stride: usize, out: &mut [f32]);

/// The activation format a weight type is dotted against (ggml-cpu type_traits_cpu).
pub fn vec_dot_type(ty: GgmlType) -> GgmlType {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K | IQ4_XS | TQ1_0 | TQ2_0 | IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S
        | IQ1_M => Q8_K,
        F16 => F16,
        BF16 => BF16,
        _ => F32,
    }
}

/// Dequantize a whole number of blocks into `out` (len = elements).
pub fn dequantize(ty: GgmlType, src: &[u8], out: &mut [f32]) {
    scalar::dequantize(ty, src, out)
}
