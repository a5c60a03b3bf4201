"""llamars-server on a real uvicorn server with the real model: native routes, OpenAI
routes through the openai SDK, streaming, errors in the caller's dialect, auth."""
from __future__ import annotations

import json

import httpx
import pytest
from server_util import LiveServer

from llamars import Engine
from llamars.config import ServerConfig
from llamars.server.app import create_app


@pytest.fixture(scope="module")
def server(model_path, tmp_path_factory):
    slots_dir = tmp_path_factory.mktemp("slots")
    cfg = ServerConfig(model=model_path, n_ctx=2048, n_parallel=2, metrics=True, slot_save_path=str(slots_dir), alias="gemma-test")
    s = LiveServer(create_app(cfg)).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def sse(text: str) -> list:
    out = []
    for line in text.splitlines():
        if line.startswith("data: "):
            out.append(line[6:])
    return out


def test_health(client):
    assert client.get("/health").json() == {"status": "ok"}
    assert client.get("/v1/health").json() == {"status": "ok"}


def test_completion_matches_engine_greedy(client, engine):
    r = client.post("/completion", json={"prompt": "The capital of France is", "n_predict": 12, "temperature": 0})
    assert r.status_code == 200
    body = r.json()
    expected = engine.generate("The capital of France is", max_tokens=12, temperature=0.0)
    assert body["content"] == expected.text
    for k in ["content", "tokens", "id_slot", "stop", "model", "tokens_predicted", "tokens_evaluated", "generation_settings", "prompt",
              "has_new_line", "truncated", "stop_type", "stopping_word", "tokens_cached", "timings"]:
        assert k in body, k
    assert body["stop"] is True and body["stop_type"] == "limit" and body["tokens_predicted"] == 12
    assert body["model"] == "gemma-test"
    for k in ["prompt_n", "prompt_ms", "prompt_per_token_ms", "prompt_per_second", "predicted_n", "predicted_ms",
              "predicted_per_token_ms", "predicted_per_second"]:
        assert k in body["timings"], k
    assert body["generation_settings"]["n_predict"] == 12


