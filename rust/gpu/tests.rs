//! Every GPU kernel against its CPU reference on small shapes, every tensor type.
//! Runs on whatever adapter wgpu finds (CI: Mesa's lavapipe); `LLAMARS_TEST_DEVICE`
//! names one. Without any adapter the tests print that they were skipped, unless
//! `LLAMARS_REQUIRE_GPU=1` (CI sets it), which makes that a failure.
use super::device::{self, Gpu};
use super::kernels::attention::{self, AttnBufs, AttnDesc};
use super::kernels::eltwise::{op_ew, Ew};
use super::kernels::matmul::GpuWeight;
use super::kernels::norm::op_norm;
use super::kernels::rope::op_rope;
use super::kernels::{embed, kvstore, Op, StepSize};
use crate::cpu::attention::{attention as cpu_attention, AttnShape, KvRows, QueryPos};
use crate::cpu::ops::{geglu, rms_norm, rope_apply, rope_cache, silu, swiglu};
use crate::cpu::ThreadPool;
use crate::quant::f16::f32_to_f16;
use crate::quant::tests::{weight_row, Fill, Rng, WEIGHT_TYPES};

/// The weight types with a GPU loader (`kernels::quant_name`).
fn gpu_types() -> impl Iterator<Item = crate::quant::GgmlType> {
    WEIGHT_TYPES.into_iter().filter(|&t| super::kernels::quant_name(t).is_some())
}
use crate::quant::{dequantize, GgmlType};
use std::sync::Arc;
use wgpu::util::DeviceExt;

/// Matrix products: |gpu - ref| <= MAT_REL · Σ|w·x| (f32 accumulation in another order).
const MAT_REL: f32 = 2e-5;
/// Norms, activations, RoPE: relative to the value's magnitude.
const EW_REL: f32 = 1e-5;
/// Attention (f16 probabilities; the exp of the two sides may differ in the last bit).
const ATTN_ABS: f32 = 2e-3;

fn gpu() -> Option<Arc<Gpu>> {
    let devs = super::list_devices();
    let require = std::env::var("LLAMARS_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if devs.is_empty() {
        assert!(!require, "LLAMARS_REQUIRE_GPU=1 but wgpu finds no adapter (install mesa-vulkan-drivers libvulkan1)");
        eprintln!("SKIPPED: no wgpu adapter on this machine");
        return None;
    }
    let name = std::env::var("LLAMARS_TEST_DEVICE").unwrap_or_else(|_| devs[0].name.clone());
    Some(device::shared(Some(&name), 0).expect("open device").expect("device"))
}

fn f32_buf(g: &Gpu, v: &[f32]) -> wgpu::Buffer {
    g.upload("test", bytemuck::cast_slice(v)).unwrap()
}

fn step(g: &Gpu, s: &StepSize) -> wgpu::Buffer {
    g.device.create_buffer_init(&wgpu::util::BufferInitDescriptor { label: None, contents: &s.bytes(), usage: wgpu::BufferUsages::UNIFORM })
}

fn run(g: &Gpu, ops: &[Op], s: &StepSize) {
    let mut enc = g.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        ops.iter().for_each(|o| o.encode(&mut pass, s));
    }
    g.queue.submit([enc.finish()]);
}

fn read(g: &Gpu, b: &wgpu::Buffer, n: usize) -> Vec<f32> {
    let mut out = vec![0f32; n];
    g.read(b, 0, (n * 4) as u64, bytemuck::cast_slice_mut(&mut out)).unwrap();
    out
}

fn size(n_tok: usize) -> StepSize {
    StepSize { n_tok: n_tok as u32, n_sel: n_tok as u32, l_full: 0, l_swa: 0 }
}

