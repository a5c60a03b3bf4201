//! KV cache tensor storage: per layer, K and V rows in f16 indexed by cell.
//! This first form holds one sequence whose cell i is position i.
use crate::error::{Error, Result};
use crate::quant::f16::f32_to_f16;

pub struct LayerKv {
    pub k: Vec<u16>,
    pub v: Vec<u16>,
}

pub struct KvCache {
    pub n_ctx: usize,
    pub k_dim: usize,
    pub v_dim: usize,
    pub layers: Vec<LayerKv>,
    /// Positions 0..n_past are filled.
    pub n_past: usize,
}

impl KvCache {
    pub fn new(n_layer: usize, n_ctx: usize, k_dim: usize, v_dim: usize) -> Result<KvCache> {
        let elems = (n_ctx as u128) * ((k_dim + v_dim) as u128);
        let bytes = n_layer as u128 * elems * 2;
        let too_big = || {
            Error::InvalidRequest(format!(
                "n_ctx = {n_ctx} needs a {:.1} GiB KV cache but {} is available; lower n_ctx",
                bytes as f64 / (1u64 << 30) as f64,
                available_memory().map(|a| format!("{:.1} GiB", a as f64 / (1u64 << 30) as f64)).unwrap_or("less".into())
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
        let mut layers = Vec::with_capacity(n_layer);
        for _ in 0..n_layer {
            layers.push(LayerKv { k: alloc(n_ctx * k_dim)?, v: alloc(n_ctx * v_dim)? });
        }
        Ok(KvCache { n_ctx, k_dim, v_dim, layers, n_past: 0 })
    }

    pub fn clear(&mut self) {
        self.n_past = 0;
    }

    /// Store K and V rows for `n` consecutive positions starting at `pos0`.
    pub fn store(&mut self, il: usize, pos0: usize, k: &[f32], v: &[f32], n: usize) {
        let l = &mut self.layers[il];
        for t in 0..n {
            let kd = &mut l.k[(pos0 + t) * self.k_dim..][..self.k_dim];
            for (d, &x) in kd.iter_mut().zip(&k[t * self.k_dim..(t + 1) * self.k_dim]) {
                *d = f32_to_f16(x);
            }
            let vd = &mut l.v[(pos0 + t) * self.v_dim..][..self.v_dim];
            for (d, &x) in vd.iter_mut().zip(&v[t * self.v_dim..(t + 1) * self.v_dim]) {
                *d = f32_to_f16(x);
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
