"""ModernBERT checkpoints through `llamars-convert` (tests/modernbert_model.py: a tiny
ModernBertModel in Hugging Face's layout with a byte-level BPE tokenizer): the GGUF says what
llama.cpp's converter says (`modern-bert`, `gpt2` vocabulary with merges, the
`modern-bert` pre-tokenizer, both RoPE bases, the window and the period of the global
layers); token ids equal the `tokenizers` library's; mean-pooled embeddings agree with
`transformers`' ModernBertModel in float64, over texts longer than the local window; a
reranker (ModernBertForSequenceClassification, mean or first-token pooling before its
GELU + LayerNorm head) scores as transformers does."""
from __future__ import annotations

import json
import random

import modernbert_model as M
import numpy as np
import pytest

from llamars import Engine
from llamars.convert import ConvertError, convert

# installed by scripts/setup --tests: a missing package is a failure, not a skip
import gguf
import tokenizers

TYPES = ("f32", "f16", "q8_0")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("modernbert")
    ckpt = M.write_checkpoint(d / "ckpt")
    return {"ckpt": ckpt, **{ty: convert(ckpt, d / f"mb-{ty}.gguf", ty) for ty in TYPES}}


@pytest.fixture(scope="module")
def engines(files):
    es = {ty: Engine(str(files[ty]), n_threads=2) for ty in TYPES}
    yield es
    for e in es.values():
        e.close()


def _texts(n: int, seed: int) -> list:
    r = random.Random(seed)
    return [" ".join(r.choice(M.WORDS) for _ in range(r.randint(1, 40))) + r.choice(["", ".", " !", "\n"]) for _ in range(n)]


def test_gguf_keys_are_llama_cpp_s(files):
    r = gguf.GGUFReader(str(files["f32"]))

    def val(k):
        f = r.fields[k]
        return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]][0]

    assert val("general.architecture") == "modern-bert"
    assert val("tokenizer.ggml.model") == "gpt2" and val("tokenizer.ggml.pre") == "modern-bert"
    assert val("modern-bert.attention.sliding_window") == M.WINDOW
    assert val("modern-bert.attention.sliding_window_pattern") == M.EVERY
    assert val("modern-bert.rope.freq_base") == 160000.0 and val("modern-bert.rope.freq_base_swa") == 10000.0
    assert val("modern-bert.pooling_type") == 1  # mean, from the sentence-transformers config
    spec = json.loads((files["ckpt"] / "tokenizer.json").read_text())
    assert len(r.fields["tokenizer.ggml.merges"].data) == len(spec["model"]["merges"])
    names = {t.name for t in r.tensors}
    assert "blk.0.attn_norm.weight" not in names and "blk.1.attn_norm.weight" in names and "token_embd_norm.weight" in names


def test_token_ids_equal_tokenizers(files, engines):
    hf = tokenizers.Tokenizer.from_file(str(files["ckpt"] / "tokenizer.json"))
    e = engines["f32"]
    strings = _texts(300, 3) + ["", " ", "  two  spaces ", "tab\tand\nnewline", "don't stop", "3.14159 and 1234567", "ÀÉÎõü", "東京の数据", "emoji 🙂🙃", "[CLS] inside", "a" * 300]
    bad = [(s, e.tokenize(s), hf.encode(s).ids) for s in strings if e.tokenize(s) != hf.encode(s).ids]
    assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]}"


@pytest.fixture(scope="module")
def transformers_reference(files):
    torch = pytest.importorskip("torch", reason="transformers' float64 reference needs torch (installed with sentence-transformers)")
    from transformers import ModernBertModel

    hf = tokenizers.Tokenizer.from_file(str(files["ckpt"] / "tokenizer.json"))
    m = ModernBertModel.from_pretrained(files["ckpt"], dtype=torch.float64, attn_implementation="eager").eval()
    texts = _texts(24, 11)
    with torch.no_grad():
        emb = [m(input_ids=torch.tensor([hf.encode(t).ids])).last_hidden_state[0].mean(0).numpy() for t in texts]
    return texts, np.array(emb)


@pytest.mark.parametrize("ty,bound", [("f32", 0.9999), ("f16", 0.9999), ("q8_0", 0.999)])
def test_embeddings_match_transformers(engines, transformers_reference, ty, bound):
    texts, want = transformers_reference
    e = engines[ty]
    assert max(len(e.tokenize(t)) for t in texts) > 2 * M.WINDOW  # the local layers' window matters
    got = np.array([np.asarray(v, np.float64).reshape(-1) for v in e.embed(texts, pooling="mean")])
    cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= bound, cos


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_reranker_scores_match_transformers(tmp_path, pooling):
    torch = pytest.importorskip("torch", reason="transformers' float64 reference needs torch (installed with sentence-transformers)")
    from transformers import ModernBertForSequenceClassification

    from llamars.rerank import pair_ids

    d = M.write_checkpoint(tmp_path / "ckpt", seed=1, classifier=pooling)
    path = convert(d, tmp_path / "rerank.gguf", "f32")
    r = gguf.GGUFReader(str(path))
    assert int(r.fields["modern-bert.classifier.pooling_type"].parts[-1][0]) == (1 if pooling == "mean" else 2)
    assert {"cls.weight", "cls.norm.weight", "cls.output.weight", "cls.output.bias"} <= {t.name for t in r.tensors}
    hf = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    m = ModernBertForSequenceClassification.from_pretrained(d, dtype=torch.float64, attn_implementation="eager").eval()
    query, docs = "local search model", _texts(8, 21)
    with torch.no_grad():
        want = [float(m(input_ids=torch.tensor([hf.encode(query, doc).ids])).logits[0, 0]) for doc in docs]
    e = Engine(str(path), n_threads=2)
    try:
        assert [pair_ids(e, query, doc) for doc in docs] == [hf.encode(query, doc).ids for doc in docs]
        ranked = e.rerank(query, docs)
        got = [next(x["relevance_score"] for x in ranked if x["index"] == i) for i in range(len(docs))]
        # llama.cpp's graph (followed here) takes the tanh GELU, the checkpoint the erf one
        assert np.abs(np.array(got) - want).max() <= 3e-3, (got, want)
        assert [x["index"] for x in ranked] == sorted(range(len(docs)), key=lambda i: -want[i])
    finally:
        e.close()


def test_other_pipelines_are_refused(tmp_path):
    d = M.write_checkpoint(tmp_path / "act", classifier="mean")
    cfg = json.loads((d / "config.json").read_text())
    cfg["classifier_activation"] = "silu"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError, match="classifier_activation"):
        convert(d, tmp_path / "act.gguf", "f32")
    d = M.write_checkpoint(tmp_path / "bias")
    cfg = json.loads((d / "config.json").read_text())
    cfg["norm_bias"] = True
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConvertError, match="bias"):
        convert(d, tmp_path / "bias.gguf", "f32")
    d = M.write_checkpoint(tmp_path / "norm")
    spec = json.loads((d / "tokenizer.json").read_text())
    spec["normalizer"] = {"type": "Lowercase"}
    (d / "tokenizer.json").write_text(json.dumps(spec))
    with pytest.raises(ConvertError, match="normalizer"):
        convert(d, tmp_path / "norm.gguf", "f32")
    assert not list(tmp_path.glob("*.gguf")) and not list(tmp_path.glob("*.part"))
