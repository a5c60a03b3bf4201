//! Slot save / restore / erase (`--slot-save-path`), run by the loop between batches.
use super::queue::{SlotAction, SlotActionResult};
use super::state::LoopState;
use crate::error::{Error, Result};
use crate::kv_cache::persist;
use std::path::Path;
use std::time::Instant;

impl LoopState {
    pub fn slot_action(&mut self, si: usize, action: SlotAction) -> Result<SlotActionResult> {
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
                let dir = dir()?;
                self.kv.to_host(false)?;
                let (cells, lora) = (&self.slots[si].cells, self.slots[si].lora.as_deref());
                let bytes = persist::save(&self.kv, cells, si, self.fingerprint, lora);
                write_slot_file(&dir, &name, &bytes)?;
                Ok(SlotActionResult { id_slot: si, filename: name, n_tokens: cells.n_past(), n_bytes: bytes.len(), ms: ms(t0) })
            }
            SlotAction::Restore(name) => {
                let bytes = read_slot_file(&dir()?, &name)?;
                let (n_vocab, n_lora) = (self.engine.model.config.n_vocab, self.engine.model.adapters.len());
                let s = &mut self.slots[si];
                let lora = persist::restore(&mut self.kv, &mut s.cells, si, self.fingerprint, &bytes, &name, n_vocab, n_lora)?;
                s.lora = lora.map(std::sync::Arc::from);
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

/// A file error at request time: the request's error, naming the file as the client
/// named it (never the server's directory).
fn file_error(name: &str, doing: &str, e: &std::io::Error) -> Error {
    use std::io::ErrorKind::*;
    let why = match e.kind() {
        NotFound => "does not exist",
        PermissionDenied => "is not accessible to the server",
        AlreadyExists => "is being written by another request; try again",
        IsADirectory | NotADirectory | DirectoryNotEmpty => "is a directory, not a slot file",
        _ if is_link_refusal(e) => "is a symbolic link; slot files must be regular files",
        StorageFull => "cannot be written: the disk is full",
        _ => "",
    };
    if why.is_empty() {
        let kind = format!("{:?}", e.kind());
        return Error::Internal(format!("{doing} slot file {name:?} failed ({kind}); check the slot directory (--slot-save-path)"));
    }
    Error::InvalidRequest(format!("filename: slot file {name:?} {why}"))
}

/// What `O_NOFOLLOW` answers for a symbolic link (ELOOP).
fn is_link_refusal(e: &std::io::Error) -> bool {
    #[cfg(unix)]
    return e.raw_os_error() == Some(libc::ELOOP);
    #[cfg(not(unix))]
    return false;
}

/// Write a slot file atomically: a temporary file created exclusively (never through a
/// link someone planted under its name) in the slot directory, then renamed over the
/// final name (which replaces a link rather than writing through it).
fn write_slot_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let stamp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let tmp = dir.join(format!(".{name}.{}.{stamp}.partial", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(O_NOFOLLOW).mode(0o600);
    }
    let mut f = opts.open(&tmp).map_err(|e| file_error(name, "creating", &e))?;
    let written = f.write_all(bytes).and_then(|_| f.sync_all());
    drop(f);
    let done = written.and_then(|_| {
        if std::fs::symlink_metadata(dir.join(name)).is_ok_and(|m| m.is_dir()) {
            return Err(std::io::Error::from(std::io::ErrorKind::IsADirectory));
        }
        std::fs::rename(&tmp, dir.join(name))
    });
    if let Err(e) = done {
        let _ = std::fs::remove_file(&tmp);
        return Err(file_error(name, "writing", &e));
    }
    Ok(())
}

/// Read a slot file: a regular file in the slot directory (links, directories and
/// devices are refused).
fn read_slot_file(dir: &Path, name: &str) -> Result<Vec<u8>> {
    use std::io::Read;
    let mut opts = std::fs::OpenOptions::new();
    opts.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(O_NOFOLLOW | O_NONBLOCK);
    }
    let mut f = opts.open(dir.join(name)).map_err(|e| file_error(name, "opening", &e))?;
    let meta = f.metadata().map_err(|e| file_error(name, "reading", &e))?;
    if meta.is_dir() {
        return Err(file_error(name, "reading", &std::io::Error::from(std::io::ErrorKind::IsADirectory)));
    }
    if !meta.is_file() {
        return Err(Error::InvalidRequest(format!("filename: slot file {name:?} is not a regular file")));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    f.read_to_end(&mut bytes).map_err(|e| file_error(name, "reading", &e))?;
    Ok(bytes)
}

#[cfg(unix)]
use libc::{O_NOFOLLOW, O_NONBLOCK};