def test_completion_stream(client):
    with client.stream("POST", "/completion", json={"prompt": "Once upon a time", "n_predict": 10, "temperature": 0, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(x) for x in sse(r.read().decode())]
    assert events[-1]["stop"] is True and events[-1]["stop_type"] == "limit"
    text = "".join(e["content"] for e in events[:-1])
    full = client.post("/completion", json={"prompt": "Once upon a time", "n_predict": 10, "temperature": 0}).json()
    assert text == full["content"]


def test_prompt_forms(client, engine):
    ids = engine.tokenize("The capital of France is")
    a = client.post("/completion", json={"prompt": ids, "n_predict": 4, "temperature": 0, "return_tokens": True}).json()
    b = client.post("/completion", json={"prompt": [ids[0], "The capital of France is"[0:0] + " The capital", " of France is"], "n_predict": 2, "temperature": 0}).json()
    assert len(a["tokens"]) == 4 and isinstance(b["content"], str)
    many = client.post("/completion", json={"prompt": ["Hello", "Goodbye"], "n_predict": 2, "temperature": 0}).json()
    assert isinstance(many, list) and len(many) == 2 and [m["index"] for m in many] == [0, 1]
    sel = client.post("/completion", json={"prompt": "Hi", "n_predict": 2, "response_fields": ["content", "generation_settings/n_predict"]}).json()
    assert set(sel) == {"content", "n_predict"}


def test_stop_word_and_probs(client):
    base = client.post("/completion", json={"prompt": "The capital of France is", "n_predict": 12, "temperature": 0}).json()
    word = base["content"].split()[2]
    r = client.post("/completion", json={"prompt": "The capital of France is", "n_predict": 12, "temperature": 0, "stop": [word], "n_probs": 3}).json()
    assert r["stop_type"] == "word" and r["stopping_word"] == word and word not in r["content"]
    p = r["completion_probabilities"][0]
    assert set(p) == {"id", "token", "bytes", "logprob", "top_logprobs"} and len(p["top_logprobs"]) == 3


def test_tokenize_detokenize_template(client, engine):
    r = client.post("/tokenize", json={"content": "Hello world", "with_pieces": True}).json()
    assert [t["id"] for t in r["tokens"]] == engine.tokenize("Hello world", add_special=False)
    assert "".join(t["piece"] for t in r["tokens"]) == "Hello world"
    ids = client.post("/tokenize", json={"content": "Hello world"}).json()["tokens"]
    assert client.post("/detokenize", json={"tokens": ids}).json() == {"content": "Hello world"}
    # a piece that is not valid UTF-8 on its own comes back as bytes
    r = client.post("/tokenize", json={"content": "\U0001f9ea\u0f3a", "with_pieces": True}).json()
    assert all(isinstance(t["piece"], (str, list)) for t in r["tokens"])
    t = client.post("/apply-template", json={"messages": [{"role": "user", "content": "Hi"}]}).json()
    assert t["prompt"] == "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_props_models_slots_metrics(client):
    p = client.get("/props").json()
    assert p["total_slots"] == 2 and "default_generation_settings" in p and p["default_generation_settings"]["n_ctx"] == 1024
    m = client.get("/v1/models").json()
    assert m["object"] == "list" and m["data"][0]["id"] == "gemma-test"
    assert {"n_vocab", "n_ctx_train", "n_embd", "n_params", "size"} <= set(m["data"][0]["meta"])
    assert client.get("/models").json() == m
    s = client.get("/slots").json()
    assert len(s) == 2 and {"id", "n_ctx", "is_processing", "next_token"} <= set(s[0])
    text = client.get("/metrics").text
    for name in ["prompt_tokens_total", "tokens_predicted_total", "prompt_tokens_seconds", "predicted_tokens_seconds",
                 "kv_cache_usage_ratio", "kv_cache_tokens", "requests_processing", "requests_deferred", "n_decode_total",
                 "n_busy_slots_per_decode"]:
        assert f"llamacpp:{name} " in text, name
    assert client.get("/lora-adapters").json() == []
    assert client.post("/props", json={"temperature": 0.5}).status_code == 501


def test_slot_save_restore_over_http(client):
    client.post("/completion", json={"prompt": "Remember this sentence.", "n_predict": 2, "id_slot": 0, "temperature": 0})
    r = client.post("/slots/0?action=save", json={"filename": "a.bin"}).json()
    assert r["n_saved"] > 0 and r["n_written"] > 0
    r = client.post("/slots/1?action=restore", json={"filename": "a.bin"}).json()
    assert r["n_restored"] > 0
    assert client.post("/slots/1?action=erase").json()["n_erased"] > 0
    bad = client.post("/slots/0?action=save", json={"filename": "../evil"})
    assert bad.status_code == 400 and "filename" in bad.json()["error"]["message"]


def test_openai_sdk(server, engine):
    import openai  # installed by scripts/setup: a missing SDK is a failure, not a skip
    c = openai.OpenAI(base_url=server.url + "/v1", api_key="unused")
    models = c.models.list()
    assert models.data[0].id == "gemma-test"
    r = c.completions.create(model="anything", prompt="The capital of France is", max_tokens=8, temperature=0)
    assert r.choices[0].text == engine.generate("The capital of France is", max_tokens=8, temperature=0.0).text
    assert r.usage.completion_tokens == 8 and r.choices[0].finish_reason == "length"
    chunks = list(c.completions.create(model="x", prompt="The capital of France is", max_tokens=8, temperature=0, stream=True))
    assert "".join(ch.choices[0].text for ch in chunks if ch.choices) == r.choices[0].text
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello."}]
    chat = c.chat.completions.create(model="x", messages=msgs, max_tokens=10, temperature=0)
    assert chat.choices[0].message.role == "assistant" and chat.usage.completion_tokens <= 10
    stream = c.chat.completions.create(model="x", messages=msgs, max_tokens=10, temperature=0, stream=True, stream_options={"include_usage": True})
    parts, usage = [], None
    for ch in stream:
        if ch.choices and ch.choices[0].delta.content:
            parts.append(ch.choices[0].delta.content)
        if ch.usage:
            usage = ch.usage
    assert "".join(parts) == chat.choices[0].message.content and usage is not None
    lp = c.chat.completions.create(model="x", messages=msgs, max_tokens=3, temperature=0, logprobs=True, top_logprobs=2)
    assert len(lp.choices[0].logprobs.content) == 3 and len(lp.choices[0].logprobs.content[0].top_logprobs) == 2


BAD = [
    ("POST", "/completion", b"{not json", 400),
    ("POST", "/completion", {"prompt": 5}, 400),
    ("POST", "/completion", {"prompt": "x", "n_predict": "ten"}, 400),
    ("POST", "/completion", {"prompt": "x", "n_predict": -7}, 400),
    ("POST", "/completion", {"prompt": "x", "temperature": "hot"}, 400),
    ("POST", "/completion", {"prompt": "x", "top_p": 3}, 400),
    ("POST", "/completion", {"prompt": "x", "min_p": -1}, 400),
    ("POST", "/completion", {"prompt": "x", "n_probs": 100000}, 400),
    ("POST", "/completion", {"prompt": [1, 2, 10**9]}, 400),
    ("POST", "/completion", {"prompt": [-3]}, 400),
    ("POST", "/completion", {"prompt": []}, 400),
    ("POST", "/completion", {"prompt": "x", "id_slot": 99}, 400),
    ("POST", "/completion", {"prompt": "x", "n_keep": -9}, 400),
    ("POST", "/completion", {"prompt": "x", "stop": 12}, 400),
    ("POST", "/completion", {"prompt": "x", "n_cmpl": 0}, 400),
    ("POST", "/completion", {"prompt": "x " * 3000, "n_predict": 1}, 400),
    ("POST", "/completion", {"prompt": "x", "repeat_penalty": -1}, 400),
    ("POST", "/completion", {"prompt": "x", "samplers": ["bogus"]}, 400),
    ("POST", "/completion", {"prompt": "x", "mirostat": 7}, 400),
    ("POST", "/completion", {"prompt": "x", "logit_bias": [[10**9, 1.0]]}, 400),
    ("POST", "/completion", {"prompt": "x", "logit_bias": [[5, "high"]]}, 400),
    ("POST", "/completion", {"prompt": "x", "dry_multiplier": 0.8, "dry_base": 0.5}, 400),
    ("POST", "/completion", {"prompt": "x", "grammar": "root ::= [a-"}, 400),
    ("POST", "/completion", [1, 2, 3], 400),
    ("POST", "/tokenize", {"content": 5}, 400),
    ("POST", "/tokenize", {}, 400),
    ("POST", "/detokenize", {"tokens": [10**9]}, 400),
    ("POST", "/detokenize", {"tokens": "abc"}, 400),
    ("POST", "/apply-template", {"messages": [{"role": "alien", "content": "x"}]}, 400),
    ("POST", "/apply-template", {"messages": "hi"}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user"}]}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}]}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "n": 0}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user"}], "max_tokens": "x"}, 400),
    ("POST", "/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]}, 400),
    ("POST", "/v1/completions", {"prompt": "x", "logprobs": 50}, 400),
    ("POST", "/v1/completions", {"max_tokens": 3}, 400),
    ("POST", "/slots/0?action=explode", {"filename": "a"}, 400),
    ("POST", "/slots/0?action=restore", {"filename": "nope.bin"}, 400),
    ("POST", "/slots/7?action=erase", None, 400),
    ("GET", "/no/such/route", None, 404),
    ("POST", "/completion", b"\xff\xfe\xfa", 400),
]


