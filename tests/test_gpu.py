"""GPU offload through wgpu, on whatever adapter this machine has (CI: Mesa's lavapipe,
a Vulkan driver that runs on the CPU). Every architecture's tiny model and the real
model, all layers and part of them offloaded, against the CPU path of the same build.

Without an adapter these tests are skipped with the reason, unless LLAMARS_REQUIRE_GPU=1
(CI sets it), which turns the missing adapter into a failure."""
import os

import numpy as np
import pytest

import llamars
from llamars import _core
import tiny_models as tm
from oracle import Oracle
from test_parity_reference import _log_softmax

# Tolerances (named). The GPU kernels compute in the CPU path's order of f32 operations,
# which is llama.cpp's (rust/gpu/kernels/exact.wgsl): where the device's fused multiply-add
# rounds once, natively or emulated (lavapipe: emulated; the engine's gpu_note says which),
# the real model's logits are the CPU path's bits, and so llama.cpp's. Measured on lavapipe,
# all 12 reference prompts (396 teacher-forced steps, 32 greedy tokens each), 2026-11-30:
# GPU vs CPU and vs llama.cpp |Δ log-prob| mean 0.0000, max 0.0000; greedy tokens identical.
# The bounds below are the issue's, for devices whose fma rounds twice.
TINY_REL = 0.03  # max |Δ logit| / std(logits) vs the numpy oracle, tiny models, every architecture and type
TINY_REL_CPU = 0.6  # f32 path vs the CPU path, whose 8-bit activations set this (tests/test_tiny_models.py TOL_Q8_ACT)
TINY_REL_INT = 0.2  # integer path vs the CPU path on a device whose fma rounds twice: a last-bit
# difference flips an activation's 8-bit rounding now and then, and layers amplify it
TINY_REL_INT_EXACT = 1e-4  # the same where the kernels compute the CPU's bits: only SiLU (llama,
# qwen2/3, phi3) uses the device's exp (measured worst 6e-7); gemma3 is bit-identical
GPU_VS_CPU_LOGPROB = 0.05  # max teacher-forced |Δ log-prob| of llama.cpp's top token, GPU vs CPU
GPU_VS_REF_MEAN = 0.05  # mean |Δ log-prob| vs llama.cpp (and so vs the CPU path)
GPU_STRICT_FAILURES = 0  # steps where the GPU's argmax differs from llama.cpp's with margin >= NEAR_TIE
NEAR_TIE = 0.1  # greedy tokens may differ only where llama.cpp's top-1/top-2 margin is below this
# lavapipe runs the kernels on the CPU (about 1.3 s per decoded token for this model on two
# cores), so the real-model checks use a few prompts; a GPU machine runs them all
# (LLAMARS_GPU_PROMPTS=12).
N_PROMPTS = int(os.environ.get("LLAMARS_GPU_PROMPTS", "3"))
N_GREEDY = int(os.environ.get("LLAMARS_GPU_GREEDY_TOKENS", "8"))


def _device():
    devs = _core.list_devices()
    if not devs:
        if os.environ.get("LLAMARS_REQUIRE_GPU") == "1":
            pytest.fail("LLAMARS_REQUIRE_GPU=1 but wgpu finds no adapter (apt-get install mesa-vulkan-drivers libvulkan1)")
        pytest.skip("no wgpu adapter on this machine (install mesa-vulkan-drivers libvulkan1 for lavapipe)")
    want = os.environ.get("LLAMARS_TEST_DEVICE")
    if want:
        return want
    gpus = [d for d in devs if d["kind"] != "cpu"]
    return (gpus or devs)[0]["name"]


@pytest.fixture(scope="module")
def device():
    return _device()


def test_devices_are_listed(device):
    devs = llamars.Engine.devices()
    names = [d["name"] for d in devs]
    assert device in names
    for d in devs:
        assert d["name"][:-1] in ("Vulkan", "Metal", "DX12") or d["name"].startswith(("Vulkan", "Metal", "DX12"))
        assert d["kind"] in ("discrete", "integrated", "virtual", "cpu", "other")
        assert d["max_buffer_bytes"] > 0 and d["max_binding_bytes"] > 0
    assert _core.gpu_built()


