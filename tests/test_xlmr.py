"""XLM-RoBERTa encoders and rerankers (the layout of bge-m3 and bge-reranker-v2-m3): a
Unigram vocabulary (`tokenizer.ggml.model = t5`) on the `bert` architecture.

Tiny checkpoints in Hugging Face's layout (tests/xlmr_model.py, with a SentencePiece
`nmt_nfkc` Unigram tokenizer laid out as XLM-R's `tokenizer.json`) are converted by
`llamars-convert`; token ids must equal the `tokenizers` library's on every string,
embeddings and rerank scores must agree with `transformers` in float64 and with llama.cpp
(`tests/fixtures/xlmr_llamacpp.json`, made by scripts/parity/xlmr_reference.py)."""
from __future__ import annotations

import base64
import hashlib
import json
import random
from pathlib import Path

import httpx
import numpy as np
import pytest
import xlmr_model as X
from server_util import LiveServer

from llamars import Engine
from llamars.config import ServerConfig
from llamars.convert import ConvertError, convert
from llamars.errors import TokenizerError
from llamars.server.app import create_app

# installed by scripts/setup --tests: a missing package is a failure, not a skip
import tokenizers

REF = json.loads((Path(__file__).parent / "fixtures" / "xlmr_llamacpp.json").read_text(encoding="utf-8"))
TYPES = ("f32", "f16", "q8_0")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("xlmr")
    # the directory names are the GGUFs' general.name, as in the reference script
    enc, cls = X.write_checkpoint(d / "enc"), X.write_checkpoint(d / "cls", classifier=True)
    out = {ty: convert(enc, d / f"enc-{ty}.gguf", ty) for ty in TYPES}
    out["rerank"] = convert(cls, d / "cls-f32.gguf", "f32")
    return {"enc": enc, "cls": cls, **out}


@pytest.fixture(scope="module")
def engines(files):
    es = {k: Engine(str(files[k]), n_threads=2) for k in (*TYPES, "rerank")}
    yield es
    for e in es.values():
        e.close()


def _random_strings(n: int, seed: int) -> list:
    rng = random.Random(seed)
    ranges = [(0x20, 0x7E), (0xA0, 0x24F), (0x300, 0x36F), (0x370, 0x4FF), (0x590, 0x6FF), (0x900, 0x97F), (0x1100, 0x11FF),
              (0x2000, 0x206F), (0x2100, 0x24FF), (0x3000, 0x30FF), (0x4E00, 0x4E80), (0xAC00, 0xAC80), (0xFB00, 0xFB4F),
              (0xFF00, 0xFFEF), (0x1F300, 0x1F6FF), (0x0, 0x1F), (0xE000, 0xE010), (0xFE00, 0xFE0F)]
    words = [w for s in X.ORDINARY for w in s.split()]
    out = []
    for _ in range(n):
        if rng.random() < 0.5:
            out.append(" ".join(rng.choice(words) for _ in range(rng.randint(1, 8))) + rng.choice(["", " ", "  ", "!"]))
        else:
            out.append("".join(chr(rng.randint(*rng.choice(ranges))) for _ in range(rng.randint(0, 30))))
    return out


def test_token_ids_equal_tokenizers(files, engines):
    hf = tokenizers.Tokenizer.from_file(str(files["enc"] / "tokenizer.json"))
    e = engines["f32"]
    strings = X.ORDINARY + X.EDGE + _random_strings(2000, 7)
    bad = [(s, e.tokenize(s), hf.encode(s).ids) for s in strings if e.tokenize(s) != hf.encode(s).ids]
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]}"
    # the pair layout is the checkpoint's own: <s> q </s></s> d </s>
    from llamars.rerank import pair_ids

    assert pair_ids(engines["rerank"], REF["query"], REF["documents"][0]) == hf.encode(REF["query"], REF["documents"][0]).ids
    # detokenization gives back the normalized text
    assert e.detokenize(e.tokenize("kashi to the naïve café", add_special=False)) == "kashi to the naïve café"


# llama.cpp's UGM drops whitespace at the end of a fragment (and whitespace-only
# fragments), where `tokenizers` keeps a final "▁" piece; llamars follows `tokenizers`
LLAMA_CPP_DIFFERS = {" ", "  hello   world  ", "\t tab\nnew  line\r", "\x11\x01 control \x7f", "<s>x</s> <unk>"}


def test_token_ids_against_llama_cpp(engines):
    m = REF["models"]["embed-f32"]
    e = engines["f32"]
    differ = {s for s, want in zip(REF["strings"], m["tokens"]) if e.tokenize(s) != want}
    assert differ == LLAMA_CPP_DIFFERS
    space = e.tokenize("\u2581", add_special=False)
    for s, want in zip(REF["strings"], m["tokens"]):
        if s in differ:  # the only difference: the "▁" pieces before </s> or a special token
            assert [t for t in e.tokenize(s) if [t] != space] == [t for t in want if [t] != space], s


def _cos(a, b) -> np.ndarray:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / np.linalg.norm(a, axis=-1) / np.linalg.norm(b, axis=-1)


def _embed(e, texts) -> np.ndarray:
    return np.array([np.asarray(v, np.float64).reshape(-1) for v in e.embed(texts, pooling="mean")])


