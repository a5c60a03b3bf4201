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

// Parameters of one weight buffer's matrix product (matmul.wgsl, qmatmul.wgsl).
struct MatParams {
    n_in: u32,
    // rows held by this buffer (a weight larger than one binding is split by rows)
    rows: u32,
    row_bytes: u32,
    row0: u32,
    y_stride: u32,
    // 0: the batch's tokens, 1: the selected rows (output layer)
    sel: u32,
    _p0: u32,
    _p1: u32,
}
