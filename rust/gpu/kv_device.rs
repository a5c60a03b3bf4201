//! The device's copy of the offloaded layers of a KV cache, kept in step with the host
//! rows around host-side cache edits.
use super::device::Gpu;
use super::offload::{next_id, Offload};
use crate::error::Result;
use crate::kv_cache::LayerKv;
use std::sync::Arc;

/// The device's copy of a KV cache's offloaded layers (same f16 bytes as the host rows).
pub struct KvDevice {
    gpu: Arc<Gpu>,
    pub(super) id: u64,
    pub(super) owner: u64,
    first: usize,
    pub(super) k: Vec<wgpu::Buffer>,
    pub(super) v: Vec<wgpu::Buffer>,
}

impl KvDevice {
    pub(super) fn new(off: &Offload, layers: &[LayerKv]) -> Result<KvDevice> {
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
