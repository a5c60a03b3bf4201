// Y[t, row0 + r] = W[r] · X[t] against activations quantized as the CPU path quantizes
// them (`QA`, from qact.wgsl), in the CPU path's order of f32 operations, which is
// llama.cpp's (rust/quant/scalar.rs): integer sums inside blocks, then the same FMA chains
// and reductions, so every output has the CPU's bits where `fmaf` rounds once (exact.wgsl).
// One thread per (row, token), walking the row's blocks in order. Each type defines BLK
// (elements per weight block), ABLK (u32 per activation block), `block_step` (one block
// into the chains) and `block_finish` (the chains' sum). `FL` holds per-row order flags
// (model/orders.rs): bit 0 Q4_K's gemm order, bit 1 Q6_K's tiled order. Block sums go
// through `dot4i8` (WGSL's dot4I8Packed where the device has it, else unpacked lanes);
// weights of 4-6 bits are packed as unsigned bytes and their offset subtracted as
// offset × Σa (`dot4off`).
@group(0) @binding(0) var<storage, read> W: array<u32>;
@group(0) @binding(1) var<storage, read> QA: array<u32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> P: MatParams;
@group(0) @binding(4) var<uniform> S: Step;
@group(0) @binding(5) var<storage, read> FL: array<u32>;

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

fn a_bsum(ab: u32, g: u32) -> i32 {
    return bitcast<i32>(QA[ab + 65u + g]);
}

// Σ (w_i - off) · a_i over 4 lanes: w packed as unsigned bytes below 128 (valid i8), a as i8.
fn dot4off(w: u32, a: u32, off: i32) -> i32 {
    return dot4i8(w, a) - off * dot4i8(0x01010101u, a);
}

// The 32-element types: eight chains, lane k taking fma(d, Σ elements 4k..4k+3, lane).
fn lanes_finish(acc: ptr<function, array<f32, 8>>, fl: u32) -> f32 {
    return hsum8(*acc);
}

