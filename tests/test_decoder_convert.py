"""Decoder checkpoints through `llamars-convert`: tiny `Qwen2ForCausalLM`,
`Qwen3ForCausalLM` (a head size other than n_embd / n_head, Q / K norms) and
`LlamaForCausalLM` (Q / K rows permuted into llama.cpp's interleaved rotation) written by
`transformers` from random weights, with byte-level BPE tokenizers trained by `tokenizers`
on Qwen 2's and Llama 3's pre-tokenizer regexes: the GGUF names llama.cpp's preset
(`qwen2`, `llama-bpe`), token ids equal `tokenizers'`, and llamars' logits on the converted
file agree with `transformers`' in float64 at every position (top-1 equal, max |Δ| small)."""
from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np
import pytest

from llamars import Engine
from llamars.convert import ConvertError, convert

# installed by scripts/setup --tests: a missing package is a failure, not a skip
import gguf
import tokenizers

sys.path.insert(0, str(Path(__file__).parent))
from test_tokenizer_bpe import LLAMA3, QWEN2  # noqa: E402

WORDS = ("the local model answers questions about rivers, mountains and music; it's 2026 and we'll run 12345 tokens "
         "naïve café Zürich 東京 données ünïcödé don't CamelCase foo_bar #tag @user\n").split(" ")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _texts(n: int, seed: int) -> list:
    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(1, 30))) + r.choice(["", ".", "!\n", "  "]) for _ in range(n)]


def tokenizer_json(regex: str, bos: bool) -> str:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), behavior="isolated"), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(_texts(500, 1), trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tok.add_special_tokens(SPECIAL)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", tok.token_to_id("<|endoftext|>"))])
    return tok.to_str()


def write_checkpoint(d: Path, kind: str) -> Path:
    torch = pytest.importorskip("torch", reason="the tiny checkpoints are written by transformers, which needs torch (installed with sentence-transformers)")
    import transformers

    d.mkdir(parents=True, exist_ok=True)
    tj = tokenizer_json(LLAMA3 if kind == "llama" else QWEN2, bos=kind == "llama")
    (d / "tokenizer.json").write_text(tj, encoding="utf-8")
    nv = tokenizers.Tokenizer.from_str(tj).get_vocab_size()
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "bos_token": "<|endoftext|>" if kind == "llama" else None,
                                                         "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"}))
    common = dict(vocab_size=nv, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, rope_theta=10000.0, rms_norm_eps=1e-6, initializer_range=0.15, tie_word_embeddings=kind == "qwen3")
    cfg = {"qwen2": lambda: transformers.Qwen2Config(**common), "qwen3": lambda: transformers.Qwen3Config(head_dim=32, **common),
           "llama": lambda: transformers.LlamaConfig(**common)}[kind]()
    torch.manual_seed(0)
    model = {"qwen2": transformers.Qwen2ForCausalLM, "qwen3": transformers.Qwen3ForCausalLM, "llama": transformers.LlamaForCausalLM}[kind](cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.2 * torch.randn_like(p))
            elif name.endswith("bias"):
                p.copy_(0.2 * torch.randn_like(p))
    model.save_pretrained(d, safe_serialization=True)
    return d


@pytest.fixture(scope="module", params=["qwen2", "qwen3", "llama"])
def ckpt(request, tmp_path_factory):
    return request.param, write_checkpoint(tmp_path_factory.mktemp(request.param) / "ckpt", request.param)


def test_keys_and_tokens(ckpt, tmp_path):
    kind, d = ckpt
    path = convert(d, tmp_path / "m.gguf", "f32")
    r = gguf.GGUFReader(str(path))

    def val(k):
        f = r.fields[k]
        return f.contents() if hasattr(f, "contents") else f.parts[f.data[0]][0]

    assert val("general.architecture") == kind and val("tokenizer.ggml.model") == "gpt2"
    assert val("tokenizer.ggml.pre") == ("llama-bpe" if kind == "llama" else "qwen2")
    assert "<|im_start|>" in val("tokenizer.chat_template")
    names = {t.name for t in r.tensors}
    assert ("output.weight" in names) == (kind != "qwen3")  # the qwen3 one is tied
    if kind == "qwen3":
        assert val("qwen3.attention.key_length") == 32 and "blk.0.attn_q_norm.weight" in names
    if kind == "qwen2":
        assert "blk.0.attn_q.bias" in names
    hf = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    e = Engine(str(path), n_ctx=256, n_threads=2)
    try:
        strings = _texts(200, 2) + ["", " ", "  x  ", "\n\n", "12345678", "it's", "東京", "🙂 emoji", "<|im_start|>user"]
        bad = [(s, e.tokenize(s, add_special=False), hf.encode(s, add_special_tokens=False).ids) for s in strings
               if e.tokenize(s, add_special=False, parse_special=False) != hf.encode(s, add_special_tokens=False).ids and "<|" not in s]
        assert not bad, f"{len(bad)} of {len(strings)} differ, first: {bad[:3]}"
        assert e.tokenize("hello", add_special=True)[:1] == ([hf.token_to_id("<|endoftext|>")] if kind == "llama" else e.tokenize("hello", add_special=False)[:1])
    finally:
        e.close()


def test_logits_match_transformers(ckpt, tmp_path):
    import torch
    import transformers

    kind, d = ckpt
    model = transformers.AutoModelForCausalLM.from_pretrained(d, dtype=torch.float64).eval()
    hf = tokenizers.Tokenizer.from_file(str(d / "tokenizer.json"))
    ids = hf.encode(" ".join(_texts(3, 9)), add_special_tokens=False).ids[:60]
    with torch.no_grad():
        want = model(input_ids=torch.tensor([ids])).logits[0].numpy()
    # an f32 KV cache without flash attention: the default f16 cache, and llama.cpp's flash
    # attention (which rounds Q to f16 whatever the cache type; llamars follows it bit for
    # bit), move the logits by about 1e-3 of their spread
    e = Engine(str(convert(d, tmp_path / "m.gguf", "f32")), n_ctx=256, n_threads=2, cache_type_k="f32", cache_type_v="f32", flash_attn="off")
    try:
        got = np.asarray(e.logits(ids), np.float64)
    finally:
        e.close()
    assert got.shape == want.shape
    assert (got.argmax(-1) == want.argmax(-1)).all()
    err = np.abs(got - want).max() / want.std()
    assert err <= 1e-4, err


def test_what_would_compute_something_else_is_refused(tmp_path):
    d = tmp_path / "c"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}))
    with pytest.raises(ConvertError, match="rope_scaling"):
        convert(d, tmp_path / "c.gguf", "f32")
    (d / "config.json").write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "hidden_act": "gelu"}))
    with pytest.raises(ConvertError, match="hidden_act"):
        convert(d, tmp_path / "c.gguf", "f32")
    assert not list(tmp_path.glob("*.gguf"))
