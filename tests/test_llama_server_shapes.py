"""Field-by-field comparison with llama.cpp's llama-server: every field its responses
carry (captured once from a llama-server build on the same model, in
tests/fixtures/llama_server/shapes.json) is present in ours, with the same JSON type, at
every nesting level that both describe. Greedy content is compared by the parity tests,
not here (the engines are not yet token-exact on this prompt)."""
from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from server_util import LiveServer

from llamars.config import ServerConfig
from llamars.server.app import create_app

FIX = json.loads((Path(__file__).parent / "fixtures" / "llama_server" / "shapes.json").read_text())

# fields llama-server has that belong to features llamars does not have (yet)
NOT_OURS = {
    "adaptive_decay", "adaptive_target", "backend_sampling", "chat_format", "generation_prompt", "grammar_lazy",
    "grammar_triggers", "preserved_tokens", "reasoning_format", "reasoning_in_content", "speculative.types",
}


def kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    return type(v).__name__


def missing(ref, ours, path="") -> list:
    out = []
    if isinstance(ref, dict) and isinstance(ours, dict):
        for k, v in ref.items():
            if k in NOT_OURS:
                continue
            if k not in ours:
                out.append(f"{path}/{k}")
            elif v is not None and ours[k] is not None and kind(v) != kind(ours[k]):
                out.append(f"{path}/{k}: {kind(v)} vs {kind(ours[k])}")
            else:
                out += missing(v, ours[k], f"{path}/{k}")
    elif isinstance(ref, list) and isinstance(ours, list) and ref and ours:
        out += missing(ref[0], ours[0], f"{path}[0]")
    return out


@pytest.fixture(scope="module")
def srv(engine):
    s = LiveServer(create_app(ServerConfig(model=engine.model_path, n_ctx=2048, n_parallel=2), engine=engine)).start()
    yield s
    s.stop()


def test_completion_shape(srv):
    r = httpx.post(srv.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 8, "temperature": 0, "n_probs": 2}).json()
    assert missing(FIX["completion"], r) == []


def test_stream_chunk_shape(srv):
    with httpx.stream("POST", srv.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 4, "temperature": 0, "stream": True}) as resp:
        first = next(json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: "))
    assert missing(FIX["completion_stream_chunk"], first) == []


def test_tokenize_props_models_chat_slots_shapes(srv):
    assert missing(FIX["tokenize"], httpx.post(srv.url + "/tokenize", json={"content": "Hello world", "with_pieces": True}).json()) == []
    assert httpx.post(srv.url + "/tokenize", json={"content": "Hello world", "with_pieces": True}).json() == FIX["tokenize"]
    assert missing(FIX["props"], httpx.get(srv.url + "/props").json()) == []
    assert missing(FIX["models"], httpx.get(srv.url + "/v1/models").json()) == []
    chat = httpx.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}).json()
    assert missing(FIX["chat"], chat) == []
    assert missing(FIX["slots"], httpx.get(srv.url + "/slots").json()) == []


# ------------------------------------------------------------------ 2026 details (capture_2026.py)

FIX26 = json.loads((Path(__file__).parent / "fixtures" / "llama_server" / "shapes-2026.json").read_text())


@pytest.fixture(scope="module")
def srv26(model_path):
    from llamars import Engine

    e = Engine(model_path, n_ctx=1024, n_parallel=2)  # llama-server's run: -c 1024 -np 2 --metrics
    s = LiveServer(create_app(ServerConfig(model=model_path, metrics=True), engine=e)).start()
    yield s
    s.stop()
    e.close()


def test_2026_metrics_and_slots(srv26):
    httpx.post(srv26.url + "/completion", json={"prompt": "Hello", "n_predict": 4})
    m = httpx.get(srv26.url + "/metrics")
    assert set(FIX26["metrics_headers"]) <= {k.lower() for k in m.headers}
    ours = [ln.split()[0].split(":", 1)[1] for ln in m.text.splitlines() if ln.startswith("llamacpp:")]
    assert ours[:len(FIX26["metrics_series"])] == FIX26["metrics_series"]  # the same series, in order (then llamars's own)
    used = next(s for s in httpx.get(srv26.url + "/slots").json() if "id_task" in s)
    assert missing(FIX26["slot_used"], used) == []


def test_2026_errors_input_tokens_and_verbose(srv26):
    big = {"messages": [{"role": "user", "content": "hello " * 600}], "max_tokens": 4}
    for key, body in (("overflow_error", big), ("overflow_error_stream", {**big, "stream": True})):
        r = httpx.post(srv26.url + "/v1/chat/completions", json=body)
        assert r.status_code == FIX26[key]["error"]["code"]
        assert missing(FIX26[key], r.json()) == [] and r.json()["error"]["n_ctx"] == FIX26[key]["error"]["n_ctx"]
    r = httpx.post(srv26.url + "/v1/chat/completions/input_tokens", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert missing(FIX26["input_tokens"], r) == [] and r["object"] == FIX26["input_tokens"]["object"]
    v = httpx.post(srv26.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                                                             "verbose": True}).json()
    assert missing(FIX26["chat_verbose"], v) == []


def test_2026_resumable_stream_and_preflight(srv26):
    body = {"prompt": "Once upon a time", "n_predict": 6, "stream": True}
    with httpx.stream("POST", srv26.url + "/completion", json=body, headers={"X-Conversation-Id": "capture-1"}) as r:
        r.read()
    look = httpx.post(srv26.url + "/v1/streams/lookup", json={"conversation_ids": ["capture-1"]}).json()
    assert missing(FIX26["stream_lookup"], look) == []
    r = httpx.get(srv26.url + "/v1/stream", params={"conv_id": "nope"})
    assert r.status_code == FIX26["stream_not_found"]["status"]
    assert r.json()["error"]["type"] == FIX26["stream_not_found"]["body"]["error"]["type"]
    assert httpx.delete(srv26.url + "/v1/stream", params={"conv_id": "capture-1"}).status_code == FIX26["stream_delete_status"]
    pre = httpx.options(srv26.url + "/v1/chat/completions", headers={"Origin": "http://example.test", "Access-Control-Request-Method": "POST"})
    assert pre.status_code == FIX26["preflight"]["status"]
    assert set(FIX26["preflight"]["headers"]) <= {k.lower() for k in pre.headers}
