//! llamars: GGUF models, quantized CPU kernels, tokenizers and the forward pass.
pub mod cpu;
pub mod engine;
pub mod error;
pub mod gguf;
pub mod gpu;
pub mod grammar;
pub mod kv_cache;
pub mod model;
pub mod quant;
pub mod sampling;
pub mod tokenizer;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