def test_list_devices_flag(device, capsys):
    from llamars.cli import main

    assert main(["--list-devices"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Available devices:") and f"  {device}: " in out and "  CPU: " in out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-gpu")
    paths = {}

    def path(arch, wtype):
        if (arch, wtype) not in paths:
            p = root / f"{arch}-{wtype}.gguf"
            tm.write_model(p, arch, wtype, seed=0)
            paths[(arch, wtype)] = str(p)
        return paths[(arch, wtype)]

    return path


def _exact(e):
    """The device computes the CPU path's bits (its fma rounds once, natively or emulated)."""
    return "the CPU path's bits" in e.info["gpu_note"]


def _rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / b.std())


@pytest.mark.parametrize("arch", tm.ARCHS)
@pytest.mark.parametrize("wtype", ["F32", "Q8_0", "Q4_K", "Q6_K", "Q5_0"])
@pytest.mark.parametrize("path", ["int", "f32"])
def test_tiny_models_all_layers(tiny, device, arch, wtype, path, monkeypatch):
    """Both matrix-product paths: integer dots against 8-bit activations (the default for
    types that have them: the CPU path's numerics) and f32 activations (the oracle's)."""
    if path == "f32":
        monkeypatch.setenv("LLAMARS_GPU_MATMUL", "f32")
    p = tiny(arch, wtype)
    ids = list(range(1, 40))
    cpu = llamars.Engine(p, n_ctx=128, n_threads=1).logits(ids)
    gpu_eng = llamars.Engine(p, n_ctx=128, n_threads=1, n_gpu_layers="all", device=device)
    assert gpu_eng.n_gpu_layers_offloaded == tm.SPECS[arch].n_layer + 1
    assert gpu_eng.gpu_device == device
    gpu = gpu_eng.logits(ids)
    assert gpu.shape == cpu.shape
    if path == "int" and wtype != "F32":
        if _exact(gpu_eng) and arch == "gemma3":
            assert np.array_equal(gpu, cpu), f"{wtype}: GPU logits differ from the CPU path's"
        bound = TINY_REL_INT_EXACT if _exact(gpu_eng) else TINY_REL_INT
        assert _rel(gpu, cpu) <= bound, f"{arch} {wtype}: GPU vs CPU max |Δ| / std = {_rel(gpu, cpu):.2e}"
    else:
        ref = Oracle(p).logits(ids)
        assert _rel(gpu, ref) <= TINY_REL, f"{arch} {wtype}: GPU vs oracle max |Δ| / std = {_rel(gpu, ref):.4f}"
        assert _rel(gpu, cpu) <= TINY_REL_CPU, f"{arch} {wtype}: GPU vs CPU max |Δ| / std = {_rel(gpu, cpu):.4f}"


@pytest.mark.parametrize("arch", ["llama", "gemma3", "phi3"])
def test_tiny_models_partial_offload_and_decode(tiny, device, arch):
    p = tiny(arch, "Q8_0")
    n_layer = tm.SPECS[arch].n_layer
    ids = list(range(3, 30))
    cpu = llamars.Engine(p, n_ctx=128, n_threads=1)
    want = cpu.logits(ids)
    for ngl in (1, 2, n_layer):
        e = llamars.Engine(p, n_ctx=128, n_threads=1, n_gpu_layers=ngl, device=device)
        assert e.n_gpu_layers_offloaded == ngl
        assert _rel(e.logits(ids), want) <= TINY_REL_CPU, f"{arch} ngl={ngl}"
    # token-by-token decoding through the scheduler (device KV cache, one token per step)
    # gives the logits of evaluating the whole sequence at once
    e = llamars.Engine(p, n_ctx=128, n_threads=1, n_gpu_layers="all", device=device)
    b = e.generate(ids, max_tokens=12, temperature=0.0, n_probs=1)
    full = e.logits(ids + b.tokens)
    assert b.tokens == [int(t) for t in full[len(ids) - 1 : -1].argmax(-1)]


