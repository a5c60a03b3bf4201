//! Run-time choice of the instruction set for the dot kernels.
//! `LLAMARS_ISA=scalar|avx2|avx512|neon` forces a path (scalar is always available).
use super::{scalar, DotFn, DotRowsFn, GgmlType};
use std::sync::OnceLock;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    Scalar,
    Avx2,
    Avx512,
    Neon,
}

impl Isa {
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
        }
    }
}

/// Instruction sets this machine can run, best last.
pub fn available() -> Vec<Isa> {
    let mut v = vec![Isa::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
            v.push(Isa::Avx2);
            if is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bw")
                && is_x86_feature_detected!("avx512vl")
            {
                v.push(Isa::Avx512);
            }
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        v.push(Isa::Neon);
    }
    v
}

fn detect() -> Isa {
    let avail = available();
    let best = *avail.last().unwrap_or(&Isa::Scalar);
    match std::env::var("LLAMARS_ISA").ok().as_deref().map(str::to_ascii_lowercase).as_deref() {
        None | Some("") | Some("auto") => best,
        Some(name) => avail.iter().copied().find(|i| i.name() == name).unwrap_or(Isa::Scalar),
    }
}

/// The instruction set in use (detected once).
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(detect)
}

/// The fastest dot kernel for `ty` on this machine.
pub fn dot_fn(ty: GgmlType) -> Option<DotFn> {
    dot_fn_for(ty, isa())
}

/// The dot kernel in llama.cpp's batch order for `ty` (see `batch_tokens`), if the type has
/// one: the ISA's kernel where there is one (F32, F16, Q3_K, Q5_K, IQ4_XS under AVX2 and up),
/// else the scalar reference (`scalar::dot_batch`). Tile kernels carry their own
/// (`TileKernel::batch`). NEON kernels follow no llama.cpp order, so NEON has no batch order.
pub fn dot_batch_fn(ty: GgmlType) -> Option<DotFn> {
    dot_batch_fn_for(ty, isa())
}

/// [`dot_batch_fn`] under `isa`.
pub fn dot_batch_fn_for(ty: GgmlType, isa: Isa) -> Option<DotFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => super::avx2::dot_batch(ty).or_else(|| super::scalar::dot_batch(ty)),
        Isa::Scalar => super::scalar::dot_batch(ty),
        _ => None,
    }
}

/// The multi-row twin of [`dot_batch_fn`] (each output bit-identical to it), where the ISA
/// has one (the grid i-quants under AVX2 and up).
pub fn dot_batch_rows_fn(ty: GgmlType) -> Option<DotRowsFn> {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => super::avx2::dot_batch_rows(ty),
        _ => {
            let _ = ty;
            None
        }
    }
}

/// The kernels in the order of llama.cpp's repacked rows-of-8 kernels for `ty` (Q4_0, IQ4_NL;
/// see `quant::row_chain`): the single-row dot, the multi-row and tile kernels where the ISA
/// has them (AVX-512 machines run the AVX2 builds). `None` where the type has no such order,
/// or under NEON (whose kernels follow no llama.cpp order).
pub fn chain_kernels(ty: GgmlType) -> Option<(DotFn, Option<DotRowsFn>, Option<super::TileKernel>)> {
    match isa() {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => super::avx2::chain(ty).map(|(d, r)| (d, Some(r), super::avx2_tile::kernel_chain(ty))),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => super::avx2::chain(ty).map(|(d, r)| (d, Some(r), super::avx512_chain::kernel_chain(ty).or_else(|| super::avx2_tile::kernel_chain(ty)))),
        Isa::Scalar => super::scalar::dot_chain(ty).map(|d| (d, None, None)),
        _ => None,
    }
}

/// The dot kernel for `ty` under a given instruction set: the best kernel that ISA has for
/// the type, else a narrower ISA's (AVX-512 → AVX2), else the scalar reference. An ISA the
/// CPU lacks never yields its kernels (each ISA module checks the CPU before handing one
/// out; `is_x86_feature_detected!` is a cached load, and this runs once per matmul, not per row).
pub fn dot_fn_for(ty: GgmlType, isa: Isa) -> Option<DotFn> {
    let scalar = scalar::dot(ty);
    match isa {
        Isa::Scalar => scalar,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => super::avx2::dot(ty).or(scalar),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => super::avx512::dot(ty).or_else(|| super::avx2::dot(ty)).or(scalar),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => super::neon::dot(ty).or(scalar),
        #[allow(unreachable_patterns)]
        _ => scalar,
    }
}

/// The fastest multi-row kernel for `ty` on this machine (see [`DotRowsFn`]), or `None`
/// where only the single-row `dot_fn` exists.
pub fn dot_rows_fn(ty: GgmlType) -> Option<DotRowsFn> {
    dot_rows_fn_for(ty, isa())
}

/// The multi-row kernel for `ty` under `isa`, matching `dot_fn_for(ty, isa)` row by row
/// (bit-identical results), or `None`.
pub fn dot_rows_fn_for(ty: GgmlType, isa: Isa) -> Option<DotRowsFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => super::avx2::dot_rows(ty),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => match super::avx512::dot(ty) {
            // the AVX-512 kernel for the type, or (only when it has none) the AVX2 one
            Some(_) => super::avx512::dot_rows(ty),
            None => super::avx2::dot_rows(ty),
        },
        _ => {
            let _ = ty; // no multi-row kernels for this ISA
            None
        }
    }
}

/// Whether the AVX-512 kernels use VNNI (`vpdpbusd`) on this machine (diagnostics).
pub fn avx512_vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        super::avx512::has_vnni()
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}
