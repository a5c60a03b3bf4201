//! Tile kernels (`tile.rs`) against the single-row `DotFn` of the same type and ISA: every
//! output element bit for bit, for every ISA (and AVX-512 build) the machine has, all tile
//! shapes and remainders, padded strides, odd block counts and short buffers.
use super::dispatch::{available, dot_fn_for, Isa};
use super::tests::{act_row, weight_row, Fill, Rng, WEIGHT_TYPES};
use super::tile::{tile_kernel_for, TileFn, TileKernel};
use super::{vec_dot_type, DotFn, GgmlType};

/// (name, tile kernel, the `DotFn` it must match) for every tile build this machine runs.
fn tile_kernels(ty: GgmlType) -> Vec<(String, TileKernel, DotFn)> {
    let mut v = Vec::new();
    for isa in available() {
        if let (Some(k), Some(d)) = (tile_kernel_for(ty, isa), dot_fn_for(ty, isa)) {
            v.push((isa.name().to_string(), k, d));
        }
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(run) = super::avx512::plain_tile(ty) {
        // the non-VNNI AVX-512 K-quant build, which VNNI machines never dispatch
        let plain = super::avx512::variants(ty).into_iter().find(|(n, _, _)| *n == "avx512-plain");
        if let (Some((_, d, _)), Some(k)) = (plain, tile_kernel_for(ty, Isa::Avx512)) {
            v.push(("avx512-plain".to_string(), TileKernel { run, ..k }, d));
        }
    }
    v
}

/// Activations of `cols` tokens: the `vec_dot_type` rows (`q_stride` apart) and the kernel's
/// input (`a_stride` apart, `pad` bytes of junk between tokens).
fn tokens(ty: GgmlType, k: &TileKernel, n: usize, cols: usize, pad: usize, rng: &mut Rng, extreme: bool) -> (Vec<u8>, usize, Vec<u8>, usize) {
    let vt = vec_dot_type(ty);
    let q_stride = vt.row_bytes(n);
    let a_stride = (k.act_bytes)(n) + pad;
    let mut q = vec![0u8; q_stride * cols];
    let mut a = vec![0xA5u8; a_stride * cols];
    for t in 0..cols {
        let (_, row) = act_row(ty, n, rng, extreme);
        q[t * q_stride..(t + 1) * q_stride].copy_from_slice(&row);
        let dst = &mut a[t * a_stride..t * a_stride + (k.act_bytes)(n)];
        match k.prep {
            Some(prep) => prep(n, &row, dst),
            None => dst.copy_from_slice(&row),
        }
    }
    (q, q_stride, a, a_stride)
}

/// Runs `run` over `rows` × `cols` and compares every element with `dot`.
#[allow(clippy::too_many_arguments)]
fn check(name: &str, ty: GgmlType, run: TileFn, dot: DotFn, n: usize, w: &[u8], w_stride: usize, rows: usize, q: &[u8], q_stride: usize, a: &[u8], a_stride: usize, cols: usize) {
    let out_stride = rows + 3;
    let mut out = vec![f32::NAN; out_stride * cols];
    run(n, w, w_stride, rows, a, a_stride, cols, &mut out, out_stride);
    let row_bytes = ty.row_bytes(n);
    for t in 0..cols {
        for r in 0..rows {
            let want = dot(n, &w[r * w_stride..r * w_stride + row_bytes], &q[t * q_stride..(t + 1) * q_stride]);
            let got = out[t * out_stride + r];
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{} {name} n={n} rows={rows} cols={cols} (r {r}, t {t}): {got} vs {want}",
                ty.name()
            );
        }
        for r in rows..out_stride {
            assert!(out[t * out_stride + r].is_nan(), "{} {name}: wrote outside the tile", ty.name());
        }
    }
}

