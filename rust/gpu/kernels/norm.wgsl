// RMSNorm of rows of `len` elements: x / sqrt(mean(x²) + eps) · g (g has `len` entries;
// per-head norms pass len = head_dim). One workgroup per row.
struct NormParams {
    len: u32,
    // rows per token (heads for QK-norm, 1 otherwise)
    per_tok: u32,
    eps: f32,
    // 0: the batch's tokens, 1: the selected rows
    sel: u32,
}

@group(0) @binding(0) var<storage, read_write> A: array<f32>;
@group(0) @binding(1) var<storage, read> B: array<f32>;
@group(0) @binding(2) var<storage, read> G: array<f32>;
@group(0) @binding(3) var<uniform> P: NormParams;
@group(0) @binding(4) var<uniform> S: Step;

var<workgroup> part: array<vec2<f32>, 256>;

fn n_rows() -> u32 {
    if (P.sel == 1u) {
        return S.n_sel * P.per_tok;
    }
    return S.n_tok * P.per_tok;
}

// Two f64-like (hi, lo) sums added (exact.wgsl's `df_add` of both parts).
fn df_add2(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    return df_add(df_add(a, b.x), b.y);
}

// 1 / sqrt(mean + eps) with mean = Σx² / len, the sum kept to ~48 bits as ggml keeps it in
// f64 (ggml_float), then rounded to f32 once: the CPU path's bits (rust/cpu/ops.rs rms_norm).
fn row_scale(li: u32, base: u32, from_b: bool) -> f32 {
    var s = vec2<f32>(0.0);
    for (var i = li; i < P.len; i += 256u) {
        var v: f32;
        if (from_b) {
            v = B[base + i];
        } else {
            v = A[base + i];
        }
        s = df_add(s, v * v);
    }
    part[li] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            part[li] = df_add2(part[li], part[li + w]);
        }
        workgroupBarrier();
    }
    let mean = df_div(part[0], f32(P.len));
    return div_rn(1.0, sqrt_rn(mean + P.eps));
}

@compute @workgroup_size(256)
fn norm_inplace(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wid.x + wid.y * GRID_X;
    if (row >= n_rows()) {
        return;
    }
    let base = row * P.len;
    let sc = row_scale(li, base, false);
    for (var i = li; i < P.len; i += 256u) {
        A[base + i] = A[base + i] * sc * G[i];
    }
}

@compute @workgroup_size(256)
fn norm_copy(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let row = wid.x + wid.y * GRID_X;
    if (row >= n_rows()) {
        return;
    }
    let base = row * P.len;
    let sc = row_scale(li, base, true);
    for (var i = li; i < P.len; i += 256u) {
        A[base + i] = B[base + i] * sc * G[i];
    }
}