// Q8_0 × Q8_0
fn block_step_q8_0(rb: u32, blk: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {
    let bo = rb + blk * Q8_0_BYTES;
    let d = ld_f16(bo) * a_d(ab);
    for (var k = 0u; k < 8u; k++) {
        (*acc)[k] = fmaf(d, f32(dot4i8(ld_u32(bo + Q8_0_QS + 4u * k), QA[ab + 1u + k])), (*acc)[k]);
    }
}

// Q4_0 × Q8_0: lane i < 4 holds low nibbles of qs word i, lane i + 4 its high nibbles.
fn block_step_q4_0(rb: u32, blk: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {
    let bo = rb + blk * Q4_0_BYTES;
    let d = ld_f16(bo) * a_d(ab);
    for (var i = 0u; i < 4u; i++) {
        let q = ld_u32(bo + Q4_0_QS + 4u * i);
        (*acc)[i] = fmaf(d, f32(dot4off(q & 0x0f0f0f0fu, QA[ab + 1u + i], 8)), (*acc)[i]);
        (*acc)[i + 4u] = fmaf(d, f32(dot4off((q >> 4u) & 0x0f0f0f0fu, QA[ab + 5u + i], 8)), (*acc)[i + 4u]);
    }
}

// Q5_0 × Q8_0
fn block_step_q5_0(rb: u32, blk: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {
    let bo = rb + blk * Q5_0_BYTES;
    let d = ld_f16(bo) * a_d(ab);
    let qh = ld_u32(bo + Q5_0_QH);
    for (var i = 0u; i < 4u; i++) {
        let q = ld_u32(bo + Q5_0_QS + 4u * i);
        let j = 4u * i;
        let lo = (q & 0x0f0f0f0fu) | (pack4(hbits4(qh, j)) << 4u);
        let hi = ((q >> 4u) & 0x0f0f0f0fu) | (pack4(hbits4(qh, j + 16u)) << 4u);
        (*acc)[i] = fmaf(d, f32(dot4off(lo, QA[ab + 1u + i], 16)), (*acc)[i]);
        (*acc)[i + 4u] = fmaf(d, f32(dot4off(hi, QA[ab + 5u + i], 16)), (*acc)[i + 4u]);
    }
}

// Q4_K × Q8_K: chains acc[0] (scaled sums, d·d_a) and acc[1] (min terms, dmin·d_a), fed
// per superblock (llama.cpp's repacked gemv) or per 64-element group (its gemm, FL bit 0).
fn block_step_q4_k(rb: u32, blk: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {
    let bo = rb + blk * Q4_K_BYTES;
    let dy = a_d(ab);
    let dd = ld_f16(bo) * dy;
    let dm = ld_f16(bo + Q4_K_DMIN) * dy;
    let gemm = (fl & 1u) != 0u;
    var sumi = 0;
    var summ = 0;
    for (var j = 0u; j < 4u; j++) {
        let sm1 = vec2<i32>(scale_min_k4(2u * j, bo + Q4_K_SCALES));
        let sm2 = vec2<i32>(scale_min_k4(2u * j + 1u, bo + Q4_K_SCALES));
        var s1 = 0;
        var s2 = 0;
        for (var i = 0u; i < 8u; i++) {
            let q = ld_u32(bo + Q4_K_QS + j * 32u + 4u * i);
            s1 += dot4i8(q & 0x0f0f0f0fu, QA[ab + 1u + j * 16u + i]);
            s2 += dot4i8((q >> 4u) & 0x0f0f0f0fu, QA[ab + 1u + j * 16u + 8u + i]);
        }
        let si = sm1.x * s1 + sm2.x * s2;
        let sm = sm1.y * (a_bsum(ab, 4u * j) + a_bsum(ab, 4u * j + 1u)) + sm2.y * (a_bsum(ab, 4u * j + 2u) + a_bsum(ab, 4u * j + 3u));
        if (gemm) {
            (*acc)[0] = fmaf(f32(si), dd, (*acc)[0]);
            (*acc)[1] = fmaf(f32(sm), dm, (*acc)[1]);
        } else {
            sumi += si;
            summ += sm;
        }
    }
    if (!gemm) {
        (*acc)[0] = fmaf(f32(sumi), dd, (*acc)[0]);
        (*acc)[1] = fmaf(f32(summ), dm, (*acc)[1]);
    }
}

fn block_finish_q4_k(acc: ptr<function, array<f32, 8>>, fl: u32) -> f32 {
    return (*acc)[0] - (*acc)[1];
}

// Q6_K × Q8_K: ggml's AVX2 vec_dot lanes (lane m: elements with (e % 32) / 4 == m, and the
// -32 offset of scale groups 2m, 2m+1), or with FL bit 1 the tiled kernel's single chain
// fma(f32(Σ)·d_w, d_a, acc).
fn block_step_q6_k(rb: u32, blk: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {
    let bo = rb + blk * Q6_K_BYTES;
    let dw = ld_f16(bo + Q6_K_D);
    let da = a_d(ab);
    var lanes: array<i32, 8>;
    for (var g = 0u; g < 16u; g++) {
        // elements g·16 .. g·16+15: half n, quarter qq, lanes l0..l0+15
        let n = g / 8u;
        let qq = (g % 8u) / 2u;
        let l0 = (g % 2u) * 16u;
        let sc = ld_i8(bo + Q6_K_SCALES + g);
        for (var i = 0u; i < 4u; i++) {
            let l = l0 + 4u * i;
            let lw = ld_u32(bo + n * 64u + l + (qq & 1u) * 32u);
            var lo: u32;
            if (qq >= 2u) {
                lo = (lw >> 4u) & 0x0f0f0f0fu;
            } else {
                lo = lw & 0x0f0f0f0fu;
            }
            let hi = (ld_u32(bo + Q6_K_QH + n * 32u + l) >> (2u * qq)) & 0x03030303u;
            lanes[(g % 2u) * 4u + i] += sc * dot4i8(lo | (hi << 4u), QA[ab + 1u + g * 4u + i]);
        }
    }
    if ((fl & 2u) != 0u) {
        var sumi = 0;
        for (var m = 0u; m < 8u; m++) {
            sumi += lanes[m] - 32 * ld_i8(bo + Q6_K_SCALES + m) * a_bsum(ab, m) - 32 * ld_i8(bo + Q6_K_SCALES + 8u + m) * a_bsum(ab, m + 8u);
        }
        (*acc)[0] = fmaf(f32(sumi) * dw, da, (*acc)[0]);
    } else {
        let d = da * dw;
        for (var m = 0u; m < 8u; m++) {
            let off = -32 * (ld_i8(bo + Q6_K_SCALES + 2u * m) * a_bsum(ab, 2u * m) + ld_i8(bo + Q6_K_SCALES + 1u + 2u * m) * a_bsum(ab, 2u * m + 1u));
            (*acc)[m] = fmaf(d, f32(lanes[m] + off), (*acc)[m]);
        }
    }
}

fn block_finish_q6_k(acc: ptr<function, array<f32, 8>>, fl: u32) -> f32 {
    if ((fl & 2u) != 0u) {
        return (*acc)[0];
    }
    return hsum8(*acc);
}

// grid: (rows / 64, folded into x and y; tokens)
@compute @workgroup_size(64)
fn qmatvec(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = (wid.x + wid.y * GRID_X) * 64u + li;
    let t = wid.z;
    if (r >= P.rows || t >= n_tokens()) {
        return;
    }
    let fl = FL[t];
    let nb = P.n_in / BLK;
    let rb = r * P.row_bytes;
    var acc: array<f32, 8>;
    for (var b = 0u; b < nb; b++) {
        block_step(rb, b, (t * nb + b) * ABLK, fl, &acc);
    }
    Y[t * P.y_stride + P.row0 + r] = block_finish(&acc, fl);
}
