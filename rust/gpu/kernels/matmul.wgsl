// Y[t, row0 + r] = sum_k W[r, k] · X[t, k] over raw GGUF weight rows (see quant.wgsl).
@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> X: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: MatParams;
@group(0) @binding(4) var<uniform> S: Step;

// Few tokens (decode): one workgroup per weight row, threads split the row.
const MV_T: u32 = 8u;
var<workgroup> red: array<f32, 512>;

@compute @workgroup_size(64)
fn matvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = wid.x + wid.y * GRID_X;
    if (r >= P.rows) {
        return;
    }
    let nt = min(n_tokens(), MV_T);
    let rb = r * P.row_bytes;
    let n4 = P.n_in / 4u;
    var acc: array<f32, 8>;
    for (var k = li * 4u; k < P.n_in; k += 256u) {
        let w = dq4(rb, k);
        for (var t = 0u; t < nt; t++) {
            acc[t] += dot(w, X[t * n4 + k / 4u]);
        }
    }
    for (var t = 0u; t < MV_T; t++) {
        red[t * 64u + li] = acc[t];
    }
    workgroupBarrier();
    for (var s = 32u; s > 0u; s >>= 1u) {
        if (li < s) {
            for (var t = 0u; t < MV_T; t++) {
                red[t * 64u + li] += red[t * 64u + li + s];
            }
        }
        workgroupBarrier();
    }
    if (li < nt) {
        Y[li * P.y_stride + P.row0 + r] = red[li * 64u];
    }
}

// Many tokens (prefill): 64 rows × 32 tokens per workgroup through shared-memory tiles
// of 32 columns; each thread keeps 8 accumulators (one row, 8 tokens).
var<workgroup> Ws: array<f32, 2112>; // [64][33]
var<workgroup> Xs: array<f32, 1056>; // [32][33]

@compute @workgroup_size(256)
fn matmul(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r0 = wid.x * 64u;
    let t0 = wid.y * 32u;
    let nt = n_tokens();
    let n4 = P.n_in / 4u;
    let lr = li % 64u;
    let tg = li / 64u;
    var acc: array<f32, 8>;
    for (var k0 = 0u; k0 < P.n_in; k0 += 32u) {
        for (var i = 0u; i < 2u; i++) {
            let idx = li + i * 256u;
            let rr = idx / 8u;
            let kq = (idx % 8u) * 4u;
            var w = vec4<f32>(0.0);
            if (r0 + rr < P.rows) {
                w = dq4((r0 + rr) * P.row_bytes, k0 + kq);
            }
            let o = rr * 33u + kq;
            Ws[o] = w.x;
            Ws[o + 1u] = w.y;
            Ws[o + 2u] = w.z;
            Ws[o + 3u] = w.w;
        }
        {
            let tt = li / 8u;
            let kq = (li % 8u) * 4u;
            var x = vec4<f32>(0.0);
            if (t0 + tt < nt) {
                x = X[(t0 + tt) * n4 + (k0 + kq) / 4u];
            }
            let o = tt * 33u + kq;
            Xs[o] = x.x;
            Xs[o + 1u] = x.y;
            Xs[o + 2u] = x.z;
            Xs[o + 3u] = x.w;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 32u; kk++) {
            let w = Ws[lr * 33u + kk];
            for (var i = 0u; i < 8u; i++) {
                acc[i] += w * Xs[(tg * 8u + i) * 33u + kk];
            }
        }
        workgroupBarrier();
    }
    let r = r0 + lr;
    if (r < P.rows) {
        for (var i = 0u; i < 8u; i++) {
            let t = t0 + tg * 8u + i;
            if (t < nt) {
                Y[t * P.y_stride + P.row0 + r] = acc[i];
            }
        }
    }
}
