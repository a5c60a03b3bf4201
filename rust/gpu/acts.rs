//! A session's activation buffers on the device, named by `Slot`, and the plan encoded
//! over them (rebuilt when they grow or the KV cache changes).
use super::device::Gpu;
use super::kernels::eltwise::gelu_table_bytes;
use super::kernels::qmatmul::Act;
use super::offload::next_id;
use super::step::Plan;
use crate::error::Result;
use crate::model::Config;

/// The activation buffers of a session, by name (`Acts[Slot::X]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[allow(non_camel_case_types)]
pub(super) enum Slot {
    X,
    H,
    Q,
    K,
    V,
    Attn,
    O,
    Gate,
    Up,
    Router,
    Tm,
    Tok,
    Sel,
    CsFull,
    CsSwa,
    Scores,
    Logits,
    Dummy,
    ActQ8_0,
    ActQ8K,
    Flags,
    SelFlags,
    Gelu,
    MoeIds,
    MoeWts,
    MoeGate,
    MoeUp,
    MoeOut,
    MoeGroup,
}

impl Slot {
    pub(super) const ALL: [Slot; 29] = [
        Slot::X,
        Slot::H,
        Slot::Q,
        Slot::K,
        Slot::V,
        Slot::Attn,
        Slot::O,
        Slot::Gate,
        Slot::Up,
        Slot::Router,
        Slot::Tm,
        Slot::Tok,
        Slot::Sel,
        Slot::CsFull,
        Slot::CsSwa,
        Slot::Scores,
        Slot::Logits,
        Slot::Dummy,
        Slot::ActQ8_0,
        Slot::ActQ8K,
        Slot::Flags,
        Slot::SelFlags,
        Slot::Gelu,
        Slot::MoeIds,
        Slot::MoeWts,
        Slot::MoeGate,
        Slot::MoeUp,
        Slot::MoeOut,
        Slot::MoeGroup,
    ];

    /// What the buffer holds (its label in device errors).
    fn name(self) -> &'static str {
        match self {
            Slot::X => "x",
            Slot::H => "h",
            Slot::Q => "q",
            Slot::K => "k",
            Slot::V => "v",
            Slot::Attn => "attn",
            Slot::O => "o",
            Slot::Gate => "gate",
            Slot::Up => "up",
            Slot::Router => "router logits",
            Slot::Tm => "token positions",
            Slot::Tok => "tokens",
            Slot::Sel => "selected rows",
            Slot::CsFull => "rope table",
            Slot::CsSwa => "rope table (sliding window)",
            Slot::Scores => "attention scores",
            Slot::Logits => "logits",
            Slot::Dummy => "placeholder",
            Slot::ActQ8_0 => "Q8_0 activations",
            Slot::ActQ8K => "Q8_K activations",
            Slot::Flags => "matmul orders",
            Slot::SelFlags => "matmul orders (selected rows)",
            Slot::Gelu => "GELU table",
            Slot::MoeIds => "chosen experts",
            Slot::MoeWts => "expert weights",
            Slot::MoeGate => "expert gates",
            Slot::MoeUp => "expert ups",
            Slot::MoeOut => "expert outputs",
            Slot::MoeGroup => "pairs grouped by expert",
        }
    }
}

/// The buffers of every `Slot`, indexed by it.
pub(super) struct Bufs(Vec<wgpu::Buffer>);

impl std::ops::Index<Slot> for Bufs {
    type Output = wgpu::Buffer;
    fn index(&self, s: Slot) -> &wgpu::Buffer {
        &self.0[s as usize]
    }
}

/// Activation buffers of one session on the device, and the encoded plan over them.
pub struct Acts {
    pub(super) cap: usize,
    pub(super) sel_cap: usize,
    pub(super) score_cap: usize,
    pub(super) bufs: Bufs,
    pub(super) step: wgpu::Buffer,
    pub(super) staging: Option<(u64, wgpu::Buffer)>,
    pub(super) plan: Option<(u64, u64, Plan)>,
    pub(super) gen: u64,
}


impl Acts {
    pub(super) fn new(gpu: &Gpu, c: &Config, cap: usize, sel_cap: usize, score_cap: usize) -> Result<Acts> {
        let f4 = |n: usize| (n * 4) as u64;
        let (e, qd, kd, vd, ad) = (c.n_embd, c.n_head * c.head_dim, c.n_head_kv * c.head_dim, c.n_head_kv * c.v_head_dim, c.n_head * c.v_head_dim);
        let half = c.n_rot / 2;
        // the experts' (token, slot) pairs and their widths, the shared expert's width
        let (k, fe, fs) = c.moe.as_ref().map_or((0, 0, 0), |m| (m.n_used, m.n_ff_exp, m.n_ff_shexp));
        let ff = c.n_ff.max(fs);
        // widest input of any matrix product
        let max_in = e.max(ad).max(ff);
        let size = |s: Slot| -> u64 {
            match s {
                Slot::X => f4(cap * e),
                Slot::H => f4(cap * e.max(ad)),
                Slot::Q => f4(cap * qd),
                Slot::K => f4(cap * kd),
                Slot::V => f4(cap * vd),
                Slot::Attn => f4(cap * ad),
                Slot::O => f4(cap * e),
                Slot::Gate => f4(cap * ff),
                Slot::Up => f4(cap * ff),
                Slot::Router => f4(cap * c.moe.as_ref().map_or(1, |m| m.n_expert)),
                Slot::Tm => (cap * 16) as u64,
                Slot::Tok => f4(cap),
                Slot::Sel => f4(sel_cap),
                Slot::CsFull => f4(2 * cap * half),
                Slot::CsSwa => f4(2 * cap * half),
                Slot::Scores => f4(score_cap),
                Slot::Logits => f4(sel_cap * c.n_vocab.max(e)),
                Slot::Dummy => 16,
                Slot::ActQ8_0 => f4(cap * Act::Q8_0.row_words(max_in)),
                Slot::ActQ8K => f4(cap * Act::Q8K.row_words(max_in)),
                Slot::Flags => f4(cap),
                Slot::SelFlags => f4(sel_cap),
                Slot::Gelu => gelu_table_bytes().len() as u64,
                Slot::MoeIds | Slot::MoeWts => f4(cap * k),
                Slot::MoeGate | Slot::MoeUp => f4(cap * k * fe),
                Slot::MoeOut => f4(cap * k * e),
                Slot::MoeGroup => f4(super::kernels::moe::group_words(c.moe.as_ref().map_or(0, |m| m.n_expert), cap * k)),
            }
        };
        let mut bufs = Vec::with_capacity(Slot::ALL.len());
        for s in Slot::ALL {
            bufs.push(gpu.zeros(&format!("activations: {}", s.name()), size(s))?);
        }
        gpu.queue.write_buffer(&bufs[Slot::Gelu as usize], 0, gelu_table_bytes());
        let step = gpu.checked("allocating the step uniform", || {
            gpu.device.create_buffer(&wgpu::BufferDescriptor { label: Some("step"), size: 16, usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST, mapped_at_creation: false })
        })?;
        Ok(Acts { cap, sel_cap, score_cap, bufs: Bufs(bufs), step, staging: None, plan: None, gen: next_id() })
    }
}
