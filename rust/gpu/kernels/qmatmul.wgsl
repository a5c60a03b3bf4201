// Y[t, row0 + r] = Σ_blocks dot(W block, quantized activation block) with integer sums
// inside each block, the CPU path's numerics (rust/quant/scalar.rs dot_*_q8_0 / _q8_k):
// only the f32 order of adding block results differs. `QA` holds activations from
// qact.wgsl. Each type defines BLK (elements per weight block), ABLK (u32 per activation
// block) and `block_dot(rb, blk, ab)`. Every block sum goes through `dot4i8`, the packed
// 4×i8 dot (WGSL's dot4I8Packed, DP4a on GPUs that have it, when the device's WGSL has it;
// else unpacked lanes); weights of 4-6 bits are packed as unsigned bytes and their offset
// subtracted as offset × Σa (`dot4off`).
@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> QA: array<u32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: MatParams;
@group(0) @binding(4) var<uniform> S: Step;

fn i8x4(w: u32) -> vec4<i32> {
    return vec4<i32>(bitcast<i32>(w << 24u) >> 24u, bitcast<i32>(w << 16u) >> 24u, bitcast<i32>(w << 8u) >> 24u, bitcast<i32>(w) >> 24u);
}

// Four lanes of 0/1 (or any bytes) packed little-endian into one word.
fn pack4(v: vec4<u32>) -> u32 {
    return v.x | (v.y << 8u) | (v.z << 16u) | (v.w << 24u);
}

fn a_d(ab: u32) -> f32 {
    return bitcast<f32>(QA[ab]);
}

// Σ (w_i - off) · a_i over 4 lanes: w packed as unsigned bytes below 128 (valid i8), a as i8.
fn dot4off(w: u32, a: u32, off: i32) -> i32 {
    return dot4i8(w, a) - off * dot4i8(0x01010101u, a);
}

// Q8_0 × Q8_0
fn block_dot_q8_0(rb: u32, blk: u32, ab: u32) -> f32 {
    let bo = rb + blk * 34u;
    var s = 0;
    for (var i = 0u; i < 8u; i++) {
        s += dot4i8(ld_u32(bo + 2u + 4u * i), QA[ab + 1u + i]);
    }
    return ld_f16(bo) * a_d(ab) * f32(s);
}

// Q4_0 × Q8_0
fn block_dot_q4_0(rb: u32, blk: u32, ab: u32) -> f32 {
    let bo = rb + blk * 18u;
    var s = 0;
    for (var i = 0u; i < 4u; i++) {
        let q = ld_u32(bo + 2u + 4u * i);
        s += dot4off(q & 0x0f0f0f0fu, QA[ab + 1u + i], 8);
        s += dot4off((q >> 4u) & 0x0f0f0f0fu, QA[ab + 5u + i], 8);
    }
    return ld_f16(bo) * a_d(ab) * f32(s);
}

// Q5_0 × Q8_0
fn block_dot_q5_0(rb: u32, blk: u32, ab: u32) -> f32 {
    let bo = rb + blk * 22u;
    let qh = ld_u32(bo + 2u);
    var s = 0;
    for (var i = 0u; i < 4u; i++) {
        let q = ld_u32(bo + 6u + 4u * i);
        let j = 4u * i;
        let lo = (q & 0x0f0f0f0fu) | (pack4(hbits4(qh, j)) << 4u);
        let hi = ((q >> 4u) & 0x0f0f0f0fu) | (pack4(hbits4(qh, j + 16u)) << 4u);
        s += dot4off(lo, QA[ab + 1u + i], 16);
        s += dot4off(hi, QA[ab + 5u + i], 16);
    }
    return ld_f16(bo) * a_d(ab) * f32(s);
}