@pytest.mark.parametrize("wtype", ["IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0", "TQ2_0"])
def test_grid_and_ternary_types_on_the_device(tiny, device, wtype):
    """Types without an integer kernel on the device, end to end. The grid i-quants read ggml's grid tables from one device buffer (kernels/grids.rs):
    every layer offloaded, f32 activations, against the numpy oracle and the CPU path."""
    p = tiny("llama", wtype)
    ids = list(range(1, 40))
    e = llamars.Engine(p, n_ctx=128, n_threads=1, n_gpu_layers="all", device=device)
    assert e.n_gpu_layers_offloaded == tm.SPECS["llama"].n_layer + 1
    gpu = e.logits(ids)
    ref = Oracle(p).logits(ids)
    cpu = llamars.Engine(p, n_ctx=128, n_threads=1).logits(ids)
    assert _rel(gpu, ref) <= TINY_REL, f"{wtype}: GPU vs oracle max |Δ| / std = {_rel(gpu, ref):.4f}"
    assert _rel(gpu, cpu) <= TINY_REL_CPU, f"{wtype}: GPU vs CPU max |Δ| / std = {_rel(gpu, cpu):.4f}"


@pytest.mark.parametrize(
    "arch, wtype",
    [(a, t) for a in ["qwen3moe", "qwen2moe", "mixtral", "olmoe", "granitemoe"] for t in ["F32", "Q8_0", "IQ4_NL"]]
    + [("gpt-oss", "F32"), ("gpt-oss", "MXFP4")],
)
def test_expert_models_on_the_device(device, tmp_path, arch, wtype):
    """Mixture-of-experts layers on the device: routing, the expert products over the 3-D
    expert tensors, shared experts and their gate, the weighted sum; prompt and decode.
    F32 weights take f32 products on both sides, so the two differ only in the order of
    sums and exp's last bits. Quantized experts are compared with the CPU's 8-bit
    activations, whose error can flip a near-tie in the routing of a token (a different
    expert, a large difference on that token): per token, the median and 90th percentile."""
    import tiny_archs as ta

    p = str(tmp_path / f"{arch}-{wtype}.gguf")
    ta.write_model(p, arch, wtype, seed=1)
    ids = list(range(1, 30))
    cpu = llamars.Engine(p, n_ctx=128, n_threads=1)
    e = llamars.Engine(p, n_ctx=128, n_threads=1, n_gpu_layers="all", device=device)
    assert e.n_gpu_layers_offloaded == ta.SPECS[arch].n_layer + 1, e.info["gpu_note"]
    want, got = cpu.logits(ids), e.logits(ids)
    if wtype == "F32":
        assert _rel(got, want) <= 1e-2, f"{arch}: GPU vs CPU max |Δ| / std = {_rel(got, want):.2e}"
    else:
        tok = np.abs(got.astype(np.float64) - want).max(-1) / want.std()
        assert np.median(tok) <= 0.2 and np.quantile(tok, 0.9) <= TINY_REL_CPU, f"{arch} {wtype}: per-token |Δ| / std {np.round(tok, 3)}"
    # decoding token by token through the device KV cache
    b = e.generate(ids, max_tokens=8, temperature=0.0, n_probs=1)
    full = e.logits(ids + b.tokens)
    assert b.tokens == [int(t) for t in full[len(ids) - 1 : -1].argmax(-1)]
    if wtype == "F32":
        assert b.tokens == cpu.generate(ids, max_tokens=8, temperature=0.0).tokens


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_speculative_decoding_on_the_device(tiny, device, arch):
    """n-gram drafts verified on the device (its KV cache cut back after rejections): the
    same tokens as plain decoding on the device, greedy and seeded."""
    p = tiny(arch, "Q8_0")
    spec = {"type": "ngram-simple", "ngram_simple_size_n": 1, "ngram_simple_size_m": 6}
    plain = llamars.Engine(p, n_ctx=256, n_threads=1, n_gpu_layers="all", device=device)
    fast = llamars.Engine(p, n_ctx=256, n_threads=1, n_gpu_layers="all", device=device, speculative=spec)
    prompt = [1, 5, 9, 5, 9, 7, 5, 9, 11, 5]
    drafted = accepted = 0
    for kw in (dict(temperature=0.0), dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=7)):
        a = plain.generate(prompt, max_tokens=40, ignore_eos=True, **kw)
        b = fast.generate(prompt, max_tokens=40, ignore_eos=True, **kw)
        assert b.tokens == a.tokens, kw
        drafted += b.timings.draft_n
        accepted += b.timings.draft_n_accepted
    assert drafted > accepted > 0, (drafted, accepted)


