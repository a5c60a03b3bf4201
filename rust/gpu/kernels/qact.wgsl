// Activations quantized on the device as the CPU path quantizes them for integer dot
// products (rust/quant/activation.rs, llama.cpp's quantize_row_q8_0 / q8_K): round to
// nearest, ties to even (WGSL `round`), divisions correctly rounded (exact.wgsl `div_rn`).
// Layout per block, 4-byte aligned (not ggml's
// bytes): Q8_0 = [d as f32 (the f16-rounded scale), 8 words of 4 i8]; Q8_K = [d f32, 64
// words of 4 i8, 16 block sums as i32].
struct QParams {
    n_in: u32,
    // 0: the batch's tokens, 1: the selected rows
    sel: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<storage, read> X: array<f32>;
@group(0) @binding(1) var<storage, read_write> QA: array<u32>;
@group(0) @binding(3) var<uniform> P: QParams;
@group(0) @binding(4) var<uniform> S: Step;

fn n_rows() -> u32 {
    if (P.sel == 1u) {
        return S.n_sel;
    }
    return S.n_tok;
}

fn pack_i8(a: i32, b: i32, c: i32, d: i32) -> u32 {
    return (u32(a) & 0xffu) | ((u32(b) & 0xffu) << 8u) | ((u32(c) & 0xffu) << 16u) | ((u32(d) & 0xffu) << 24u);
}

// one thread per 32-element block
@compute @workgroup_size(64)
fn quant_q8_0(@builtin(global_invocation_id) gid: vec3<u32>) {
    let nb = P.n_in / 32u;
    let b = gid.x + gid.y * GRID_X * 64u;
    if (b >= n_rows() * nb) {
        return;
    }
    let x0 = (b / nb) * P.n_in + (b % nb) * 32u;
    var amax = 0.0;
    for (var i = 0u; i < 32u; i++) {
        amax = max(amax, abs(X[x0 + i]));
    }
    let d = div_rn(amax, 127.0);
    var id = 0.0;
    if (amax != 0.0) {
        id = div_rn(127.0, amax);
    }
    let o = b * 9u;
    QA[o] = bitcast<u32>(unpack2x16float(pack2x16float(vec2<f32>(d, 0.0))).x);
    for (var w = 0u; w < 8u; w++) {
        let x = x0 + 4u * w;
        QA[o + 1u + w] = pack_i8(i32(round(X[x] * id)), i32(round(X[x + 1u] * id)), i32(round(X[x + 2u] * id)), i32(round(X[x + 3u] * id)));
    }
}

// one thread per 256-element block
@compute @workgroup_size(64)
fn quant_q8_k(@builtin(global_invocation_id) gid: vec3<u32>) {
    let nb = P.n_in / 256u;
    let b = gid.x + gid.y * GRID_X * 64u;
    if (b >= n_rows() * nb) {
        return;
    }
    let x0 = (b / nb) * P.n_in + (b % nb) * 256u;
    let o = b * 81u;
    var amax = 0.0;
    var mx = 0.0;
    for (var i = 0u; i < 256u; i++) {
        let v = X[x0 + i];
        if (abs(v) > amax) {
            amax = abs(v);
            mx = v;
        }
    }
    if (amax == 0.0) {
        for (var w = 0u; w < 81u; w++) {
            QA[o + w] = 0u;
        }
        return;
    }
    let iscale = div_rn(-127.0, mx);
    for (var g = 0u; g < 16u; g++) {
        var s = 0;
        for (var w = 0u; w < 4u; w++) {
            let x = x0 + g * 16u + 4u * w;
            let q = vec4<i32>(
                min(i32(round(iscale * X[x])), 127),
                min(i32(round(iscale * X[x + 1u])), 127),
                min(i32(round(iscale * X[x + 2u])), 127),
                min(i32(round(iscale * X[x + 3u])), 127),
            );
            s += q.x + q.y + q.z + q.w;
            QA[o + 1u + g * 4u + w] = pack_i8(q.x, q.y, q.z, q.w);
        }
        QA[o + 65u + g] = bitcast<u32>(s);
    }
    QA[o] = bitcast<u32>(div_rn(1.0, iscale));
}
