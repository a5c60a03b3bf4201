//! One forward step of the offloaded layers: the plan (the layers' steps encoded as
//! kernels over the session's buffers, `model::plan`'s list walked as the CPU walks it)
//! and its execution as one command submission that reads back only the logits (or the
//! hidden rows asked for).
use super::acts::{Acts, Slot};
use super::kernels::attention::{self, AttnBufs, AttnDesc};
use super::kernels::eltwise::{op_ew, Ew};
use super::kernels::matmul::GpuWeight;
use super::kernels::moe::{self, IdIo};
use super::kernels::norm::op_norm;
use super::kernels::qmatmul::{int_act, op_quant, order_flags, Act};
use super::kernels::rope::op_rope;
use super::kernels::{embed, kvstore, Op, StepSize};
use super::kv_device::KvDevice;
use super::offload::{f32_bytes, Dev, Offload};
use super::StepIo;
use crate::cpu::attention::QueryPos;
use crate::cpu::ops::rope_cache;
use crate::error::{Error, Result};
use crate::kv_cache::KvStore;
use crate::model::orders::Masks;
use crate::model::plan::{Buf, Step};
use crate::model::{Activation, ExpertAct, Model};

pub(super) struct Plan {
    embed: Vec<Op>,
    layers: Vec<Op>,
    /// gather the selected rows into H and normalise them
    head: Vec<Op>,
    /// the output matrix over H into LOGITS
    logits: Vec<Op>,
}

