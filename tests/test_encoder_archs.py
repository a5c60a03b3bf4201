"""Encoder architectures beyond BERT against llama.cpp on tiny generated models
(tests/tiny_models.py): jina-bert-v2 (jina-embeddings-v2, jina-reranker-v1: ALiBi in
place of positions, a fused GEGLU projection with one bias over both halves, BERT's
post-LayerNorm layers, jina-reranker-v1's single [n_embd → 1] classifier layer) and
modern-bert (ModernBERT: pre-LayerNorms without biases, RoPE with a local base on the
sliding-window layers, a symmetric window, a fused GEGLU projection, a final norm). Reference: tests/fixtures/minilm_llamacpp.json (its `tiny`
part), made by scripts/parity/encoder_reference.py."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
import tiny_models

from llamars import Engine
from llamars.errors import ModelLoadError

TINY = json.loads((Path(__file__).parent / "fixtures" / "minilm_llamacpp.json").read_text())["tiny"]


def _engine(path: Path, key: str) -> Engine:
    if hashlib.sha256(path.read_bytes()).hexdigest() != TINY["models"][key]["sha256"]:
        pytest.skip(f"{key}: this gguf package writes the tiny model differently from the reference's")
    return Engine(str(path), n_threads=2)


def _cos(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


ARCHS = {"jina": "jina-bert-v2", "modern": "modern-bert"}


@pytest.mark.parametrize("name", ARCHS)
@pytest.mark.parametrize("ty,bound", [("F32", 0.99999), ("F16", 0.99999), ("Q8_0", 0.9999)])
def test_embeddings_match_llama_cpp(tmp_path, name, ty, bound):
    m = TINY["models"][f"{name}-{ty}"]
    path = tmp_path / f"{name}-{ty}.gguf"
    tiny_models.write_bert_model(path, ty, arch=ARCHS[name])
    e = _engine(path, f"{name}-{ty}")
    try:
        assert e.info["arch"] == ARCHS[name] and e.info["encoder"]
        assert [e.tokenize(t) for t in TINY["texts"]] == m["tokens"]
        got = np.array([r[0] for r in e.embed(TINY["texts"])])
        c = _cos(got, m["embeddings"])
        assert c.min() >= bound, f"{name}-{ty}: cosine {np.round(c, 7).tolist()}"
    finally:
        e.close()


def test_alibi_is_what_tells_positions_apart(tmp_path):
    """Without a position table, only ALiBi makes the order of tokens matter."""
    path = tmp_path / "jina-F32.gguf"
    tiny_models.write_bert_model(path, "F32", arch="jina-bert-v2")
    e = Engine(str(path), n_threads=2)
    try:
        a, b = (np.asarray(e.embed(t)[0][0]) for t in ("hello world water", "water world hello"))
        assert _cos(a, b) < 0.9999
    finally:
        e.close()


def test_modern_bert_local_layers_see_a_symmetric_window(tmp_path):
    """The local layer masks keys more than window/2 = 2 tokens away: a 3-token input is
    computed as with no window (same bits), a longer one is not."""
    kvs = tiny_models.bert_kvs(False, "modern-bert")
    ts = tiny_models.bert_tensors("F32", False, arch="modern-bert")
    out = {}
    for window in (4, 64):
        k = [tiny_models.KV(kv.key, kv.vtype, window) if kv.key.endswith("sliding_window") else kv for kv in kvs]
        p = tmp_path / f"modern-{window}.gguf"
        tiny_models.write_gguf(p, k, ts)
        e = Engine(str(p), n_threads=2)
        try:
            assert len(e.tokenize("water")) == 3
            out[window] = [np.asarray(e.embed(t, pooling="none")[0]) for t in ("water", "hello world the water is long")]
        finally:
            e.close()
    assert np.array_equal(out[4][0], out[64][0])
    assert not np.allclose(out[4][1], out[64][1], atol=1e-4)


def test_single_layer_reranker_matches_llama_cpp(tmp_path):
    from llamars.rerank import pair_ids

    m = TINY["models"]["jina-rerank-F32"]
    path = tmp_path / "jina-rerank.gguf"
    tiny_models.write_bert_model(path, "F32", reranker=True, arch="jina-bert-v2")
    e = _engine(path, "jina-rerank-F32")
    try:
        assert [pair_ids(e, TINY["query"], d) for d in TINY["documents"]] == m["pairs"]
        ranked = e.rerank(TINY["query"], TINY["documents"])
        got = {r["index"]: r["relevance_score"] for r in ranked}
        assert max(abs(got[i] - s) for i, s in enumerate(m["scores"])) <= 1e-4, (got, m["scores"])
        assert [r["index"] for r in ranked] == sorted(range(len(m["scores"])), key=lambda i: -m["scores"][i])
    finally:
        e.close()


def test_unsupported_jina_norms_are_refused_naming_the_tensor(tmp_path):

    kvs = tiny_models.bert_kvs(False, "jina-bert-v2")
    ts = tiny_models.bert_tensors("F32", False, arch="jina-bert-v2")
    ts.append(tiny_models.make_vector("blk.0.attn_q_norm.weight", np.ones(tiny_models.BERT.n_embd)))
    path = tmp_path / "jina-qnorm.gguf"
    tiny_models.write_gguf(path, kvs, ts)
    with pytest.raises(ModelLoadError, match="blk.0.attn_q_norm.weight"):
        Engine(str(path), n_threads=1)


def test_modern_bert_single_layer_classifier_is_a_linear_score(tmp_path):
    # only cls.output (no prediction head, no classifier.pooling_type): llama.cpp's rank
    # pooling projects the first token's hidden state, so negating the weights negates
    # every score (tests/test_modernbert_convert.py checks the full head against
    # transformers)
    w = np.random.default_rng(0).standard_normal(tiny_models.BERT.n_embd).astype(np.float32) * 0.3
    docs = ["quick brown fox", "lazy dog", "fox"]
    scores = []
    for sign in (1, -1):
        ts = tiny_models.bert_tensors("F32", False, arch="modern-bert")
        ts.append(tiny_models.Tensor("cls.output.weight", 0, [tiny_models.BERT.n_embd, 1], (sign * w).tobytes()))
        path = tmp_path / f"modern-cls{sign}.gguf"
        tiny_models.write_gguf(path, tiny_models.bert_kvs(True, "modern-bert"), ts)
        e = Engine(str(path), n_threads=1)
        try:
            ranked = e.rerank("fox", docs)
            assert [x["relevance_score"] for x in ranked] == sorted((x["relevance_score"] for x in ranked), reverse=True)
            scores.append([x["relevance_score"] for x in sorted(ranked, key=lambda x: x["index"])])
        finally:
            e.close()
    assert np.all(np.isfinite(scores)) and np.abs(scores[0]).min() > 1e-3
    assert np.allclose(scores[0], -np.array(scores[1]), rtol=1e-5, atol=1e-6), scores
