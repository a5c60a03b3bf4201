//! KV cache: tensor storage (`KvStore`, rows per layer and slot in the cache's K and V
//! types, f16 by default: `types.rs`) apart from the bookkeeping of which tokens each
//! slot's sequence holds (`cells::SeqCells`).
//!
//! Layout: every slot owns `slot_ctx` positions. A full-attention layer keeps one row
//! per position (row = pos); a sliding-window layer keeps a ring of
//! `cap = min(slot_ctx, window + n_ubatch - 1)` rows (row = pos % cap), enough for the
//! keys the newest `n_ubatch` queries can see — llama.cpp's non-`--swa-full` SWA cache.
pub mod cells;
pub mod checkpoint;
pub mod persist;
pub mod types;

pub use cells::SeqCells;
pub use types::KvType;
pub use checkpoint::Checkpoint;

use crate::error::{Error, Result};

pub struct LayerKv {
    /// [n_slots * cap, k_units]: rows of k_dim values in `k_type` (f16: one unit per value)
    pub k: Vec<u16>,
    /// [n_slots * cap, v_units]
    pub v: Vec<u16>,
    /// Rows per slot: slot_ctx for full layers, the ring size for sliding-window layers.
    pub cap: usize,
}

pub struct KvStore {
    pub n_slots: usize,
    /// Positions each slot can hold.
    pub slot_ctx: usize,
    pub k_dim: usize,
    pub v_dim: usize,
    pub k_type: KvType,
    pub v_type: KvType,
    /// 2-byte units of a K row and a V row.
    pub k_units: usize,
    pub v_units: usize,
    /// Attention over this cache runs as flash attention (`cpu/attention_fa.rs`).
    pub flash_attn: bool,
    pub layers: Vec<LayerKv>,
    /// The device's rows of the offloaded layers (authoritative for those layers; the
    /// host rows are a mirror refreshed by `to_host` around host-side operations).
    pub dev: Option<crate::gpu::KvDevice>,
}

impl KvStore {
    /// `caps[l]` rows per slot for layer l (each <= slot_ctx).
    pub fn new(n_slots: usize, slot_ctx: usize, caps: &[usize], k_dim: usize, v_dim: usize) -> Result<KvStore> {
        Self::with_types(n_slots, slot_ctx, caps, k_dim, v_dim, KvType::F16, KvType::F16)
    }

