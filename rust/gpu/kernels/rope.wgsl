// RoPE on [n_tok, n_heads · head_dim] rows with per-token cos/sin tables computed on the
// CPU exactly as the CPU path does (CS = [n_tok, half] cos then [n_tok, half] sin).
struct RopeParams {
    n_heads: u32,
    head_dim: u32,
    n_rot: u32,
    neox: u32,
    // offset of the sin table in CS
    sin_off: u32,
    _p0: u32,
    _p1: u32,
    _p2: u32,
}

@group(0) @binding(0) var<storage, read_write> A: array<f32>;
@group(0) @binding(1) var<storage, read> CS: array<f32>;
@group(0) @binding(3) var<uniform> P: RopeParams;
@group(0) @binding(4) var<uniform> S: Step;

@compute @workgroup_size(64)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = P.n_rot / 2u;
    let i = gid.x;
    let h = gid.y;
    let t = gid.z;
    if (i >= half || h >= P.n_heads || t >= S.n_tok) {
        return;
    }
    let base = (t * P.n_heads + h) * P.head_dim;
    var a = base + 2u * i;
    var b = a + 1u;
    if (P.neox == 1u) {
        a = base + i;
        b = base + i + half;
    }
    let c = CS[t * half + i];
    let s = CS[P.sin_off + t * half + i];
    let x0 = A[a];
    let x1 = A[b];
    // as ggml's C compiles it (contracted), like the CPU path (rust/cpu/ops.rs rope_apply)
    A[a] = fmaf(x0, c, -(x1 * s));
    A[b] = fmaf(x0, s, x1 * c);
}
