//! What a model holds and what one token reads, from its GGUF alone: parameters (all, and
//! active per token where a mixture of experts routes each token to some of its experts)
//! and the bytes of weights a generated token reads.
use super::Config;
use crate::gguf::{Gguf, TensorInfo};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Footprint {
    pub n_params: u64,
    /// Parameters one token's forward pass uses: every tensor but the experts, and of each
    /// expert stack `n_expert_used / n_expert`.
    pub n_params_active: u64,
    /// Bytes of weights a decoded token reads: the active tensors, of the token embedding
    /// table only its row (unless it is also the output matrix).
    pub bytes_per_token: u64,
    pub n_expert: usize,
    pub n_expert_used: usize,
}

/// An expert stack (`blk.N.ffn_*_exps.*`): 3-D, one slice per expert.
fn is_experts(t: &TensorInfo) -> bool {
    t.name.contains("_exps.") && t.dims.len() == 3
}

pub fn footprint(g: &Gguf, c: &Config) -> Footprint {
    let (ne, nu) = c.moe.as_ref().map_or((0, 0), |m| (m.n_expert, m.n_used));
    let tied = g.tensor("output.weight").is_none();
    let mut f = Footprint { n_expert: ne, n_expert_used: nu, ..Default::default() };
    for t in &g.tensors {
        let n = t.n_elements();
        f.n_params += n;
        if is_experts(t) && ne > 0 {
            f.n_params_active += n * nu as u64 / ne as u64;
            f.bytes_per_token += t.size * nu as u64 / ne as u64;
            continue;
        }
        f.n_params_active += n;
        f.bytes_per_token += if t.name == "token_embd.weight" && !tied { t.size / t.n_rows().max(1) as u64 } else { t.size };
    }
    f
}
