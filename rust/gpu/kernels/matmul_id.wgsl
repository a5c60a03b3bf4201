// Expert products (llama.cpp's mul_mat_id): for each (token, slot) pair p of the batch,
// Y[p, r] = W_{IDS[p]}[r, :] · X[p / k or p, :] (+ the expert's bias), over the experts
// this buffer holds; one workgroup per (row, pair), threads split the row.
struct IdParams {
    n_in: u32,
    // rows of one expert (the output width)
    n_out: u32,
    row_bytes: u32,
    // experts [x0, x0 + n_x) are in this buffer
    x0: u32,
    n_x: u32,
    // experts per token
    k: u32,
    // 1: X has one row per pair (the down projection), 0: one per token
    x_per_pair: u32,
    has_bias: u32,
}

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: IdParams;
@group(0) @binding(4) var<uniform> S: Step;
@group(0) @binding(6) var<storage, read> IDS: array<u32>;
@group(0) @binding(7) var<storage, read> BIAS: array<f32>;

var<workgroup> red: array<f32, 64>;

// pairs past the grid's z (65535) are taken by the workgroups of z mod 65535
const Z_MAX: u32 = 65535u;

@compute @workgroup_size(64)
fn matvec_id(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wid.x + wid.y * GRID_X;
    if (r >= P.n_out) {
        return;
    }
    let n4 = P.n_in / 4u;
    for (var p = wid.z; p < S.n_tok * P.k; p += Z_MAX) {
        // a pair routed to an expert of another buffer still reaches the barriers
        let x = IDS[p];
        let mine = x >= P.x0 && x < P.x0 + P.n_x;
        var xr = p / P.k;
        if (P.x_per_pair == 1u) {
            xr = p;
        }
        var acc = 0.0;
        if (mine) {
            let rb = ((x - P.x0) * P.n_out + r) * P.row_bytes;
            for (var kk = li * 4u; kk < P.n_in; kk += 256u) {
                acc += dot(dq4(rb, kk), X[xr * n4 + kk / 4u]);
            }
        }
        red[li] = acc;
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if (li < s) {
                red[li] += red[li + s];
            }
            workgroupBarrier();
        }
        if (li == 0u && mine) {
            var y = red[0];
            if (P.has_bias == 1u) {
                y += BIAS[x * P.n_out + r];
            }
            Y[p * P.n_out + r] = y;
        }
        workgroupBarrier();
    }
}