def test_draft_model_on_the_cpu_for_a_target_on_the_device(tiny, device):
    """A draft model (draft-simple; it runs on the CPU) drafting for a target with every
    layer offloaded: the target's tokens are plain decoding's on the device, greedy and
    seeded, with drafts accepted and rejected."""
    p = tiny("llama", "Q8_0")
    plain = llamars.Engine(p, n_ctx=256, n_threads=1, n_gpu_layers="all", device=device)
    fast = llamars.Engine(p, n_ctx=256, n_threads=1, n_gpu_layers="all", device=device, draft_model=p)
    assert fast.info["spec_type"] == "draft-simple" and fast.n_gpu_layers_offloaded == plain.n_gpu_layers_offloaded
    prompt = [1, 5, 9, 5, 9, 7, 5, 9, 11, 5]
    drafted = accepted = 0
    for kw in (dict(temperature=0.0), dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=7)):
        a = plain.generate(prompt, max_tokens=40, ignore_eos=True, **kw)
        b = fast.generate(prompt, max_tokens=40, ignore_eos=True, speculative={"p_min": 0.0, "n_max": 4}, **kw)
        assert b.tokens == a.tokens, kw
        drafted += b.timings.draft_n
        accepted += b.timings.draft_n_accepted
    assert drafted > accepted > 0, (drafted, accepted)


def test_ngl_zero_and_bad_arguments(tiny, device):
    p = tiny("llama", "F32")
    e = llamars.Engine(p, n_ctx=64, n_threads=1, n_gpu_layers=0, device=device)
    assert e.n_gpu_layers_offloaded == 0 and e.gpu_device is None
    e = llamars.Engine(p, n_ctx=64, n_threads=1, n_gpu_layers=99, device="none")
    assert e.n_gpu_layers_offloaded == 0
    with pytest.raises(llamars.InvalidRequestError, match="device: no device named 'NoSuchGPU3'"):
        llamars.Engine(p, n_ctx=64, n_gpu_layers="all", device="NoSuchGPU3")
    with pytest.raises(llamars.InvalidRequestError, match="n_gpu_layers"):
        llamars.Engine(p, n_ctx=64, n_gpu_layers="lots")
    with pytest.raises(llamars.InvalidRequestError, match="several devices"):
        llamars.Engine(p, n_ctx=64, n_gpu_layers="all", device=f"{device},{device}")


def test_memory_check_before_loading(tiny, device, monkeypatch):
    """Too little device memory for the layers asked for: a clear error before anything is
    uploaded; 'auto' offloads what fits."""
    p = tiny("llama", "F32")
    full = llamars.Engine(p, n_ctx=128, n_gpu_layers="all", device=device)
    assert full.n_gpu_layers_offloaded == tm.SPECS["llama"].n_layer + 1
    # the tiny llama's F32 layers take ~2.4 MiB each, its output layer ~0.4 MiB: 90% of
    # 4 MiB holds the output layer and one more
    monkeypatch.setenv("LLAMARS_GPU_MEMORY_MIB", "4")
    with pytest.raises(llamars.GpuError, match=r"offloading 4 layers .* needs about .* MiB .* use -ngl 2 or less"):
        llamars.Engine(p, n_ctx=128, n_batch=16, n_gpu_layers="all", device=device)
    part = llamars.Engine(p, n_ctx=128, n_batch=16, n_gpu_layers="auto", device=device)
    assert 0 < part.n_gpu_layers_offloaded < full.n_gpu_layers_offloaded
    ids = list(range(2, 20))
    ref = llamars.Engine(p, n_ctx=128).logits(ids)
    assert _rel(part.logits(ids), ref) <= TINY_REL_CPU


# ---------------------------------------------------------------- the real model


@pytest.fixture(scope="module")
def gpu_engine(model_path, device):
    return llamars.Engine(model_path, n_ctx=512, n_gpu_layers="all", device=device)


def test_real_model_all_layers_offloaded(gpu_engine, device):
    assert gpu_engine.n_gpu_layers_offloaded == gpu_engine.info["n_layer"] + 1
    assert device in gpu_engine.info["gpu_note"]
    print(gpu_engine.info["gpu_note"])


