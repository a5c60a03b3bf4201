"""Engine forward pass vs an independent numpy oracle (tests/oracle.py), on tiny
random models of every architecture and every weight type (tests/tiny_models.py).

The oracle runs exact math on dequantized weights. The engine quantizes activations
(to the weight type's vec_dot_type: Q8_0 / Q8_1 / Q8_K for quantized weights, F16 /
BF16 for half weights), keeps the KV cache, Q and the attention probabilities in f16,
and computes GELU through an f16 table, so the two differ by a bounded amount. The
tolerances below are named per activation format and set from measurements (worst
case over all architectures) with >= 1.5x headroom; the
`test_tolerance_catches_bugs` cases show that real bugs (RoPE pairing, GQA head
mapping, a missing bias or norm, the sliding-window pattern, ...) land outside them.
"""
from __future__ import annotations

import copy
import io
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import llamars
import tiny_models as tm
from oracle import Oracle

# |engine - oracle| over all logits of a 12-token sequence, relative to the std of the
# oracle's logits: (max, mean). Measured worst cases over the 5 architectures:
#   F32/F16 weights (0.0061, 0.0011), BF16 (0.054, 0.0072),
#   quantized weights (0.344 gemma3/Q4_K, 0.040 gemma3/Q6_K).
# The weakest deliberate bug in PERTURBATIONS moves the Q8_0 comparison to mean 0.088
# (rope_base_x100 on qwen2; activation_swapped on phi3: 0.089), so TOL_Q8_ACT's mean
# sits between the two, 1.5x from each.
TOL_F32_ACT = (0.03, 0.005)  # F32 and F16 weights: f32 / f16 activations
TOL_BF16_ACT = (0.12, 0.02)  # BF16 weights: activations rounded to bf16 (8-bit mantissa)
TOL_Q8_ACT = (0.6, 0.06)  # quantized weights: activations quantized to 8 bits per block


def tolerance(wtype: str):
    """(MAX_ABS_LOGIT_DIFF, MEAN_ABS_LOGIT_DIFF), both relative to the oracle's logit std."""
    if wtype in ("F32", "F16"):
        return TOL_F32_ACT
    if wtype == "BF16":
        return TOL_BF16_ACT
    return TOL_Q8_ACT


SEQ_LEN = 12
N_CTX = 64


def sequence(arch: str) -> list:
    """BOS then 11 fixed pseudo-random ids (bytes tokens and pieces alike)."""
    bos = 2 if arch == "gemma3" else 1
    rng = np.random.default_rng(1234)
    return [bos] + [int(t) for t in rng.integers(4, tm.n_vocab(arch), SEQ_LEN - 1)]


def rel_diff(engine_logits: np.ndarray, oracle_logits: np.ndarray):
    s = float(oracle_logits.std())
    d = np.abs(engine_logits.astype(np.float64) - oracle_logits)
    return float(d.max()) / s, float(d.mean()) / s


class Models:
    """Tiny models written once per module, with their engines and oracles cached."""

    def __init__(self, root: Path):
        self.root = root
        self._paths, self._engines, self._oracles, self._oracle_logits = {}, {}, {}, {}

    def path(self, arch: str, wtype: str) -> str:
        key = (arch, wtype)
        if key not in self._paths:
            p = self.root / f"{arch}-{wtype}.gguf"
            tm.write_model(p, arch, wtype, seed=0)
            self._paths[key] = str(p)
        return self._paths[key]

    def engine(self, arch: str, wtype: str) -> llamars.Engine:
        key = (arch, wtype)
        if key not in self._engines:
            self._engines[key] = engine(self.path(arch, wtype))
        return self._engines[key]

    def oracle(self, arch: str, wtype: str) -> Oracle:
        """A private copy (its tensor dict may be edited by a perturbation)."""
        key = (arch, wtype)
        if key not in self._oracles:
            self._oracles[key] = Oracle(self.path(arch, wtype))
        o = copy.copy(self._oracles[key])
        o.t = dict(o.t)
        return o

    def oracle_logits(self, arch: str, wtype: str, ids) -> np.ndarray:
        key = (arch, wtype, tuple(ids))
        if key not in self._oracle_logits:
            self._oracle_logits[key] = self.oracle(arch, wtype).logits(list(ids))
        return self._oracle_logits[key]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return Models(tmp_path_factory.mktemp("tiny"))


