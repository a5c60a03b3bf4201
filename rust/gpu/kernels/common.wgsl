// Per-step values every kernel of a forward pass reads (written once per step).
struct Step {
    // tokens in the batch
    n_tok: u32,
    // rows whose logits (or hidden states) are asked for
    n_sel: u32,
    // longest key range of any query: full-attention layers, sliding-window layers
    l_full: u32,
    l_swa: u32,
}

// 2-D dispatch grid flattened (one dimension holds at most 65535 workgroups).
const GRID_X: u32 = 32768u;
