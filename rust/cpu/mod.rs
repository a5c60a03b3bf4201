//! CPU compute: persistent thread pool, quantized matmul, norms, RoPE, activations, attention.
pub mod attention;
pub mod attention_fa;
mod fa_accum;
pub mod f16vec;
pub mod matmul;
pub mod ops;
pub mod pool;

pub use matmul::{matmul, matmul_masked, Scratch, Weight};
pub use pool::ThreadPool;
