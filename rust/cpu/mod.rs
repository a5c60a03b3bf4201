//! CPU compute: persistent thread pool, quantized matmul, norms, RoPE, activations, attention.
pub mod attention;
mod attention_bidir;
pub mod attention_fa;
#[cfg(target_arch = "x86_64")]
mod attn_avx512;
mod fa_accum;
pub mod f16vec;
pub mod matmul;
pub mod ops;
pub mod pool;

pub use matmul::{matmul, matmul_masked, Scratch, Weight};
pub use pool::ThreadPool;
