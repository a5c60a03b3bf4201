// Expert products (llama.cpp's mul_mat_id): for each (token, slot) pair p of the batch,
// Y[p, r] = W_{IDS[p]}[r, :] · X[p / k or p, :] (+ the expert's bias), over the experts
// this buffer holds. `matvec_id`: one workgroup per (row, pair), threads split the row (few
// pairs: decode). `matmul_id_grouped`: the pairs grouped by expert first (`group_pairs`:
// GROUP = per-expert offsets, then the pair lists), one workgroup per (row, expert) that
// decodes each weight once for up to 8 of the expert's pairs (prefill). Both give each
// output the same operations in the same order.
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
    // experts in the whole tensor (group_pairs; the pair lists start at n_expert + 1)
    n_expert: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: IdParams;
@group(0) @binding(4) var<uniform> S: Step;
@group(0) @binding(6) var<storage, read> IDS: array<u32>;
@group(0) @binding(7) var<storage, read> BIAS: array<f32>;
@group(0) @binding(8) var<storage, read_write> GROUP: array<u32>;

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

// ---- grouping: GROUP[x] .. GROUP[x + 1] index the pairs routed to expert x in
// GROUP[n_expert + 1 ..] (their order within an expert is immaterial: each pair's output is
// computed alone). One workgroup; at most GROUP_EXPERTS_MAX experts (moe.rs checks).
const GROUP_EXPERTS_MAX: u32 = 1024u;
var<workgroup> g_count: array<atomic<u32>, GROUP_EXPERTS_MAX>;
var<workgroup> g_fill: array<atomic<u32>, GROUP_EXPERTS_MAX>;

@compute @workgroup_size(256)
fn group_pairs(@builtin(local_invocation_index) li: u32) {
    let ne = P.n_expert;
    let n_pairs = S.n_tok * P.k;
    for (var x = li; x < ne; x += 256u) {
        atomicStore(&g_count[x], 0u);
        atomicStore(&g_fill[x], 0u);
    }
    workgroupBarrier();
    for (var p = li; p < n_pairs; p += 256u) {
        let x = IDS[p];
        if (x < ne) {
            atomicAdd(&g_count[x], 1u);
        }
    }
    workgroupBarrier();
    if (li == 0u) {
        var off = 0u;
        for (var x = 0u; x < ne; x++) {
            GROUP[x] = off;
            off += atomicLoad(&g_count[x]);
        }
        GROUP[ne] = off;
    }
    storageBarrier();
    workgroupBarrier();
    for (var p = li; p < n_pairs; p += 256u) {
        let x = IDS[p];
        if (x < ne) {
            let at = GROUP[x] + atomicAdd(&g_fill[x], 1u);
            GROUP[ne + 1u + at] = p;
        }
    }
}

const GROUP_N: u32 = 8u;
var<workgroup> red8: array<f32, 512>;
var<workgroup> g_range: vec2<u32>;

@compute @workgroup_size(64)
fn matmul_id_grouped(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wid.x + wid.y * GRID_X;
    if (r >= P.n_out) {
        return;
    }
    let x = P.x0 + wid.z;
    if (li == 0u) {
        g_range = vec2<u32>(GROUP[x], GROUP[x + 1u]);
    }
    let rg = workgroupUniformLoad(&g_range);
    let list = P.n_expert + 1u;
    let n4 = P.n_in / 4u;
    let rb = (wid.z * P.n_out + r) * P.row_bytes;
    for (var c0 = rg.x; c0 < rg.y; c0 += GROUP_N) {
        let nc = min(GROUP_N, rg.y - c0);
        var acc: array<f32, GROUP_N>;
        var xr: array<u32, GROUP_N>;
        for (var j = 0u; j < nc; j++) {
            let p = GROUP[list + c0 + j];
            xr[j] = select(p / P.k, p, P.x_per_pair == 1u);
        }
        for (var kk = li * 4u; kk < P.n_in; kk += 256u) {
            let w = dq4(rb, kk);
            for (var j = 0u; j < nc; j++) {
                acc[j] += dot(w, X[xr[j] * n4 + kk / 4u]);
            }
        }
        for (var j = 0u; j < GROUP_N; j++) {
            red8[j * 64u + li] = acc[j];
        }
        workgroupBarrier();
        for (var s = 32u; s > 0u; s >>= 1u) {
            if (li < s) {
                for (var j = 0u; j < GROUP_N; j++) {
                    red8[j * 64u + li] += red8[j * 64u + li + s];
                }
            }
            workgroupBarrier();
        }
        if (li < nc) {
            let p = GROUP[list + c0 + li];
            var y = red8[li * 64u];
            if (P.has_bias == 1u) {
                y += BIAS[x * P.n_out + r];
            }
            Y[p * P.n_out + r] = y;
        }
        workgroupBarrier();
    }
}
