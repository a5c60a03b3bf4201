//! Layer offload: the last layers and the output layer of a model resident on the device
//! (llama.cpp's placement: `-ngl N` puts the output layer and the last N-1 layers there),
//! the device half of a KV cache, per-session activations, and one forward step encoded
//! as one command submission that reads back only logits (or the hidden rows asked for).
use super::device::Gpu;
use super::StepIo;
use super::kernels::attention::{self, AttnBufs, AttnDesc};
use super::kernels::eltwise::{gelu_table_bytes, op_ew, Ew};
use super::kernels::matmul::GpuWeight;
use super::kernels::norm::op_norm;
use super::kernels::qmatmul::{int_act, op_quant, order_flags, Act};
use super::kernels::rope::op_rope;
use super::kernels::{embed, kvstore, Op, StepSize};
use crate::cpu::attention::QueryPos;
use crate::cpu::ops::rope_cache;
use crate::cpu::Weight;
use crate::error::{Error, Result};
use crate::kv_cache::{KvStore, LayerKv};
use crate::model::orders::Masks;
use crate::model::plan::{Buf, Step};
use crate::model::{Activation, Config, Model};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What the device holds for one step of a layer (`model::plan`): the weight rows of a
/// matrix product, the vector of a norm or bias, or nothing.
enum Dev {
    None,
    W(GpuWeight),
    V(wgpu::Buffer),
}

/// A layer on the device: one entry per step of `Model::layer_steps`, in step order.
struct GLayer {
    devs: Vec<Dev>,
}
/// The part of a model held by the device.
pub struct Offload {
    pub gpu: Arc<Gpu>,
    /// First layer on the device (layers before it run on the CPU).
    pub first: usize,
    /// Layers offloaded, counted as llama.cpp does (the output layer is one of them).
    pub n_offloaded: usize,
    /// Bytes of weights uploaded.
    pub weight_bytes: usize,
    layers: Vec<GLayer>,
    out_norm: wgpu::Buffer,
    output: GpuWeight,
    /// The token embeddings are the output matrix (tied) and every layer is offloaded:
    /// the lookup runs on the device.
    embed_on_device: bool,
    id: u64,
}

fn f32_bytes(v: &[f32]) -> &[u8] {
    bytemuck::cast_slice(v)
}

fn up_vec(gpu: &Gpu, name: &str, v: &[f32]) -> Result<wgpu::Buffer> {
    gpu.upload(name, f32_bytes(v))
}

fn up_w(gpu: &Gpu, name: &str, w: &Weight, r_lo: usize, r_hi: usize) -> Result<GpuWeight> {
    GpuWeight::upload(gpu, name, w.ty, w.n_in, w.bytes(), r_lo, r_hi)
}

fn next_id() -> u64 {
    static N: AtomicU64 = AtomicU64::new(1);
    N.fetch_add(1, Ordering::Relaxed)
}

impl Offload {
    /// Upload the output layer and the last `n_gpu_layers - 1` layers (all of them when
    /// `n_gpu_layers > n_layer`). `progress(done, total)` is called after each layer.
    pub fn new(gpu: Arc<Gpu>, m: &Model, n_gpu_layers: usize, progress: &mut dyn FnMut(usize, usize)) -> Result<Offload> {
        let c = &m.config;
        let n_layer = c.n_layer;
        let n_offloaded = n_gpu_layers.min(n_layer + 1);
        if n_offloaded == 0 {
            return Err(Error::InvalidRequest("n_gpu_layers: 0 layers to offload".into()));
        }
        let first = n_layer + 1 - n_offloaded;
        if c.head_dim > 512 || c.head_dim % 2 != 0 || c.v_head_dim % 2 != 0 {
            return Err(Error::NotSupported(format!("GPU attention needs an even head size of at most 512 (this model: {})", c.head_dim)));
        }
        let g = &*gpu;
        let mut layers = Vec::new();
        for il in first..n_layer {
            let mut devs = Vec::new();
            for step in m.layer_steps(il) {
                devs.push(match step {
                    Step::MatMul { w, lo, hi, name, .. } => Dev::W(up_w(g, &format!("blk.{il}.{name}"), w, lo, hi)?),
                    Step::Norm { w, name, .. } | Step::AddBias { b: w, name, .. } => Dev::V(up_vec(g, &format!("blk.{il}.{name}"), w)?),
                    _ => Dev::None,
                });
            }
            layers.push(GLayer { devs });
            progress(il + 1 - first, n_offloaded);
        }
        let output = up_w(g, "output", &m.output, 0, m.output.n_out)?;
        let out_norm = up_vec(g, "output_norm", &m.output_norm)?;
        progress(n_offloaded, n_offloaded);
        let tied = std::ptr::eq(m.output.bytes().as_ptr(), m.tok_embd.bytes().as_ptr());
        let weight_bytes = output.bytes()
            + layers.iter().flat_map(|l| &l.devs).map(|d| if let Dev::W(w) = d { w.bytes() } else { 0 }).sum::<usize>();
        Ok(Offload { gpu, first, n_offloaded, weight_bytes, layers, out_norm, output, embed_on_device: tied && first == 0, id: next_id() })
    }

