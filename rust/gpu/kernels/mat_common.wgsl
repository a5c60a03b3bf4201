// Rows a matrix product covers this step (matmul.wgsl and qmatmul.wgsl append this after
// their bindings, which name `P: MatParams` and `S: Step`).
fn n_tokens() -> u32 {
    if (P.sel == 1u) {
        return S.n_sel;
    }
    return S.n_tok;
}