def engine(path: str, **kw) -> llamars.Engine:
    kw.setdefault("n_ctx", N_CTX)
    kw.setdefault("n_threads", 1)
    return llamars.Engine(path, **kw)


# ---------------------------------------------------------------- generator sanity


@pytest.mark.parametrize("wtype", ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"])
def test_raw_blocks_dequantize_to_requested_std(wtype):
    from gguf import GGMLQuantizationType as QT
    from gguf.quants import dequantize

    blocks = tm.random_raw_blocks(QT[wtype], 64, 512, 0.05, np.random.default_rng(0))
    w = dequantize(blocks, QT[wtype])
    assert w.shape == (64, 512)
    assert np.isfinite(w).all()
    assert abs(w.std() - 0.05) < 0.05 * 0.02  # f16 rounding of the scale fields only
    assert abs(w.mean()) < 0.05 * 0.05  # no common offset that would dominate every dot


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_tiny_model_reads_back_with_gguf_package(models, arch):
    """Two independent readers (gguf's and the engine's) see the same tensors."""
    from gguf import GGUFReader

    path = models.path(arch, "Q4_K")
    r = GGUFReader(path)
    got = [(t.name, t.tensor_type.name, [int(d) for d in t.shape], int(t.data_offset), int(t.n_bytes)) for t in r.tensors]
    info = llamars.inspect(path, file=io.StringIO())
    want = [(t[0], t[1], list(t[2]), t[3], t[4]) for t in info["tensors"]]
    assert got == want
    assert r.fields["general.architecture"].contents() == arch == info["metadata"][0][2]


# ---------------------------------------------------------------- oracle parity


@pytest.mark.parametrize("wtype", tm.WEIGHT_TYPES)
@pytest.mark.parametrize("arch", tm.ARCHS)
def test_logits_match_oracle(models, arch, wtype):
    eng = models.engine(arch, wtype)
    assert eng.arch == arch
    assert eng.n_vocab == tm.n_vocab(arch)
    ids = sequence(arch)
    got = eng.logits(ids)
    want = models.oracle_logits(arch, wtype, ids)
    assert got.shape == want.shape == (SEQ_LEN, tm.n_vocab(arch))
    assert np.isfinite(got).all()
    max_rel, mean_rel = rel_diff(got, want)
    max_tol, mean_tol = tolerance(wtype)
    per_row = [round(float(x), 3) for x in np.abs(got - want).max(axis=1) / want.std()]
    assert max_rel <= max_tol and mean_rel <= mean_tol, (
        f"{arch}/{wtype}: max |diff|/std = {max_rel:.4f} (tol {max_tol}), mean = {mean_rel:.4f} (tol {mean_tol}); "
        f"per-row max |diff|/std: {per_row}"
    )


def _drop(*suffixes):
    def f(o):
        for k in [k for k in o.t if k.endswith(suffixes)]:
            del o.t[k]

    return f


def _swap_gate_up(o):
    for k in [k for k in o.t if k.endswith("ffn_up.weight")]:
        g, u = np.split(o.t[k], 2, axis=0)
        o.t[k] = np.concatenate([u, g], axis=0)


def _ones_norms(o):
    for k in [k for k in o.t if k.endswith("norm.weight")]:
        o.t[k] = np.ones_like(o.t[k])


# Bugs a forward pass could have, applied to the oracle: each must push the
# engine-vs-oracle difference outside the loosest tolerance (TOL_Q8_ACT).
PERTURBATIONS = {
    "rope_pairing_swapped": (tm.ARCHS, lambda o: setattr(o, "neox", not o.neox)),
    # gemma3 is left out: only its one global layer uses rope.freq_base, and at positions
    # <= 11 bases 1e6 and 1e8 barely differ; local_rope_base_global covers its RoPE bases.
    "rope_base_x100": (["llama", "qwen2", "qwen3", "phi3"], lambda o: setattr(o, "rope_base", o.rope_base * 100)),
    "gqa_heads_interleaved": (["llama", "qwen2", "qwen3"], lambda o: setattr(o, "kv_head", lambda h: h % o.n_head_kv)),
    "activation_swapped": (tm.ARCHS, lambda o: setattr(o, "act", "silu" if o.act == "gelu" else "gelu")),
    "norm_weights_ignored": (tm.ARCHS, _ones_norms),
    "qkv_bias_missing": (["qwen2"], _drop("attn_q.bias", "attn_k.bias", "attn_v.bias")),
    "q_bias_missing": (["qwen2"], _drop("attn_q.bias")),
    "k_norm_missing": (["qwen3", "gemma3"], _drop("attn_k_norm.weight")),
    "post_norms_missing": (["gemma3"], _drop("post_attention_norm.weight", "post_ffw_norm.weight")),
    "no_sliding_window": (["gemma3"], lambda o: setattr(o, "swa_layers", [False] * o.n_layer)),
    "global_layer_windowed": (["gemma3"], lambda o: setattr(o, "swa_layers", [True] * o.n_layer)),
    "window_off_by_one": (["gemma3"], lambda o: setattr(o, "window", o.window + 1)),
    "local_rope_base_global": (["gemma3"], lambda o: setattr(o, "rope_base_swa", o.rope_base)),
    "embedding_unscaled": (["gemma3"], lambda o: setattr(o, "embd_scale", 1.0)),
    "fused_gate_up_swapped": (["phi3"], _swap_gate_up),
}


@pytest.mark.parametrize(
    "arch,bug",
    [(a, b) for b, (archs, _) in PERTURBATIONS.items() for a in archs],
)
def test_tolerance_catches_bugs(models, arch, bug):
    """The parity test has teeth: an oracle with a deliberate bug, compared with the
    engine on 8-bit-activation weights (Q8_0), fails the Q8 tolerance."""
    ids = sequence(arch)
    got = models.engine(arch, "Q8_0").logits(ids)
    good = models.oracle_logits(arch, "Q8_0", ids)
    bad_oracle = models.oracle(arch, "Q8_0")
    PERTURBATIONS[bug][1](bad_oracle)
    bad = bad_oracle.logits(ids)
    # reference scale from the unperturbed oracle so a perturbation cannot inflate it
    s = float(good.std())
    d = np.abs(got.astype(np.float64) - bad)
    max_rel, mean_rel = float(d.max()) / s, float(d.mean()) / s
    max_tol, mean_tol = TOL_Q8_ACT
    assert max_rel > max_tol or mean_rel > mean_tol, (
        f"{bug} on {arch} stays within tolerance: max {max_rel:.3f} (tol {max_tol}), mean {mean_rel:.4f} (tol {mean_tol})"
    )


# ---------------------------------------------------------------- engine-internal consistency


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_prefix_logits_equal_first_rows(models, arch):
    """Causality: the logits of a prefix are the first rows of the longer sequence's. Up to
    the last bits: like llama.cpp, Q4_K and attention sum in another order for a chunk of
    other length (gemm vs gemv groups, one token vs several); a token attending to a later
    one would move them by orders of magnitude more."""
    eng = models.engine(arch, "Q4_K")
    ids = sequence(arch)
    full = eng.logits(ids)
    scale = float(np.abs(full).max())
    for k in (1, 5, 11):
        part = eng.logits(ids[:k])
        np.testing.assert_allclose(part, full[:k], rtol=0, atol=2e-5 * scale, err_msg=f"prefix of {k} tokens")


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_chunked_prompt_matches_one_batch(models, arch):
    """n_batch smaller than the sequence: later chunks attend to the KV cache of earlier
    ones. K/V are stored in f16 either way, so results are identical up to f32
    summation order (CHUNK_REL_TOL, relative to the logit std)."""
    CHUNK_REL_TOL = 1e-5
    ids = sequence(arch)
    one = models.engine(arch, "Q8_0").logits(ids)
    chunked = engine(models.path(arch, "Q8_0"), n_batch=5).logits(ids)
    assert float(np.abs(one - chunked).max()) <= CHUNK_REL_TOL * float(one.std())


@pytest.mark.parametrize("arch", tm.ARCHS)
def test_greedy_generation(models, arch):
    """Greedy decoding returns 8 tokens (stop 'limit') unless EOS; each token is the
    argmax of the engine's logits over the sequence so far, and agrees with the oracle
    wherever the oracle's top-2 margin is wider than the parity tolerance."""
    eng = models.engine(arch, "Q8_0")
    prompt = sequence(arch)[:6]
    res = eng.generate(prompt, max_tokens=8, temperature=0.0)
    eos = eng.info["eos"]
    assert res.prompt_tokens == prompt
    if res.stop_reason == "eos":
        assert len(res.tokens) < 8 and eos not in res.tokens
    else:
        assert res.stop_reason == "limit"
        assert len(res.tokens) == 8
    seq = prompt + list(res.tokens)
    lg = eng.logits(seq)
    orc = models.oracle_logits(arch, "Q8_0", seq)
    margin_tol = 2 * TOL_Q8_ACT[0] * float(orc.std())
    for i, tok in enumerate(res.tokens):
        row = lg[len(prompt) - 1 + i]
        top2 = np.sort(row)[-2:]
        if top2[1] - top2[0] > 1e-6 * abs(top2[1]):
            assert tok == int(row.argmax()), f"step {i}"
        orow = orc[len(prompt) - 1 + i]
        o2 = np.sort(orow)[-2:]
        if o2[1] - o2[0] > margin_tol:
            assert tok == int(orow.argmax()), f"step {i}: oracle argmax {int(orow.argmax())}"
    assert res.timings.predicted_n == len(res.tokens)


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_tiny_vocab_tokenizes_and_roundtrips(models, arch):
    eng = models.engine(arch, "Q4_0")
    text = "hello world, the model: Hi!"
    ids = eng.tokenize(text)
    assert ids[0] == eng.info["bos"]
    assert all(0 <= t < eng.n_vocab for t in ids)
    # pieces of the vocab are used where they fit ("▁hello", "▁world"), bytes elsewhere ("H", ":")
    vocab_tokens = tm.spm_vocab(gemma_order=arch == "gemma3")[0]
    pieces = [vocab_tokens[t] for t in ids[1:]]
    assert "\u2581hello" in pieces and "\u2581world" in pieces
    assert "<0x48>" in pieces and "<0x3A>" in pieces
    assert eng.detokenize(ids[1:]) == text


def test_threads_do_not_change_logits_or_hang(models):
    """n_threads=2 right after load (the pool's first job) gives the n_threads=1 logits.
    Run in a subprocess so a deadlock in the thread pool fails the test instead of
    hanging the suite."""
    path = models.path("llama", "Q4_K")
    ids = sequence("llama")
    ref = models.engine("llama", "Q4_K").logits(ids)
    script = textwrap.dedent(
        f"""
        import numpy as np, llamars, sys
        for _ in range(5):
            e = llamars.Engine({path!r}, n_ctx={N_CTX}, n_threads=2)
            out = e.logits({ids!r})
        sys.stdout.buffer.write(out.tobytes())
        """
    )
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("Engine(n_threads=2) followed at once by logits() did not finish within 60 s (thread pool deadlock)")
    assert r.returncode == 0, r.stderr.decode()
    got = np.frombuffer(r.stdout, dtype=np.float32).reshape(ref.shape)
    np.testing.assert_array_equal(got, ref)
