"""A tiny XLM-RoBERTa checkpoint in Hugging Face's layout (config.json, model.safetensors,
the Unigram tokenizer of tests/fixtures/ugm/), weights drawn with numpy so the files are
the same on every machine: what `llamars-convert` turns into a `bert` GGUF with a `t5`
vocabulary, as llama.cpp's converter does for bge-m3 and bge-reranker-v2-m3."""
from __future__ import annotations

import gzip
import json
import shutil
import struct
from pathlib import Path

import numpy as np

FIXTURE = Path(__file__).parent / "fixtures" / "ugm"
N_EMBD, N_LAYER, N_HEAD, N_FF, N_POS, PAD = 32, 2, 2, 64, 130, 1


def tokenizer_json() -> bytes:
    return gzip.decompress((FIXTURE / "tokenizer.json.gz").read_bytes())


def n_vocab() -> int:
    return len(json.loads(tokenizer_json())["model"]["vocab"])


def write_safetensors(path: Path, tensors: dict) -> None:
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def write_checkpoint(d: Path, classifier: bool = False, seed: int = 0) -> Path:
    """The checkpoint directory `d` (XLMRobertaModel, or XLMRobertaForSequenceClassification
    with one label when `classifier`)."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "tokenizer.json").write_bytes(tokenizer_json())
    shutil.copy(FIXTURE / "tokenizer_config.json", d / "tokenizer_config.json")
    nv = n_vocab()
    cfg = {
        "architectures": ["XLMRobertaForSequenceClassification" if classifier else "XLMRobertaModel"],
        "model_type": "xlm-roberta", "vocab_size": nv, "hidden_size": N_EMBD, "num_hidden_layers": N_LAYER,
        "num_attention_heads": N_HEAD, "intermediate_size": N_FF, "hidden_act": "gelu",
        "max_position_embeddings": N_POS, "type_vocab_size": 1, "layer_norm_eps": 1e-5,
        "pad_token_id": PAD, "bos_token_id": 0, "eos_token_id": 2, "position_embedding_type": "absolute",
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02,
    }
    if classifier:
        cfg["id2label"] = {"0": "LABEL_0"}
        cfg["label2id"] = {"LABEL_0": 0}
    (d / "config.json").write_text(json.dumps(cfg, indent=1) + "\n")
    rng = np.random.default_rng(seed)
    e, F = N_EMBD, N_FF

    def w(*shape, sd=0.2):
        return (sd * rng.standard_normal(shape)).astype(np.float32)

    def ln(prefix):
        return {prefix + ".weight": 1.0 + w(e, sd=0.1), prefix + ".bias": w(e, sd=0.1)}

    p = "roberta." if classifier else ""
    t = {p + "embeddings.word_embeddings.weight": w(nv, e, sd=0.5), p + "embeddings.position_embeddings.weight": w(N_POS, e, sd=0.5),
         p + "embeddings.token_type_embeddings.weight": w(1, e, sd=0.5)}
    t.update(ln(p + "embeddings.LayerNorm"))
    for i in range(N_LAYER):
        b = f"{p}encoder.layer.{i}."
        for n in ("query", "key", "value"):
            t[b + f"attention.self.{n}.weight"], t[b + f"attention.self.{n}.bias"] = w(e, e), w(e, sd=0.1)
        t[b + "attention.output.dense.weight"], t[b + "attention.output.dense.bias"] = w(e, e), w(e, sd=0.1)
        t.update(ln(b + "attention.output.LayerNorm"))
        t[b + "intermediate.dense.weight"], t[b + "intermediate.dense.bias"] = w(F, e), w(F, sd=0.1)
        t[b + "output.dense.weight"], t[b + "output.dense.bias"] = w(e, F, sd=0.15), w(e, sd=0.1)
        t.update(ln(b + "output.LayerNorm"))
    if classifier:
        t["classifier.dense.weight"], t["classifier.dense.bias"] = w(e, e, sd=0.3), w(e, sd=0.1)
        t["classifier.out_proj.weight"], t["classifier.out_proj.bias"] = w(1, e, sd=0.5), w(1, sd=0.1)
    else:
        t["pooler.dense.weight"], t["pooler.dense.bias"] = w(e, e), w(e, sd=0.1)
    write_safetensors(d / "model.safetensors", t)
    return d


#: strings for the tokenizer comparisons: ordinary text in the fixture's scripts, and the
#: edge cases where normalizers differ (combining marks, compatibility forms, controls,
#: zero-width characters, runs of spaces, emoji sequences, added tokens)
ORDINARY = [
    "kashi to the naïve café", "東京 日本語 한국어", "Москва привет", "مرحبا שלום", "नमस्ते ελληνικά",
    "the fox, the dog. and (x) 123 4.5!", "über déjà vu résumé Straße", "«quoted» text",
]
EDGE = [
    "", " ", "  hello   world  ", "\t tab\nnew  line\r", "e\u0301 cafe\u0301 n\u0303", "ﬁnance ﬂow Ⅻ ① ½",
    "ＡＢＣ１２３ ｆｕｌｌ", "\u200b zero\u200dwidth \u2060", "🙂👍🏽 👨‍👩‍👧 🇯🇵", "\x11\x01 control \x7f", "x" * 120,
    "a<mask>b", "<s>x</s> <unk>", "ᄀ\u1161\u11a8 한", "Straße STRASSE ß", "\u00a0nbsp\u3000ideo",
]
