//! Where layers go: the device memory an offload needs, `-ngl` as llama.cpp counts it
//! (`auto` = as many as fit), and the check before anything is uploaded.
use super::offload::Offload;
use crate::error::{Error, Result};
use crate::model::Model;

/// Device memory an offload of `n` layers (llama.cpp's count) needs: the weights, the
/// KV cache of those layers for `cfg.n_ctx` positions, and one batch of activations.
pub fn bytes_needed(m: &Model, n: usize, cfg: &super::GpuConfig) -> u64 {
    let c = &m.config;
    let n = n.min(c.n_layer + 1);
    if n == 0 {
        return 0;
    }
    let first = c.n_layer + 1 - n;
    let mut bytes = m.lm_head().map_or(0, |(_, o)| o.bytes().len() as u64) + 4 * c.n_embd as u64;
    let caps = m.kv_caps(cfg.n_ctx.max(1), cfg.n_batch.max(1), false);
    let kv_row = 2 * (c.n_head_kv * (c.head_dim + c.v_head_dim)) as u64;
    for il in first..c.n_layer {
        bytes += m.layer_weight_bytes(il);
        bytes += caps[il] as u64 * kv_row;
    }
    let nb = cfg.n_batch.max(1) as u64;
    let (e, f) = (c.n_embd as u64, c.n_ff as u64);
    // the experts' buffers: ids, weights, the grouped pair list, gate and up per (token,
    // slot), outputs
    let moe = c.moe.as_ref().map_or(0, |mc| (mc.n_used * (3 + 2 * mc.n_ff_exp + c.n_embd + mc.n_expert) + 2 * mc.n_ff_shexp) as u64);
    let per_tok = 4 * (3 * e + 2 * (c.n_head * c.head_dim) as u64 + 2 * (c.n_head_kv * c.head_dim) as u64 + 2 * f + moe);
    let scores = 4 * nb * c.n_head as u64 * cfg.n_ctx.max(1) as u64;
    bytes + nb * per_tok + scores + 4 * c.n_vocab as u64
}

/// Decide and perform the offload `cfg` asks for. Returns the offload (None: everything
/// stays on the CPU) and a line saying what happened, for the log.
pub fn attach(m: &Model, cfg: &super::GpuConfig, progress: &mut dyn FnMut(usize, usize)) -> Result<(Option<Offload>, String)> {
    let n_layer = m.config.n_layer;
    let named = cfg.device.as_deref().map(str::trim).filter(|d| !d.is_empty());
    if named.is_some_and(|d| d.eq_ignore_ascii_case("none")) || cfg.n_gpu_layers == 0 {
        return Ok((None, format!("offloaded 0/{} layers to GPU", n_layer + 1)));
    }
    if m.config.arch.is_encoder() {
        return Ok((None, format!("{} is an encoder: GPU offload covers decoder models; running on the CPU", m.config.arch.name())));
    }
    if m.lm_head().is_ok_and(|(n, _)| matches!(n, crate::model::Norm::Layer { .. })) {
        return Ok((None, format!("{} normalises with LayerNorm, which GPU offload does not cover yet; running on the CPU", m.config.arch.name())));
    }
    if m.config.attn_temp.is_some() {
        return Ok((None, format!("{} scales attention by position (temperature), which GPU offload does not cover yet; running on the CPU", m.config.arch.name())));
    }
    if m.config.attn_softcap > 0.0 {
        return Ok((None, format!("{} soft-caps attention scores, which GPU offload does not cover yet (WGSL's tanh is not libm's); running on the CPU", m.config.arch.name())));
    }
    if m.config.moe.as_ref().is_some_and(|mc| mc.n_used > super::kernels::moe::K_MAX) {
        return Ok((None, format!("{} routes each token to more than {} experts, which GPU offload does not cover; running on the CPU", m.config.arch.name(), super::kernels::moe::K_MAX)));
    }
    if let Some(d) = named {
        if d.contains(',') {
            return Err(Error::InvalidRequest(format!("device: '{d}' names several devices; llamars offloads to one device")));
        }
    }
    let Some(gpu) = super::device::shared(named, cfg.main_gpu)? else {
        return Ok((None, "no GPU adapter found (software adapters are used only when named with --device); running on the CPU".into()));
    };
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    // 90% of the device's memory, leaving room for the driver and other programs;
    // LLAMARS_GPU_MEMORY_MIB caps what llamars assumes it may use
    let cap = std::env::var("LLAMARS_GPU_MEMORY_MIB").ok().and_then(|v| v.trim().parse::<u64>().ok()).map(|m| m << 20);
    let total = match (gpu.info.memory_bytes, cap) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let budget = total.map(|b| b / 10 * 9);
    let n = match (cfg.n_gpu_layers < 0, budget) {
        // auto: as many as fit
        (true, Some(b)) => (0..=n_layer + 1).rev().find(|&k| bytes_needed(m, k, cfg) <= b).unwrap_or(0),
        _ => super::layers_to_offload(cfg.n_gpu_layers, n_layer),
    };
    if n == 0 {
        return Ok((None, format!("{}: not even the output layer fits in {:.0} MiB; running on the CPU", gpu.info.name, mib(budget.unwrap_or(0)))));
    }
    if let Some(b) = budget {
        let need = bytes_needed(m, n, cfg);
        if need > b {
            let fit = (0..n).rev().find(|&k| bytes_needed(m, k, cfg) <= b).unwrap_or(0);
            return Err(Error::Gpu(format!(
                "{} ({}): offloading {n} layers with a {}-token context needs about {:.0} MiB but the device has {:.0} MiB \
                 (90% of {:.0} MiB); use -ngl {fit} or less, -ngl auto, or a smaller context",
                gpu.info.name,
                gpu.info.description,
                cfg.n_ctx,
                mib(need),
                mib(b),
                mib(total.unwrap_or(0))
            )));
        }
    }
    let off = Offload::new(gpu.clone(), m, n, progress)?;
    let numerics = match (gpu.fma_exact, gpu.fma_native) {
        (true, true) => "the CPU path's bits",
        (true, false) => "the CPU path's bits (fma emulated)",
        _ => "the CPU path's order, last bits differ (the device's fma rounds twice)",
    };
    let note = format!(
        "offloaded {}/{} layers to GPU {} ({}, {}), {:.1} MiB of weights; {numerics}",
        off.n_offloaded,
        n_layer + 1,
        gpu.info.name,
        gpu.info.description,
        gpu.info.backend,
        off.weight_bytes as f64 / (1 << 20) as f64
    );
    Ok((Some(off), note))
}
