//! A slot's tokens and KV rows as bytes (slot save/restore, the host-RAM prompt cache).
//!
//! Layout (little endian): b"LLMRSLOT", version u32, model fingerprint u64, n_layer u32,
//! k_dim u32, v_dim u32, n_tokens u32, tokens [u32; n_tokens], (version 2) the LoRA scales
//! the rows were computed under: n_lora u32 (0: none), [f32; n_lora], and the K and V types
//! (ggml type ids u32, u32), then per layer: first position u32, row count u32, K rows
//! [u16; count*k_units], V rows [u16; count*v_units] (units: `types.rs`). Version 1 files
//! (no LoRA section, f16 rows) restore as computed without adapters into an f16 cache.
use super::{KvStore, SeqCells};
use crate::error::{Error, Result};

const MAGIC: &[u8; 8] = b"LLMRSLOT";
const VERSION: u32 = 2;

fn put32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Serialize what `slot` holds (computed under the LoRA scales `lora`).
pub fn save(kv: &KvStore, cells: &SeqCells, slot: usize, fingerprint: u64, lora: Option<&[f32]>) -> Vec<u8> {
    let n = cells.n_past();
    let mut out = Vec::with_capacity(64 + n * 4 + kv.layers.len() * n * (kv.k_units + kv.v_units) * 2);
    out.extend_from_slice(MAGIC);
    put32(&mut out, VERSION);
    out.extend_from_slice(&fingerprint.to_le_bytes());
    for v in [kv.layers.len(), kv.k_dim, kv.v_dim, n] {
        put32(&mut out, v as u32);
    }
    cells.tokens.iter().for_each(|&t| put32(&mut out, t));
    let lora = lora.unwrap_or(&[]);
    put32(&mut out, lora.len() as u32);
    lora.iter().for_each(|s| out.extend_from_slice(&s.to_le_bytes()));
    put32(&mut out, kv.k_type.ggml().id());
    put32(&mut out, kv.v_type.ggml().id());
    for il in 0..kv.layers.len() {
        let lo = if kv.is_full(il) { 0 } else { cells.ring_lo.max(n.saturating_sub(kv.layers[il].cap)).min(n) };
        put32(&mut out, lo as u32);
        put32(&mut out, (n - lo) as u32);
        for (rows, dim) in [(&kv.layers[il].k, kv.k_units), (&kv.layers[il].v, kv.v_units)] {
            for p in lo..n {
                let r = kv.row(il, slot, p);
                rows[r * dim..(r + 1) * dim].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes()));
            }
        }
    }
    out
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
    what: &'a str,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8]> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len()).ok_or_else(|| {
            Error::InvalidRequest(format!("{}: truncated slot file (needs {} bytes at offset {}, has {})", self.what, n, self.at, self.b.len()))
        })?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u32(&mut self) -> Result<u32> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
}

