//! AVX2 tile kernels: the generic bodies of `avx2_q.rs` (32-element block types) and
//! `avx2_k.rs` (Q4_K, Q6_K) with several weight rows per call, reading the standard
//! `vec_dot_type` activation rows (no packing). Each (row, token) sees the operations of the
//! AVX2 `DotFn`, so results are bit-identical to it.
//!
//! Register tile: 1 row × 4 tokens for every type (16 ymm registers; the 32-element types keep
//! two accumulators per (row, token)). Measured: 1.5x the `DotFn` per dot for Q5_0 / Q8_0 at
//! 64 tokens, where 2 rows × 2 tokens gave 1.1x (the `sign` per (row, token) and the
//! per-block f16 scales dominate; reusing activations across rows saves little).
use super::blocks::*;
use super::avx2_k::{q4_k_gemm, q4_k_gemv, q6_k_tiled, q6_k_vec};
use super::avx2_q::{iq4_nl_q8_0, iq4_nlx8_q8_0, mxfp4_q8_0, mxfp4x8_q8_0, q4_0_q8_0, q4_0x8_q8_0, q4_1_q8_1, q5_0_q8_0, q5_1_q8_1, q8_0_q8_0};
use super::tile::{drive, Tile, TileFn, TileKernel};
use super::{vec_dot_type, GgmlType};

fn has_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

/// The AVX2 tile kernel for `ty`, or `None`.
pub(super) fn kernel(ty: GgmlType) -> Option<TileKernel> {
    if !has_avx2() {
        return None;
    }
    use GgmlType::*;
    let run: TileFn = match ty {
        Q8_0 => run_q8_0,
        Q5_0 => run_q5_0,
        Q4_0 => run_q4_0,
        IQ4_NL => run_iq4_nl,
        MXFP4 => run_mxfp4,
        Q4_1 => run_q4_1,
        Q5_1 => run_q5_1,
        Q4_K => run_q4_k,
        Q6_K => run_q6_k,
        _ => return None,
    };
    let act_bytes: fn(usize) -> usize = match vec_dot_type(ty) {
        Q8_1 => |n| Q8_1.row_bytes(n),
        Q8_K => |n| Q8_K.row_bytes(n),
        _ => |n| Q8_0.row_bytes(n),
    };
    let batch: Option<TileFn> = match ty {
        Q4_K => Some(run_q4_k_gemm),
        Q6_K => Some(run_q6_k_tiled),
        _ => None,
    };
    Some(TileKernel { run, act_bytes, prep: None, packs: false, batch })
}

/// The AVX2 tile kernel in the order of llama.cpp's repacked rows-of-8 kernels for `ty`
/// (`quant::row_chain`; Q4_0, IQ4_NL), or `None`.
pub(super) fn kernel_chain(ty: GgmlType) -> Option<TileKernel> {
    if !has_avx2() {
        return None;
    }
    let run: TileFn = match ty {
        GgmlType::Q4_0 => run_q4_0x8,
        GgmlType::IQ4_NL => run_iq4_nlx8,
        GgmlType::MXFP4 => run_mxfp4x8,
        _ => return None,
    };
    Some(TileKernel { run, act_bytes: |n| GgmlType::Q8_0.row_bytes(n), prep: None, packs: false, batch: None })
}

macro_rules! tiles {
    ($($tile:ident, $run:ident => $kernel:ident, $bs:expr, $wts:expr, $ats:expr, [$rw:expr, $c:expr, $rg:expr];)*) => {$(
        #[allow(non_camel_case_types)]
        struct $tile;
        impl Tile for $tile {
            const BS: usize = $bs;
            const WTS: usize = $wts;
            fn act_blocks(bytes: usize) -> usize {
                bytes / $ats
            }
            #[inline(always)]
            unsafe fn run<const RW: usize, const C: usize>(nb: usize, w: [*const u8; RW], a: [*const u8; C]) -> [[f32; C]; RW] {
                $kernel::<RW, C>(nb, w, a)
            }
        }
        #[allow(clippy::too_many_arguments)]
        pub(super) fn $run(n: usize, w: &[u8], ws: usize, rows: usize, a: &[u8], as_: usize, cols: usize, out: &mut [f32], os: usize) {
            drive::<$tile, { $rw }, { $c }, { $rg }>(n, w, ws, rows, a, as_, cols, out, os)
        }
    )*};
}

// SAFETY (of the generated code): reached only through `kernel`, after the CPU check;
// `drive` bounds `nb` by every row and token.
tiles! {
    TQ8_0, run_q8_0 => q8_0_q8_0, 32, 34, 34, [1, 4, 1];
    TQ5_0, run_q5_0 => q5_0_q8_0, 32, 22, 34, [1, 4, 1];
    TQ4_0, run_q4_0 => q4_0_q8_0, 32, 18, 34, [1, 4, 1];
    TIQ4_NL, run_iq4_nl => iq4_nl_q8_0, 32, 18, 34, [1, 4, 1];
    TQ4_0x8, run_q4_0x8 => q4_0x8_q8_0, 32, 18, 34, [1, 4, 1];
    TIQ4_NLx8, run_iq4_nlx8 => iq4_nlx8_q8_0, 32, 18, 34, [1, 4, 1];
    TMXFP4, run_mxfp4 => mxfp4_q8_0, 32, 17, 34, [1, 4, 1];
    TMXFP4x8, run_mxfp4x8 => mxfp4x8_q8_0, 32, 17, 34, [1, 4, 1];
    TQ4_1, run_q4_1 => q4_1_q8_1, 32, 20, 36, [1, 4, 1];
    TQ5_1, run_q5_1 => q5_1_q8_1, 32, 24, 36, [1, 4, 1];
    TQ4_K, run_q4_k => q4_k_gemv, QK_K, Q4_K_BYTES, Q8_K_BYTES, [1, 4, 1];
    TQ4_K_GEMM, run_q4_k_gemm => q4_k_gemm, QK_K, Q4_K_BYTES, Q8_K_BYTES, [1, 4, 1];
    TQ6_K, run_q6_k => q6_k_vec, QK_K, Q6_K_BYTES, Q8_K_BYTES, [1, 4, 1];
    TQ6_K_TILED, run_q6_k_tiled => q6_k_tiled, QK_K, Q6_K_BYTES, Q8_K_BYTES, [1, 4, 1];
}
