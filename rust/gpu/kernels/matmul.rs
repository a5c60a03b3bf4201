//! Matrix products over raw GGUF weights (matmul.wgsl): `matvec` for up to 8 tokens (one
//! workgroup per weight row), `matmul` tiles for more. A weight larger than one storage
//! binding is split into row ranges, one buffer and one dispatch each.
use super::{fold, op, words, Family, Op};
use crate::error::{Error, Result};
use crate::gpu::device::Gpu;
use crate::quant::GgmlType;

/// Tokens up to which the one-row-per-workgroup kernel is used.
pub const MATVEC_MAX: u32 = 8;

pub struct Chunk {
    pub buf: wgpu::Buffer,
    pub row0: usize,
    pub rows: usize,
}

/// A weight matrix [n_out, n_in] resident on the device, in its GGUF encoding.
pub struct GpuWeight {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    pub row_bytes: usize,
    pub chunks: Vec<Chunk>,
}

impl GpuWeight {
    /// Upload rows [r_lo, r_hi) of a [rows, n_in] matrix given as its raw bytes.
    pub fn upload(gpu: &Gpu, name: &str, ty: GgmlType, n_in: usize, bytes: &[u8], r_lo: usize, r_hi: usize) -> Result<GpuWeight> {
        Self::upload_split(gpu, name, ty, n_in, bytes, r_lo, r_hi, usize::MAX)
    }

    /// `upload` with at most `max_rows` rows per buffer (tests split small weights).
    #[allow(clippy::too_many_arguments)]
    pub fn upload_split(gpu: &Gpu, name: &str, ty: GgmlType, n_in: usize, bytes: &[u8], r_lo: usize, r_hi: usize, max_rows: usize) -> Result<GpuWeight> {
        if super::quant_name(ty).is_none() {
            return Err(Error::NotSupported(format!(
                "{name}: tensor type {} has no GPU kernel yet; run this model on the CPU (-ngl 0) or offload a model of another type",
                ty.name()
            )));
        }
        if n_in % 32 != 0 {
            return Err(Error::NotSupported(format!("{name}: rows of {n_in} elements (the GPU kernels need a multiple of 32)")));
        }
        let row_bytes = ty.row_bytes(n_in);
        if bytes.len() < r_hi * row_bytes || r_lo > r_hi {
            return Err(Error::Gpu(format!("{name}: rows [{r_lo}, {r_hi}) are outside the tensor")));
        }
        // rows per binding: the device's binding limit, kept under 2^31 bytes so byte
        // offsets fit the kernels' u32 arithmetic
        let limit = gpu.limits.max_storage_buffer_binding_size.min(gpu.limits.max_buffer_size).min(1 << 31) as usize;
        let per = ((limit - 16) / row_bytes).clamp(1, max_rows.max(1));
        let mut chunks = Vec::new();
        let mut r = r_lo;
        while r < r_hi {
            let n = per.min(r_hi - r);
            let buf = gpu.upload(name, &bytes[r * row_bytes..(r + n) * row_bytes])?;
            chunks.push(Chunk { buf, row0: r - r_lo, rows: n });
            r += n;
        }
        Ok(GpuWeight { ty, n_in, n_out: r_hi - r_lo, row_bytes, chunks })
    }

    pub fn bytes(&self) -> usize {
        self.n_out * self.row_bytes
    }

    /// Y[t, :] = W · X[t, :] for the step's tokens (or selected rows when `sel`).
    /// x: [n, n_in] f32, y: [n, n_out] f32.
    pub fn ops(&self, gpu: &Gpu, x: &wgpu::Buffer, y: &wgpu::Buffer, step: &wgpu::Buffer, sel: bool) -> Result<Vec<(Op, Op)>> {
        let mut out = Vec::new();
        let grids = super::grids::buffer(gpu, self.ty)?;
        for c in &self.chunks {
            let bufs: Vec<&wgpu::Buffer> = [&c.buf, x, y].into_iter().chain(grids.as_ref()).collect();
            let p = words(&[self.n_in as u32, c.rows as u32, self.row_bytes as u32, c.row0 as u32, self.n_out as u32, sel as u32, 0, 0]);
            let rows = c.rows as u32;
            let small = op(
                gpu,
                Family::Mat(self.ty),
                "matvec",
                &bufs,
                Some(&p),
                step,
                Box::new(move |s| if s.rows(sel) <= MATVEC_MAX { fold(rows) } else { [0, 0, 0] }),
            )?;
            let big = op(
                gpu,
                Family::Mat(self.ty),
                "matmul",
                &bufs,
                Some(&p),
                step,
                Box::new(move |s| if s.rows(sel) > MATVEC_MAX { [rows.div_ceil(64), s.rows(sel).div_ceil(32), 1] } else { [0, 0, 0] }),
            )?;
            out.push((small, big));
        }
        Ok(out)
    }
}
