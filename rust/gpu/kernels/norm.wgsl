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

var<workgroup> part: array<f32, 256>;

fn n_rows() -> u32 {
    if (P.sel == 1u) {
        return S.n_sel * P.per_tok;
    }
    return S.n_tok * P.per_tok;
}

fn row_scale(li: u32, base: u32, from_b: bool) -> f32 {
    var s = 0.0;
    for (var i = li; i < P.len; i += 256u) {
        var v: f32;
        if (from_b) {
            v = B[base + i];
        } else {
            v = A[base + i];
        }
        s += v * v;
    }
    part[li] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            part[li] += part[li + w];
        }
        workgroupBarrier();
    }
    return 1.0 / sqrt(part[0] / f32(P.len) + P.eps);
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
