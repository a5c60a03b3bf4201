"""Mixture-of-experts models beyond parity (tests/test_tiny_archs.py has that): batching
never changes a token's bits, what inspect / Engine.info / the server report about experts,
errors for malformed expert metadata, GPU offload leaving experts on the CPU, and a tiny MoE
model served end to end (streaming, chat, a tool call) through a real server and the
OpenAI SDK."""
from __future__ import annotations

import json

import numpy as np
import openai
import pytest
from server_util import LiveServer

import tiny_archs as ta
import tiny_models as tm
from llamars import Engine, ModelLoadError, _core
from llamars._inspect import inspect
from llamars.config import ServerConfig
from llamars.server.app import create_app

PROMPTS = ["hello world the model", "the people of water", "one day he was", "which way to the long"]


@pytest.fixture(scope="module")
def moe_path(tmp_path_factory):
    # Q6_K experts: the type whose order depends on how many rows an expert gets
    p = tmp_path_factory.mktemp("moe") / "qwen3moe-Q6_K.gguf"
    ta.write_model(p, "qwen3moe", "Q6_K", seed=1)
    return str(p)


_GEN = dict(max_tokens=24, temperature=0.0, ignore_eos=True, cache_prompt=False, n_probs=4)


def _key(r):
    return r.tokens, repr(r.probs)


def test_concurrent_sequences_match_serial_runs_bit_for_bit(moe_path):
    """Tokens of other sequences share the expert matmuls; probabilities (from the logits' bits)
    and tokens stay those of each sequence evaluated alone."""
    e = Engine(moe_path, n_ctx=4 * 128, n_parallel=4, n_threads=2)
    try:
        serial = [_key(e.generate(p, **_GEN)) for p in PROMPTS]
        # requests built (tokenized, validated) first, then submitted back to back, so the
        # loop finds them all queued however fast the tiny model decodes
        reqs = [e.request(p, **_GEN) for p in PROMPTS]
        streams = [e.submit(r, quiet=True) for r in reqs]
        for i, s in enumerate(streams):
            for _ in s:
                pass
            assert _key(s.result) == serial[i], f"prompt {i} differs when batched"
        assert e.metrics()["n_busy_slots_total"] > e.metrics()["n_decode_total"]
    finally:
        e.close()


