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
        let bytes = n_layer as u128 * n_ctx as u128 * (k_dim + v_dim) as u128 * 2;
        if bytes > (1u128 << 40) {
            return Err(Error::InvalidRequest(format!("n_ctx = {n_ctx} needs a {bytes}-byte KV cache; lower n_ctx")));
        }
        let layers = (0..n_layer)
            .map(|_| LayerKv { k: vec![0; n_ctx * k_dim], v: vec![0; n_ctx * v_dim] })
            .collect();
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
