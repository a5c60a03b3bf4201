//! Sliding-window checkpoints: a copy of a slot's ring rows at one position. A ring
//! forgets the window behind old positions as the sequence grows, so a later prompt that
//! diverges far back could not resume there; restoring a checkpoint taken at position c
//! (<= the divergence) makes the sequence resumable at c again (the full-attention layers
//! still hold every position). llama.cpp keeps similar context checkpoints for SWA models.
use super::{KvStore, SeqCells};

pub struct Checkpoint {
    /// The sequence length when it was taken.
    pub pos: usize,
    /// Lowest position the saved rows cover.
    pub lo: usize,
    /// Per ring layer: (layer, K rows, V rows) for positions lo..pos.
    rows: Vec<(usize, Vec<u16>, Vec<u16>)>,
}

impl Checkpoint {
    /// Copy the ring rows `slot` holds now (positions [ring_lo, n_past)).
    pub fn take(kv: &KvStore, cells: &SeqCells, slot: usize) -> Option<Checkpoint> {
        cells.ring?;
        let pos = cells.n_past();
        let mut lo = cells.ring_lo;
        let mut rows = Vec::new();
        for il in 0..kv.layers.len() {
            if kv.is_full(il) {
                continue;
            }
            lo = lo.max(pos.saturating_sub(kv.layers[il].cap));
        }
        for il in 0..kv.layers.len() {
            if kv.is_full(il) {
                continue;
            }
            let (mut k, mut v) = (Vec::with_capacity((pos - lo) * kv.k_units), Vec::with_capacity((pos - lo) * kv.v_units));
            for p in lo..pos {
                let r = kv.row(il, slot, p);
                let l = &kv.layers[il];
                k.extend_from_slice(&l.k[r * kv.k_units..(r + 1) * kv.k_units]);
                v.extend_from_slice(&l.v[r * kv.v_units..(r + 1) * kv.v_units]);
            }
            rows.push((il, k, v));
        }
        Some(Checkpoint { pos, lo, rows })
    }

    pub fn bytes(&self) -> usize {
        self.rows.iter().map(|(_, k, v)| (k.len() + v.len()) * 2).sum()
    }

    /// Put the rows back and cut the sequence to `pos` tokens. The caller guarantees the
    /// full-attention rows of positions < pos are unchanged since the checkpoint was taken.
    pub fn restore(&self, kv: &mut KvStore, cells: &mut SeqCells, slot: usize) {
        for (il, k, v) in &self.rows {
            for (i, p) in (self.lo..self.pos).enumerate() {
                let r = kv.row(*il, slot, p);
                let (kd, vd) = (kv.k_units, kv.v_units);
                let l = &mut kv.layers[*il];
                l.k[r * kd..(r + 1) * kd].copy_from_slice(&k[i * kd..(i + 1) * kd]);
                l.v[r * vd..(r + 1) * vd].copy_from_slice(&v[i * vd..(i + 1) * vd]);
            }
        }
        cells.tokens.truncate(self.pos);
        cells.ring_lo = self.lo;
    }
}