    pub fn embeds_on_device(&self) -> bool {
        self.embed_on_device
    }

    pub fn first_layer(&self) -> usize {
        self.first
    }

    pub fn n_offloaded(&self) -> usize {
        self.n_offloaded
    }

    pub fn device_name(&self) -> String {
        self.gpu.info.name.clone()
    }
}

/// The device's copy of a KV cache's offloaded layers (same f16 bytes as the host rows).
pub struct KvDevice {
    gpu: Arc<Gpu>,
    id: u64,
    owner: u64,
    first: usize,
    k: Vec<wgpu::Buffer>,
    v: Vec<wgpu::Buffer>,
}

impl KvDevice {
    fn new(off: &Offload, layers: &[LayerKv]) -> Result<KvDevice> {
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for (il, l) in layers.iter().enumerate().skip(off.first) {
            k.push(off.gpu.upload(&format!("KV cache K of layer {il}"), bytemuck::cast_slice(&l.k))?);
            v.push(off.gpu.upload(&format!("KV cache V of layer {il}"), bytemuck::cast_slice(&l.v))?);
        }
        Ok(KvDevice { gpu: off.gpu.clone(), id: next_id(), owner: off.id, first: off.first, k, v })
    }

    /// Copy the device rows into the host mirror (before host-side cache operations).
    pub fn download(&self, layers: &mut [LayerKv], pick: &dyn Fn(usize) -> bool) -> Result<()> {
        for (i, l) in layers.iter_mut().enumerate().skip(self.first).filter(|(i, _)| pick(*i)) {
            let j = i - self.first;
            for (buf, host) in [(&self.k[j], &mut l.k), (&self.v[j], &mut l.v)] {
                let bytes: &mut [u8] = bytemuck::cast_slice_mut(host.as_mut_slice());
                let n = bytes.len() as u64;
                self.gpu.read(buf, 0, n, bytes)?;
            }
        }
        Ok(())
    }

    /// Copy the host mirror to the device (after host-side cache operations).
    pub fn upload(&self, layers: &[LayerKv], pick: &dyn Fn(usize) -> bool) -> Result<()> {
        for (i, l) in layers.iter().enumerate().skip(self.first).filter(|(i, _)| pick(*i)) {
            let j = i - self.first;
            self.gpu.queue.write_buffer(&self.k[j], 0, bytemuck::cast_slice(&l.k));
            self.gpu.queue.write_buffer(&self.v[j], 0, bytemuck::cast_slice(&l.v));
        }
        self.gpu.queue.submit([]);
        Ok(())
    }

    pub fn bytes(&self) -> u64 {
        self.k.iter().chain(&self.v).map(|b| b.size()).sum()
    }
}

/// Activation buffers of one session on the device, and the encoded plan over them.
pub struct Acts {
    cap: usize,
    sel_cap: usize,
    score_cap: usize,
    bufs: Vec<wgpu::Buffer>,
    step: wgpu::Buffer,
    staging: Option<(u64, wgpu::Buffer)>,
    plan: Option<(u64, u64, Plan)>,
    gen: u64,
}

