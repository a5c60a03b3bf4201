"""KV caches of every type llama-server offers (`-ctk` / `-ctv`: f32, f16, bf16, q8_0, q4_0,
q4_1, iq4_nl, q5_0, q5_1) with flash attention on and off, on the real model.

Against llama.cpp (tests/fixtures/kv_types_llamacpp.json, scripts/parity/kv_reference.py
with llama-cpp-python 0.3.36): every pair it accepts — all 81 with flash attention, the 27
with an f32 / f16 / bf16 V without it — under teacher forcing on three prompts (top-1 where
llama.cpp's margin is ≥ 0.1, mean |Δ log-prob|); the figures of every
configuration are printed (`pytest -s`). All 108 match bit for bit (to the reference's six
decimals): quantized rows written with ggml's quantizers after llama.cpp's Walsh-Hadamard
rotation, scores and the V product in the order of the matmul ggml runs for each type.
Beside them: the bytes a token takes per type, what a slot file of one type does in a cache
of another, and the refusals llama.cpp makes."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llamars import Engine
from llamars.errors import LlamarsError

REF = json.loads((Path(__file__).parent / "fixtures" / "kv_types_llamacpp.json").read_text())
# bytes per 32 values of each type (ggml's blocks)
BLOCK_BYTES = {"f32": 128, "f16": 64, "bf16": 64, "q8_0": 34, "q4_0": 18, "q4_1": 20, "iq4_nl": 18, "q5_0": 22, "q5_1": 24}


def logprobs(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))


def cid(c) -> str:
    return f"{c['k']}-{c['v']}-{'fa' if c['fa'] else 'nofa'}"


@pytest.mark.parametrize("cfg", REF["configs"], ids=cid)
def test_kv_types_match_llama_cpp(model_path, cfg):
    with Engine(model_path, n_ctx=512, cache_type_k=cfg["k"], cache_type_v=cfg["v"], flash_attn="on" if cfg["fa"] else "off") as e:
        deltas, agree, total = [], 0, 0
        for p, rows in zip(REF["prompts"], cfg["positions"]):
            lp = logprobs(e.logits(p["tokens"]))
            for k, (top, top_lp, second_lp) in enumerate(rows):
                deltas.append(abs(lp[k, top] - top_lp))
                if top_lp - second_lp >= 0.1:
                    total += 1
                    agree += int(lp[k].argmax() == top)
    mean, mx = float(np.mean(deltas)), float(np.max(deltas))
    print(f"\n{cid(cfg)}: mean |d logprob| {mean:.2e}, max {mx:.2e}, top-1 {agree}/{total}")
    # the reference keeps six decimals; this model moves log-probs by up to 0.1 for a one-ulp
    # change of a product, so anything but the same arithmetic fails here
    assert agree == total and mean <= 1e-5 and mx <= 1e-5


DEC_FILE = Path(__file__).parent / "fixtures" / "kv_types_decode_llamacpp.json"
DEC = json.loads(DEC_FILE.read_text()) if DEC_FILE.exists() else {"configs": []}


@pytest.mark.parametrize("cfg", DEC["configs"], ids=cid)
def test_kv_types_decode_match_llama_cpp(model_path, cfg):
    """Greedy generation, one token per evaluation (the one-token order of ggml's matmuls),
    against llama.cpp's (scripts/parity/kv_decode_reference.py): the same tokens and
    log-probs of the top two."""
    with Engine(model_path, n_ctx=512, cache_type_k=cfg["k"], cache_type_v=cfg["v"], flash_attn="on" if cfg["fa"] else "off") as e:
        r = e.generate(DEC["tokens"], max_tokens=DEC["n_steps"], temperature=0.0, ignore_eos=True, n_probs=2)
    worst = 0.0
    for i, (got, (top, top_lp, second_lp)) in enumerate(zip(r.probs, cfg["steps"])):
        assert got["id"] == top, f"step {i}"
        worst = max(worst, abs(got["logprob"] - top_lp), abs(got["top_logprobs"][1]["logprob"] - second_lp))
    print(f"\n{cid(cfg)} decode: max |d logprob| {worst:.2e} over {len(cfg['steps'])} steps")
    assert len(r.probs) == len(cfg["steps"]) and worst <= 1e-5


def test_bytes_per_token_follow_the_block_sizes(model_path):
    sizes = {}
    for t in BLOCK_BYTES:
        with Engine(model_path, n_ctx=64, cache_type_k=t, cache_type_v=t, flash_attn="on") as e:
            i = e.info
            sizes[t] = i["kv_bytes_per_token"]
            assert (i["cache_type_k"], i["cache_type_v"], i["flash_attn"]) == (t, t, True)
    # Gemma 3 270M: 18 layers, one KV head of 256 values for K and for V
    for t, b in BLOCK_BYTES.items():
        assert sizes[t] == 18 * 2 * (256 // 32) * b, t
    assert sizes["f16"] / sizes["q8_0"] >= 1.88


def test_slot_files_are_refused_by_a_cache_of_other_types(model_path, tmp_path):
    prompt = REF["prompts"][0]["tokens"]
    with Engine(model_path, n_ctx=512, cache_type_k="q8_0", cache_type_v="q8_0", slot_save_path=str(tmp_path)) as e:
        want = e.generate(prompt, max_tokens=6, temperature=0.0, id_slot=0)
        e.slot_save(0, "q8.bin")
        e.slot_erase(0)
        e.slot_restore(0, "q8.bin")
        again = e.generate(prompt, max_tokens=6, temperature=0.0, id_slot=0)
        assert again.tokens_cached > 0 and again.tokens == want.tokens
    with Engine(model_path, n_ctx=512, slot_save_path=str(tmp_path)) as e:
        with pytest.raises(LlamarsError, match=r"saved from a q8_0/q8_0 KV cache but this one is f16/f16; restore it with -ctk q8_0 -ctv q8_0"):
            e.slot_restore(0, "q8.bin")


def test_refusals(model_path):
    with pytest.raises(LlamarsError, match=r"quantized V cache \(q4_0\) requires flash attention"):
        Engine(model_path, n_ctx=64, cache_type_v="q4_0", flash_attn="off")
    with pytest.raises(LlamarsError, match=r"cache_type_k: unknown KV cache type \"q3_k\""):
        Engine(model_path, n_ctx=64, cache_type_k="q3_k")
    with pytest.raises(LlamarsError, match="flash_attn"):
        Engine(model_path, n_ctx=64, flash_attn="sometimes")
    # auto turns flash attention on for a quantized V, as llama.cpp; f16 stays on the exact path
    with Engine(model_path, n_ctx=64, cache_type_v="q8_0") as e:
        assert e.info["flash_attn"] is True
    with Engine(model_path, n_ctx=64) as e:
        assert e.info["flash_attn"] is False


def test_server_flags_props_and_metrics(model_path):
    import httpx
    from server_util import LiveServer

    from llamars.cli_parse import parse_args
    from llamars.server.app import create_app

    cfg = parse_args(["-m", model_path, "-c", "512", "-np", "1", "-ctk", "q8_0", "-ctv", "q4_0", "-fa", "on", "--metrics"], env={})
    assert (cfg.cache_type_k, cfg.cache_type_v, cfg.flash_attn) == ("q8_0", "q4_0", "on")
    s = LiveServer(create_app(cfg)).start()
    try:
        c = httpx.Client(base_url=s.url, timeout=120)
        kv = c.get("/props").json()["kv_cache"]
        assert kv["type_k"] == "q8_0" and kv["type_v"] == "q4_0" and kv["flash_attn"] is True
        assert kv["bytes_per_token"] == 18 * 8 * (34 + 18) and kv["bytes"] == 512 * kv["bytes_per_token"]
        r = c.post("/completion", json={"prompt": "The capital of France is", "n_predict": 4, "temperature": 0})
        assert r.status_code == 200 and r.json()["content"]
        slot = c.get("/slots").json()[0]
        assert slot["kv_cache"] == {"type_k": "q8_0", "type_v": "q4_0", "bytes": slot["n_cached"] * kv["bytes_per_token"]}
        assert slot["n_cached"] > 0
        m = c.get("/metrics").text
        assert "KV-cache bytes (K q8_0, V q4_0)." in m and f"llamacpp:kv_cache_bytes {kv['bytes']}" in m
    finally:
        s.stop()
