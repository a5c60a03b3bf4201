// Causal attention over the f16 cache in the CPU path's order of f32 operations, which is
// llama.cpp's non-fused path (rust/cpu/attention.rs, rust/cpu/f16vec.rs): Q rounded to f16;
// QK^T and P·V as FMA chains over `W` lanes (16: tinyBLAS, for tokens of a batch chunk,
// TM bit 2; 64: ggml_vec_dot_f16, for one token) reduced as ggml reduces them; softmax with
// ggml's exponential and 16-wide partial sums by key position added in f64 (here a
// (hi, lo) pair); probabilities rounded to f16 before the V product. Three passes over a
// score buffer SC [n_tok, n_head, L] where L is the longest key range in the batch.
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
    // 1: SINKS holds a logit per head that the softmax takes in (gpt-oss)
    has_sinks: u32,
    _p1: u32,
}

@group(0) @binding(0) var<storage, read> Q: array<f32>;
// KC / VC (bindings 1, 2: the f16 cache, two halves per word) and their readers `kc2` /
// `vc2` come before this file: f16 arrays where the device has SHADER_F16, else u32 words
// unpacked (kernels/mod.rs).
@group(0) @binding(3) var<storage, read_write> SC: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read> TM: array<vec4<u32>>;
@group(0) @binding(6) var<uniform> P: AttnParams;
@group(0) @binding(7) var<uniform> S: Step;
@group(0) @binding(8) var<storage, read> SINKS: array<f32>;

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

// tinyBLAS's order for this query token (else ggml_vec_dot_f16's)
fn batch_order(t: u32) -> bool {
    return (TM[t].w & 4u) != 0u;
}

// 64 lanes folded to 16 as GGML_F32x16_REDUCE does, then `reduce16`.
fn reduce64(x: ptr<function, array<f32, 64>>) -> f32 {
    var r: array<f32, 16>;
    for (var l = 0u; l < 16u; l++) {
        r[l] = ((*x)[l] + (*x)[l + 32u]) + ((*x)[l + 16u] + (*x)[l + 48u]);
    }
    return reduce16(r);
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
    var s: f32;
    if (batch_order(t) && hd % 16u == 0u) {
        var acc: array<f32, 16>;
        for (var d = 0u; d < hd / 2u; d++) {
            let k = kc2(kb + d);
            let l = (2u * d) % 16u;
            acc[l] = fmaf(qs[2u * d], k.x, acc[l]);
            acc[l + 1u] = fmaf(qs[2u * d + 1u], k.y, acc[l + 1u]);
        }
        s = reduce16(acc);
    } else {
        var acc: array<f32, 64>;
        let np = hd / 64u * 64u;
        for (var d = 0u; d < np / 2u; d++) {
            let k = kc2(kb + d);
            let l = (2u * d) % 64u;
            acc[l] = fmaf(qs[2u * d], k.x, acc[l]);
            acc[l + 1u] = fmaf(qs[2u * d + 1u], k.y, acc[l + 1u]);
        }
        // elements past the last multiple of 64 are added in f64 after the reduction
        var tail = vec2<f32>(reduce64(&acc), 0.0);
        for (var d = np / 2u; d < hd / 2u; d++) {
            let k = kc2(kb + d);
            tail = df_add(tail, qs[2u * d] * k.x);
            tail = df_add(tail, qs[2u * d + 1u] * k.y);
        }
        s = tail.x + tail.y;
    }
    s *= P.scale;
    if (P.softcap > 0.0) {
        s = tanh(s / P.softcap) * P.softcap;
    }
    SC[out] = s;
}

var<workgroup> red: array<f32, 256>;
var<workgroup> dred: array<vec2<f32>, 256>;

// grid: (n_head, n_tok)
@compute @workgroup_size(256)
fn attn_softmax(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.x;
    let t = wid.y;
    let L = l_max();
    let kr = key_range(t);
    let n = kr.y;
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
    if (P.has_sinks == 1u) {
        m = max(m, SINKS[h]);
    }
    workgroupBarrier();
    for (var i = li; i < n; i += 256u) {
        SC[base + i] = expf_ggml(SC[base + i] - m);
    }
    storageBarrier();
    workgroupBarrier();
    // key positions in groups of 16 from position 0, each group reduced as one 16-lane
    // vector (missing keys are zeros), the groups' sums added in f64
    let c0 = kr.x / 16u;
    let nc = (kr.x + n + 15u) / 16u - c0;
    var s = vec2<f32>(0.0);
    for (var c = li; c < nc; c += 256u) {
        var x: array<f32, 16>;
        for (var l = 0u; l < 16u; l++) {
            let p = (c0 + c) * 16u + l;
            if (p >= kr.x && p < kr.x + n) {
                x[l] = SC[base + p - kr.x];
            }
        }
        s = df_add(s, reduce16(x));
    }
    dred[li] = s;
    workgroupBarrier();
    for (var w = 128u; w > 0u; w >>= 1u) {
        if (li < w) {
            dred[li] = df_add(df_add(dred[li], dred[li + w].x), dred[li + w].y);
        }
        workgroupBarrier();
    }
    var tot = dred[0];
    if (P.has_sinks == 1u) {
        // the sink's term last, as rust/cpu/f16vec.rs `softmax_ggml` adds it
        tot = df_add(tot, exp(SINKS[h] - m));
    }
    let inv = df_recip(tot);
    for (var i = li; i < n; i += 256u) {
        SC[base + i] = round_f16(SC[base + i] * inv);
    }
}

// grid: (ceil(v_head_dim / 64), n_head, n_tok); one thread per output element, key
// position j into lane j % W.
@compute @workgroup_size(64)
fn attn_pv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let h = wid.y;
    let t = wid.z;
    let d = wid.x * 64u + li;
    if (d >= P.v_head_dim) {
        return;
    }
    let L = l_max();
    let kr = key_range(t);
    let base = (t * P.n_head + h) * L;
    let vdim2 = P.n_head_kv * P.v_head_dim / 2u;
    let g = h / (P.n_head / P.n_head_kv);
    let vo = g * P.v_head_dim / 2u + d / 2u;
    let hi = (d & 1u) == 1u;
    // 16 lanes (tinyBLAS) or 64 (ggml_vec_dot_f16)
    let w = select(64u, 16u, batch_order(t) && P.v_head_dim % 4u == 0u);
    var acc: array<f32, 64>;
    for (var i = 0u; i < kr.y; i++) {
        let p = SC[base + i];
        if (p != 0.0) {
            let v2 = vc2(cache_row(t, kr.x + i) * vdim2 + vo);
            let l = (kr.x + i) % w;
            acc[l] = fmaf(p, select(v2.x, v2.y, hi), acc[l]);
        }
    }
    var r: f32;
    if (w == 16u) {
        var x: array<f32, 16>;
        for (var l = 0u; l < 16u; l++) {
            x[l] = acc[l];
        }
        r = reduce16(x);
    } else {
        r = reduce64(&acc);
    }
    O[(t * P.n_head + h) * P.v_head_dim + d] = r;
}