// indices into Acts::bufs
const X: usize = 0;
const H: usize = 1;
const Q: usize = 2;
const K: usize = 3;
const V: usize = 4;
const ATTN: usize = 5;
const O: usize = 6;
const GATE: usize = 7;
const UP: usize = 8;
const TM: usize = 9;
const TOK: usize = 10;
const SEL: usize = 11;
const CS_FULL: usize = 12;
const CS_SWA: usize = 13;
const SCORES: usize = 14;
const LOGITS: usize = 15;
const DUMMY: usize = 16;
const QA8_0: usize = 17;
const QA8_K: usize = 18;
const FLAGS: usize = 19;
const SEL_FLAGS: usize = 20;
const GELU: usize = 21;

struct Plan {
    embed: Vec<Op>,
    layers: Vec<Op>,
    /// gather the selected rows into H and normalise them
    head: Vec<Op>,
    /// the output matrix over H into LOGITS
    logits: Vec<Op>,
}

impl Acts {
    fn new(gpu: &Gpu, c: &Config, cap: usize, sel_cap: usize, score_cap: usize) -> Result<Acts> {
        let f4 = |n: usize| (n * 4) as u64;
        let (e, qd, kd, vd, ad) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim, c.n_head * c.v_head_dim);
        let half = c.n_rot / 2;
        // widest input of any matrix product
        let max_in = e.max(ad).max(c.n_ff);
        let sizes = [
            f4(cap * e),
            f4(cap * e.max(ad)),
            f4(cap * qd),
            f4(cap * kd),
            f4(cap * vd),
            f4(cap * ad),
            f4(cap * e),
            f4(cap * c.n_ff),
            f4(cap * c.n_ff),
            (cap * 16) as u64,
            f4(cap),
            f4(sel_cap),
            f4(2 * cap * half),
            f4(2 * cap * half),
            f4(score_cap),
            f4(sel_cap * c.n_vocab.max(e)),
            16,
            f4(cap * Act::Q8_0.row_words(max_in)),
            f4(cap * Act::Q8K.row_words(max_in)),
            f4(cap),
            f4(sel_cap),
            gelu_table_bytes().len() as u64,
        ];
        let names = [
            "x",
            "h",
            "q",
            "k",
            "v",
            "attn",
            "o",
            "gate",
            "up",
            "token positions",
            "tokens",
            "selected rows",
            "rope table",
            "rope table (sliding window)",
            "attention scores",
            "logits",
            "placeholder",
            "Q8_0 activations",
            "Q8_K activations",
            "matmul orders",
            "matmul orders (selected rows)",
            "GELU table",
        ];
        let mut bufs = Vec::with_capacity(sizes.len());
        for (s, n) in sizes.iter().zip(names) {
            bufs.push(gpu.zeros(&format!("activations: {n}"), *s)?);
        }
        gpu.queue.write_buffer(&bufs[GELU], 0, gelu_table_bytes());
        let step = gpu.checked("allocating the step uniform", || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor { label: Some("step"), size: 16, usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false })
        })?;
        Ok(Acts { cap, sel_cap, score_cap, bufs, step, staging: None, plan: None, gen: next_id() })
    }
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
        let dummy = &b[DUMMY];
        // integer dots against quantized activations where the type has them (the CPU
        // path's numerics), else f32; LLAMARS_GPU_MATMUL=f32 takes the f32 path everywhere
        let int_dot = std::env::var("LLAMARS_GPU_MATMUL").map_or(true, |v| v != "f32");
        let mm = |w: &GpuWeight, x: usize, y: usize, sel: bool, ops: &mut Vec<Op>| -> Result<()> {
            if let Some(act) = int_act(w.ty).filter(|_| int_dot) {
                let qa = &b[if act == Act::Q8_0 { QA8_0 } else { QA8_K }];
                ops.push(op_quant(g, act, &b[x], qa, w.n_in, sel, s)?);
                ops.extend(w.qops(g, qa, &b[y], &b[if sel { SEL_FLAGS } else { FLAGS }], s, sel)?);
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
            embed_ops = embed::ops(g, &self.output, &b[TOK], &b[X], c.embd_scale, s)?;
        }
        let mut ops = Vec::new();
        let slot = |b: Buf| match b {
            Buf::X => X,
            Buf::H => H,
            Buf::Q => Q,
            Buf::K => K,
            Buf::V => V,
            Buf::Attn => ATTN,
            Buf::O => O,
            Buf::Gate => GATE,
            Buf::Up => UP,
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
                        let cs = if swa { &b[CS_SWA] } else { &b[CS_FULL] };
                        ops.push(op_rope(g, &b[Q], cs, c.n_head, hd, c.n_rot, c.rope_neox, a.cap * half, s)?);
                        ops.push(op_rope(g, &b[K], cs, c.n_head_kv, hd, c.n_rot, c.rope_neox, a.cap * half, s)?);
                    }
                    (Step::Scale { buf, s: k, width }, _) => ops.push(op_ew(g, Ew::Scale(k), &b[slot(buf)], dummy, dummy, width, false, s)?),
                    (Step::Attention { swa }, _) => {
                        let cap = kv.layers[il].cap;
                        ops.push(kvstore::op_store(g, &kvd.k[j], &b[K], &b[TM], kd, cap, s)?);
                        ops.push(kvstore::op_store(g, &kvd.v[j], &b[V], &b[TM], vd, cap, s)?);
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
                        let ab = AttnBufs { q: &b[Q], k: &kvd.k[j], v: &kvd.v[j], scores: &b[SCORES], out: &b[ATTN], tm: &b[TM] };
                        ops.extend(attention::ops(g, &desc, &ab, s)?);
                    }
                    (Step::Residual { src }, _) => ops.push(op_ew(g, Ew::Add, &b[X], &b[slot(src)], dummy, e, false, s)?),
                    (Step::GatedAct(act), _) => {
                        let act = match act {
                            Activation::GeluTanh => Ew::Geglu,
                            Activation::Silu => Ew::Swiglu,
                        };
                        ops.push(op_ew(g, act, &b[GATE], &b[UP], &b[GELU], c.n_ff, false, s)?);
                    }
                    (Step::Tap { .. }, _) => {}
                    _ => return Err(Error::Gpu(format!("blk.{il}: a step without its device weights"))),
                }
            }
        }
        let head = vec![
            op_ew(g, Ew::Gather, &b[H], &b[X], &b[SEL], e, true, s)?,
            op_norm(g, &b[H], None, &self.out_norm, dummy, e, 1, c.rms_eps, true, s)?,
        ];
        let mut logits = Vec::new();
        mm(&self.output, H, LOGITS, true, &mut logits)?;
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
        q.write_buffer(&a.bufs[TM], 0, bytemuck::cast_slice(&tm));
        let fl: Vec<u32> = (0..n).map(|t| order_flags(masks.q4_k.get(t) == Some(&true), masks.q6_k.get(t) == Some(&true))).collect();
        q.write_buffer(&a.bufs[FLAGS], 0, bytemuck::cast_slice(&fl));
        q.write_buffer(&a.bufs[TOK], 0, bytemuck::cast_slice(tokens));
        let half = c.n_rot / 2;
        if half > 0 {
            let (mut cos, mut sin) = (vec![0f32; half], vec![0f32; half]);
            for (slot, swa) in [(CS_FULL, false), (CS_SWA, true)] {
                let (base, scale) = if swa { (c.rope_base_swa, c.rope_freq_scale_swa) } else { (c.rope_base, c.rope_freq_scale) };
                let mut tab = vec![0f32; 2 * a.cap * half];
                for (t, qp) in queries.iter().enumerate() {
                    rope_cache(qp.pos, c.n_rot, base, scale, m.rope_freqs.as_deref(), &mut cos, &mut sin);
                    tab[t * half..(t + 1) * half].copy_from_slice(&cos);
                    tab[a.cap * half + t * half..a.cap * half + (t + 1) * half].copy_from_slice(&sin);
                }
                q.write_buffer(&a.bufs[slot], 0, f32_bytes(&tab));
            }
        }
        if let StepIo::Hidden(x) = input {
            q.write_buffer(&a.bufs[X], 0, f32_bytes(&x[..n * c.n_embd]));
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
                q.write_buffer(&a.bufs[SEL], 0, bytemuck::cast_slice(&sel32));
                let sf: Vec<u32> = (done..done + rows).map(|r| order_flags(masks.out_q4_k.get(r) == Some(&true), masks.out_q6_k.get(r) == Some(&true))).collect();
                q.write_buffer(&a.bufs[SEL_FLAGS], 0, bytemuck::cast_slice(&sf));
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
                enc.copy_buffer_to_buffer(&a.bufs[if hidden { H } else { LOGITS }], 0, st, 0, bytes);
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
