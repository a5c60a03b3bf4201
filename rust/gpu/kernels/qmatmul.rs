//! Integer-dot matrix products (qmatmul.wgsl) for the types whose CPU kernels dot against
//! 8-bit activations: the activations are quantized on the device exactly as the CPU path
//! does it (qact.wgsl), so block sums are the same integers and results differ from the
//! CPU only in the f32 order of adding blocks. Q8_0 / Q4_0 / Q5_0 use Q8_0 activations,
//! Q4_K / Q6_K use Q8_K; other types take the f32 path (matmul.rs).
use super::matmul::GpuWeight;
use super::{fold, op, words, Family, Op, StepSize, GRID_X};
use crate::error::Result;
use crate::gpu::device::Gpu;
use crate::quant::GgmlType;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Act {
    /// 32-element blocks, f16-rounded scale (llama.cpp's Q8_0)
    Q8_0,
    /// 256-element blocks, f32 scale, 16 block sums (llama.cpp's Q8_K)
    Q8K,
}

impl Act {
    /// (elements, u32 words) per activation block on the device
    pub fn block(self) -> (usize, usize) {
        match self {
            Act::Q8_0 => (32, 9),
            Act::Q8K => (256, 81),
        }
    }

    /// u32 words of one quantized row of `n_in` elements
    pub fn row_words(self, n_in: usize) -> usize {
        let (e, w) = self.block();
        n_in / e * w
    }
}

/// The activation format of a weight type's integer kernel, if it has one.
pub fn int_act(ty: GgmlType) -> Option<Act> {
    use GgmlType::*;
    match ty {
        Q8_0 | Q4_0 | Q5_0 => Some(Act::Q8_0),
        Q4_K | Q6_K => Some(Act::Q8K),
        _ => None,
    }
}

/// WGSL constants and aliases that specialise qmatmul.wgsl to a weight type.
pub fn specialise(ty: GgmlType, dp4a: bool) -> Option<String> {
    let act = int_act(ty)?;
    let name = super::quant_name(ty)?;
    let (blk, ablk) = match act {
        Act::Q8_0 => (32, 9),
        Act::Q8K => (256, 81),
    };
    let dot4 = if dp4a { "dot4I8Packed(a, b)" } else { "dot(i8x4(a), i8x4(b))" };
    let finish = match ty {
        GgmlType::Q4_K | GgmlType::Q6_K => format!("block_finish_{name}"),
        _ => "lanes_finish".to_string(),
    };
    Some(format!(
        "const BLK: u32 = {blk}u;\nconst ABLK: u32 = {ablk}u;\n\
         fn block_step(rb: u32, b: u32, ab: u32, fl: u32, acc: ptr<function, array<f32, 8>>) {{\n    block_step_{name}(rb, b, ab, fl, acc);\n}}\n\
         fn block_finish(acc: ptr<function, array<f32, 8>>, fl: u32) -> f32 {{\n    return {finish}(acc, fl);\n}}\n\
         fn dot4i8(a: u32, b: u32) -> i32 {{\n    return {dot4};\n}}\n"
    ))
}

/// Quantize x [rows, n_in] (the step's tokens, or its selected rows when `sel`) into qa.
pub fn op_quant(gpu: &Gpu, act: Act, x: &wgpu::Buffer, qa: &wgpu::Buffer, n_in: usize, sel: bool, step: &wgpu::Buffer) -> Result<Op> {
    let p = words(&[n_in as u32, sel as u32, 0, 0]);
    let nb = (n_in / act.block().0) as u32;
    let entry = match act {
        Act::Q8_0 => "quant_q8_0",
        Act::Q8K => "quant_q8_k",
    };
    op(gpu, Family::QAct, entry, &[x, qa], Some(&p), step, Box::new(move |s: &StepSize| fold((s.rows(sel) * nb).div_ceil(64))))
}

impl GpuWeight {
    /// Y = W · X with X given quantized in `qa` (`op_quant` of this weight's `int_act`);
    /// `flags` holds each row's order flags (qmatmul.wgsl `FL`; `order_flags`).
    pub fn qops(&self, gpu: &Gpu, qa: &wgpu::Buffer, y: &wgpu::Buffer, flags: &wgpu::Buffer, step: &wgpu::Buffer, sel: bool) -> Result<Vec<Op>> {
        self.chunks
            .iter()
            .map(|c| {
                let p = words(&[self.n_in as u32, c.rows as u32, self.row_bytes as u32, c.row0 as u32, self.n_out as u32, sel as u32, 0, 0]);
                let rows = c.rows as u32;
                op(
                    gpu,
                    Family::QMat(self.ty),
                    "qmatvec",
                    &[&c.buf, qa, y, flags],
                    Some(&p),
                    step,
                    Box::new(move |s: &StepSize| {
                        let n = s.rows(sel);
                        if n == 0 {
                            return [0, 0, 0];
                        }
                        // 64 rows per workgroup, one token per z
                        let groups = rows.div_ceil(64);
                        [groups.min(GRID_X), groups.div_ceil(GRID_X), n]
                    }),
                )
            })
            .collect()
    }
}

/// The order flags of one row of a matrix product (qmatmul.wgsl `FL`): llama.cpp's Q4_K gemm
/// order (bit 0) and Q6_K tiled order (bit 1), from `model::orders::TokenOrder`.
pub fn order_flags(q4_k: bool, q6_k: bool) -> u32 {
    q4_k as u32 | (q6_k as u32) << 1
}