#[test]
fn matmul_every_type_matches_dequantized_reference() {
    let Some(g) = gpu() else { return };
    let (n_in, n_out) = (512, 67);
    let mut rng = Rng(7);
    for ty in gpu_types() {
        let rows: Vec<Vec<u8>> = (0..n_out).map(|_| weight_row(ty, n_in, &mut rng, Fill::Random)).collect();
        let bytes: Vec<u8> = rows.concat();
        let deq: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| {
                let mut o = vec![0f32; n_in];
                dequantize(ty, r, &mut o);
                o
            })
            .collect();
        // one buffer, and rows split over buffers of 16 rows (weights over the binding limit)
        for split in [usize::MAX, 16] {
            let w = GpuWeight::upload_split(&g, "w", ty, n_in, &bytes, 0, n_out, split).unwrap();
            for n_tok in [1usize, 3, 8, 9, 40] {
                let x: Vec<f32> = (0..n_tok * n_in).map(|_| rng.sym()).collect();
                let xb = f32_buf(&g, &x);
                let yb = g.zeros("y", (n_tok * n_out * 4) as u64).unwrap();
                let s = size(n_tok);
                let sb = step(&g, &s);
                let ops: Vec<Op> = w.ops(&g, &xb, &yb, &sb, false).unwrap().into_iter().flat_map(|(a, b)| [a, b]).collect();
                run(&g, &ops, &s);
                let y = read(&g, &yb, n_tok * n_out);
                for t in 0..n_tok {
                    for r in 0..n_out {
                        let xt = &x[t * n_in..(t + 1) * n_in];
                        let want: f64 = deq[r].iter().zip(xt).map(|(&a, &b)| a as f64 * b as f64).sum();
                        let mag: f32 = deq[r].iter().zip(xt).map(|(a, b)| (a * b).abs()).sum();
                        let got = y[t * n_out + r];
                        assert!(
                            (got as f64 - want).abs() as f32 <= MAT_REL * mag + 1e-6,
                            "{} split {split} n_tok {n_tok} row {r} token {t}: gpu {got} vs {want}",
                            ty.name()
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn expert_products_every_type_match_dequantized_reference() {
    use super::kernels::moe::IdIo;
    let Some(g) = gpu() else { return };
    let (n_in, n_out, n_exp, k) = (256, 19, 5, 3);
    let mut rng = Rng(13);
    // 1 token: 3 pairs, one workgroup per (row, pair); 4 and 21: at least as many pairs as
    // experts, grouped by expert (21: more than 8 pairs of an expert, several passes)
    for (ty, n_tok) in gpu_types().flat_map(|t| [(t, 1), (t, 4), (t, 21)]) {
        let rows: Vec<Vec<u8>> = (0..n_exp * n_out).map(|_| weight_row(ty, n_in, &mut rng, Fill::Random)).collect();
        let deq: Vec<Vec<f32>> = rows
            .iter()
            .map(|r| {
                let mut o = vec![0f32; n_in];
                dequantize(ty, r, &mut o);
                o
            })
            .collect();
        // two experts per buffer: pairs routed to the other buffers are skipped
        let w = GpuWeight::upload_split(&g, "exps", ty, n_in, &rows.concat(), 0, n_exp * n_out, 2 * n_out).unwrap();
        assert_eq!(w.chunks.len(), 3);
        let ids: Vec<u32> = (0..n_tok * k).map(|p| ((p * 7 + 3) % n_exp) as u32).collect();
        let bias: Vec<f32> = (0..n_exp * n_out).map(|_| rng.sym()).collect();
        for x_per_pair in [false, true] {
            let n_x = if x_per_pair { n_tok * k } else { n_tok };
            let x: Vec<f32> = (0..n_x * n_in).map(|_| rng.sym()).collect();
            let (xb, ib, bb, dummy) = (f32_buf(&g, &x), g.upload("ids", bytemuck::cast_slice(&ids)).unwrap(), f32_buf(&g, &bias), f32_buf(&g, &[0.0; 4]));
            let yb = g.zeros("y", (n_tok * k * n_out * 4) as u64).unwrap();
            let s = size(n_tok);
            let sb = step(&g, &s);
            let gb = g.zeros("group", (4 * super::kernels::moe::group_words(n_exp, n_tok * k)) as u64).unwrap();
            let io = IdIo { x: &xb, y: &yb, ids: &ib, group: &gb, bias: Some(&bb), dummy: &dummy, k, x_per_pair };
            run(&g, &w.id_ops(&g, n_out, &io, &sb).unwrap(), &s);
            let y = read(&g, &yb, n_tok * k * n_out);
            for p in 0..n_tok * k {
                let (e, xr) = (ids[p] as usize, if x_per_pair { p } else { p / k });
                let xt = &x[xr * n_in..(xr + 1) * n_in];
                for r in 0..n_out {
                    let d = &deq[e * n_out + r];
                    let want: f64 = d.iter().zip(xt).map(|(&a, &b)| a as f64 * b as f64).sum::<f64>() + bias[e * n_out + r] as f64;
                    let mag: f32 = d.iter().zip(xt).map(|(a, b)| (a * b).abs()).sum::<f32>() + bias[e * n_out + r].abs();
                    let got = y[p * n_out + r];
                    assert!((got as f64 - want).abs() as f32 <= MAT_REL * mag + 1e-6, "{} {n_tok} tokens pair {p} expert {e} row {r}: gpu {got} vs {want}", ty.name());
                }
            }
        }
    }
}

/// Integer-dot products: the CPU path's own kernel (activations quantized the same way), in
/// the order each token's flags pick; the same bits where the device's `fmaf` rounds once.
const INT_REL: f32 = 1e-5;

/// A tolerance that is zero where the kernels compute the CPU path's bits.
fn tol(g: &Gpu, t: f32) -> f32 {
    if g.fma_exact {
        0.0
    } else {
        t
    }
}

#[test]
fn integer_matmul_matches_cpu_kernels() {
    let Some(g) = gpu() else { return };
    // with the packed dot product (dot4I8Packed) and with its unpacked fallback
    let name = g.info.name.clone();
    let mut other = device::open(Some(&name), 0).expect("open").expect("device");
    other.dp4a = !g.dp4a;
    for dev in [&*g, &other] {
        integer_matmul_on(dev);
    }
}

fn integer_matmul_on(g: &Gpu) {
    use super::kernels::qmatmul::{int_act, op_quant, order_flags};
    let (n_in, n_out) = (512, 67);
    let mut rng = Rng(13);
    for ty in gpu_types().filter(|&t| int_act(t).is_some()) {
        let act = int_act(ty).unwrap();
        let rows: Vec<Vec<u8>> = (0..n_out).map(|_| weight_row(ty, n_in, &mut rng, Fill::Random)).collect();
        let bytes: Vec<u8> = rows.concat();
        let dot = crate::quant::dot_fn(ty).unwrap();
        for split in [usize::MAX, 16] {
            let w = GpuWeight::upload_split(g, "w", ty, n_in, &bytes, 0, n_out, split).unwrap();
            for n_tok in [1usize, 3, 9, 20] {
                // activations with an outlier now and then, as real ones have
                let x: Vec<f32> = (0..n_tok * n_in).map(|i| rng.sym() * if i % 97 == 0 { 20.0 } else { 1.0 }).collect();
                let xb = f32_buf(g, &x);
                let qa = g.zeros("qa", (n_tok * act.row_words(n_in) * 4) as u64).unwrap();
                let yb = g.zeros("y", (n_tok * n_out * 4) as u64).unwrap();
                let s = size(n_tok);
                let sb = step(g, &s);
                // each token in one-token or batch order (Q4_K gemm, Q6_K tiled)
                let batch: Vec<bool> = (0..n_tok).map(|t| t % 3 != 1).collect();
                let fl: Vec<u32> = batch.iter().map(|&b| order_flags(b, b)).collect();
                let flb = g.upload("flags", bytemuck::cast_slice(&fl)).unwrap();
                let mut ops = vec![op_quant(g, act, &xb, &qa, n_in, false, &sb).unwrap()];
                ops.extend(w.qops(g, &qa, &yb, &flb, &sb, false).unwrap());
                run(g, &ops, &s);
                let y = read(g, &yb, n_tok * n_out);
                for t in 0..n_tok {
                    let mut xq = Vec::new();
                    crate::quant::activation::quantize(crate::quant::vec_dot_type(ty), &x[t * n_in..(t + 1) * n_in], &mut xq);
                    let dot = if batch[t] { crate::quant::scalar::dot_batch(ty).unwrap_or(dot) } else { dot };
                    for r in 0..n_out {
                        let want = dot(n_in, &rows[r], &xq);
                        let mut wd = vec![0f32; n_in];
                        dequantize(ty, &rows[r], &mut wd);
                        let mag: f32 = wd.iter().zip(&x[t * n_in..]).map(|(a, b)| (a * b).abs()).sum();
                        let got = y[t * n_out + r];
                        assert!(
                            (got - want).abs() <= tol(g, INT_REL * mag + 1e-6),
                            "{} dp4a {} split {split} n_tok {n_tok} row {r} token {t}: gpu {got} vs cpu {want}",
                            ty.name(),
                            g.dp4a
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn embedding_rows_match_dequantize() {
    let Some(g) = gpu() else { return };
    let (n_in, n_rows) = (256, 40);
    let mut rng = Rng(11);
    for ty in gpu_types() {
        let bytes: Vec<u8> = (0..n_rows).flat_map(|_| weight_row(ty, n_in, &mut rng, Fill::Random)).collect();
        let w = GpuWeight::upload_split(&g, "emb", ty, n_in, &bytes, 0, n_rows, 13).unwrap();
        let toks: Vec<u32> = vec![0, 39, 13, 12, 26, 5];
        let tb = g.upload("tok", bytemuck::cast_slice(&toks)).unwrap();
        let yb = g.zeros("y", (toks.len() * n_in * 4) as u64).unwrap();
        let s = size(toks.len());
        let sb = step(&g, &s);
        let ops = embed::ops(&g, &w, &tb, &yb, 1.5, &sb).unwrap();
        run(&g, &ops, &s);
        let y = read(&g, &yb, toks.len() * n_in);
        let rb = ty.row_bytes(n_in);
        for (t, &tok) in toks.iter().enumerate() {
            let mut want = vec![0f32; n_in];
            dequantize(ty, &bytes[tok as usize * rb..(tok as usize + 1) * rb], &mut want);
            for (k, (&a, &b)) in y[t * n_in..(t + 1) * n_in].iter().zip(&want).enumerate() {
                assert!((a - b * 1.5).abs() <= 1e-6 * (1.0 + b.abs()), "{} token {tok} element {k}: {a} vs {}", ty.name(), b * 1.5);
            }
        }
    }
}

fn close(a: &[f32], b: &[f32], rel: f32, what: &str) {
    assert_eq!(a.len(), b.len());
    for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= rel * (1.0 + y.abs()), "{what}[{i}]: gpu {x} vs cpu {y}");
    }
}

#[test]
fn norms_activations_and_rope_match_cpu() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(3);
    let (n, e, hd) = (5usize, 384usize, 64usize);
    let x: Vec<f32> = (0..n * e).map(|_| 3.0 * rng.sym()).collect();
    let w: Vec<f32> = (0..e).map(|_| rng.sym()).collect();
    let s = size(n);
    let sb = step(&g, &s);
    let dummy = g.zeros("d", 16).unwrap();
    // RMSNorm copy and per-head in place
    let (xb, hb, wb) = (f32_buf(&g, &x), g.zeros("h", (n * e * 4) as u64).unwrap(), f32_buf(&g, &w));
    let wh = f32_buf(&g, &w[..hd]);
    run(&g, &[op_norm(&g, &hb, Some(&xb), &wb, &dummy, e, 1, 1e-6, false, &sb).unwrap()], &s);
    let mut want = x.clone();
    want.chunks_exact_mut(e).for_each(|r| rms_norm(r, &w, 1e-6));
    close(&read(&g, &hb, n * e), &want, tol(&g, EW_REL), "rms_norm");
    run(&g, &[op_norm(&g, &xb, None, &wh, &dummy, hd, e / hd, 1e-6, false, &sb).unwrap()], &s);
    let mut want = x.clone();
    want.chunks_exact_mut(hd).for_each(|r| rms_norm(r, &w[..hd], 1e-6));
    close(&read(&g, &xb, n * e), &want, tol(&g, EW_REL), "rms_norm per head");
    // gated activations, add, scale
    let up: Vec<f32> = (0..n * e).map(|_| rng.sym()).collect();
    let ub = f32_buf(&g, &up);
    let gelu = g.upload("gelu", super::kernels::eltwise::gelu_table_bytes()).unwrap();
    let oai = Ew::SwigluOai { alpha: 1.702, limit: 2.0 };
    for kind in [Ew::Geglu, Ew::Swiglu, Ew::Add, Ew::Scale(0.125), Ew::AddRow, Ew::Silu, oai, Ew::SigmoidGate] {
        let ab = f32_buf(&g, &x);
        let b = if kind == Ew::AddRow { f32_buf(&g, &w) } else { f32_buf(&g, &up) };
        run(&g, &[op_ew(&g, kind, &ab, &b, &gelu, e, false, &sb).unwrap()], &s);
        let mut want = x.clone();
        match kind {
            Ew::Geglu => geglu(&mut want, &up),
            Ew::Swiglu => swiglu(&mut want, &up),
            Ew::Add => want.iter_mut().zip(&up).for_each(|(a, b)| *a += b),
            Ew::Scale(f) => want.iter_mut().for_each(|a| *a *= f),
            Ew::AddRow => want.chunks_exact_mut(e).for_each(|r| r.iter_mut().zip(&w).for_each(|(a, b)| *a += b)),
            Ew::Silu => want.iter_mut().for_each(|a| *a = silu(*a)),
            Ew::SwigluOai { alpha, limit } => want.iter_mut().zip(&up).for_each(|(a, &u)| {
                let x = a.min(limit);
                *a = x / (1.0 + (alpha * -x).exp()) * (u.clamp(-limit, limit) + 1.0);
            }),
            Ew::SigmoidGate => want.chunks_exact_mut(e).zip(&up).for_each(|(r, &gt)| r.iter_mut().for_each(|a| *a *= silu(gt) / gt)),
            Ew::Gather => {}
        }
        // the sigmoids use the device's exp; the rest are the CPU's bits
        let exact = matches!(kind, Ew::Geglu | Ew::Add | Ew::Scale(_) | Ew::AddRow);
        close(&read(&g, &ab, n * e), &want, if exact { 0.0 } else { EW_REL }, &format!("{kind:?}"));
    }
    drop(ub);
    // gather selected rows
    let sel: Vec<u32> = vec![4, 1];
    let selb = g.upload("sel", bytemuck::cast_slice(&sel)).unwrap();
    let s2 = StepSize { n_tok: n as u32, n_sel: 2, l_full: 0, l_swa: 0 };
    let sb2 = step(&g, &s2);
    let xb = f32_buf(&g, &x);
    let gb = g.zeros("g", (2 * e * 4) as u64).unwrap();
    run(&g, &[op_ew(&g, Ew::Gather, &gb, &xb, &selb, e, true, &sb2).unwrap()], &s2);
    close(&read(&g, &gb, 2 * e), &[&x[4 * e..5 * e], &x[e..2 * e]].concat(), 0.0, "gather");
    // RoPE, both styles, with rotation over part of the head
    for (neox, n_rot) in [(false, hd), (true, hd), (true, 32)] {
        let half = n_rot / 2;
        let pos = [0usize, 7, 100, 4095, 31];
        let (mut cos, mut sin) = (vec![0f32; half], vec![0f32; half]);
        let mut tab = vec![0f32; 2 * n * half];
        let mut want = x.clone();
        for (t, &p) in pos.iter().enumerate() {
            rope_cache(p, &crate::cpu::ops::RopeParams::plain(n_rot, 10000.0, 1.0), &mut cos, &mut sin);
            tab[t * half..(t + 1) * half].copy_from_slice(&cos);
            tab[n * half + t * half..n * half + (t + 1) * half].copy_from_slice(&sin);
            want[t * e..(t + 1) * e].chunks_exact_mut(hd).for_each(|h| rope_apply(h, n_rot, neox, &cos, &sin));
        }
        let ab = f32_buf(&g, &x);
        let cb = f32_buf(&g, &tab);
        run(&g, &[op_rope(&g, &ab, &cb, e / hd, hd, n_rot, neox, n * half, &sb).unwrap()], &s);
        close(&read(&g, &ab, n * e), &want, tol(&g, EW_REL), &format!("rope neox={neox} n_rot={n_rot}"));
    }
}

#[test]
fn kv_store_and_attention_match_cpu() {
    let Some(g) = gpu() else { return };
    // with the cache read as f16 arrays (SHADER_F16) and as unpacked words
    let mut other = device::open(Some(&g.info.name.clone()), 0).expect("open").expect("device");
    other.f16 = false;
    attention_on(&g);
    if g.f16 {
        attention_on(&other);
    }
}

fn attention_on(g: &Gpu) {
    let mut rng = Rng(5);
    let pool = ThreadPool::new(1);
    let (n_head, n_head_kv, hd) = (4usize, 2usize, 80usize);
    let (kd, qd) = (n_head_kv * hd, n_head * hd);
    // (n_slots, cap, ring, window, queries)
    let cases: Vec<(usize, usize, bool, Option<usize>, Vec<QueryPos>)> = vec![
        (2, 64, false, None, (0..5).map(|i| QueryPos { slot: 1, pos: 20 + i, ring_lo: 0, batch_order: true }).chain([QueryPos { slot: 0, pos: 3, ring_lo: 0, batch_order: false }]).collect()),
        (1, 64, false, Some(8), (0..6).map(|i| QueryPos { slot: 0, pos: 30 + i, ring_lo: 0, batch_order: i % 2 == 0 }).collect()),
        (2, 24, true, Some(16), (0..4).map(|i| QueryPos { slot: 1, pos: 50 + i, ring_lo: 40, batch_order: true }).chain([QueryPos { slot: 0, pos: 9, ring_lo: 0, batch_order: true }]).collect()),
    ];
    for (ci, (n_slots, cap, ring, window, queries)) in cases.into_iter().enumerate() {
        let n = queries.len();
        // a cache filled with history, then this batch's rows stored by both sides
        let mut kc: Vec<u16> = (0..n_slots * cap * kd).map(|_| f32_to_f16(rng.sym())).collect();
        let mut vc: Vec<u16> = (0..n_slots * cap * kd).map(|_| f32_to_f16(rng.sym())).collect();
        let knew: Vec<f32> = (0..n * kd).map(|_| rng.sym()).collect();
        let vnew: Vec<f32> = (0..n * kd).map(|_| rng.sym()).collect();
        let q: Vec<f32> = (0..n * qd).map(|_| 2.0 * rng.sym()).collect();
        let kcb = g.upload("k", bytemuck::cast_slice(&kc)).unwrap();
        let vcb = g.upload("v", bytemuck::cast_slice(&vc)).unwrap();
        for (t, qp) in queries.iter().enumerate() {
            let r = qp.slot * cap + qp.pos % cap;
            for d in 0..kd {
                kc[r * kd + d] = f32_to_f16(knew[t * kd + d]);
                vc[r * kd + d] = f32_to_f16(vnew[t * kd + d]);
            }
        }
        // with and without a sink logit per head (gpt-oss)
        let sink_vals: Vec<f32> = (0..n_head).map(|h| 1.5 - h as f32).collect();
        for sinks in [None, Some(&sink_vals[..])] {
            let sinks_b = sinks.map(|v| f32_buf(&g, v));
            let shape = AttnShape { n_head, n_head_kv, head_dim: hd, v_head_dim: hd, scale: 0.125, window, softcap: 0.0, sinks };
            let mut want = vec![0f32; n * qd];
            let kf16 = crate::kv_cache::KvType::F16;
            let rows = KvRows { k: &kc, v: &vc, k_type: kf16, v_type: kf16, k_units: kd, v_units: kd, cap, ring };
            cpu_attention(&pool, &shape, &q, &rows, &queries, &mut want);
            let l = queries
                .iter()
                .map(|p| {
                    let lo = window.map(|w| (p.pos + 1).saturating_sub(w)).unwrap_or(0);
                    let lo = if ring { lo.max(p.ring_lo.min(p.pos)) } else { lo };
                    p.pos + 1 - lo
                })
                .max()
                .unwrap_or(0);
            let s = StepSize { n_tok: n as u32, n_sel: 0, l_full: l as u32, l_swa: l as u32 };
            let sb = step(&g, &s);
            let tm: Vec<u32> = queries.iter().flat_map(|p| [p.slot as u32, p.pos as u32, p.ring_lo as u32, (p.batch_order as u32) << 2]).collect();
            let tmb = g.upload("tm", bytemuck::cast_slice(&tm)).unwrap();
            let (kb, vb, qb) = (f32_buf(&g, &knew), f32_buf(&g, &vnew), f32_buf(&g, &q));
            let scb = g.zeros("scores", (n * n_head * l * 4) as u64).unwrap();
            let ob = g.zeros("out", (n * qd * 4) as u64).unwrap();
            let desc = AttnDesc { n_head, n_head_kv, head_dim: hd, v_head_dim: hd, cap, ring, window: window.unwrap_or(0), swa: window.is_some(), scale: 0.125, softcap: 0.0 };
            let mut ops = vec![kvstore::op_store(&g, &kcb, &kb, &tmb, kd, cap, &sb).unwrap(), kvstore::op_store(&g, &vcb, &vb, &tmb, kd, cap, &sb).unwrap()];
            ops.extend(attention::ops(&g, &desc, &AttnBufs { q: &qb, k: &kcb, v: &vcb, scores: &scb, out: &ob, tm: &tmb, sinks: sinks_b.as_ref() }, &sb).unwrap());
            run(&g, &ops, &s);
            // the stored cache rows are the CPU's bytes
            let mut kdev = vec![0u16; kc.len()];
            g.read(&kcb, 0, (kc.len() * 2) as u64, bytemuck::cast_slice_mut(&mut kdev)).unwrap();
            assert_eq!(kdev, kc, "case {ci}: K cache rows");
            let got = read(&g, &ob, n * qd);
            for (i, (&a, &b)) in got.iter().zip(&want).enumerate() {
                // the sink's exp is the device's, so not always the CPU's last bit
                let t = if sinks.is_some() { ATTN_ABS } else { tol(&g, ATTN_ABS) };
                assert!((a - b).abs() <= t, "case {ci} (f16 {}, sinks {}) attention[{i}]: gpu {a} vs cpu {b}", g.f16, sinks.is_some());
            }
        }
    }
}

#[test]
fn unknown_device_is_a_typed_error() {
    match device::open(Some("NoSuchDevice7"), 0) {
        Err(crate::Error::InvalidRequest(m)) => assert!(m.contains("NoSuchDevice7") && m.contains("available"), "{m}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("a device that does not exist was opened"),
    }
    let _ = GgmlType::F32;
}

/// Run a one-entry WGSL kernel `main` over `n` invocations: binding 0 = input words, binding 1 = output words.
fn run_wgsl(g: &Gpu, src: &str, input: &[u32], n_out: usize, n: u32) -> Vec<u32> {
    let module = g.device.create_shader_module(wgpu::ShaderModuleDescriptor { label: None, source: wgpu::ShaderSource::Wgsl(src.into()) });
    let pipe = g.device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor { label: None, layout: None, module: &module, entry_point: Some("main"), compilation_options: Default::default(), cache: None });
    let inb = g.upload("in", bytemuck::cast_slice(input)).unwrap();
    let outb = g.zeros("out", (n_out * 4) as u64).unwrap();
    let bgl = pipe.get_bind_group_layout(0);
    let st = step(g, &size(1));
    let bind = g.device.create_bind_group(&wgpu::BindGroupDescriptor { label: None, layout: &bgl, entries: &[wgpu::BindGroupEntry { binding: 0, resource: inb.as_entire_binding() }, wgpu::BindGroupEntry { binding: 1, resource: outb.as_entire_binding() }, wgpu::BindGroupEntry { binding: 2, resource: st.as_entire_binding() }] });
    let mut enc = g.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        pass.set_pipeline(&pipe);
        pass.set_bind_group(0, &bind, &[]);
        pass.dispatch_workgroups(n.div_ceil(64).min(65535), n.div_ceil(64).div_ceil(65535), 1);
    }
    g.queue.submit([enc.finish()]);
    let mut out = vec![0u32; n_out];
    g.read(&outb, 0, (n_out * 4) as u64, bytemuck::cast_slice_mut(&mut out)).unwrap();
    out
}

/// The fused multiply-add the kernels use (`fmaf`: the device's, or its emulation where
/// the device's rounds twice, as lavapipe's does) rounds once, on a million cases where one
/// and two roundings differ often.
#[test]
fn kernels_fma_rounds_once() {
    let Some(g) = gpu() else { return };
    eprintln!("{}: fma {}", g.info.name, if g.fma_native { "native" } else { "emulated" });
    let require = std::env::var("LLAMARS_REQUIRE_GPU").is_ok_and(|v| v == "1");
    assert!(g.fma_exact || !require, "neither the device's fma nor its emulation rounds once");
    if !g.fma_exact {
        eprintln!("SKIPPED: this device's fma rounds twice and so does its emulation");
        return;
    }
    let n = 1u32 << 20;
    let mut rng = Rng(3);
    let mut v: Vec<f32> = Vec::with_capacity(3 * n as usize);
    for i in 0..n {
        let a = rng.sym() * 4.0;
        let b = (rng.next() % 20000) as f32 - 10000.0;
        let c = rng.sym() * 100.0;
        match i % 3 {
            0 => v.extend([a, b, c]),
            // c ≈ -a·b: cancellation
            1 => v.extend([a, b, -(a * b) * (1.0 + rng.sym() * 1e-6)]),
            _ => v.extend([a * 1e-3, rng.sym(), rng.sym() * 1e-3]),
        }
    }
    let fmaf = if g.fma_native { "fma(a, b, c)" } else { "fma_emulated(a, b, c)" };
    let src = format!("{}\n{}\nfn fmaf(a: f32, b: f32, c: f32) -> f32 {{ return {fmaf}; }}
@group(0) @binding(0) var<storage, read> A: array<f32>;
@group(0) @binding(1) var<storage, read_write> O: array<f32>;
@group(0) @binding(2) var<uniform> S: Step;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) gid: vec3<u32>) {{
  let i = gid.x + gid.y * 65535u * 64u;
  O[i] = fmaf(A[3u * i], A[3u * i + 1u], A[3u * i + 2u]);
}}", include_str!("kernels/common.wgsl"), include_str!("kernels/exact.wgsl"));
    let out = run_wgsl(&g, &src, bytemuck::cast_slice(&v), n as usize, n);
    let bad: Vec<usize> = (0..n as usize).filter(|&i| out[i] != v[3 * i].mul_add(v[3 * i + 1], v[3 * i + 2]).to_bits()).collect();
    assert!(bad.is_empty(), "{} of {n} fused multiply-adds rounded differently, first at {:?}", bad.len(), &v[3 * bad[0]..3 * bad[0] + 3]);
}
