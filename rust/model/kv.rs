//! What the model decides about its KV cache: rows per layer, the identity a saved
//! slot must match, and the K re-rotation that context shift needs.
use super::Model;
use crate::cpu::ops::{rope_apply, rope_cache};
use crate::kv_cache::{KvStore, SeqCells};
use crate::kv_cache::types::{hadamard, load_row, rotation, store_row};

impl Model {
    /// Rows per slot for each layer: every position for full attention; for sliding-window
    /// layers a ring of window + n_ubatch - 1 rows (unless `swa_full`).
    pub fn kv_caps(&self, slot_ctx: usize, n_ubatch: usize, swa_full: bool) -> Vec<usize> {
        self.config.kv_caps(slot_ctx, n_ubatch, swa_full)
    }

    /// (ring rows, window) when some layer keeps a ring, for `SeqCells`.
    pub fn kv_ring(&self, kv: &KvStore) -> Option<(usize, usize)> {
        (0..kv.layers.len()).find(|&il| !kv.is_full(il)).map(|il| (kv.layers[il].cap, self.config.sliding_window))
    }

    /// Identity of the weights: FNV-1a over tensor names, types, shapes and the first
    /// bytes of each tensor's data. A slot saved from another model is refused.
    pub fn fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf29ce484222325;
        let mut eat = |b: &[u8]| {
            for &x in b {
                h ^= x as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        };
        for t in &self.gguf.tensors {
            eat(t.name.as_bytes());
            eat(t.ty.name().as_bytes());
            t.dims.iter().for_each(|d| eat(&d.to_le_bytes()));
            let data = self.gguf.tensor_data(t);
            eat(&data[..data.len().min(64)]);
        }
        h
    }

    /// Context shift (llama.cpp's `seq_rm` + `seq_add`): drop positions
    /// [n_keep, n_keep + n_discard) of `slot` and move the rest down by n_discard, re-rotating
    /// the moved keys by -n_discard with each layer's RoPE (keys are stored rotated).
    pub fn kv_shift(&self, kv: &mut KvStore, cells: &mut SeqCells, slot: usize, n_keep: usize, n_discard: usize) {
        let c = &self.config;
        let n_past = cells.n_past();
        if n_discard == 0 || n_keep + n_discard > n_past {
            return;
        }
        let new_len = n_past - n_discard;
        let (kd, vd, hd) = (kv.k_units, kv.v_units, c.head_dim);
        let kt = kv.k_type;
        let half = c.n_rot / 2;
        let (mut cos, mut sin) = (vec![0f32; half], vec![0f32; half]);
        let mut kf = vec![0f32; kv.k_dim];
        let mut new_ring_lo = 0;
        for il in 0..kv.layers.len() {
            let cap = kv.layers[il].cap;
            let full = kv.is_full(il);
            // keys of a layer without RoPE move as they are
            let rotate = c.has_rope(il);
            let swa = c.is_swa(il);
            // a rotation by -n_discard: YaRN's blended angles but not its magnitude factor,
            // which the stored keys already carry (llama.cpp's shift applies it again)
            let rp = crate::cpu::ops::RopeParams { rotation_only: true, ..c.rope_params(swa, self.rope_freqs.as_deref()) };
            rope_cache(n_discard, &rp, &mut cos, &mut sin);
            sin.iter_mut().for_each(|s| *s = -*s);
            // New positions that land in this layer's rows: all moved ones for a full layer,
            // the newest `cap` for a ring; each gathers its source row first, then scatters.
            let lo = if full { n_keep } else { new_len.saturating_sub(cap).max(n_keep) };
            let mut first_valid = lo;
            let mut moved: Vec<(usize, Vec<u16>, Vec<u16>)> = Vec::with_capacity(new_len - lo);
            for x in lo..new_len {
                let src = x + n_discard;
                if !full && src < cells.ring_lo {
                    first_valid = x + 1;
                    continue;
                }
                let r = kv.row(il, slot, src);
                let l = &kv.layers[il];
                moved.push((x, l.k[r * kd..(r + 1) * kd].to_vec(), l.v[r * vd..(r + 1) * vd].to_vec()));
            }
            for (x, mut k, v) in moved {
                if rotate {
                    // a quantized K is rotated as f32 and stored again (llama.cpp's
                    // build_k_shift: cast to f32, rope, copy back)
                    load_row(kt, &k, &mut kf);
                    // stored rotated (llama.cpp's attn_rot_k): back, RoPE, forward again
                    let rot = rotation(kt, hd, true);
                    if let Some(r) = rot {
                        hadamard(&mut kf, r);
                    }
                    for head in kf.chunks_exact_mut(hd) {
                        rope_apply(head, c.n_rot, c.rope_neox, &cos, &sin);
                    }
                    if let Some(r) = rot {
                        hadamard(&mut kf, r);
                    }
                    store_row(kt, &kf, &mut k);
                }
                let r = kv.row(il, slot, x);
                let l = &mut kv.layers[il];
                l.k[r * kd..(r + 1) * kd].copy_from_slice(&k);
                l.v[r * vd..(r + 1) * vd].copy_from_slice(&v);
            }
            if !full {
                // Intact after the move: the moved positions from first_valid on, plus the
                // unmoved prefix [0, n_keep) where the ring still held it and no moved row
                // landed on it.
                let layer_lo = if first_valid > lo { first_valid } else { cells.ring_lo.min(n_keep).max(new_len.saturating_sub(cap)) };
                new_ring_lo = new_ring_lo.max(layer_lo);
            }
        }
        let mut toks = std::mem::take(&mut cells.tokens);
        toks.drain(n_keep..n_keep + n_discard);
        cells.tokens = toks;
        cells.ring_lo = new_ring_lo;
    }
}