    /// A cache whose K and V rows are of `k_type` / `v_type` (each row's values a whole
    /// number of the type's blocks).
    pub fn with_types(n_slots: usize, slot_ctx: usize, caps: &[usize], k_dim: usize, v_dim: usize, k_type: KvType, v_type: KvType) -> Result<KvStore> {
        for (ty, dim, what) in [(k_type, k_dim, "K"), (v_type, v_dim, "V")] {
            if dim % ty.block() != 0 {
                return Err(Error::InvalidRequest(format!(
                    "cache type {}: {what} rows of {dim} values are not a whole number of its {}-value blocks",
                    ty.name(),
                    ty.block()
                )));
            }
        }
        let (k_units, v_units) = (k_type.units(k_dim), v_type.units(v_dim));
        let rows: u128 = caps.iter().map(|&c| c as u128).sum::<u128>() * n_slots as u128;
        let bytes = rows * ((k_units + v_units) as u128) * 2;
        let too_big = || {
            Error::InvalidRequest(format!(
                "a context of {} tokens x {n_slots} slot(s) needs a {:.2} GiB KV cache but {} is available; lower n_ctx or n_parallel",
                slot_ctx,
                bytes as f64 / (1u64 << 30) as f64,
                available_memory().map(|a| format!("{:.2} GiB", a as f64 / (1u64 << 30) as f64)).unwrap_or("less".into())
            ))
        };
        if bytes > (1u128 << 40) || available_memory().is_some_and(|avail| bytes > avail as u128) {
            return Err(too_big());
        }
        let alloc = |n: usize| -> Result<Vec<u16>> {
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| too_big())?;
            v.resize(n, 0);
            Ok(v)
        };
        let mut layers = Vec::with_capacity(caps.len());
        for &cap in caps {
            let cap = cap.clamp(1, slot_ctx.max(1));
            layers.push(LayerKv { k: alloc(n_slots * cap * k_units)?, v: alloc(n_slots * cap * v_units)?, cap });
        }
        // llama.cpp needs flash attention for a quantized V (KvConfig::resolve decides the rest)
        let flash_attn = v_type.is_quantized();
        Ok(KvStore { n_slots, slot_ctx, k_dim, v_dim, k_type, v_type, k_units, v_units, flash_attn, layers, dev: None })
    }

    /// Bring the host rows of device-held layers up to date (before reading or editing
    /// the cache on the host: save, restore, checkpoints, context shift).
    /// `rings_only`: just the sliding-window layers (what checkpoints hold).
    pub fn to_host(&mut self, rings_only: bool) -> Result<()> {
        let full: Vec<bool> = (0..self.layers.len()).map(|il| self.is_full(il)).collect();
        match &self.dev {
            Some(d) => d.download(&mut self.layers, &|il| !rings_only || !full[il]),
            None => Ok(()),
        }
    }

    /// Send host edits of device-held layers back to the device.
    pub fn to_device(&self, rings_only: bool) -> Result<()> {
        match &self.dev {
            Some(d) => d.upload(&self.layers, &|il| !rings_only || !self.is_full(il)),
            None => Ok(()),
        }
    }

    /// Bytes held by the tensors.
    pub fn bytes(&self) -> usize {
        self.layers.iter().map(|l| (l.k.len() + l.v.len()) * 2).sum()
    }

    /// Bytes one slot's rows take when it holds `n_pos` positions (a sliding-window
    /// layer's ring holds at most its size).
    pub fn slot_bytes(&self, n_pos: usize) -> usize {
        self.layers.iter().map(|l| n_pos.min(l.cap) * (self.k_units + self.v_units) * 2).sum()
    }

    /// Row of (slot, pos) in layer `il`.
    #[inline]
    pub fn row(&self, il: usize, slot: usize, pos: usize) -> usize {
        let cap = self.layers[il].cap;
        slot * cap + pos % cap
    }

    /// Whether layer `il` keeps every position (not a ring).
    pub fn is_full(&self, il: usize) -> bool {
        self.layers[il].cap >= self.slot_ctx
    }

    /// Store K and V rows ([n, k_dim], [n, v_dim]) of `n` consecutive positions of `slot`.
    pub fn store(&mut self, il: usize, slot: usize, pos0: usize, k: &[f32], v: &[f32], n: usize) {
        let (kd, vd, ku, vu) = (self.k_dim, self.v_dim, self.k_units, self.v_units);
        for t in 0..n {
            let r = self.row(il, slot, pos0 + t);
            let l = &mut self.layers[il];
            types::store_row(self.k_type, &k[t * kd..(t + 1) * kd], &mut l.k[r * ku..(r + 1) * ku]);
            types::store_row(self.v_type, &v[t * vd..(t + 1) * vd], &mut l.v[r * vu..(r + 1) * vu]);
        }
    }

    /// Copy the rows of positions [from, to) of `src_slot` to the same positions in `dst_slot`.
    pub fn copy_slot(&mut self, src_slot: usize, dst_slot: usize, from: usize, to: usize) {
        let (kd, vd) = (self.k_units, self.v_units);
        for il in 0..self.layers.len() {
            let cap = self.layers[il].cap;
            for p in from.max(to.saturating_sub(cap))..to {
                let (rs, rd) = (self.row(il, src_slot, p), self.row(il, dst_slot, p));
                let l = &mut self.layers[il];
                l.k.copy_within(rs * kd..(rs + 1) * kd, rd * kd);
                l.v.copy_within(rs * vd..(rs + 1) * vd, rd * vd);
            }
        }
    }
}

/// Memory the system can still hand out (Linux: MemAvailable), if known.
pub fn available_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