// Q4_K × Q8_K
fn block_dot_q4_k(rb: u32, blk: u32, ab: u32) -> f32 {
    let bo = rb + blk * 144u;
    let da = a_d(ab);
    let d = ld_f16(bo) * da;
    let dmin = ld_f16(bo + 2u) * da;
    var sumi = 0;
    var summ = 0;
    for (var j = 0u; j < 4u; j++) {
        let sm1 = scale_min_k4(2u * j, bo + 4u);
        let sm2 = scale_min_k4(2u * j + 1u, bo + 4u);
        var s1 = 0;
        var s2 = 0;
        for (var i = 0u; i < 8u; i++) {
            let q = ld_u32(bo + 16u + j * 32u + 4u * i);
            s1 += dot4i8(q & 0x0f0f0f0fu, QA[ab + 1u + j * 16u + i]);
            s2 += dot4i8((q >> 4u) & 0x0f0f0f0fu, QA[ab + 1u + j * 16u + 8u + i]);
        }
        sumi += i32(sm1.x) * s1 + i32(sm2.x) * s2;
        summ += i32(sm1.y) * (bitcast<i32>(QA[ab + 65u + 4u * j]) + bitcast<i32>(QA[ab + 66u + 4u * j]));
        summ += i32(sm2.y) * (bitcast<i32>(QA[ab + 67u + 4u * j]) + bitcast<i32>(QA[ab + 68u + 4u * j]));
    }
    return d * f32(sumi) - dmin * f32(summ);
}

// Q6_K × Q8_K
fn block_dot_q6_k(rb: u32, blk: u32, ab: u32) -> f32 {
    let bo = rb + blk * 210u;
    let d = ld_f16(bo + 208u) * a_d(ab);
    var sumi = 0;
    for (var g = 0u; g < 16u; g++) {
        // elements g·16 .. g·16+15: half n, quarter qq, lanes l0..l0+15
        let n = g / 8u;
        let qq = (g % 8u) / 2u;
        let l0 = (g % 2u) * 16u;
        var s = 0;
        for (var i = 0u; i < 4u; i++) {
            let l = l0 + 4u * i;
            let lw = ld_u32(bo + n * 64u + l + (qq & 1u) * 32u);
            var lo: u32;
            if (qq >= 2u) {
                lo = (lw >> 4u) & 0x0f0f0f0fu;
            } else {
                lo = lw & 0x0f0f0f0fu;
            }
            let hi = (ld_u32(bo + 128u + n * 32u + l) >> (2u * qq)) & 0x03030303u;
            s += dot4off(lo | (hi << 4u), QA[ab + 1u + g * 4u + i], 32);
        }
        sumi += ld_i8(bo + 192u + g) * s;
    }
    return d * f32(sumi);
}

// 8 weight rows per workgroup, 8 lanes per row striding over the row's blocks (rows hold
// few blocks: 8 for a 2048-wide K-quant row), up to 8 tokens (grid z: groups of 8 tokens).
var<workgroup> red: array<f32, 512>;

@compute @workgroup_size(64)
fn qmatvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let lane = li % 8u;
    let rl = li / 8u;
    let r = (wid.x + wid.y * GRID_X) * 8u + rl;
    let t0 = wid.z * 8u;
    let nt = min(n_tokens() - min(t0, n_tokens()), 8u);
    let nb = P.n_in / BLK;
    var acc: array<f32, 8>;
    if (r < P.rows) {
        let rb = r * P.row_bytes;
        for (var b = lane; b < nb; b += 8u) {
            for (var t = 0u; t < nt; t++) {
                acc[t] += block_dot(rb, b, ((t0 + t) * nb + b) * ABLK);
            }
        }
    }
    // [token][row][lane]
    for (var t = 0u; t < 8u; t++) {
        red[t * 64u + li] = acc[t];
    }
    workgroupBarrier();
    for (var s = 4u; s > 0u; s >>= 1u) {
        if (lane < s) {
            for (var t = 0u; t < 8u; t++) {
                red[t * 64u + li] += red[t * 64u + li + s];
            }
        }
        workgroupBarrier();
    }
    if (lane < nt && r < P.rows) {
        Y[(t0 + lane) * P.y_stride + P.row0 + r] = red[lane * 64u + rl * 8u];
    }
}
