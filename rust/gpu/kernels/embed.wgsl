// Token embeddings: Y[t, :] = dequantize(W[TOK[t], :]) · scale, for the rows this buffer holds.
struct EmbParams {
    n_in: u32,
    rows: u32,
    row_bytes: u32,
    row0: u32,
    scale: f32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> TOK: array<u32>;
@group(0) @binding(2) var<storage, read_write> Y: array<vec4<f32>>;
@group(0) @binding(3) var<uniform> P: EmbParams;
@group(0) @binding(4) var<uniform> S: Step;

@compute @workgroup_size(64)
fn embed(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y;
    let k = gid.x * 4u;
    if (t >= S.n_tok || k >= P.n_in) {
        return;
    }
    let tok = TOK[t];
    if (tok < P.row0 || tok >= P.row0 + P.rows) {
        return;
    }
    Y[(t * P.n_in + k) / 4u] = dq4((tok - P.row0) * P.row_bytes, k) * P.scale;
}
