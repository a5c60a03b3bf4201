"""The decoder half of `llamars-convert`: a Hugging Face `LlamaForCausalLM`,
`Qwen2ForCausalLM` or `Qwen3ForCausalLM` checkpoint (`config.json`, `*.safetensors`, a
byte-level BPE `tokenizer.json`, `tokenizer_config.json` with its chat template) into the
GGUF llama.cpp's converter writes for it: the architecture's keys (head counts, head size
when it is not n_embd / n_head, RoPE base, RMS epsilon), llama.cpp's tensor names (gguf's
map), Llama's Q / K rows permuted from Hugging Face's half-split rotation into the
interleaved pairs llama.cpp's `llama` rotates, no `output.weight` when the embeddings are
tied, the vocabulary with its pre-tokenizer preset, special tokens and chat template.
Scaled RoPE (`rope_scaling`) and sliding windows are refused rather than converted into a
file that computes something else.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from .convert_io import file_types, read_safetensors, write_tensors
from .convert_vocab import ConvertError, need, read_vocab, write_vocab

ARCHS = {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Hugging Face's Q / K rows (each head's first half, then its second) as llama.cpp's
    `llama` pairs them (element 2i with 2i + 1)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _check(hp: dict, cfg_path: Path) -> None:
    if hp.get("rope_scaling"):
        raise ConvertError(f"{cfg_path}: rope_scaling {json.dumps(hp['rope_scaling'])[:120]}: scaled RoPE is not converted yet")
    if hp.get("use_sliding_window") or (hp.get("sliding_window") and hp.get("model_type") == "mistral"):
        raise ConvertError(f"{cfg_path}: a sliding window is not converted")
    act = hp.get("hidden_act", "silu")
    if act != "silu":
        raise ConvertError(f"{cfg_path}: hidden_act {act!r}: these architectures run SwiGLU (silu)")
    if hp.get("attention_bias") or hp.get("mlp_bias"):
        raise ConvertError(f"{cfg_path}: attention_bias / mlp_bias: llama.cpp's llama graph has no such biases")


def convert_decoder(model_dir: Path, hp: dict, out: Path, out_type: str = "f16", progress: Optional[Callable[[int, int, str], None]] = None) -> Path:
    """Write the GGUF of the decoder checkpoint in `model_dir` (its config `hp`) to `out`."""
    gguf = need("gguf")
    cfg_path = model_dir / "config.json"
    arch = next(ARCHS[a] for a in hp.get("architectures") or [] if a in ARCHS)
    _check(hp, cfg_path)
    st_files = sorted(model_dir.glob("*.safetensors"))
    if not st_files:
        raise ConvertError(f"{model_dir}: no .safetensors weights (convert a PyTorch checkpoint with safetensors first)")
    vocab = read_vocab(model_dir)
    if vocab.model != "gpt2":
        raise ConvertError(f"{model_dir}: a {vocab.model!r} vocabulary; decoders are converted with a byte-level BPE tokenizer.json")
    qt, ftype = file_types(out_type)
    n_layer, n_embd, n_head = int(hp["num_hidden_layers"]), int(hp["hidden_size"]), int(hp["num_attention_heads"])
    n_head_kv = int(hp.get("num_key_value_heads") or n_head)
    head_dim = int(hp.get("head_dim") or n_embd // n_head)
    tied = bool(hp.get("tie_word_embeddings", False))

    part = out.with_name(out.name + ".part")
    w = gguf.GGUFWriter(str(part), arch)
    w.add_name(model_dir.name)
    w.add_block_count(n_layer)
    w.add_context_length(int(hp.get("max_position_embeddings", 4096)))
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(int(hp["intermediate_size"]))
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_rope_freq_base(float(hp.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(hp.get("rms_norm_eps", 1e-6)))
    if head_dim != n_embd // n_head:
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "llama":
        w.add_rope_dimension_count(head_dim)
    w.add_file_type(ftype)
    write_vocab(w, vocab, model_dir)

    tmap = gguf.get_tensor_name_map({"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}[arch], n_layer)
    tensors = []
    for f in st_files:
        for name, load in read_safetensors(f):
            if name.endswith("rotary_emb.inv_freq") or (tied and name == "lm_head.weight"):
                continue
            new = tmap.get_name(name, try_suffixes=(".weight", ".bias"))
            if new is None:
                raise ConvertError(f"{f.name}: tensor {name} has no GGUF name for {arch}")
            if arch == "llama" and name.endswith(("q_proj.weight", "q_proj.bias")):
                load = (lambda f=load: _permute(np.asarray(f()), n_head))
            elif arch == "llama" and name.endswith(("k_proj.weight", "k_proj.bias")):
                load = (lambda f=load: _permute(np.asarray(f()), n_head_kv))
            tensors.append((new, load))
    if not tied and not any(n == "output.weight" for n, _ in tensors):
        raise ConvertError(f"{model_dir}: tie_word_embeddings is false but there is no lm_head.weight")
    write_tensors(w, tensors, qt, progress)
    part.replace(out)
    return out
