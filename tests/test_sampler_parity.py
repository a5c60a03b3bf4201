"""Deterministic sampler settings are token-exact with llama.cpp on the real model:
(1) exactly, on llama.cpp's own logits: at every step of llama.cpp's run, llamars'
sampler chain, given the logits llama.cpp's chain saw and the same history, picks the
same token; (2) end to end: llamars generates exactly llama.cpp's tokens (its logits are
bit-identical to llama.cpp's when the prompt is evaluated fresh and then one token at a
time, as llama.cpp did here). Cases:
greedy with repetition / presence / frequency penalties, top_k = 1 at temperature 0.8,
logit bias (a banned and a favoured token) and DRY, against tokens llama.cpp's own
sampler chain produced (tests/fixtures/llama_cpp_samplers.json, made by
scripts/make_sampler_fixtures.py with llama-cpp-python; the prompt tokens were fed to the
chain first, as llama-server does)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "llama_cpp_samplers.json"
DATA = json.loads(FIXTURE.read_text())
FIELDS = ("temperature", "top_k", "seed", "repeat_penalty", "presence_penalty", "frequency_penalty", "repeat_last_n", "logit_bias",
          "dry_multiplier", "dry_base", "dry_allowed_length", "dry_penalty_last_n", "dry_sequence_breakers")


def _kwargs(params: dict) -> dict:
    kw = {k: params[k] for k in FIELDS if k in params}
    kw.setdefault("top_k", 40)
    if "logit_bias" in kw:  # JSON has no -inf: llama.cpp's `false` (never)
        kw["logit_bias"] = [[t, b] for t, b in kw["logit_bias"]]
    return kw


def test_fixture_covers_the_deterministic_samplers():
    names = {c["case"] for c in DATA["cases"]}
    assert {"top_k_1", "repeat_penalty", "presence_frequency", "logit_bias", "dry"} <= names
    assert len(DATA["cases"]) >= 30


IDS = [f"{c['case']}-{i}" for i, c in enumerate(DATA["cases"])]


@pytest.mark.parametrize("c", DATA["cases"], ids=IDS)
def test_sampler_on_llama_cpp_logits_is_exact(engine, c):
    import numpy as np

    kw = _kwargs(c["params"])
    kw.pop("logit_bias", None)
    sampling = {k: kw.pop(k) for k in list(kw) if k not in ("temperature", "top_k", "seed")}
    bias = c["params"].get("logit_bias")
    if bias:
        sampling["logit_bias"] = [(t, float("-inf") if b is False else float(b)) for t, b in bias]
    history = list(c["prompt_tokens"])
    for j, (want, top) in enumerate(zip(c["tokens"], c["step_logits"])):
        logits = np.full(engine.n_vocab, -np.inf, dtype=np.float32)
        for i, v in top:
            logits[i] = v
        req = engine.request([0], **kw, **sampling)
        got = engine._core.sample_logits(logits.tolist(), history, req)
        assert got == want, f"{c['case']} step {j}: llamars' sampler picks {got}, llama.cpp's {want}"
        history.append(want)


@pytest.mark.parametrize("c", DATA["cases"], ids=IDS)
def test_generation_matches_llama_cpp(engine, c):
    """Free-running with llamars' own logits and sampler chain: llama.cpp's tokens exactly.
    A fresh prompt evaluation (`cache_prompt=False`), then one token at a time, as
    llama.cpp produced the fixture: the same arithmetic, so the same logits bit for bit."""
    assert engine.tokenize(c["prompt"]) == c["prompt_tokens"]
    res = engine.generate(c["prompt_tokens"], max_tokens=len(c["tokens"]), cache_prompt=False, **_kwargs(c["params"]))
    k = next((j for j, (a, b) in enumerate(zip(res.tokens, c["tokens"])) if a != b), None)
    assert res.tokens == c["tokens"], f"{c['case']} on {c['prompt'][:40]!r}: first difference at step {k}"