@pytest.mark.parametrize("method,path,payload,status", BAD)
def test_bad_input_gets_4xx_and_server_stays_healthy(client, method, path, payload, status):
    if isinstance(payload, bytes):
        r = client.request(method, path, content=payload, headers={"Content-Type": "application/json"})
    elif payload is None:
        r = client.request(method, path)
    else:
        r = client.request(method, path, json=payload)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and err["message"] and err["type"]
    assert client.get("/health").status_code == 200


def test_context_overflow_type(client):
    r = client.post("/completion", json={"prompt": "x " * 3000, "n_predict": 1})
    assert r.json()["error"]["type"] == "exceed_context_size_error"


def test_api_key_auth(model_path, engine):
    cfg = ServerConfig(model=model_path, api_keys=["k1", "k2"])
    s = LiveServer(create_app(cfg, engine=engine)).start()
    try:
        with httpx.Client(base_url=s.url) as c:
            assert c.get("/health").status_code == 200
            r = c.post("/tokenize", json={"content": "hi"})
            assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
            assert c.post("/tokenize", json={"content": "hi"}, headers={"Authorization": "Bearer k2"}).status_code == 200
            assert c.post("/tokenize", json={"content": "hi"}, headers={"x-api-key": "k1"}).status_code == 200
            assert c.post("/tokenize", json={"content": "hi"}, headers={"Authorization": "Bearer nope"}).status_code == 401
    finally:
        s.stop()