impl Offload {
    fn build_plan(&self, m: &Model, a: &Acts, kvd: &KvDevice, kv: &KvStore) -> Result<Plan> {
        let c = &m.config;
        let g = &*self.gpu;
        let b = &a.bufs;
        let s = &a.step;
        let (e, hd, vhd) = (c.n_embd, c.head_dim, c.v_head_dim);
        let (kd, vd) = (c.n_head_kv * hd, c.n_head_kv * vhd);
        let half = c.n_rot / 2;
        let dummy = &b[Slot::Dummy];
        // integer dots against quantized activations where the type has them (the CPU
        // path's numerics), else f32; LLAMARS_GPU_MATMUL=f32 takes the f32 path everywhere
        let int_dot = std::env::var("LLAMARS_GPU_MATMUL").map_or(true, |v| v != "f32");
        let mm = |w: &GpuWeight, x: Slot, y: Slot, sel: bool, ops: &mut Vec<Op>| -> Result<()> {
            if let Some(act) = int_act(w.ty).filter(|_| int_dot) {
                let qa = &b[if act == Act::Q8_0 { Slot::ActQ8_0 } else { Slot::ActQ8K }];
                ops.push(op_quant(g, act, &b[x], qa, w.n_in, sel, s)?);
                ops.extend(w.qops(g, qa, &b[y], &b[if sel { Slot::SelFlags } else { Slot::Flags }], s, sel)?);
                return Ok(());
            }
            for (small, big) in w.ops(g, &b[x], &b[y], s, sel)? {
                ops.push(small);
                ops.push(big);
            }
            Ok(())
        };
        let mut embed_ops = Vec::new();
        if self.embed_on_device {
            embed_ops = embed::ops(g, &self.output, &b[Slot::Tok], &b[Slot::X], c.embd_scale, s)?;
        }
        let mut ops = Vec::new();
        let slot = |b: Buf| match b {
            Buf::X => Slot::X,
            Buf::H => Slot::H,
            Buf::Q => Slot::Q,
            Buf::K => Slot::K,
            Buf::V => Slot::V,
            Buf::Attn => Slot::Attn,
            Buf::O => Slot::O,
            Buf::Gate => Slot::Gate,
            Buf::Up => Slot::Up,
            Buf::Router => Slot::Router,
        };
        for (j, gl) in self.layers.iter().enumerate() {
            let il = self.first + j;
            let steps = m.layer_steps(il);
            if steps.len() != gl.devs.len() {
                return Err(Error::Gpu(format!("blk.{il}: the device copy does not match the layer's steps")));
            }
            for (step, dev) in steps.into_iter().zip(&gl.devs) {
                match (step, dev) {
                    (Step::Norm { src, dst, width, groups, .. }, Dev::V(w)) => {
                        let from = if src == dst { None } else { Some(&b[slot(src)]) };
                        ops.push(op_norm(g, &b[slot(dst)], from, w, dummy, width, groups, c.rms_eps, false, s)?);
                    }
                    (Step::MatMul { src, dst, .. }, Dev::W(w)) => mm(w, slot(src), slot(dst), false, &mut ops)?,
                    (Step::AddBias { dst, b: bias, .. }, Dev::V(bb)) => ops.push(op_ew(g, Ew::AddRow, &b[slot(dst)], bb, dummy, bias.len(), false, s)?),
                    (Step::Rope { swa }, _) => {
                        let cs = if swa { &b[Slot::CsSwa] } else { &b[Slot::CsFull] };
                        ops.push(op_rope(g, &b[Slot::Q], cs, c.n_head, hd, c.n_rot, c.rope_neox, a.cap * half, s)?);
                        ops.push(op_rope(g, &b[Slot::K], cs, c.n_head_kv, hd, c.n_rot, c.rope_neox, a.cap * half, s)?);
                    }
                    (Step::Scale { buf, s: k, width }, _) => ops.push(op_ew(g, Ew::Scale(k), &b[slot(buf)], dummy, dummy, width, false, s)?),
                    (Step::Attention { swa, sinks }, dev) => {
                        let sinks = match (sinks, dev) {
                            (None, _) => None,
                            (Some(_), Dev::V(v)) => Some(v),
                            _ => return Err(Error::Gpu(format!("blk.{il}: the attention sinks are not on the device"))),
                        };
                        let cap = kv.layers[il].cap;
                        ops.push(kvstore::op_store(g, &kvd.k[j], &b[Slot::K], &b[Slot::Tm], kd, cap, s)?);
                        ops.push(kvstore::op_store(g, &kvd.v[j], &b[Slot::V], &b[Slot::Tm], vd, cap, s)?);
                        let desc = AttnDesc {
                            n_head: c.n_head,
                            n_head_kv: c.n_head_kv,
                            head_dim: hd,
                            v_head_dim: vhd,
                            cap,
                            ring: !kv.is_full(il),
                            window: if swa { c.sliding_window } else { 0 },
                            swa,
                            scale: c.kq_scale,
                            softcap: 0.0,
                        };
                        let ab = AttnBufs { q: &b[Slot::Q], k: &kvd.k[j], v: &kvd.v[j], scores: &b[Slot::Scores], out: &b[Slot::Attn], tm: &b[Slot::Tm], sinks };
                        ops.extend(attention::ops(g, &desc, &ab, s)?);
                    }
                    (Step::Residual { src }, _) => ops.push(op_ew(g, Ew::Add, &b[Slot::X], &b[slot(src)], dummy, e, false, s)?),
                    (Step::GatedAct { act, width }, _) => {
                        let act = match act {
                            Activation::GeluTanh => Ew::Geglu,
                            Activation::Silu => Ew::Swiglu,
                        };
                        ops.push(op_ew(g, act, &b[Slot::Gate], &b[Slot::Up], &b[Slot::Gelu], width, false, s)?);
                    }
                    (Step::AttnTemp, _) => {
                        return Err(Error::NotSupported(format!("blk.{il}: the attention temperature does not run on the GPU yet")))
                    }
                    (Step::SigmoidGate { buf, gate, width }, _) => ops.push(op_ew(g, Ew::SigmoidGate, &b[slot(buf)], &b[slot(gate)], dummy, width, false, s)?),
                    (Step::Moe { src, dst, add, .. }, Dev::Moe(d)) => {
                        let Some(mc) = &c.moe else {
                            return Err(Error::Internal(format!("blk.{il}: an expert layer in a model without expert settings")));
                        };
                        let (k, fe) = (mc.n_used, mc.n_ff_exp);
                        let (ids, wts) = (&b[Slot::MoeIds], &b[Slot::MoeWts]);
                        ops.push(moe::op_route(g, mc, &b[Slot::Router], wts, ids, dummy, s)?);
                        let x = IdIo { x: &b[slot(src)], y: &b[Slot::MoeUp], ids, group: &b[Slot::MoeGroup], bias: None, dummy, k, x_per_pair: false };
                        let up_into = if d.gate.is_some() { Slot::MoeUp } else { Slot::MoeGate };
                        ops.extend(d.up.id_ops(g, fe, &IdIo { y: &b[up_into], bias: d.up_b.as_ref(), ..x }, s)?);
                        match &d.gate {
                            Some(gw) => {
                                ops.extend(gw.id_ops(g, fe, &IdIo { y: &b[Slot::MoeGate], bias: d.gate_b.as_ref(), ..x }, s)?);
                                let act = match mc.act {
                                    ExpertAct::Swiglu => Ew::Swiglu,
                                    ExpertAct::SwigluOai { alpha, limit } => Ew::SwigluOai { alpha, limit },
                                };
                                ops.push(op_ew(g, act, &b[Slot::MoeGate], &b[Slot::MoeUp], dummy, k * fe, false, s)?);
                            }
                            None => ops.push(op_ew(g, Ew::Silu, &b[Slot::MoeGate], dummy, dummy, k * fe, false, s)?),
                        }
                        let down = IdIo { x: &b[Slot::MoeGate], y: &b[Slot::MoeOut], bias: d.down_b.as_ref(), x_per_pair: true, ..x };
                        ops.extend(d.down.id_ops(g, e, &down, s)?);
                        ops.push(moe::op_combine(g, k, e, add, &b[Slot::MoeOut], wts, ids, &b[slot(dst)], s)?);
                    }
                    (Step::Tap { .. }, _) => {}
                    (Step::LayerNorm { .. } | Step::Act { .. }, _) => {
                        return Err(Error::NotSupported(format!("blk.{il}: LayerNorm and ungated activations (encoder layers) do not run on the GPU yet")))
                    }
                    _ => return Err(Error::Gpu(format!("blk.{il}: a step without its device weights"))),
                }
            }
        }
        let head = vec![
            op_ew(g, Ew::Gather, &b[Slot::H], &b[Slot::X], &b[Slot::Sel], e, true, s)?,
            op_norm(g, &b[Slot::H], None, &self.out_norm, dummy, e, 1, c.rms_eps, true, s)?,
        ];
        let mut logits = Vec::new();
        mm(&self.output, Slot::H, Slot::Logits, true, &mut logits)?;
        Ok(Plan { embed: embed_ops, layers: ops, head, logits })
    }

