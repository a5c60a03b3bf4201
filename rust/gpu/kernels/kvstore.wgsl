// Write K or V rows of the batch into the f16 cache (two halves per u32, the same bytes
// as the CPU cache): row of (slot, pos) = slot · cap + pos % cap.
struct KvParams {
    // elements per row (even)
    dim: u32,
    cap: u32,
    _p0: u32,
    _p1: u32,
}

@group(0) @binding(0) var<storage, read_write> C: array<u32>;
@group(0) @binding(1) var<storage, read> SRC: array<f32>;
@group(0) @binding(2) var<storage, read> TM: array<vec4<u32>>;
@group(0) @binding(3) var<uniform> P: KvParams;
@group(0) @binding(4) var<uniform> S: Step;

@compute @workgroup_size(64)
fn kv_store(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    let t = gid.y;
    let hd = P.dim / 2u;
    if (i >= hd || t >= S.n_tok) {
        return;
    }
    let m = TM[t];
    let row = m.x * P.cap + m.y % P.cap;
    let s = t * P.dim + 2u * i;
    C[row * hd + i] = pack2x16float(vec2<f32>(SRC[s], SRC[s + 1u]));
}
