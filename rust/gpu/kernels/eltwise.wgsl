// Element-wise kernels over [n_tok, width] rows: residual add, scale, gated activations,
// and the gather of selected rows.
struct EwParams {
    width: u32,
    scale: f32,
    // 0: the batch's tokens, 1: the selected rows
    sel: u32,
    // swiglu_oai: the clamp limit (scale: its α)
    limit: f32,
}

@group(0) @binding(0) var<storage, read_write> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
// the selected rows (gather), or GELU's table by f16 input (geglu)
@group(0) @binding(2) var<storage, read> AUX: array<u32>;
@group(0) @binding(3) var<uniform> P: EwParams;
@group(0) @binding(4) var<uniform> S: Step;

fn n_elems() -> u32 {
    if (P.sel == 1u) {
        return S.n_sel * P.width;
    }
    return S.n_tok * P.width;
}

fn flat(gid: vec3<u32>) -> u32 {
    return gid.x + gid.y * GRID_X * 256u;
}

@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        A[i] = A[i] + B[i];
    }
}

@compute @workgroup_size(256)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        A[i] = A[i] * P.scale;
    }
}

// GELU (tanh form) as ggml-cpu computes it: the table of the CPU path (rust/cpu/ops.rs
// `gelu`) indexed by the input rounded to f16, exact outside [-10, 10].
fn gelu(x: f32) -> f32 {
    if (x <= -10.0) {
        return 0.0;
    }
    if (x >= 10.0) {
        return x;
    }
    return bitcast<f32>(AUX[pack2x16float(vec2<f32>(x, 0.0)) & 0xffffu]);
}

@compute @workgroup_size(256)
fn geglu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        A[i] = gelu(A[i]) * B[i];
    }
}

@compute @workgroup_size(256)
fn swiglu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        let x = A[i];
        A[i] = x / (1.0 + exp(-x)) * B[i];
    }
}

// A[i, :] = B[SEL[i], :] for the selected rows.
@compute @workgroup_size(256)
fn gather(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < S.n_sel * P.width) {
        let r = i / P.width;
        A[i] = B[AUX[r] * P.width + i % P.width];
    }
}

// A[t, :] += B[:] (a bias row broadcast over the batch).
@compute @workgroup_size(256)
fn add_row(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        A[i] = A[i] + B[i % P.width];
    }
}

@compute @workgroup_size(256)
fn silu(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        let x = A[i];
        A[i] = x / (1.0 + exp(-x));
    }
}

// ggml's swiglu_oai: x = min(a, limit), y = clamp(b, -limit, limit), x · σ(α·x) · (y + 1).
@compute @workgroup_size(256)
fn swiglu_oai(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        let x = min(A[i], P.limit);
        let y = clamp(B[i], -P.limit, P.limit);
        A[i] = x / (1.0 + exp(P.scale * -x)) * (y + 1.0);
    }
}

// A[t, :] *= σ(B[t]), as ggml_div(ggml_silu(g), g).
@compute @workgroup_size(256)
fn sigmoid_gate(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = flat(gid);
    if (i < n_elems()) {
        let g = B[i / P.width];
        A[i] = A[i] * ((g / (1.0 + exp(-g))) / g);
    }
}