def test_health_reports_loading(model_path, monkeypatch):
    import threading

    from llamars.server import service

    gate = threading.Event()
    real = service.Service._load

    def slow(self):
        gate.wait(30)
        real(self)

    monkeypatch.setattr(service.Service, "_load", slow)
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=512, n_parallel=1))).start(wait_healthy=False)
    try:
        r = httpx.get(s.url + "/health")
        assert r.status_code == 503
        assert r.json() == {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
        assert httpx.post(s.url + "/completion", json={"prompt": "x"}).status_code == 503
        gate.set()
        for _ in range(600):
            if httpx.get(s.url + "/health").status_code == 200:
                break
            import time

            time.sleep(0.05)
        assert httpx.get(s.url + "/health").json() == {"status": "ok"}
    finally:
        gate.set()
        s.stop()


def test_stream_progress_and_timings_per_token(client, engine):
    prompt = " ".join(f"word{i}" for i in range(150))
    body = {"prompt": prompt, "n_predict": 3, "temperature": 0, "stream": True, "return_progress": True, "timings_per_token": True, "cache_prompt": False}
    with client.stream("POST", "/completion", json=body) as r:
        events = [json.loads(x) for x in sse(r.read().decode())]
    progress = [e["prompt_progress"] for e in events if "prompt_progress" in e]
    n_prompt = len(engine.tokenize(prompt))
    assert progress and progress[-1]["processed"] == progress[-1]["total"] == n_prompt
    assert all(a["processed"] < b["processed"] for a, b in zip(progress, progress[1:]))
    tokens = [e for e in events if "prompt_progress" not in e and not e["stop"]]
    assert len(tokens) == 3 and all("timings" in t and t["timings"]["prompt_n"] == n_prompt for t in tokens)
    assert tokens[-1]["timings"]["predicted_n"] == 3


def test_streamed_request_beyond_context_gets_a_real_400(client):
    r = client.post("/completion", json={"prompt": "x " * 3000, "stream": True})
    assert r.status_code == 400 and r.json()["error"]["type"] == "exceed_context_size_error"
    r = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x " * 3000}], "stream": True})
    assert r.status_code == 400


def test_sampler_fields_change_generation(client, engine):
    p = {"prompt": "The capital of France is", "n_predict": 24, "temperature": 0}
    base = client.post("/completion", json=p).json()["content"]
    pen = client.post("/completion", json={**p, "repeat_penalty": 1.5}).json()["content"]
    assert pen != base and pen == engine.generate("The capital of France is", max_tokens=24, temperature=0.0, repeat_penalty=1.5).text
    first = engine.generate("The capital of France is", max_tokens=1, temperature=0.0).tokens[0]
    banned = client.post("/completion", json={**p, "n_predict": 3, "logit_bias": [[first, False]], "return_tokens": True}).json()
    assert banned["tokens"][0] != first
    oai = client.post("/v1/completions", json={"prompt": "The capital of France is", "max_tokens": 3, "temperature": 0, "logit_bias": {str(first): -100}}).json()
    assert not oai["choices"][0]["text"].startswith(engine.detokenize([first]))
    order = client.post("/completion", json={**p, "temperature": 0.9, "seed": 5, "samplers": "kt"}).json()
    assert order["stop_type"] == "limit"


def test_random_seed_is_reported_and_reproduces(client):
    r = client.post("/completion", json={"prompt": "Once upon a time", "n_predict": 8, "temperature": 0.9, "seed": -1}).json()
    seed = r["generation_settings"]["seed"]
    assert seed >= 0
    again = client.post("/completion", json={"prompt": "Once upon a time", "n_predict": 8, "temperature": 0.9, "seed": seed}).json()
    assert again["content"] == r["content"]


def test_post_sampling_probs(client):
    body = {"prompt": "The capital of France is", "n_predict": 3, "temperature": 0.8, "top_k": 5, "seed": 1, "n_probs": 3, "post_sampling_probs": True}
    r = client.post("/completion", json=body).json()
    for p in r["completion_probabilities"]:
        assert set(p) == {"id", "token", "bytes", "prob", "top_probs"}
        assert 0 < p["prob"] <= 1 and len(p["top_probs"]) == 3
        assert all(0 <= t["prob"] <= 1 for t in p["top_probs"]) and sum(t["prob"] for t in p["top_probs"]) <= 1.0 + 1e-5
        assert p["id"] in [t["id"] for t in p["top_probs"]] or p["prob"] <= p["top_probs"][-1]["prob"]
    greedy = client.post("/completion", json={**body, "temperature": 0}).json()
    assert all(p["prob"] == 1.0 for p in greedy["completion_probabilities"])


def test_server_wide_sampler_defaults(engine):
    from llamars.config import SamplingDefaults

    cfg = ServerConfig(model=engine.model_path, sampling=SamplingDefaults(repeat_penalty=1.5, temperature=0.0))
    s = LiveServer(create_app(cfg, engine=engine)).start()
    try:
        want = engine.generate("The capital of France is", max_tokens=16, temperature=0.0, repeat_penalty=1.5).text
        r = httpx.post(s.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 16}).json()
        assert r["content"] == want
        # a request's own value wins
        plain = engine.generate("The capital of France is", max_tokens=16, temperature=0.0).text
        r = httpx.post(s.url + "/completion", json={"prompt": "The capital of France is", "n_predict": 16, "repeat_penalty": 1.0}).json()
        assert r["content"] == plain
    finally:
        s.stop()


def test_openapi_schema_lists_the_routes(client):
    j = client.get("/openapi/openapi.json").json()
    for path in ["/completion", "/v1/chat/completions", "/v1/completions", "/tokenize", "/v1/embeddings", "/slots/{id_slot}", "/health"]:
        assert path in j["paths"], path
    body = j["paths"]["/completion"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]