def test_real_model_teacher_forced_logprobs(gpu_engine, engine, reference):
    d_cpu, d_ref_gpu, d_ref_cpu, strict = [], [], [], 0
    for g in reference["greedy"][:N_PROMPTS]:
        toks = g["prompt_tokens"] + g["generated_tokens"]
        n = len(g["prompt_tokens"])
        xg, xc = gpu_engine.logits(toks), engine.logits(toks)
        if _exact(gpu_engine):
            assert np.array_equal(xg, xc), f"{g['prompt']!r}: GPU logits differ from the CPU path's"
        lg = _log_softmax(xg[n - 1 :])
        lc = _log_softmax(xc[n - 1 :])
        for i, step in enumerate(g["steps"]):
            top, lp = step["top_ids"][0], step["top_logprobs"]
            d_cpu.append(abs(lg[i, top] - lc[i, top]))
            d_ref_gpu.append(abs(lg[i, top] - lp[0]))
            d_ref_cpu.append(abs(lc[i, top] - lp[0]))
            strict += lp[0] - lp[1] >= NEAR_TIE and int(lg[i].argmax()) != top
    print(f"GPU vs CPU |Δ log-prob|: mean {np.mean(d_cpu):.4f}, max {np.max(d_cpu):.4f}; vs llama.cpp: "
          f"GPU mean {np.mean(d_ref_gpu):.4f} max {np.max(d_ref_gpu):.4f}, CPU mean {np.mean(d_ref_cpu):.4f} "
          f"max {np.max(d_ref_cpu):.4f}; GPU argmax != llama.cpp at {strict} steps with margin >= {NEAR_TIE} "
          f"({len(d_cpu)} steps)")
    assert np.mean(d_ref_gpu) <= GPU_VS_REF_MEAN
    assert np.max(d_cpu) <= GPU_VS_CPU_LOGPROB
    assert strict <= GPU_STRICT_FAILURES


def test_real_model_greedy(gpu_engine, engine, reference):
    """GPU greedy tokens against llama.cpp's and the CPU path's (which are the same: the CPU
    path is bit-identical to llama.cpp on a fresh prompt): a difference only at a llama.cpp
    near-tie."""
    for g in reference["greedy"][:N_PROMPTS]:
        want = g["generated_tokens"][:N_GREEDY]
        got = gpu_engine.generate(g["prompt_tokens"], max_tokens=len(want), temperature=0.0, cache_prompt=False).tokens
        cpu = engine.generate(g["prompt_tokens"], max_tokens=len(want), temperature=0.0, cache_prompt=False).tokens
        if _exact(gpu_engine):
            assert got == cpu, f"{g['prompt']!r}: GPU greedy tokens differ from the CPU path's"
        for other, name in ((want, "llama.cpp"), (cpu, "CPU")):
            if got != other:
                k = next(i for i, (x, y) in enumerate(zip(got, other)) if x != y)
                lp = g["steps"][k]["top_logprobs"]
                print(f"{g['prompt'][:30]!r}: GPU and {name} differ at step {k}, llama.cpp margin {lp[0] - lp[1]:.3f}, "
                      f"GPU {'agrees' if got[: k + 1] == want[: k + 1] else 'disagrees'} with llama.cpp there")
                assert got[: k + 1] == want[: k + 1] or lp[0] - lp[1] < NEAR_TIE, f"{g['prompt']!r}: GPU and {name} differ at step {k}"


def test_real_model_partial_offload(model_path, engine, device, reference):
    e = llamars.Engine(model_path, n_ctx=256, n_gpu_layers=7, device=device)
    assert e.n_gpu_layers_offloaded == 7
    g = reference["greedy"][0]
    toks = g["prompt_tokens"] + g["generated_tokens"][:8]
    lc = engine.logits(toks)
    lg = e.logits(toks)
    if _exact(e):
        assert np.array_equal(lg, lc)
    d = np.abs(_log_softmax(lg) - _log_softmax(lc))
    top = lc.argmax(-1)
    assert d[np.arange(len(toks)), top].max() <= GPU_VS_CPU_LOGPROB


def test_real_model_slot_save_restore_on_device(model_path, device, tmp_path):
    """Host-side cache operations (slot save/restore) see the device's KV rows."""
    e = llamars.Engine(model_path, n_ctx=256, n_gpu_layers="all", device=device, slot_save_path=tmp_path)
    ids = e.tokenize("The quick brown fox jumps over the lazy dog")
    first = e.generate(ids, max_tokens=3, temperature=0.0)
    saved = e.slot_save(0, "s.bin")
    assert saved["n_tokens"] > 0
    e.slot_erase(0)
    e.slot_restore(0, "s.bin")
    again = e.generate(ids, max_tokens=3, temperature=0.0)
    assert again.tokens == first.tokens
    assert again.timings.prompt_n <= 1  # the prompt came from the restored cache