/// Load bytes made by `save` into `slot`, replacing what it held. `what` names the
/// source in errors (a file name); `n_lora`: the adapters loaded (a file saved under a
/// different set is refused). Returns the LoRA scales the rows were computed under. Nothing
/// is changed when the bytes are refused.
#[allow(clippy::too_many_arguments)]
pub fn restore(kv: &mut KvStore, cells: &mut SeqCells, slot: usize, fingerprint: u64, bytes: &[u8], what: &str, n_vocab: usize, n_lora: usize) -> Result<Option<Vec<f32>>> {
    let bad = |m: String| Error::InvalidRequest(format!("{what}: {m}"));
    let mut r = Reader { b: bytes, at: 0, what };
    if r.take(8)? != MAGIC {
        return Err(bad("not a llamars slot file (bad magic)".into()));
    }
    let version = r.u32()?;
    if version != VERSION && version != 1 {
        return Err(bad(format!("slot file version {version} is not supported (expected {VERSION})")));
    }
    let fp = u64::from_le_bytes(r.take(8)?.try_into().map_err(|_| bad("truncated".into()))?);
    if fp != fingerprint {
        return Err(bad("the slot was saved from a different model; load it with the model that wrote it".into()));
    }
    let (nl, kd, vd, n) = (r.u32()? as usize, r.u32()? as usize, r.u32()? as usize, r.u32()? as usize);
    if nl != kv.layers.len() || kd != kv.k_dim || vd != kv.v_dim {
        return Err(bad(format!("layout {nl} layers x ({kd}, {vd}) does not match this model's KV cache")));
    }
    if n > kv.slot_ctx {
        return Err(bad(format!("the slot holds {n} tokens but this engine's slot context is {}", kv.slot_ctx)));
    }
    let toks = r.take(n * 4)?;
    let tokens: Vec<u32> = toks.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    if let Some(t) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(bad(format!("invalid tokens: id {t} is outside the vocabulary (n_vocab = {n_vocab})")));
    }
    let nl_lora = if version >= 2 { r.u32()? as usize } else { 0 };
    if nl_lora != 0 && nl_lora != n_lora {
        return Err(bad(format!("the slot was computed under {nl_lora} LoRA adapters, but {n_lora} are loaded; restore it where the same adapters are loaded")));
    }
    let raw = r.take(nl_lora * 4)?;
    let lora: Vec<f32> = raw.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let f16 = super::KvType::F16.ggml().id();
    let (kt, vt) = if version >= 2 { (r.u32()?, r.u32()?) } else { (f16, f16) };
    if kt != kv.k_type.ggml().id() || vt != kv.v_type.ggml().id() {
        let name = |id: u32| crate::quant::GgmlType::from_id(id).map_or(format!("type {id}"), |t| t.name().to_ascii_lowercase());
        return Err(bad(format!(
            "the slot was saved from a {}/{} KV cache but this one is {}/{}; restore it with -ctk {} -ctv {}",
            name(kt),
            name(vt),
            kv.k_type.name(),
            kv.v_type.name(),
            name(kt),
            name(vt)
        )));
    }
    let (kd, vd) = (kv.k_units, kv.v_units);
    // Validate every layer header and length before writing anything.
    let start = r.at;
    let mut spans = Vec::with_capacity(nl);
    for il in 0..nl {
        let (lo, cnt) = (r.u32()? as usize, r.u32()? as usize);
        if lo.checked_add(cnt) != Some(n) || cnt > kv.layers[il].cap {
            return Err(bad(format!("layer {il}: rows [{lo}, {lo}+{cnt}) do not fit {n} tokens in {} rows", kv.layers[il].cap)));
        }
        if kv.is_full(il) && lo != 0 {
            return Err(bad(format!("layer {il}: a full-attention layer must hold every position")));
        }
        r.take(cnt * (kd + vd) * 2)?;
        spans.push((lo, cnt));
    }
    if r.at != bytes.len() {
        return Err(bad(format!("{} trailing bytes after the KV rows", bytes.len() - r.at)));
    }
    r.at = start;
    let mut ring_lo = 0;
    for (il, &(lo, cnt)) in spans.iter().enumerate() {
        r.take(8)?;
        if !kv.is_full(il) {
            ring_lo = ring_lo.max(lo);
        }
        for (is_k, dim) in [(true, kd), (false, vd)] {
            let src = r.take(cnt * dim * 2)?;
            for (i, p) in (lo..n).enumerate() {
                let row = kv.row(il, slot, p);
                let l = &mut kv.layers[il];
                let dst = if is_k { &mut l.k } else { &mut l.v };
                for (d, c) in dst[row * dim..(row + 1) * dim].iter_mut().zip(src[i * dim * 2..(i + 1) * dim * 2].chunks_exact(2)) {
                    *d = u16::from_le_bytes([c[0], c[1]]);
                }
            }
        }
    }
    cells.tokens = tokens;
    cells.ring_lo = ring_lo;
    Ok((!lora.is_empty()).then_some(lora))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_restore_roundtrip_and_refusals() {
        let mut kv = KvStore::new(2, 16, &[16, 6], 2, 2).unwrap();
        let mut cells = SeqCells::new(Some((6, 3)));
        let k: Vec<f32> = (0..20).map(|i| i as f32).collect();
        let v: Vec<f32> = (0..20).map(|i| -(i as f32)).collect();
        for il in 0..2 {
            kv.store(il, 0, 0, &k, &v, 10);
        }
        cells.push(&(100..110).collect::<Vec<u32>>());
        let bytes = save(&kv, &cells, 0, 42, None);
        let mut c2 = SeqCells::new(Some((6, 3)));
        assert_eq!(restore(&mut kv, &mut c2, 1, 42, &bytes, "t", 1000, 0).unwrap(), None);
        assert_eq!(c2.tokens, cells.tokens);
        assert_eq!(c2.ring_lo, 4);
        for p in 0..10 {
            let (a, b) = (kv.row(0, 0, p), kv.row(0, 1, p));
            assert_eq!(kv.layers[0].k[a * 2..a * 2 + 2], kv.layers[0].k[b * 2..b * 2 + 2]);
        }
        for p in 4..10 {
            let (a, b) = (kv.row(1, 0, p), kv.row(1, 1, p));
            assert_eq!(kv.layers[1].v[a * 2..a * 2 + 2], kv.layers[1].v[b * 2..b * 2 + 2]);
        }
        assert!(restore(&mut kv, &mut c2, 1, 43, &bytes, "t", 1000, 0).unwrap_err().to_string().contains("different model"));
        assert!(restore(&mut kv, &mut c2, 1, 42, &bytes[..bytes.len() - 3], "t", 1000, 0).unwrap_err().to_string().contains("truncated"));
        assert!(restore(&mut kv, &mut c2, 1, 42, b"garbage!garbage!", "t", 1000, 0).unwrap_err().to_string().contains("magic"));
        // token ids beyond the vocabulary are refused before anything is written
        let before = c2.tokens.clone();
        assert!(restore(&mut kv, &mut c2, 1, 42, &bytes, "t", 105, 0).unwrap_err().to_string().contains("invalid tokens: id 105"));
        assert_eq!(c2.tokens, before);
        // the LoRA scales travel with the rows; a file of another adapter set is refused
        let with = save(&kv, &cells, 0, 42, Some(&[0.5, 0.0]));
        assert_eq!(restore(&mut kv, &mut c2, 1, 42, &with, "t", 1000, 2).unwrap(), Some(vec![0.5, 0.0]));
        assert!(restore(&mut kv, &mut c2, 1, 42, &with, "t", 1000, 1).unwrap_err().to_string().contains("2 LoRA adapters, but 1 are loaded"));
    }
}
