// Mixture-of-experts steps (moe.rs): each token's experts and weights from its router
// logits (`route`), as rust/model/moe.rs `route` picks them, and the weighted sum of the
// chosen experts' outputs in the order they were chosen (`combine`).
struct MoeParams {
    n_expert: u32,
    // experts per token (at most MOE_K_MAX)
    k: u32,
    // 0: softmax then top k, 1: sigmoid then top k, 2: top k logits then their softmax
    gating: u32,
    norm_w: u32,
    w_scale: f32,
    // combine: output width, and whether the sum is added to OUT
    width: u32,
    add: u32,
    _p0: u32,
}

// route: router logits [n, n_expert]; combine: the experts' outputs [n, k, width]
@group(0) @binding(0) var<storage, read> IN: array<f32>;
@group(0) @binding(1) var<storage, read_write> WTS: array<f32>;
@group(0) @binding(2) var<storage, read_write> IDS: array<u32>;
@group(0) @binding(3) var<uniform> P: MoeParams;
@group(0) @binding(4) var<uniform> S: Step;
@group(0) @binding(5) var<storage, read_write> OUT: array<f32>;

const MOE_K_MAX: u32 = 32u;

// Whether (v, c) comes after (pv, pc) in the order of the choice: larger first, ties by
// the lower index.
fn after(v: f32, c: u32, pv: f32, pc: u32) -> bool {
    return v < pv || (v == pv && c > pc);
}

@compute @workgroup_size(64)
fn route(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.x + gid.y * GRID_X * 64u;
    if (t >= S.n_tok) {
        return;
    }
    let ne = P.n_expert;
    let base = t * ne;
    var mx = -3.4028235e38;
    for (var c = 0u; c < ne; c++) {
        mx = max(mx, IN[base + c]);
    }
    var inv = 1.0;
    if (P.gating == 0u) {
        var sum = 0.0;
        for (var c = 0u; c < ne; c++) {
            sum += exp(IN[base + c] - mx);
        }
        inv = 1.0 / sum;
    }
    var w: array<f32, MOE_K_MAX>;
    var pv = 3.4028235e38;
    var pc = 0u;
    var first = true;
    for (var j = 0u; j < P.k; j++) {
        var bv = -3.4028235e38;
        var bc = ne;
        for (var c = 0u; c < ne; c++) {
            let x = IN[base + c];
            var v = x;
            if (P.gating == 0u) {
                v = exp(x - mx) * inv;
            } else if (P.gating == 1u) {
                v = 1.0 / (1.0 + exp(-x));
            }
            if ((first || after(v, c, pv, pc)) && (bc == ne || v > bv)) {
                bv = v;
                bc = c;
            }
        }
        first = false;
        pv = bv;
        pc = bc;
        IDS[t * P.k + j] = bc;
        w[j] = bv;
    }
    let k = P.k;
    if (P.gating == 2u) {
        var m = w[0];
        for (var j = 1u; j < k; j++) {
            m = max(m, w[j]);
        }
        var s = 0.0;
        for (var j = 0u; j < k; j++) {
            w[j] = exp(w[j] - m);
            s += w[j];
        }
        let is = 1.0 / s;
        for (var j = 0u; j < k; j++) {
            w[j] *= is;
        }
    }
    if (P.norm_w == 1u) {
        var s = 0.0;
        for (var j = 0u; j < k; j++) {
            s += w[j];
        }
        s = max(s, 6.1035156e-5);
        for (var j = 0u; j < k; j++) {
            w[j] /= s;
        }
    }
    for (var j = 0u; j < k; j++) {
        var v = w[j];
        if (P.w_scale != 0.0 && P.w_scale != 1.0) {
            v *= P.w_scale;
        }
        WTS[t * k + j] = v;
    }
}

// OUT[t, i] (+)= Σ_j WTS[t, j] · IN[t, j, i], j in the order chosen.
@compute @workgroup_size(256)
fn combine(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x + gid.y * GRID_X * 256u;
    if (i >= S.n_tok * P.width) {
        return;
    }
    let t = i / P.width;
    let e = i % P.width;
    let k = P.k;
    var acc = IN[(t * k) * P.width + e] * WTS[t * k];
    for (var j = 1u; j < k; j++) {
        acc += IN[(t * k + j) * P.width + e] * WTS[t * k + j];
    }
    if (P.add == 1u) {
        acc += OUT[i];
    }
    OUT[i] = acc;
}
