//! The grid ("i-quant") types' lookup tables on the device: ggml's `iq2xxs_grid`,
//! `iq2xs_grid`, `iq2s_grid`, `iq3xxs_grid`, `iq3s_grid` and `iq1s_grid` (the CPU path's
//! `quant::iquant` / `quant::iquant1` bytes) in one read-only buffer per device, bound at
//! slot 5 of the matrix-product and embedding kernels of those types, which grids.wgsl's
//! `dq4_*` loaders read as `G`.
use super::Family;
use crate::error::{Error, Result};
use crate::gpu::device::Gpu;
use crate::quant::iquant::{IQ2S, IQ2XS, IQ2XXS, IQ3S, IQ3XXS};
use crate::quant::iquant1::IQ1S;
use crate::quant::GgmlType;

/// The tables in buffer order with their WGSL offset constants (in u32 words).
fn tables() -> [(&'static str, &'static [u8]); 6] {
    [("IQ2XXS_G", IQ2XXS), ("IQ2XS_G", IQ2XS), ("IQ2S_G", IQ2S), ("IQ3XXS_G", IQ3XXS), ("IQ3S_G", IQ3S), ("IQ1S_G", IQ1S)]
}

/// Whether a type's loader reads the grid tables.
pub fn uses_grids(ty: GgmlType) -> bool {
    use GgmlType::*;
    matches!(ty, IQ2_XXS | IQ2_XS | IQ2_S | IQ3_XXS | IQ3_S | IQ1_S | IQ1_M)
}

/// Whether a kernel family of a weight type binds the grid tables (slot 5).
pub fn family_binds(f: Family) -> bool {
    matches!(f, Family::Mat(t) | Family::Embed(t) if uses_grids(t))
}

/// The WGSL that declares the tables, their offsets, the block sizes and the loaders.
pub fn wgsl() -> String {
    let mut s = String::from("@group(0) @binding(5) var<storage, read> G: array<u32>;\n");
    let mut at = 0;
    for (name, bytes) in tables() {
        s += &format!("const {name}: u32 = {at}u;\n");
        at += bytes.len() / 4;
    }
    use GgmlType::*;
    for ty in [IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M] {
        s += &format!("const {}_BYTES: u32 = {}u;\n", ty.name(), ty.type_size());
    }
    s + include_str!("grids.wgsl")
}

/// The device's table buffer, uploaded on first use, when `ty` needs it.
pub fn buffer(gpu: &Gpu, ty: GgmlType) -> Result<Option<wgpu::Buffer>> {
    if !uses_grids(ty) {
        return Ok(None);
    }
    let mut slot = gpu.pipes.grids.lock().map_err(|_| Error::Gpu("grid table cache poisoned".into()))?;
    if let Some(b) = slot.as_ref() {
        return Ok(Some(b.clone()));
    }
    let bytes: Vec<u8> = tables().iter().flat_map(|(_, b)| b.iter().copied()).collect();
    let b = gpu.upload("i-quant grid tables", &bytes)?;
    *slot = Some(b.clone());
    Ok(Some(b))
}
