//! Slot save / restore / erase (`--slot-save-path`), run by the loop between batches.
use super::batch_loop::Loop;
use super::scheduler::{SlotAction, SlotActionResult};
use crate::error::{Error, Result};
use crate::kv_cache::persist;
use std::time::Instant;

impl Loop {
    pub(super) fn slot_action(&mut self, si: usize, action: SlotAction) -> Result<SlotActionResult> {
        let t0 = Instant::now();
        if si >= self.slots.len() {
            return Err(Error::InvalidRequest(format!("id_slot: slot {si} does not exist (0..{})", self.slots.len())));
        }
        if self.slots[si].task.is_some() {
            return Err(Error::Unavailable(format!("slot {si} is processing a request; try again when it is idle")));
        }
        let dir = || {
            self.cfg.slot_save_path.clone().ok_or_else(|| {
                Error::NotSupported("slot save/restore is disabled; start the engine with slot_save_path (--slot-save-path DIR)".into())
            })
        };
        let ms = |t0: Instant| t0.elapsed().as_secs_f64() * 1e3;
        match action {
            SlotAction::Save(name) => {
                let path = dir()?.join(&name);
                self.kv.to_host(false)?;
                let cells = &self.slots[si].cells;
                let bytes = persist::save(&self.kv, cells, si, self.fingerprint);
                let tmp = path.with_extension("partial");
                std::fs::write(&tmp, &bytes)
                    .and_then(|_| std::fs::rename(&tmp, &path))
                    .map_err(|e| Error::Io { path: path.clone(), source: e })?;
                Ok(SlotActionResult { id_slot: si, filename: name, n_tokens: cells.n_past(), n_bytes: bytes.len(), ms: ms(t0) })
            }
            SlotAction::Restore(name) => {
                let path = dir()?.join(&name);
                let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
                    std::io::ErrorKind::NotFound => Error::InvalidRequest(format!("filename: slot file {name:?} does not exist")),
                    _ => Error::Io { path: path.clone(), source: e },
                })?;
                let s = &mut self.slots[si];
                persist::restore(&mut self.kv, &mut s.cells, si, self.fingerprint, &bytes, &name)?;
                if let Err(e) = self.kv.to_device(false) {
                    s.clear();
                    return Err(e);
                }
                s.checkpoints.clear();
                Ok(SlotActionResult { id_slot: si, filename: name, n_tokens: s.cells.n_past(), n_bytes: bytes.len(), ms: ms(t0) })
            }
            SlotAction::Erase => {
                let s = &mut self.slots[si];
                let n = s.cells.n_past();
                s.clear();
                Ok(SlotActionResult { id_slot: si, filename: String::new(), n_tokens: n, n_bytes: 0, ms: ms(t0) })
            }
        }
    }
}
