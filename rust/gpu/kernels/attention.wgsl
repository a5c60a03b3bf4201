// Causal attention over the f16 cache, ggml's non-fused numerics (rust/cpu/attention.rs):
// Q rounded to f16, scores in f32, softmax in f32, probabilities rounded to f16 before
// the V product. Three passes over a score buffer SC [n_tok, n_head, L] where L is the
// longest key range in the batch: scores, softmax, then P·V.
struct AttnParams {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    v_head_dim: u32,
    cap: u32,
    ring: u32,
    // 0: no sliding window
    window: u32,
    // 0: L = S.l_full, 1: L = S.l_swa
    swa: u32,
    scale: f32,
    softcap: f32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;
@group(0) @binding(1) var<storage, read> KC: array<u32>;
@group(0) @binding(2) var<storage, read> VC: array<u32>;
@group(0) @binding(3) var<storage, read_write> SC: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read> TM: array<vec4<u32>>;
@group(0) @binding(6) var<uniform> P: AttnParams;
@group(0) @binding(7) var<uniform> S: Step;

fn l_max() -> u32 {
    if (P.swa == 1u) {
        return S.l_swa;
    }
    return S.l_full;
}

// (first key position, number of keys) query t sees.
fn key_range(t: u32) -> vec2<u32> {
    let m = TM[t];
    let pos = m.y;
    var lo = 0u;
    if (P.window > 0u && pos + 1u > P.window) {
        lo = pos + 1u - P.window;
    }
    if (P.ring == 1u) {
        lo = max(lo, min(m.z, pos));
    }
    return vec2<u32>(lo, pos + 1u - lo);
}

fn cache_row(t: u32, j: u32) -> u32 {
    return TM[t].x * P.cap + j % P.cap;
}

fn round_f16(x: f32) -> f32 {
    return unpack2x16float(pack2x16float(vec2<f32>(x, 0.0))).x;
}

var<workgroup> qs: array<f32, 512>;

// grid: (ceil(L / 64), n_head, n_tok)
@compute @workgroup_size(64)
fn attn_scores(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.y;
    let t = wid.z;
    let hd = P.head_dim;
    let qb = (t * P.n_head + h) * hd;
    for (var d = li; d < hd; d += 64u) {
        qs[d] = round_f16(Q[qb + d]);
    }
    workgroupBarrier();
    let i = wid.x * 64u + li;
    let L = l_max();
    if (i >= L) {
        return;
    }
    let kr = key_range(t);
    let out = (t * P.n_head + h) * L + i;
    if (i >= kr.y) {
        SC[out] = -3.0e38;
        return;
    }
    let g = h / (P.n_head / P.n_head_kv);
    let kdim2 = P.n_head_kv * hd / 2u;
    let kb = cache_row(t, kr.x + i) * kdim2 + g * hd / 2u;
    var s = 0.0;
    for (var d = 0u; d < hd / 2u; d++) {
        let k = unpack2x16float(KC[kb + d]);
        s += qs[2u * d] * k.x + qs[2u * d + 1u] * k.y;
    }
    s *= P.scale;
    if (P.softcap > 0.0) {
        s = tanh(s / P.softcap) * P.softcap;
    }
    SC[out] = s;
}

var<workgroup> red: array<f32, 256>;

// grid: (n_head, n_tok)
@compute @workgroup_size(256)
fn attn_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.x;
    let t = wid.y;
    let L = l_max();
    let n = key_range(t).y;
    let base = (t * P.n_head + h) * L;
    var m = -3.4e38;
    for (var i = li; i < n; i += 256u) {
        m = max(m, SC[base + i]);
    }
    red[li] = m;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            red[li] = max(red[li], red[li + w]);
        }
        workgroupBarrier();
    }
    m = red[0];
    workgroupBarrier();
    var s = 0.0;
    for (var i = li; i < n; i += 256u) {
        let e = exp(SC[base + i] - m);
        SC[base + i] = e;
        s += e;
    }
    red[li] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            red[li] += red[li + w];
        }
        workgroupBarrier();
    }
    let inv = 1.0 / red[0];
    for (var i = li; i < n; i += 256u) {
        SC[base + i] = round_f16(SC[base + i] * inv);
    }
}

// grid: (n_head, n_tok); each thread owns pairs of output dimensions.
@compute @workgroup_size(64)
fn attn_pv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.x;
    let t = wid.y;
    let L = l_max();
    let kr = key_range(t);
    let base = (t * P.n_head + h) * L;
    let vd2 = P.v_head_dim / 2u;
    let vdim2 = P.n_head_kv * vd2;
    let g = h / (P.n_head / P.n_head_kv);
    let ob = (t * P.n_head + h) * P.v_head_dim;
    for (var d = li; d < vd2; d += 64u) {
        var acc = vec2<f32>(0.0);
        for (var i = 0u; i < kr.y; i++) {
            let p = SC[base + i];
            if (p != 0.0) {
                acc += p * unpack2x16float(VC[cache_row(t, kr.x + i) * vdim2 + g * vd2 + d]);
            }
        }
        O[ob + 2u * d] = acc.x;
        O[ob + 2u * d + 1u] = acc.y;
    }
}