fn weights(ty: GgmlType, n: usize, rows: usize, pad: usize, rng: &mut Rng, fill: Fill) -> (Vec<u8>, usize) {
    let row_bytes = ty.row_bytes(n);
    let stride = row_bytes + pad;
    let mut w = vec![0x5Au8; stride * rows];
    for r in 0..rows {
        w[r * stride..r * stride + row_bytes].copy_from_slice(&weight_row(ty, n, rng, fill));
    }
    (w, stride)
}

#[test]
fn tiles_equal_single_row_dots_bit_for_bit() {
    let mut rng = Rng(91);
    let mut covered = 0;
    for &ty in &WEIGHT_TYPES {
        let kernels = tile_kernels(ty);
        for n in [32usize, 96, 256, 640, 768, 2048] {
            if n % ty.block_size() != 0 {
                continue;
            }
            for (rows, cols) in [(1, 1), (5, 1), (9, 1), (2, 2), (3, 7), (4, 8), (5, 9), (2, 16), (7, 17), (4, 31)] {
                let pad = if (rows + cols) % 2 == 0 { 0 } else { 40 };
                let (w, w_stride) = weights(ty, n, rows, pad, &mut rng, Fill::Random);
                for (name, k, dot) in &kernels {
                    let (q, qs, a, as_) = tokens(ty, k, n, cols, pad, &mut rng, false);
                    check(name, ty, k.run, *dot, n, &w, w_stride, rows, &q, qs, &a, as_, cols);
                    covered += 1;
                }
            }
        }
    }
    #[cfg(target_arch = "x86_64")]
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c") {
        assert!(covered > 0, "no tile kernel was tested");
    }
    let _ = covered;
}

/// Matrices larger than one row block of `drive` (`tile::ROW_BLOCK_BYTES`), several column
/// passes: every block's outputs land in their rows, bit for bit.
#[test]
fn tiles_over_several_row_blocks_equal_single_row_dots() {
    let mut rng = Rng(97);
    for &ty in &WEIGHT_TYPES {
        let n = if ty.block_size() == 256 { 512 } else { 640 };
        let pad = 24;
        let rows = super::tile::ROW_BLOCK_BYTES * 2 / (ty.row_bytes(n) + pad) + 7;
        let (w, w_stride) = weights(ty, n, rows, pad, &mut rng, Fill::Random);
        for (name, k, dot) in &tile_kernels(ty) {
            for cols in [3usize, 17] {
                let (q, qs, a, as_) = tokens(ty, k, n, cols, 0, &mut rng, false);
                check(name, ty, k.run, *dot, n, &w, w_stride, rows, &q, qs, &a, as_, cols);
            }
        }
    }
}

/// The batch-order tiles (Q4_K, Q6_K, the grid i-quants' tiled order; F32, F16 in tinyBLAS's
/// order; `TileKernel::batch`) against the scalar batch-order dot.
#[test]
fn batch_tiles_equal_scalar_batch_dots_bit_for_bit() {
    use GgmlType::*;
    let mut rng = Rng(93);
    for ty in [Q4_K, Q6_K, F32, F16, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M] {
        let reference = super::scalar::dot_batch(ty).expect("batch-order reference");
        // (40: not a multiple of 16, where tinyBLAS declines and the vec_dot order applies)
        let ns: &[usize] = if ty.block_size() == 1 { &[40, 96, 256, 384] } else { &[256, 768, 2048] };
        for &n in ns {
            // (rows past 16 and 32: the lanes of more than one packed Q4_K panel)
            for (rows, cols) in [(1, 1), (5, 1), (3, 7), (4, 8), (7, 17), (17, 9), (35, 4)] {
                let (w, w_stride) = weights(ty, n, rows, 40, &mut rng, Fill::Random);
                for (name, k, _) in tile_kernels(ty) {
                    let batch = k.batch.unwrap_or_else(|| panic!("{name} {}: no batch kernel", ty.name()));
                    let (q, qs, a, as_) = tokens(ty, &k, n, cols, 0, &mut rng, false);
                    check(&format!("{name}-batch"), ty, batch, reference, n, &w, w_stride, rows, &q, qs, &a, as_, cols);
                }
            }
        }
    }
}

