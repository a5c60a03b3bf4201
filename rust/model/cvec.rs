//! Control vectors (`--control-vector`, `--control-vector-scaled`,
//! `--control-vector-layer-range`) as llama.cpp loads and applies them
//! (`common_control_vector_load`, `llama_adapter_cvec`): GGUF files of F32 tensors
//! `direction.N` [n_embd] (N ≥ 1, the layer), each scaled by its file's strength and summed
//! over files; the sum for layer `il` is added to every token's residual stream at the end of
//! that layer, for the layers in the range (both ends included; layer 0 never has one).
use crate::error::{Error, Result};
use crate::gguf::Gguf;
use crate::quant::GgmlType;
use std::path::{Path, PathBuf};

pub struct ControlVector {
    /// Per layer (index = layer), its direction if any.
    dirs: Vec<Option<Vec<f32>>>,
    start: usize,
    end: usize,
}

impl ControlVector {
    /// Load and sum `files` (path, strength) for a model of `n_layer` layers and `n_embd`
    /// values per token. `range`: the first and last layer (≤ 0: 1 and n_layer).
    pub fn load(files: &[(PathBuf, f32)], range: (i64, i64), n_layer: usize, n_embd: usize) -> Result<ControlVector> {
        let mut dirs: Vec<Option<Vec<f32>>> = vec![None; n_layer];
        for (path, strength) in files {
            for (il, v) in read_one(path, n_embd)? {
                if il >= n_layer {
                    continue; // llama.cpp keeps only the model's layers
                }
                let d = dirs[il].get_or_insert_with(|| vec![0.0; n_embd]);
                // dst[j] += src[j] * strength
                d.iter_mut().zip(v).for_each(|(d, s)| *d += s * strength);
            }
        }
        let start = if range.0 <= 0 { 1 } else { range.0 as usize };
        let end = if range.1 <= 0 { n_layer } else { range.1 as usize };
        Ok(ControlVector { dirs, start, end })
    }

    /// Layer `il`'s direction, when the range includes it.
    pub fn layer(&self, il: usize) -> Option<&[f32]> {
        if il < self.start || il > self.end {
            return None;
        }
        self.dirs.get(il).and_then(|d| d.as_deref())
    }

    pub fn n_layers(&self) -> usize {
        (0..self.dirs.len()).filter(|&il| self.layer(il).is_some()).count()
    }
}

/// (layer, values) of each `direction.N` tensor of one file.
fn read_one(path: &Path, n_embd: usize) -> Result<Vec<(usize, Vec<f32>)>> {
    let g = Gguf::open(path)?;
    let err = |tensor: &str, what: String| Error::Tensor { path: path.to_path_buf(), tensor: tensor.to_string(), what };
    if g.tensors.is_empty() {
        return Err(err("", "holds no direction tensors: not a control vector".into()));
    }
    let mut out = Vec::new();
    for t in &g.tensors {
        let il = t.name.strip_prefix("direction.").and_then(|n| n.parse::<usize>().ok());
        let Some(il) = il else {
            return Err(err(&t.name, "is not a direction.N tensor: not a control vector".into()));
        };
        if il == 0 {
            return Err(err(&t.name, "names layer 0, which has no control vector (directions start at direction.1)".into()));
        }
        if t.ty != GgmlType::F32 {
            return Err(err(&t.name, format!("is {}; control vectors are F32", t.ty.name())));
        }
        if t.dims.len() != 1 || t.dims[0] as usize != n_embd {
            return Err(err(&t.name, format!("has shape {:?}; this model's control vectors have {n_embd} values (a vector for another model?)", t.dims)));
        }
        let mut v = vec![0f32; n_embd];
        crate::quant::dequantize(t.ty, g.tensor_data(t), &mut v);
        out.push((il, v));
    }
    Ok(out)
}