def test_inspect_and_info_report_experts_and_active_parameters(moe_path, capsys):
    s = ta.SPECS["qwen3moe"]
    info = _core.inspect(moe_path)
    m = info["model"]
    tensors = {name: (dims, size) for name, _, dims, _, size, _ in info["tensors"]}
    exps = [n for n in tensors if "_exps." in n]
    assert len(exps) == 3 * s.n_layer
    total = sum(int(np.prod(d)) for d, _ in tensors.values())
    in_exps = sum(int(np.prod(tensors[n][0])) for n in exps)
    assert m["n_params"] == total
    assert m["n_params_active"] == total - in_exps + in_exps * s.n_used // s.n_expert
    assert (m["n_expert"], m["n_expert_used"]) == (s.n_expert, s.n_used)
    # bytes a decoded token reads: the active share of the experts, one embedding row
    emb_dims, emb_size = tensors["token_embd.weight"]
    want = sum(sz for n, (_, sz) in tensors.items() if n not in exps and n != "token_embd.weight")
    want += sum(tensors[n][1] * s.n_used // s.n_expert for n in exps) + emb_size // emb_dims[1]
    assert m["bytes_per_token"] == want
    inspect(moe_path)
    out = capsys.readouterr().out
    assert f"{s.n_used} of {s.n_expert} experts per token" in out and f"{m['n_params_active']:,} parameters active" in out
    e = Engine(moe_path, n_ctx=128)
    i = e.info
    assert (i["n_expert"], i["n_expert_used"], i["n_params_active"], i["bytes_per_token"]) == (s.n_expert, s.n_used, m["n_params_active"], want)
    assert "experts per token" in e._repr_html_()
    e.close()


def _kvs(drop=(), extra=()):
    return [kv for kv in ta.model_kvs("qwen3moe") if kv.key not in drop] + list(extra)


@pytest.mark.parametrize(
    "kvs_change, tensors_drop, needle",
    [
        (dict(drop=["qwen3moe.expert_used_count"], extra=[tm.KV("qwen3moe.expert_used_count", tm.VT.UINT32, 9)]), (), "qwen3moe.expert_used_count"),
        (dict(drop=["qwen3moe.expert_count"]), (), "qwen3moe.expert_count"),
        (dict(drop=["qwen3moe.expert_count"], extra=[tm.KV("qwen3moe.expert_count", tm.VT.UINT32, 100000)]), (), "qwen3moe.expert_count"),
        ({}, ("blk.1.ffn_down_exps.weight",), "blk.1.ffn_down_exps.weight"),
        ({}, ("blk.0.ffn_gate_inp.weight",), "blk.0.ffn_gate_inp.weight"),
    ],
)
def test_malformed_expert_models_fail_naming_the_key_or_tensor(tmp_path, kvs_change, tensors_drop, needle):
    p = tmp_path / "bad.gguf"
    ts = [t for t in ta.model_tensors("qwen3moe", "F32") if t.name not in tensors_drop]
    tm.write_gguf(p, _kvs(**kvs_change), ts)
    with pytest.raises(ModelLoadError) as ei:
        Engine(str(p), n_ctx=128)
    assert needle in str(ei.value) and p.name in str(ei.value)


def test_expert_tensor_of_the_wrong_shape_is_refused(tmp_path):
    ts = ta.model_tensors("qwen3moe", "F32")
    i = next(k for k, t in enumerate(ts) if t.name == "blk.0.ffn_up_exps.weight")
    d = ts[i].dims
    ts[i] = tm.Tensor(ts[i].name, ts[i].ggml_type, [d[0], d[1] * 2, d[2] // 2], ts[i].data)
    p = tmp_path / "shape.gguf"
    tm.write_gguf(p, ta.model_kvs("qwen3moe"), ts)
    with pytest.raises(ModelLoadError, match="blk.0.ffn_up_exps.weight.*shape"):
        Engine(str(p), n_ctx=128)


def test_experts_in_an_architecture_without_them_are_refused(tmp_path):
    kvs = tm.model_kvs("qwen3", extra=[tm.KV("qwen3.expert_count", tm.VT.UINT32, 4), tm.KV("qwen3.expert_used_count", tm.VT.UINT32, 2)])
    p = tmp_path / "q3.gguf"
    tm.write_gguf(p, kvs, tm.model_tensors("qwen3", "F32"))
    with pytest.raises(ModelLoadError, match="qwen3.expert_count"):
        Engine(str(p), n_ctx=128)


# ------------------------------------------------------------------ served end to end

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def server(moe_path):
    s = LiveServer(create_app(ServerConfig(model=moe_path, n_ctx=4096, n_parallel=2, alias="tiny-moe", chat_template=CHATML))).start()
    yield s
    s.stop()


def test_served_completion_streams_the_engines_tokens(server, moe_path):
    import httpx

    e = Engine(moe_path, n_ctx=256)
    want = e.generate("hello world", max_tokens=8, temperature=0.0, ignore_eos=True).text
    e.close()
    pieces = []
    with httpx.stream("POST", server.url + "/completion", json={"prompt": "hello world", "n_predict": 8, "temperature": 0, "stream": True, "ignore_eos": True}, timeout=60) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                ev = json.loads(line[6:])
                pieces.append(ev.get("content", ""))
    assert "".join(pieces) == want
    props = httpx.get(server.url + "/props", timeout=10).json()
    assert props["model_info"]["n_expert"] == ta.SPECS["qwen3moe"].n_expert


def test_served_chat_with_a_tool_call_and_streaming(server):
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"word": {"type": "string", "maxLength": 8}}, "required": ["word"]}}}]
    r = oai.chat.completions.create(model="tiny-moe", messages=[{"role": "user", "content": "the word"}], tools=tools, tool_choice="required", temperature=0, max_tokens=400)
    call = r.choices[0].message.tool_calls[0]
    assert call.function.name == "lookup" and isinstance(json.loads(call.function.arguments)["word"], str)
    chunks = list(oai.chat.completions.create(model="tiny-moe", messages=[{"role": "user", "content": "hello"}], temperature=0, max_tokens=8, stream=True))
    assert chunks and chunks[-1].choices[0].finish_reason == "length"