/// The repacked rows-of-8 order's tiles (Q4_0, IQ4_NL; `quant::chain_kernels`) against the
/// scalar chain dot.
#[test]
fn row_chain_tiles_equal_scalar_chain_dots_bit_for_bit() {
    let mut rng = Rng(94);
    for ty in [GgmlType::Q4_0, GgmlType::IQ4_NL] {
        let reference = super::scalar::dot_chain(ty).expect("chain reference");
        let Some((_, _, Some(k))) = super::chain_kernels(ty) else { continue };
        for n in [32usize, 256, 2048] {
            for (rows, cols) in [(1, 1), (5, 1), (3, 7), (8, 8), (17, 9)] {
                let (w, w_stride) = weights(ty, n, rows, 40, &mut rng, Fill::Random);
                let (q, qs, a, as_) = tokens(ty, &k, n, cols, 0, &mut rng, false);
                check("chain", ty, k.run, reference, n, &w, w_stride, rows, &q, qs, &a, as_, cols);
            }
        }
    }
}

#[test]
fn tiles_equal_single_row_dots_on_extreme_blocks() {
    // -128 weight bytes (Q8_0), all-ones high bits, saturation traps against ±127 activations.
    let mut rng = Rng(92);
    for &ty in &WEIGHT_TYPES {
        let kernels = tile_kernels(ty);
        let n = 3 * ty.block_size().max(32);
        for c in [0x00u8, 0xFF, 0x80, 0x7F, 0x55] {
            let (w, ws) = weights(ty, n, 3, 0, &mut rng, Fill::Const(c));
            for (name, k, dot) in &kernels {
                let (q, qs, a, as_) = tokens(ty, k, n, 5, 0, &mut rng, true);
                check(name, ty, k.run, *dot, n, &w, ws, 3, &q, qs, &a, as_, 5);
            }
        }
    }
}

#[test]
fn tiles_stop_at_short_buffers_and_small_outputs() {
    let mut rng = Rng(93);
    for &ty in &[GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_1, GgmlType::IQ2_XXS, GgmlType::IQ1_M] {
        let n = 4 * ty.block_size().max(32);
        let half = n / 2;
        let (w, ws) = weights(ty, n, 3, 0, &mut rng, Fill::Random);
        for (name, k, dot) in tile_kernels(ty) {
            let (q, qs, a, as_) = tokens(ty, &k, n, 3, 0, &mut rng, false);
            // the last token holds only half the blocks: every element stops there
            let short = 2 * as_ + (k.act_bytes)(half);
            let mut out = vec![0f32; 9];
            (k.run)(n, &w, ws, 3, &a[..short], as_, 3, &mut out, 3);
            for t in 0..3 {
                for r in 0..3 {
                    let want = dot(half, &w[r * ws..], &q[t * qs..]);
                    assert_eq!(out[t * 3 + r].to_bits(), want.to_bits(), "{} {name} short act (r {r}, t {t})", ty.name());
                }
            }
            // the last weight row short: likewise
            let w_short = &w[..2 * ws + ty.row_bytes(half)];
            (k.run)(n, w_short, ws, 3, &a, as_, 3, &mut out, 3);
            assert_eq!(out[0].to_bits(), dot(half, &w, &q).to_bits(), "{} {name} short weights", ty.name());
            // an output too small for the tile: only what fits is written, no panic
            let mut small = vec![f32::NAN; 4];
            (k.run)(n, &w, ws, 3, &a, as_, 3, &mut small, 3);
            assert_eq!(small[3].to_bits(), dot(n, &w, &q[qs..]).to_bits(), "{} {name} small out", ty.name());
            // empty calls
            (k.run)(n, &w, ws, 0, &a, as_, 3, &mut out, 3);
            (k.run)(n, &w, ws, 3, &a, as_, 0, &mut out, 3);
            (k.run)(n, &[], ws, 3, &[], as_, 3, &mut out, 3);
        }
    }
}

