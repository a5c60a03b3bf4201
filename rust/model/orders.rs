//! Which of llama.cpp's kernel orders each token of a batch takes.
//!
//! llama.cpp's x86 kernels sum in different orders depending on the shape of the batch they
//! run on (`quant::batch_tokens`: Q4_K's gemm for whole groups of 4 tokens, the tiled K-quant kernel
//! from 8 tokens; attention's and the F32 / F16 matmuls' tinyBLAS from 2 tokens, `ggml_vec_dot` for one). llamars
//! reproduces those orders for each sequence as if llama.cpp evaluated it alone: the prompt
//! in chunks of `ubatch` tokens from position 0, then one token at a time. So a token's
//! arithmetic depends only on its own sequence (never on what shares the batch, nor on how the
//! engine chunked the prefill), a repeated prompt recomputes the same bits, and a fresh
//! evaluation is bit-identical to llama.cpp's.
use crate::quant::{batch_tokens, GgmlType};

/// The orders of one token: Q4_K's (and Q2_K's) repacked gemm, the tiled K-quant kernel (Q6_K, Q5_K, Q3_K, IQ4_XS),
/// attention's batch (tinyBLAS).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenOrder {
    pub q4_k: bool,
    pub tiled: bool,
    pub attn: bool,
}

/// The order of the token at `pos` of a sequence whose prompt ends at `prompt_end`
/// (tokens from there on are generated one at a time), prompts chunked by `ubatch`.
pub fn token_order(pos: usize, prompt_end: usize, ubatch: usize) -> TokenOrder {
    if pos >= prompt_end || ubatch == 0 {
        return TokenOrder::default();
    }
    let c0 = pos / ubatch * ubatch;
    let size = ubatch.min(prompt_end - c0);
    let k = pos - c0;
    TokenOrder {
        q4_k: k < batch_tokens(GgmlType::Q4_K, size),
        tiled: k < batch_tokens(GgmlType::Q6_K, size),
        attn: size >= 2,
    }
}

/// Per-token batch-order flags of a forward pass, for the matmuls whose order depends on it.
#[derive(Default)]
pub struct Masks {
    pub q4_k: Vec<bool>,
    pub tiled: Vec<bool>,
    /// The same for the rows that get logits (a row asked for alone is a one-row matmul).
    pub out_q4_k: Vec<bool>,
    pub out_tiled: Vec<bool>,
    /// F32 / F16 weights: tinyBLAS from 2 tokens (the rule of attention's batch order).
    pub float: Vec<bool>,
    pub out_float: Vec<bool>,
}

impl Masks {
    pub fn clear(&mut self) {
        self.q4_k.clear();
        self.tiled.clear();
        self.out_q4_k.clear();
        self.out_tiled.clear();
        self.float.clear();
        self.out_float.clear();
    }

    pub fn push(&mut self, o: TokenOrder) {
        self.q4_k.push(o.q4_k);
        self.tiled.push(o.tiled);
        self.float.push(o.attn);
    }

    pub fn push_out(&mut self, o: TokenOrder) {
        self.out_q4_k.push(o.q4_k);
        self.out_tiled.push(o.tiled);
        self.out_float.push(o.attn);
    }

    /// The flags for a matmul over the batch's tokens with weights of `ty`.
    pub fn tokens(&self, ty: GgmlType) -> Option<&[bool]> {
        pick(ty, &self.q4_k, &self.tiled, &self.float)
    }

    /// The flags for the output matmul over the logit rows.
    pub fn outputs(&self, ty: GgmlType) -> Option<&[bool]> {
        pick(ty, &self.out_q4_k, &self.out_tiled, &self.out_float)
    }
}

fn pick<'a>(ty: GgmlType, q4: &'a [bool], tiled: &'a [bool], float: &'a [bool]) -> Option<&'a [bool]> {
    match ty {
        GgmlType::Q4_K | GgmlType::Q2_K => Some(q4),
        GgmlType::F32 | GgmlType::F16 => Some(float),
        ty if crate::quant::tiled_type(ty) => Some(tiled),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_follow_llama_cpp_chunks() {
        // a 38-token prompt: Q4_K gemm for 36, gemv for the last 2; tiled Q6_K; batch attention
        let o: Vec<_> = (0..40).map(|p| token_order(p, 38, 512)).collect();
        assert!(o[..36].iter().all(|t| t.q4_k && t.tiled && t.attn));
        assert!(o[36..38].iter().all(|t| !t.q4_k && t.tiled && t.attn));
        assert_eq!(o[38], TokenOrder::default()); // generated: one token at a time
        // short prompts: no tiled Q6_K below 8 tokens, no batch attention for one token
        assert_eq!(token_order(2, 5, 512), TokenOrder { q4_k: true, tiled: false, attn: true });
        assert_eq!(token_order(0, 1, 512), TokenOrder::default());
        // chunked by ubatch: 10 tokens with ubatch 8 = chunks of 8 and 2
        assert_eq!(token_order(7, 10, 8), TokenOrder { q4_k: true, tiled: true, attn: true });
        assert_eq!(token_order(8, 10, 8), TokenOrder { q4_k: false, tiled: false, attn: true });
    }
}
