"""Embeddings (Engine.embed, /embedding, /v1/embeddings through the openai SDK) and
/infill (FIM prompt layout; a model without FIM tokens gets a clear 400)."""
from __future__ import annotations

import base64

import httpx
import numpy as np
import pytest
from server_util import LiveServer

from llamars.config import ServerConfig
from llamars.embeddings import normalize
from llamars.server.app import create_app
from llamars.server.routes.infill import build


@pytest.fixture(scope="module")
def emb_server(engine):
    s = LiveServer(create_app(ServerConfig(model=engine.model_path, embedding=True, alias="emb"), engine=engine)).start()
    yield s
    s.stop()


def test_engine_embed_pooling_and_normalisation(engine):
    h = engine.hidden_states(engine.tokenize("The cat sat on the mat."))
    assert h.shape[1] == 640 and np.isfinite(h).all()
    last, = engine.embed("The cat sat on the mat.")
    assert last.shape == (1, 640)
    assert np.allclose(last[0], h[-1] / np.linalg.norm(h[-1]), atol=1e-5)
    mean, = engine.embed("The cat sat on the mat.", pooling="mean", normalize=-1)
    assert np.allclose(mean[0], h.mean(axis=0), atol=1e-5)
    none, = engine.embed("The cat sat on the mat.", pooling="none", normalize=-1)
    assert np.array_equal(none, h)
    a, b, c = engine.embed(["The cat sat on the mat.", "A cat is sitting on a mat.", "Quarterly earnings rose sharply."])
    assert float((a @ b.T)[0, 0]) > float((a @ c.T)[0, 0])


def test_normalize_variants():
    x = np.array([[3.0, -4.0, 0.0]], dtype=np.float32)
    assert np.allclose(normalize(x, 2), [[0.6, -0.8, 0.0]])
    assert np.allclose(normalize(x, 1), [[3 / 7, -4 / 7, 0.0]])
    assert np.allclose(normalize(x, 0), [[3 * 32760 / 4, -32760, 0.0]])
    assert np.allclose(normalize(x, 3), x / (27 + 64) ** (1 / 3))
    assert np.array_equal(normalize(x, -1), x)
    assert np.array_equal(normalize(np.zeros((1, 3), np.float32), 2), np.zeros((1, 3)))


def test_native_embedding_route(emb_server, engine):
    r = httpx.post(emb_server.url + "/embedding", json={"content": "The cat sat on the mat."}, timeout=60)
    assert r.status_code == 200
    body = r.json()
    assert body[0]["index"] == 0 and len(body[0]["embedding"]) == 1 and len(body[0]["embedding"][0]) == 640
    assert np.allclose(body[0]["embedding"][0], engine.embed("The cat sat on the mat.")[0][0], atol=1e-5)
    many = httpx.post(emb_server.url + "/embeddings", json={"content": ["a", "b", [2, 1000, 1001]]}, timeout=60).json()
    assert [m["index"] for m in many] == [0, 1, 2]


def test_openai_embeddings(emb_server, engine):
    import openai  # installed by scripts/setup: a missing SDK is a failure, not a skip
    c = openai.OpenAI(base_url=emb_server.url + "/v1", api_key="x")
    r = c.embeddings.create(model="emb", input=["The cat sat on the mat.", "Quarterly earnings rose sharply."])
    assert len(r.data) == 2 and len(r.data[0].embedding) == 640 and r.usage.prompt_tokens > 0
    assert np.allclose(r.data[0].embedding, engine.embed("The cat sat on the mat.")[0][0], atol=1e-5)
    raw = httpx.post(emb_server.url + "/v1/embeddings", json={"input": "hello", "encoding_format": "base64"}).json()
    v = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(v, engine.embed("hello")[0][0], atol=1e-6)
    bad = httpx.post(emb_server.url + "/v1/embeddings", json={"input": "x", "encoding_format": "hex"})
    assert bad.status_code == 400 and "encoding_format" in bad.json()["error"]["message"]
    bad = httpx.post(emb_server.url + "/v1/embeddings", json={"input": [[10**9]]})
    assert bad.status_code == 400