#[test]
fn tile_kernels_exist_where_expected() {
    #[cfg(target_arch = "x86_64")]
    if available().contains(&Isa::Avx2) {
        for ty in [GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q4_0, GgmlType::IQ4_NL, GgmlType::Q4_1, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q6_K] {
            assert!(tile_kernel_for(ty, Isa::Avx2).is_some(), "{}", ty.name());
            assert!(tile_kernel_for(ty, Isa::Avx512).is_some() || !available().contains(&Isa::Avx512), "{}", ty.name());
        }
    }
    #[cfg(target_arch = "x86_64")]
    if super::avx512::has_vnni() {
        assert!(tile_kernel_for(GgmlType::IQ3_S, Isa::Avx512).is_some_and(|k| k.batch.is_some()), "grid i-quants: packed prefill panels");
    }
    assert!(tile_kernel_for(GgmlType::Q8_0, Isa::Scalar).is_none());
    assert!(tile_kernel_for(GgmlType::BF16, super::isa()).is_none());
}

/// CPU time of this thread in seconds (benchmarks on a shared machine: time spent descheduled
/// does not count).
fn cpu_now() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, tp: *mut Timespec) -> i32;
    }
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: glibc's clock_gettime with CLOCK_THREAD_CPUTIME_ID (3) writes one timespec.
    unsafe { clock_gettime(3, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

/// Throughput of the tile kernels on the Gemma 3 270M shapes (`cargo test --release --lib
/// tile_speed -- --ignored --nocapture`): ns per weight row per token, best of several runs.
#[test]
#[ignore]
fn tile_speed() {
    let mut rng = Rng(5);
    for (ty, n, rows) in [(GgmlType::Q5_0, 640, 2048), (GgmlType::Q8_0, 640, 4096), (GgmlType::Q4_K, 2048, 640), (GgmlType::Q6_K, 2048, 640)] {
        let (w, ws) = weights(ty, n, rows, 0, &mut rng, Fill::Random);
        for (name, k, dot) in tile_kernels(ty) {
            for cols in [1usize, 64] {
                let (q, qs, a, as_) = tokens(ty, &k, n, cols, 0, &mut rng, false);
                let mut out = vec![0f32; rows * cols];
                let mut best = f64::MAX;
                let mut best_dot = f64::MAX;
                for _ in 0..7 {
                    let t = cpu_now();
                    (k.run)(n, &w, ws, rows, &a, as_, cols, &mut out, rows);
                    best = best.min(cpu_now() - t);
                    let t = cpu_now();
                    for tk in 0..cols {
                        for r in 0..rows {
                            out[tk * rows + r] = dot(n, &w[r * ws..(r + 1) * ws], &q[tk * qs..(tk + 1) * qs]);
                        }
                    }
                    best_dot = best_dot.min(cpu_now() - t);
                }
                let per = 1e9 / (rows * cols) as f64;
                eprintln!(
                    "{:5} {name:13} n={n:5} cols={cols:3}: tile {:7.2} ns/dot, DotFn loop {:7.2} ns/dot ({:.2}x)",
                    ty.name(),
                    best * per,
                    best_dot * per,
                    best_dot / best
                );
            }
        }
    }
}

/// Register-tile shapes of the AVX-512 VNNI Q5_0 / Q8_0 tiles (`-- --ignored --nocapture`).
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn tile_shapes() {
    let Some(k) = tile_kernel_for(GgmlType::Q5_0, Isa::Avx512) else { return };
    if !super::avx512::has_vnni() {
        return;
    }
    let mut rng = Rng(6);
    let big = std::env::var("TILE_N").ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(640);
    for (ty, n, rows) in [(GgmlType::Q5_0, big, 2048), (GgmlType::Q8_0, big, 1024), (GgmlType::Q4_K, 2048, 640), (GgmlType::Q6_K, 2048, 640)] {
        let kq = ty.block_size() == 256;
        let (w, ws) = weights(ty, n, rows, 0, &mut rng, Fill::Random);
        let k = tile_kernel_for(ty, Isa::Avx512).unwrap_or(k);
        let cols = 48;
        let (_, _, a0, as_) = tokens(ty, &k, n, cols, 0, &mut rng, false);
        let mut buf = vec![0u8; a0.len() + 64];
        let off = if std::env::var("TILE_MISALIGN").is_ok() { 8 } else { buf.as_ptr().align_offset(64) };
        buf[off..off + a0.len()].copy_from_slice(&a0);
        let a = &buf[off..off + a0.len()];
        let mut out = vec![0f32; rows * cols];
        let only = std::env::var("TILE_SHAPE").ok();
        let shapes = if kq { super::avx512::k_shapes() } else { super::avx512_tile::shapes() };
        for (name, q5, q8) in shapes {
            if only.as_deref().is_some_and(|o| o != name) {
                continue;
            }
            let run = if ty == GgmlType::Q5_0 || ty == GgmlType::Q4_K { q5 } else { q8 };
            let mut best = f64::MAX;
            for _ in 0..if only.is_some() { 3000 } else { 15 } {
                let t = cpu_now();
                run(n, &w, ws, rows, a, as_, cols, &mut out, rows);
                best = best.min(cpu_now() - t);
            }
            eprintln!("{} {name:5}: {:6.2} ns/dot", ty.name(), best * 1e9 / (rows * cols) as f64);
        }
    }
}

/// Decode (one token) bandwidth of the tile kernels over a matrix far larger than the caches,
/// by prefetch distance (`-- --ignored --nocapture`).
#[test]
#[ignore]
fn gemv_bandwidth() {
    let mut rng = Rng(8);
    for (ty, n) in [(GgmlType::Q8_0, 640), (GgmlType::Q5_0, 640), (GgmlType::Q4_K, 2048), (GgmlType::Q6_K, 2048), (GgmlType::Q6_K, 8192)] {
        let Some(k) = super::tile::tile_kernel(ty) else { continue };
        let rows = (256usize << 20) / ty.row_bytes(n);
        let row = weight_row(ty, n, &mut rng, Fill::Random);
        let w: Vec<u8> = row.iter().copied().cycle().take(rows * row.len()).collect();
        let (_, _, a, as_) = tokens(ty, &k, n, 1, 0, &mut rng, false);
        let mut out = vec![0f32; rows];
        for (pf, dist) in [(0usize, 0usize), (2, 0), (0, 1024), (0, 2048), (0, 4096), (0, 8192), (0, 16384), (1, 4096)] {
            super::tile::PF_OVERRIDE.store(pf, std::sync::atomic::Ordering::Relaxed);
            super::tile::PF_DIST.store(dist, std::sync::atomic::Ordering::Relaxed);
            let mut best = f64::MAX;
            for _ in 0..4 {
                let t = std::time::Instant::now();
                (k.run)(n, &w, row.len(), rows, &a, as_, 1, &mut out, rows);
                best = best.min(t.elapsed().as_secs_f64());
            }
            eprintln!("{} prefetch {pf} tiles, {dist} bytes: {:.1} GB/s", ty.name(), w.len() as f64 / best / 1e9);
        }
        super::tile::PF_OVERRIDE.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
        super::tile::PF_DIST.store(usize::MAX, std::sync::atomic::Ordering::Relaxed);
        // in L2 (compute bound): the same kernel over a 512 KiB matrix, repeated
        let rows = (512usize << 10) / ty.row_bytes(n);
        let w = &w[..rows * row.len()];
        let mut best = f64::MAX;
        for _ in 0..20 {
            let t = std::time::Instant::now();
            for _ in 0..50 {
                (k.run)(n, w, row.len(), rows, &a, as_, 1, &mut out, rows);
            }
            best = best.min(t.elapsed().as_secs_f64() / 50.0);
        }
        eprintln!("{} in L2: {:.1} GB/s", ty.name(), w.len() as f64 / best / 1e9);
    }
}

/// The AVX-512 activation quantizers write the same bytes as the scalar references.
#[cfg(target_arch = "x86_64")]
#[test]
fn vector_activation_quantizers_equal_scalar() {
    use super::activation;
    let mut rng = Rng(31);
    let n = 4096;
    let mut cases: Vec<Vec<f32>> = Vec::new();
    for scale in [1e-30f32, 1e-6, 1.0, 3.0, 1e4, 1e30] {
        cases.push((0..n).map(|_| { let v = (rng.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0; v * scale }).collect());
    }
    // exact ties after scaling (k + 0.5 steps), zeros of both signs, repeated maxima of both
    // signs, subnormals, and blocks holding NaN / ±inf (scalar fallback)
    cases.push((0..n).map(|i| ((i % 255) as f32 - 127.0) * 0.5).collect());
    // amax 127 in every block: id = 1, so every k + 0.5 is an exact tie
    cases.push((0..n).map(|i| if i % 32 == 0 { 127.0 } else { (i % 250) as f32 - 125.0 + 0.5 }).collect());
    cases.push((0..n).map(|i| if i % 2 == 0 { 0.0 } else { -0.0 }).collect());
    cases.push((0..n).map(|i| if i % 7 == 0 { -2.5 } else if i % 5 == 0 { 2.5 } else { 1.25 }).collect());
    cases.push((0..n).map(|i| f32::from_bits(1 + (i as u32 % 1000))).collect());
    cases.push((0..n).map(|i| match i % 301 { 0 => f32::NAN, 100 => f32::INFINITY, 200 => f32::NEG_INFINITY, _ => i as f32 * 0.01 }).collect());
    for (c, x) in cases.iter().enumerate() {
        for ty in [GgmlType::Q8_0, GgmlType::Q8_1, GgmlType::Q8_K] {
            let mut want = vec![0u8; ty.row_bytes(n)];
            match ty {
                GgmlType::Q8_0 => activation::q8_0(x, &mut want),
                GgmlType::Q8_1 => activation::q8_1(x, &mut want),
                _ => activation::q8_k(x, &mut want),
            }
            let mut got = vec![0x33u8; ty.row_bytes(n)];
            if !super::activation_avx512::quantize_into(ty, x, &mut got) {
                return; // no AVX-512 here
            }
            if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
                panic!("{} case {c}: byte {i} (block {}) differs: {} vs {}", ty.name(), i / ty.type_size(), got[i], want[i]);
            }
        }
    }
}

/// Prefill speed of the batch-order tiles: row-wise (one row per register, 16 lanes reduced
/// per group) against rows in lanes (`avx512_packed`), one 64-token call over a 2048 × 2048
/// matrix (`-- --ignored --nocapture`); both give the same bits.
#[cfg(target_arch = "x86_64")]
#[test]
#[ignore]
fn batch_tile_speed() {
    if !super::avx512::has_vnni() {
        return;
    }
    for (ty, rowwise) in [(GgmlType::Q4_K, super::avx512::Q4_K_GEMM_ROWWISE_VNNI), (GgmlType::Q6_K, super::avx512::Q6_K_TILED_ROWWISE_VNNI)] {
        let Some(k) = super::tile::tile_kernel(ty) else { return };
        let packed = k.batch.expect("batch kernel");
        let mut rng = Rng(12);
        let (n, rows, cols) = (2048, 2048, 64);
        let (w, ws) = weights(ty, n, rows, 0, &mut rng, Fill::Random);
        let (_, _, a, as_) = tokens(ty, &k, n, cols, 0, &mut rng, false);
        let mut outs = Vec::new();
        for (name, run) in [("row-wise", rowwise), ("packed", packed)] {
            let mut out = vec![0f32; rows * cols];
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t = std::time::Instant::now();
                run(n, &w, ws, rows, &a, as_, cols, &mut out, rows);
                best = best.min(t.elapsed().as_secs_f64());
            }
            eprintln!("{} batch {name:8}: {:.2} ms, {:.1} GMAC/s", ty.name(), best * 1e3, (n * rows * cols) as f64 / best / 1e9);
            outs.push(out);
        }
        assert!(outs[0].iter().zip(&outs[1]).all(|(x, y)| x.to_bits() == y.to_bits()));
    }
}

/// The 16-row lane panels in the block-chain order (`avx512_chain`): from `PANEL_TOKENS`
/// tokens against the scalar chain dot, below it against the row kernels' own order (the
/// chain for `kernel_chain` over Q8_0 rows, ggml's `vec_dot` for `kernel_prefill` over
/// `avx512_tile`'s packed pairs); random and extreme
/// blocks (-128 bytes, all-ones nibbles and high bits, MXFP4's subnormal exponents), rows
/// past one and two panels, padded strides.
#[cfg(target_arch = "x86_64")]
#[test]
fn chain_panels_equal_scalar_chain_dots_bit_for_bit() {
    use super::avx512_chain::{kernel_chain, kernel_prefill, PANEL_TOKENS};
    use GgmlType::*;
    if !super::avx512::has_vnni() {
        eprintln!("skipped: this CPU has no AVX-512 VNNI");
        return;
    }
    let mut rng = Rng(95);
    let mut panels = 0;
    for ty in [Q4_0, IQ4_NL, MXFP4, Q5_0, Q8_0] {
        let chain = super::scalar::dot_chain(ty).expect("chain reference");
        let vec = dot_fn_for(ty, Isa::Avx512).expect("vec_dot kernel");
        let prefill = kernel_prefill(ty).expect("prefill kernel");
        for n in [32usize, 640, 2048] {
            for (rows, cols) in [(1, 16), (5, 16), (16, 17), (17, 20), (33, 35), (3, 15), (16, 1)] {
                for fill in [Fill::Random, Fill::Const(0xFF), Fill::Const(0x80), Fill::Const(0x11)] {
                    let extreme = !matches!(fill, Fill::Random);
                    let (mut w, ws) = weights(ty, n, rows, 40, &mut rng, fill);
                    if ty == MXFP4 {
                        // every exponent class of ggml_e8m0_to_fp32_half: subnormal (0, 1), 2^-126, ..
                        for r in 0..rows {
                            for b in 0..n / 32 {
                                w[r * ws + b * 17] = [0u8, 1, 2, 127, 130][(r + b) % 5];
                            }
                        }
                    }
                    let (q, qs, a, as_) = tokens(ty, &prefill, n, cols, 8, &mut rng, extreme);
                    let want = if cols >= PANEL_TOKENS { chain } else { vec };
                    check("prefill", ty, prefill.run, want, n, &w, ws, rows, &q, qs, &a, as_, cols);
                    let (pairs_fallback, chain_fallback) = super::avx512_chain::fallbacks(ty);
                    check("prefill-fallback", ty, pairs_fallback, chain, n, &w, ws, rows, &q, qs, &a, as_, cols);
                    if let Some(k) = kernel_chain(ty) {
                        // (its own activation layout: Q8_0 rows)
                        let (q, qs, a, as_) = tokens(ty, &k, n, cols, 8, &mut rng, extreme);
                        check("chain", ty, k.run, chain, n, &w, ws, rows, &q, qs, &a, as_, cols);
                        if let Some(f) = chain_fallback {
                            check("chain-fallback", ty, f, chain, n, &w, ws, rows, &q, qs, &a, as_, cols);
                        }
                    }
                    panels += usize::from(cols >= PANEL_TOKENS);
                }
            }
        }
    }
    assert!(panels > 0);
}

/// The fast mode's AVX-512 BF16 tiles (`bf16_tile.rs`) against their twin `bf16_dot::dot`,
/// bit for bit: F16 and F32 weights, the 4 × 6 and 4 × 1 tiles and their remainders, padded
/// strides, and rows holding f32 denormals, huge values, zeros and values that round up.
#[test]
fn bf16_tiles_equal_their_twin_bit_for_bit() {
    use super::{fast_float_kernel, Exactness};
    let mut rng = Rng(23);
    for ty in [GgmlType::F16, GgmlType::F32] {
        let Some(k) = fast_float_kernel(ty, 64, Exactness::Fast) else {
            eprintln!("bf16_tiles_equal_their_twin_bit_for_bit: no AVX-512 BF16 here, skipped");
            return;
        };
        assert!(fast_float_kernel(ty, 64, Exactness::Default).is_none() && fast_float_kernel(ty, 48, Exactness::Fast).is_none());
        let twin = super::bf16_dot::dot_fn(ty).expect("F16 / F32 have a twin");
        for n in [32usize, 64, 384] {
            for (rows, cols) in [(1, 1), (3, 5), (4, 6), (5, 7), (9, 13), (8, 12), (2, 19)] {
                for pad in [0usize, 6] {
                    let (w, ws) = weights(ty, n, rows, pad, &mut rng, Fill::Random);
                    let (q, qs, a, as_) = tokens(ty, &k, n, cols, pad, &mut rng, pad > 0);
                    check("bf16", ty, k.run, twin, n, &w, ws, rows, &q, qs, &a, as_, cols);
                }
            }
        }
        // special values (F32 rows reach f32 denormals; F16 rows their f16 extremes)
        let special = [1e-39f32, -3e-40, 65504.0, -1e30, 0.0, -0.0, 1.00390625, 1.01171875, 3.0e-38, 1.7e38];
        let n = 64;
        let row = |off: usize| -> Vec<u8> {
            (0..n)
                .flat_map(|i| {
                    let x = if i % 3 == 0 { special[(i / 3 + off) % special.len()] } else { rng_free(i + off) };
                    if ty == GgmlType::F16 { super::f16::f32_to_f16(x.clamp(-65504.0, 65504.0)).to_le_bytes().to_vec() } else { x.to_le_bytes().to_vec() }
                })
                .collect()
        };
        let (rows, cols) = (5, 7);
        let w: Vec<u8> = (0..rows).flat_map(|r| row(r)).collect();
        let q: Vec<u8> = (0..cols).flat_map(|t| row(t + 3)).collect();
        let qs = q.len() / cols;
        let a_stride = (k.act_bytes)(n);
        let mut a = vec![0u8; a_stride * cols];
        for t in 0..cols {
            (k.prep.expect("bf16 tiles read rounded rows"))(n, &q[t * qs..(t + 1) * qs], &mut a[t * a_stride..(t + 1) * a_stride]);
            let mut want = vec![0u8; a_stride];
            if ty == GgmlType::F16 {
                super::bf16_dot::round_row::<true>(n, &q[t * qs..(t + 1) * qs], &mut want)
            } else {
                super::bf16_dot::round_row::<false>(n, &q[t * qs..(t + 1) * qs], &mut want)
            }
            assert_eq!(&a[t * a_stride..(t + 1) * a_stride], &want[..], "{} bf16 rounding of token {t}", ty.name());
        }
        check("bf16 special", ty, k.run, twin, n, &w, w.len() / rows, rows, &q, qs, &a, a_stride, cols);
    }
}

/// A deterministic value of either sign, some of which round to bf16 at a tie.
fn rng_free(i: usize) -> f32 {
    let m = (i * 7919 % 1000) as f32 / 250.0 - 2.0;
    if i % 5 == 0 {
        1.0 + (1 + 2 * (i % 64)) as f32 * 2f32.powi(-8)
    } else {
        m
    }
}
