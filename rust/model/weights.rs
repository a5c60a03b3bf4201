//! Binding GGUF tensors to typed weights, with shape checks that name the tensor.
use super::Experts;
use crate::cpu::Weight;
use crate::error::{Error, Result};
use crate::gguf::{Gguf, TensorInfo};
use crate::quant;

pub struct Loader<'a> {
    pub g: &'a Gguf,
    /// The matmul weights' kernel orders (`quant::Exactness`).
    pub mode: quant::Exactness,
}

impl<'a> Loader<'a> {
    pub fn err(&self, name: &str, what: String) -> Error {
        Error::Tensor { path: self.g.path().to_path_buf(), tensor: name.to_string(), what }
    }

    fn unsupported(&self, t: &TensorInfo) -> Error {
        Error::UnsupportedTensorType {
            path: self.g.path().to_path_buf(),
            tensor: t.name.clone(),
            type_name: t.ty.name().to_string(),
        }
    }

    pub fn info(&self, name: &str) -> Result<&'a TensorInfo> {
        self.g.tensor(name).ok_or_else(|| self.err(name, "is required but missing from the file".into()))
    }

    pub fn has(&self, name: &str) -> bool {
        self.g.tensor(name).is_some()
    }

    fn check_shape(&self, t: &TensorInfo, want: &[usize]) -> Result<()> {
        let dims: Vec<usize> = t.dims.iter().map(|&d| d as usize).collect();
        let mut d = dims.clone();
        while d.len() > want.len() && d.last() == Some(&1) {
            d.pop();
        }
        if d != want {
            return Err(self.err(&t.name, format!("has shape {dims:?}, expected {want:?}")));
        }
        Ok(())
    }

    /// A matrix [n_in, n_out] (ggml order) usable by `matmul`.
    pub fn matrix(&self, name: &str, n_in: usize, n_out: usize) -> Result<Weight> {
        let t = self.info(name)?;
        self.check_shape(t, &[n_in, n_out])?;
        self.weight_of(t)
    }

    fn weight_of(&self, t: &TensorInfo) -> Result<Weight> {
        if !t.ty.is_supported() {
            return Err(self.unsupported(t));
        }
        let dot = quant::dot_fn(t.ty)
            .ok_or_else(|| self.unsupported(t))?;
        let data = self.g.tensor_data(t);
        // SAFETY: `data` points into the model's memory map, which the `Model` owns
        // (through an Arc<Gguf>) for at least as long as any Weight built from it.
        Ok(unsafe { Weight::with_mode(t.ty, t.row_len(), t.n_rows(), data, dot, self.mode) })
    }

    /// A stack of `n` matrices [n_in, n_out] (a 3-D tensor [n_in, n_out, n]: experts).
    pub fn experts(&self, name: &str, n_in: usize, n_out: usize, n: usize) -> Result<Experts> {
        let t = self.info(name)?;
        self.check_shape(t, &[n_in, n_out, n])?;
        Ok(Experts { w: self.weight_of(t)?, n, n_out })
    }

    pub fn opt_experts(&self, name: &str, n_in: usize, n_out: usize, n: usize) -> Result<Option<Experts>> {
        if self.has(name) {
            self.experts(name, n_in, n_out, n).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A one-row matrix [n_in] or [n_in, 1] (Qwen2-MoE's shared-expert gate), if present.
    pub fn opt_row_matrix(&self, name: &str, n_in: usize) -> Result<Option<Weight>> {
        let Some(t) = self.g.tensor(name) else { return Ok(None) };
        self.check_shape(t, &[n_in])?;
        self.weight_of(t).map(Some)
    }

    pub fn opt_matrix(&self, name: &str, n_in: usize, n_out: usize) -> Result<Option<Weight>> {
        if self.has(name) {
            self.matrix(name, n_in, n_out).map(Some)
        } else {
            Ok(None)
        }
    }

    /// A vector of `n` values dequantized to f32 (norm weights, biases).
    pub fn vector(&self, name: &str, n: usize) -> Result<Vec<f32>> {
        let t = self.info(name)?;
        self.check_shape(t, &[n])?;
        if !t.ty.is_supported() {
            return Err(self.unsupported(t));
        }
        let mut out = vec![0f32; n];
        quant::dequantize(t.ty, self.g.tensor_data(t), &mut out);
        Ok(out)
    }

    /// A tensor of shape `dims` (ggml order) dequantized to f32, if present (gpt-oss's
    /// per-expert biases [n, n_expert]).
    pub fn opt_floats(&self, name: &str, dims: &[usize]) -> Result<Option<Vec<f32>>> {
        let Some(t) = self.g.tensor(name) else { return Ok(None) };
        self.check_shape(t, dims)?;
        if !t.ty.is_supported() {
            return Err(self.unsupported(t));
        }
        let mut out = vec![0f32; dims.iter().product()];
        quant::dequantize(t.ty, self.g.tensor_data(t), &mut out);
        Ok(Some(out))
    }

    /// The first row (of `n` values) of a 2-D tensor, dequantized (BERT's token type 0).
    pub fn opt_first_row(&self, name: &str, n: usize) -> Result<Option<Vec<f32>>> {
        let Some(t) = self.g.tensor(name) else { return Ok(None) };
        if t.dims.first().copied() != Some(n as u64) || t.n_rows() == 0 {
            return Err(self.err(name, format!("has shape {:?}, expected [{n}, n_types]", t.dims)));
        }
        if !t.ty.is_supported() {
            return Err(self.unsupported(t));
        }
        let row = t.ty.row_bytes(t.row_len());
        let mut out = vec![0f32; n];
        quant::dequantize(t.ty, &self.g.tensor_data(t)[..row], &mut out);
        Ok(Some(out))
    }

    /// The error for a tensor the model needs that the file lacks.
    pub fn missing(&self, name: &str) -> Error {
        self.err(name, "is required but missing from the file".into())
    }

    pub fn opt_vector(&self, name: &str, n: usize) -> Result<Option<Vec<f32>>> {
        if self.has(name) {
            self.vector(name, n).map(Some)
        } else {
            Ok(None)
        }
    }
}