@pytest.fixture(scope="module")
def transformers_reference(files):
    torch = pytest.importorskip("torch", reason="transformers' float64 reference needs torch (installed with sentence-transformers)")
    from transformers import XLMRobertaForSequenceClassification, XLMRobertaModel

    hf = tokenizers.Tokenizer.from_file(str(files["enc"] / "tokenizer.json"))
    m = XLMRobertaModel.from_pretrained(files["enc"], dtype=torch.float64, add_pooling_layer=False).eval()
    c = XLMRobertaForSequenceClassification.from_pretrained(files["cls"], dtype=torch.float64).eval()
    with torch.no_grad():
        emb = [m(input_ids=torch.tensor([hf.encode(t).ids])).last_hidden_state[0].mean(0).numpy() for t in REF["texts"]]
        scores = [float(c(input_ids=torch.tensor([hf.encode(REF["query"], d).ids])).logits[0, 0]) for d in REF["documents"]]
    return np.array(emb), scores


@pytest.mark.parametrize("ty,bound", [("f32", 0.99999), ("f16", 0.99999), ("q8_0", 0.999)])
def test_embeddings_match_transformers(engines, transformers_reference, ty, bound):
    # llama.cpp's BERT graph (followed here) uses the tanh GELU, the checkpoint erf
    cos = _cos(_embed(engines[ty], REF["texts"]), transformers_reference[0])
    assert cos.min() >= bound, cos


@pytest.mark.parametrize("ty", TYPES)
def test_embeddings_match_llama_cpp(files, engines, ty):
    m = REF["models"][f"embed-{ty}"]
    if hashlib.sha256(files[ty].read_bytes()).hexdigest() != m["sha256"]:
        pytest.skip(f"the installed gguf package converts {ty} to another file than the fixture's (sha256 differs)")
    assert [engines[ty].tokenize(t) for t in REF["texts"]] == m["tokens"][: len(REF["texts"])]
    cos = _cos(_embed(engines[ty], REF["texts"]), m["embeddings"])
    assert cos.min() >= 0.999999, cos


def test_rerank_matches_transformers_and_llama_cpp(files, engines, transformers_reference):
    from llamars.rerank import pair_ids

    m = REF["models"]["rerank-f32"]
    e = engines["rerank"]
    ranked = e.rerank(REF["query"], REF["documents"])
    got = [next(r["relevance_score"] for r in ranked if r["index"] == i) for i in range(len(REF["documents"]))]
    assert np.abs(np.array(got) - transformers_reference[1]).max() <= 2e-3, (got, transformers_reference[1])
    assert [r["index"] for r in ranked] == sorted(range(len(got)), key=lambda i: -transformers_reference[1][i])
    if hashlib.sha256(files["rerank"].read_bytes()).hexdigest() != m["sha256"]:
        pytest.skip("the installed gguf package converts the reranker to another file than the fixture's (sha256 differs)")
    assert [pair_ids(e, REF["query"], d) for d in REF["documents"]] == m["pairs"]
    assert np.abs(np.array(got) - m["scores"]).max() <= 1e-5, (got, m["scores"])


def test_server_serves_the_reranker(engines):
    e = engines["rerank"]
    s = LiveServer(create_app(ServerConfig(model=e.model_path, alias="xlmr-reranker", rerank=True), engine=e)).start()
    try:
        r = httpx.post(s.url + "/v1/rerank", json={"query": REF["query"], "documents": REF["documents"], "top_n": 2}, timeout=60)
        assert r.status_code == 200, r.text
        want = e.rerank(REF["query"], REF["documents"], top_n=2)
        assert [x["index"] for x in r.json()["results"]] == [x["index"] for x in want]
        r = httpx.post(s.url + "/v1/rerank", json={"query": REF["query"], "documents": []}, timeout=30)
        assert r.status_code == 400 and "documents" in r.text
    finally:
        s.stop()


def _tokenizer_json(tmp_path: Path, edit) -> Path:
    d = X.write_checkpoint(tmp_path / "m")
    spec = json.loads((d / "tokenizer.json").read_text())
    edit(spec)
    (d / "tokenizer.json").write_text(json.dumps(spec))
    return d


@pytest.mark.parametrize("edit,words", [
    (lambda s: s["normalizer"]["normalizers"].insert(1, {"type": "Lowercase"}), "normalizer step 1"),
    (lambda s: s["pre_tokenizer"].update(split=False), "Metaspace"),
    (lambda s: s["pre_tokenizer"].update(prepend_scheme="first"), "prepend_scheme 'first'"),
    (lambda s: s["model"].update(byte_fallback=True), "byte_fallback"),
    (lambda s: s["model"].update(unk_id=None), "unk_id"),
])
def test_converter_refuses_pipelines_it_does_not_reproduce(tmp_path, edit, words):
    d = _tokenizer_json(tmp_path, edit)
    with pytest.raises(ConvertError, match=words.replace("(", r"\(")):
        convert(d, tmp_path / "x.gguf", "f32")
    assert not (tmp_path / "x.gguf").exists()


def test_a_broken_charsmap_is_refused_when_the_model_opens(tmp_path):
    bad = base64.b64encode(b"\xff\xff\x00\x00" + b"\x00" * 12).decode()
    d = _tokenizer_json(tmp_path, lambda s: s["normalizer"]["normalizers"][0].update(precompiled_charsmap=bad))
    out = convert(d, tmp_path / "x.gguf", "f32")
    with pytest.raises(TokenizerError, match="precompiled_charsmap"):
        Engine(str(out))