    /// Run the device layers and the output layer for one batch. `queries` and `sel` are
    /// the CPU pass's (per-token positions, rows asked for); `out` receives logits
    /// [sel, n_vocab], or the final-normed hidden rows [sel, n_embd] when `hidden`.
    #[allow(clippy::too_many_arguments)]
    pub fn forward(
        &self,
        m: &Model,
        acts: &mut Option<Acts>,
        kv: &mut KvStore,
        tokens: &[u32],
        queries: &[QueryPos],
        masks: &Masks,
        sel: &[usize],
        input: StepIo<'_>,
        hidden: bool,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let c = &m.config;
        let g = &*self.gpu;
        let n = tokens.len();
        let nr = sel.len();
        // key ranges the attention passes see (same rule as attention.wgsl `key_range`)
        let swa_layer = (self.first..c.n_layer).find(|&il| c.is_swa(il));
        let ring = swa_layer.is_some_and(|il| !kv.is_full(il));
        let (mut l_full, mut l_swa) = (0usize, 0usize);
        for q in queries {
            l_full = l_full.max(q.pos + 1);
            let mut lo = if c.sliding_window > 0 { (q.pos + 1).saturating_sub(c.sliding_window) } else { 0 };
            if ring {
                lo = lo.max(q.ring_lo.min(q.pos));
            }
            l_swa = l_swa.max(q.pos + 1 - lo);
        }
        let score_need = n * c.n_head * l_full.max(l_swa);
        // rows of logits per output pass: what one binding holds
        let width = if hidden { c.n_embd } else { c.n_vocab };
        let bind_rows = ((g.limits.max_storage_buffer_binding_size.min(1 << 31) as usize) / (4 * c.n_vocab.max(c.n_embd))).max(1);
        let sel_need = nr.clamp(1, bind_rows);
        let grow = match acts {
            Some(a) => a.cap < n || a.sel_cap < sel_need || a.score_cap < score_need,
            None => true,
        };
        if grow {
            let (pc, ps, pq) = acts.as_ref().map(|a| (a.cap, a.sel_cap, a.score_cap)).unwrap_or((0, 0, 0));
            *acts = None;
            *acts = Some(Acts::new(g, c, n.max(pc), sel_need.max(ps), score_need.max(pq).max(1))?);
        }
        let Some(a) = acts.as_mut() else { return Err(Error::Gpu("activations missing".into())) };
        let kv_ok = kv.dev.as_ref().is_some_and(|d| d.owner == self.id);
        if !kv_ok {
            if kv.k_type != crate::kv_cache::KvType::F16 || kv.v_type != crate::kv_cache::KvType::F16 {
                return Err(Error::NotSupported(format!(
                    "a {}/{} KV cache runs on the CPU path only: start without GPU offload (-ngl 0), or with -ctk f16 -ctv f16",
                    kv.k_type.name(),
                    kv.v_type.name()
                )));
            }
            kv.dev = Some(KvDevice::new(self, &kv.layers)?);
        }
        let Some(kvd) = kv.dev.as_ref() else { return Err(Error::Gpu("KV cache missing".into())) };
        if a.plan.as_ref().is_none_or(|(gen, kid, _)| *gen != a.gen || *kid != kvd.id) {
            let plan = self.build_plan(m, a, kvd, kv)?;
            a.plan = Some((a.gen, kvd.id, plan));
        }
        // per-step inputs
        let q = &g.queue;
        // per token: slot, position, ring start, attention order (bit 2); matmul orders
        let tm: Vec<u32> = queries.iter().flat_map(|p| [p.slot as u32, p.pos as u32, p.ring_lo as u32, (p.batch_order as u32) << 2]).collect();
        q.write_buffer(&a.bufs[Slot::Tm], 0, bytemuck::cast_slice(&tm));
        let fl: Vec<u32> = (0..n).map(|t| order_flags(masks.q4_k.get(t) == Some(&true), masks.tiled.get(t) == Some(&true))).collect();
        q.write_buffer(&a.bufs[Slot::Flags], 0, bytemuck::cast_slice(&fl));
        q.write_buffer(&a.bufs[Slot::Tok], 0, bytemuck::cast_slice(tokens));
        let half = c.n_rot / 2;
        if half > 0 {
            let (mut cos, mut sin) = (vec![0f32; half], vec![0f32; half]);
            for (slot, swa) in [(Slot::CsFull, false), (Slot::CsSwa, true)] {
                let rp = c.rope_params(swa, m.rope_freqs.as_deref());
                let mut tab = vec![0f32; 2 * a.cap * half];
                for (t, qp) in queries.iter().enumerate() {
                    rope_cache(qp.pos, &rp, &mut cos, &mut sin);
                    tab[t * half..(t + 1) * half].copy_from_slice(&cos);
                    tab[a.cap * half + t * half..a.cap * half + (t + 1) * half].copy_from_slice(&sin);
                }
                q.write_buffer(&a.bufs[slot], 0, f32_bytes(&tab));
            }
        }
        if let StepIo::Hidden(x) = input {
            q.write_buffer(&a.bufs[Slot::X], 0, f32_bytes(&x[..n * c.n_embd]));
        } else if !self.embed_on_device {
            return Err(Error::Gpu("the token embeddings are not on the device".into()));
        }
        let Some((_, _, plan)) = a.plan.as_ref() else { return Err(Error::Gpu("no plan".into())) };
        out.clear();
        out.resize(nr * width, 0.0);
        let mut done = 0;
        let mut first_pass = true;
        while first_pass || done < nr {
            let rows = (nr - done).min(a.sel_cap);
            let size = StepSize { n_tok: n as u32, n_sel: rows as u32, l_full: l_full as u32, l_swa: l_swa as u32 };
            q.write_buffer(&a.step, 0, &size.bytes());
            let sel32: Vec<u32> = sel[done..done + rows].iter().map(|&r| r as u32).collect();
            if !sel32.is_empty() {
                q.write_buffer(&a.bufs[Slot::Sel], 0, bytemuck::cast_slice(&sel32));
                let sf: Vec<u32> = (done..done + rows).map(|r| order_flags(masks.out_q4_k.get(r) == Some(&true), masks.out_tiled.get(r) == Some(&true))).collect();
                q.write_buffer(&a.bufs[Slot::SelFlags], 0, bytemuck::cast_slice(&sf));
            }
            let mut enc = g.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                if first_pass {
                    if matches!(input, StepIo::Tokens) {
                        plan.embed.iter().for_each(|o| o.encode(&mut pass, &size));
                    }
                    plan.layers.iter().for_each(|o| o.encode(&mut pass, &size));
                }
                if rows > 0 {
                    plan.head.iter().for_each(|o| o.encode(&mut pass, &size));
                    if !hidden {
                        plan.logits.iter().for_each(|o| o.encode(&mut pass, &size));
                    }
                }
            }
            let bytes = (rows * width * 4) as u64;
            if rows > 0 {
                if a.staging.as_ref().is_none_or(|(sz, _)| *sz < bytes) {
                    a.staging = Some((bytes, g.staging(bytes)?));
                }
                let Some((_, st)) = a.staging.as_ref() else { return Err(Error::Gpu("no read-back buffer".into())) };
                enc.copy_buffer_to_buffer(&a.bufs[if hidden { Slot::H } else { Slot::Logits }], 0, st, 0, bytes);
                g.queue.submit([enc.finish()]);
                let dst: &mut [u8] = bytemuck::cast_slice_mut(&mut out[done * width..(done + rows) * width]);
                g.map_into(st, bytes, dst)?;
            } else {
                g.queue.submit([enc.finish()]);
                g.device
                    .poll(wgpu::PollType::wait_indefinitely())
                    .map_err(|e| Error::Gpu(format!("{}: waiting for the device failed: {e}", g.info.name)))?;
            }
            done += rows;
            first_pass = false;
        }
        Ok(())
    }
}