def test_embeddings_need_the_flag(engine):
    s = LiveServer(create_app(ServerConfig(model=engine.model_path), engine=engine)).start()
    try:
        r = httpx.post(s.url + "/v1/embeddings", json={"input": "x"})
        assert r.status_code == 501 and "--embeddings" in r.json()["error"]["message"]
    finally:
        s.stop()


def test_infill_without_fim_tokens_is_a_clear_400(emb_server):
    r = httpx.post(emb_server.url + "/infill", json={"input_prefix": "def f(", "input_suffix": "):\n    pass"})
    assert r.status_code == 400 and "fill-in-the-middle" in r.json()["error"]["message"]


def test_infill_prompt_layout():
    class X:
        def __init__(self, f, t):
            self.filename, self.text = f, t

    def tok(s):
        return [ord(ch) for ch in s]

    # llama.cpp's format_prompt_infill: extra context, then BOS, <PRE> prefix prompt <SUF> suffix <MID>
    fim = {"pre": 1, "suf": 2, "mid": 3}
    ids = build(tok, fim, [9], "ab", "cd", "e", [X("f.py", "xy")])
    assert ids == tok("\n\n--- snippet ---\n\n") + tok("xy") + [9, 1] + tok("ab") + tok("e") + [2] + tok("cd") + [3]
    fim.update(rep=4, sep=5)
    ids = build(tok, fim, [], "ab", "cd", "", [X("f.py", "xy")])
    assert ids == [4] + tok("myproject\n") + [5] + tok("f.py\n") + tok("xy") + [5] + tok("filename\n") + [1] + tok("ab") + [2] + tok("cd") + [3]
    # --spm-infill: the suffix first
    ids = build(tok, fim, [9], "ab", "cd", "e", [], spm=True)
    assert ids[-9:] == [9, 2] + tok("cd") + [1] + tok("ab") + tok("e") + [3]
    # budgets: the prefix keeps its last 3/4 batch, the suffix its first 1/4 less the prompt and 2,
    # the extra context its last n_ctx - n_batch - 2 n_predict tokens
    ids = build(tok, {"pre": 1, "suf": 2, "mid": 3}, [], "p" * 100, "s" * 100, "m", [X("a", "x" * 100)],
                n_batch=16, n_ctx=40, n_predict=4)
    assert ids == tok("x" * 16) + [1] + tok("p" * 12) + tok("m") + [2] + tok("s" * 1) + [3]


def test_infill_on_a_model_with_fim_tokens_streamed_and_not(tmp_path):
    """A tiny model whose metadata names FIM tokens: /infill builds the FIM prompt and
    generates, streamed or not, with the same tokens; named template variants are picked
    by --chat-template NAME."""
    import json

    import tiny_models as tm

    path = tmp_path / "fim.gguf"
    tm.write_model(
        path,
        "llama",
        "F32",
        seed=4,
        extra_kvs=[
            tm.KV("tokenizer.ggml.fim_pre_token_id", tm.VT.UINT32, 10),
            tm.KV("tokenizer.ggml.fim_suf_token_id", tm.VT.UINT32, 11),
            tm.KV("tokenizer.ggml.fim_mid_token_id", tm.VT.UINT32, 12),
            tm.KV("tokenizer.chat_template.plain", tm.VT.STRING, "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}"),
        ],
    )
    cfg = ServerConfig(model=str(path), n_ctx=256, n_parallel=1, chat_template="plain")
    s = LiveServer(create_app(cfg)).start()
    try:
        body = {"input_prefix": "ab", "input_suffix": "cd", "prompt": "", "n_predict": 5, "temperature": 0, "ignore_eos": True, "return_tokens": True}
        r = httpx.post(s.url + "/infill", json=body, timeout=60).json()
        assert r["tokens_predicted"] == 5
        assert r["tokens_evaluated"] >= 4
        with httpx.stream("POST", s.url + "/infill", json={**body, "stream": True}, timeout=60) as resp:
            events = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: ")]
        assert events[-1]["stop"] is True
        assert [t for e in events[:-1] for t in e["tokens"]] == r["tokens"]
        t = httpx.post(s.url + "/apply-template", json={"messages": [{"role": "user", "content": "hi"}]}).json()
        assert t["prompt"] == "[user] hi\n"
    finally:
        s.stop()
