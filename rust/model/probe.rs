//! Activation taps for op-by-op comparison with llama.cpp (a development tool, off unless
//! `LLAMARS_PROBE_DIR` is set). At each tap the forward pass writes the activation to
//! `$LLAMARS_PROBE_DIR/ours/<name>-<layer>.f32` (raw little-endian f32, the last forward wins)
//! and, when `$LLAMARS_PROBE_DIR/ll/<name>-<layer>.f32` exists with the same length, replaces
//! it with those values, so every op can be run on llama.cpp's own inputs.
//! `scripts/parity/compare_ops.py` drives it against `scripts/parity/llama_dump.py`'s tensors.
use std::sync::OnceLock;

pub fn tap(name: &str, layer: Option<usize>, buf: &mut [f32]) {
    static DIR: OnceLock<Option<String>> = OnceLock::new();
    let Some(dir) = DIR.get_or_init(|| std::env::var("LLAMARS_PROBE_DIR").ok().filter(|d| !d.is_empty())) else {
        return;
    };
    let key = match layer {
        Some(i) => format!("{name}-{i}"),
        None => name.to_string(),
    };
    let bytes: Vec<u8> = buf.iter().flat_map(|v| v.to_le_bytes()).collect();
    if let Err(e) = std::fs::write(format!("{dir}/ours/{key}.f32"), bytes) {
        eprintln!("LLAMARS_PROBE_DIR: cannot write {dir}/ours/{key}.f32: {e} (create the ours/ folder)");
    }
    if let Ok(b) = std::fs::read(format!("{dir}/ll/{key}.f32")) {
        if b.len() == buf.len() * 4 {
            for (v, c) in buf.iter_mut().zip(b.chunks_exact(4)) {
                *v = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
    }
}
