"""`llamars-convert MODEL_DIR OUT.gguf`: a Hugging Face BERT-family checkpoint (BERT,
XLM-RoBERTa, nomic-bert, jina-bert-v2, ModernBERT: `config.json`, `model.safetensors`,
`tokenizer.json` or `vocab.txt`, and the sentence-transformers pooling config when present) into a GGUF that
llama.cpp loads as well: llama.cpp's tensor names (gguf's tensor map), metadata keys,
vocabulary form (convert_vocab.py) and type rules (1-D tensors, norms, position and
token-type tables stay F32). Llama / Qwen 2 / Qwen 3 decoders go to convert_decoder.py. XLM-RoBERTa's position table starts at `pad_token_id + 1`;
its first rows are dropped as llama.cpp's converter drops them. ModernBERT (`modern-bert`):
RoPE with its global and local bases, the local layers' window and the period of the
global ones, a byte-level BPE vocabulary with the `modern-bert` pre-tokenizer; its
masked-LM head is left out; a sequence classifier (reranker) keeps its prediction head
(`cls`, `cls.norm`), its classifier (`cls.output`) and `classifier_pooling` (llama.cpp's
`classifier.pooling_type`: mean or the first token before the head). nomic-embed-text
(`NomicBertModel`, `nomic-bert`): its GPT-style config keys (`n_embd`, `n_layer`, ...), RoPE
base `rotary_emb_base`, the context it was trained at (`max_trained_positions`); only the
layout llama.cpp's graph runs (SwiGLU, post-norm, no biases, full non-interleaved
rotation, no experts) is accepted. jina-embeddings-v2 (`JinaBertModel`, `jina-bert-v2`):
ALiBi instead of a position table, the fused GEGLU `gated_layers` (its first half the
gate) as `ffn_up`, BERT's WordPiece vocabulary.

Needs the `gguf` and `tokenizers` packages: `pip install 'llamars[convert]'`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable, Optional

from .convert_decoder import ARCHS as DECODERS
from .convert_decoder import convert_decoder
from .convert_io import TYPES, file_types, read_safetensors, write_tensors
from .convert_vocab import ConvertError, need, read_vocab, write_vocab

# GGUF pooling_type values (llama.cpp's enum)
_POOLING = {"mean": 1, "cls": 2, "last": 3}
_ARCHS = {"BertModel": "bert", "BertForMaskedLM": "bert", "BertForSequenceClassification": "bert",
          "XLMRobertaModel": "bert", "XLMRobertaForSequenceClassification": "bert",
          "NomicBertModel": "nomic-bert", "JinaBertModel": "jina-bert-v2", "JinaBertForMaskedLM": "jina-bert-v2",
          "ModernBertModel": "modern-bert", "ModernBertForMaskedLM": "modern-bert", "ModernBertForSequenceClassification": "modern-bert"}
# ModernBERT's classifier tensors by llama.cpp's names (gguf's map gives `cls` to both)
_MODERN_CLS = {"head.dense.weight": "cls.weight", "head.dense.bias": "cls.bias", "head.norm.weight": "cls.norm.weight",
               "classifier.weight": "cls.output.weight", "classifier.bias": "cls.output.bias"}


def _pooling(model_dir: Path) -> Optional[int]:
    modules = model_dir / "modules.json"
    if not modules.is_file():
        return None
    for m in json.loads(modules.read_text()):
        if m.get("type", "").endswith("Pooling"):
            cfg = json.loads((model_dir / m["path"] / "config.json").read_text())
            if cfg.get("pooling_mode_mean_tokens"):
                return _POOLING["mean"]
            if cfg.get("pooling_mode_cls_token"):
                return _POOLING["cls"]
            if cfg.get("pooling_mode_lasttoken"):
                return _POOLING["last"]
            return _POOLING.get(cfg.get("pooling_mode"))
    return None


def _modern_bert_hparams(w, hp: dict) -> None:
    """ModernBERT's keys as llama.cpp's converter writes them: the global and local RoPE
    bases, the local window (`local_attention`, the full width: ± half of it
    around each token) and the period of the global layers (first of each period)."""
    if hp.get("norm_bias") or hp.get("attention_bias") or hp.get("mlp_bias"):
        raise ConvertError("a ModernBERT with biases (norm_bias / attention_bias / mlp_bias): llama.cpp's graph has none")
    act = hp.get("hidden_activation", "gelu")
    if act != "gelu":
        raise ConvertError(f"ModernBERT hidden_activation {act!r}: llama.cpp's graph uses GELU")
    rope = hp.get("rope_parameters") or {}
    full = (rope.get("full_attention") or {}).get("rope_theta", hp.get("global_rope_theta", 160000.0))
    local = (rope.get("sliding_attention") or {}).get("rope_theta", hp.get("local_rope_theta", 10000.0))
    w.add_rope_freq_base(float(full))
    w.add_rope_freq_base_swa(float(local))
    w.add_sliding_window(int(hp.get("local_attention", 128)))
    w.add_sliding_window_pattern(int(hp.get("global_attn_every_n_layers", 3)))
    if "ModernBertForSequenceClassification" in (hp.get("architectures") or []):
        if hp.get("classifier_activation", "gelu") != "gelu":
            raise ConvertError(f"ModernBERT classifier_activation {hp['classifier_activation']!r}: llama.cpp's head uses GELU")
        pooling = hp.get("classifier_pooling", "cls")
        if pooling not in ("mean", "cls"):
            raise ConvertError(f"ModernBERT classifier_pooling {pooling!r}: llama.cpp's head takes 'mean' or 'cls'")
        w.add_uint32("modern-bert.classifier.pooling_type", _POOLING[pooling])


def _nomic_config(hp: dict) -> dict:
    """A nomic-bert config in BERT's key names, after checking that llama.cpp's graph runs
    it (its converter's checks)."""
    want = {"activation_function": "swiglu", "causal": False, "prenorm": False, "qkv_proj_bias": False, "mlp_fc1_bias": False,
            "mlp_fc2_bias": False, "rotary_emb_fraction": 1.0, "rotary_emb_interleaved": False, "use_rms_norm": False, "parallel_block": False}
    for k, v in want.items():
        if k in hp and hp[k] != v:
            raise ConvertError(f"nomic-bert {k} = {hp[k]!r}: llama.cpp's graph runs {v!r} only")
    if hp.get("moe_every_n_layers") or hp.get("num_experts"):
        raise ConvertError("a nomic-bert with experts (nomic-embed-text-v2-moe): not supported")
    if hp.get("rotary_scaling_factor"):
        raise ConvertError("nomic-bert rotary_scaling_factor: scaled RoPE is not supported")
    return {**hp, "num_hidden_layers": hp["n_layer"], "hidden_size": hp["n_embd"], "intermediate_size": hp["n_inner"],
            "num_attention_heads": hp["n_head"], "layer_norm_eps": hp.get("layer_norm_epsilon", 1e-12),
            "max_position_embeddings": hp.get("max_trained_positions", hp.get("n_positions", 2048)), "type_vocab_size": hp.get("type_vocab_size", 2)}


def convert(model_dir, out, out_type: str = "f16", progress: Optional[Callable[[int, int, str], None]] = None) -> Path:
    """Write the GGUF of the checkpoint in `model_dir` to `out`; returns its path."""
    gguf = need("gguf")
    model_dir, out = Path(model_dir), Path(out)
    file_types(out_type)  # checks it
    cfg_path = model_dir / "config.json"
    if not cfg_path.is_file():
        raise ConvertError(f"{model_dir}: config.json is missing (is this a Hugging Face model directory?)")
    hp = json.loads(cfg_path.read_text())
    names = hp.get("architectures") or []
    if any(a in DECODERS for a in names):
        return convert_decoder(model_dir, hp, out, out_type, progress)
    arch = next((_ARCHS[a] for a in names if a in _ARCHS), None)
    if arch is None and hp.get("model_type") in ("bert", "xlm-roberta"):
        arch = "bert"
    if arch is None and hp.get("model_type") == "nomic_bert":
        arch = "nomic-bert"
    nomic, jina = arch == "nomic-bert", arch == "jina-bert-v2"
    if nomic:
        hp = _nomic_config(hp)
    if jina and (hp.get("position_embedding_type", "alibi") != "alibi" or hp.get("feed_forward_type", "geglu") != "geglu"):
        raise ConvertError(f"{cfg_path}: a jina-bert-v2 with position_embedding_type {hp.get('position_embedding_type')!r} / feed_forward_type {hp.get('feed_forward_type')!r}: llama.cpp's graph runs ALiBi with GEGLU")
    if arch is None:
        raise ConvertError(f"{cfg_path}: architectures {names} / model_type {hp.get('model_type')!r}: this converter handles BERT, XLM-RoBERTa, nomic-bert, jina-bert-v2 and ModernBERT checkpoints")
    if arch == "bert" and hp.get("position_embedding_type", "absolute") != "absolute":
        raise ConvertError(f"{cfg_path}: position_embedding_type {hp['position_embedding_type']!r}; BERT here uses absolute positions")
    st_files = sorted(model_dir.glob("*.safetensors"))
    if not st_files:
        raise ConvertError(f"{model_dir}: no .safetensors weights (convert a PyTorch checkpoint with safetensors first)")
    n_layer = int(hp["num_hidden_layers"])
    modern = arch == "modern-bert"
    model_arch = {"modern-bert": gguf.MODEL_ARCH.MODERN_BERT, "nomic-bert": gguf.MODEL_ARCH.NOMIC_BERT, "jina-bert-v2": gguf.MODEL_ARCH.JINA_BERT_V2}
    tmap = gguf.get_tensor_name_map(model_arch.get(arch, gguf.MODEL_ARCH.BERT), n_layer)
    vocab = read_vocab(model_dir)
    if modern and vocab.model != "gpt2":
        raise ConvertError(f"{model_dir}: a ModernBERT checkpoint with a {vocab.model!r} vocabulary; its byte-level BPE tokenizer.json is expected")
    if (nomic or jina) and vocab.model != "bert":
        raise ConvertError(f"{model_dir}: a {arch} checkpoint with a {vocab.model!r} vocabulary; llamars-convert takes BERT's WordPiece one for it")
    roberta = hp.get("model_type") == "xlm-roberta" or any(a.startswith("XLMRoberta") for a in names)
    # positions start at pad_token_id + 1 (fairseq); llama.cpp's converter drops the rows before
    pos_offset = int(hp.get("pad_token_id", 1)) + 1 if roberta else 0
    qt, ftype = file_types(out_type)

    part = out.with_name(out.name + ".part")
    w = gguf.GGUFWriter(str(part), arch)
    w.add_name(model_dir.name)
    w.add_block_count(n_layer)
    w.add_context_length(int(hp["max_position_embeddings"]) - pos_offset)
    w.add_embedding_length(int(hp["hidden_size"]))
    w.add_feed_forward_length(int(hp["intermediate_size"]))
    w.add_head_count(int(hp["num_attention_heads"]))
    w.add_layer_norm_eps(float(hp.get("norm_eps", 1e-5)) if modern else float(hp.get("layer_norm_eps", 1e-12)))
    w.add_causal_attention(False)
    w.add_file_type(ftype)
    if (pool := _pooling(model_dir)) is not None:
        w.add_pooling_type(gguf.PoolingType(pool))
    if modern:
        _modern_bert_hparams(w, hp)
    else:
        w.add_token_type_count(int(hp.get("type_vocab_size", 1)))
    if nomic:
        w.add_rope_freq_base(float(hp.get("rotary_emb_base", 10000.0)))
    write_vocab(w, vocab, model_dir, pre="modern-bert" if modern else None)

    tensors = []
    for f in st_files:
        for name, load in read_safetensors(f):
            n = name.split(".", 1)[1] if name.startswith(("bert.", "roberta.", "model.")) else name
            if modern and "ModernBertForSequenceClassification" in names and n in _MODERN_CLS:
                tensors.append((_MODERN_CLS[n], load))
                continue
            if modern and n.startswith(("head.", "decoder.")):
                continue  # the masked-LM head
            if n.endswith(".gamma"):
                n = n[:-6] + ".weight"
            if n.endswith(".beta"):
                n = n[:-5] + ".bias"
            if n in ("embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias") or n.startswith(("cls.predictions", "cls.seq_relationship")):
                continue
            new = tmap.get_name(n, try_suffixes=(".weight", ".bias"))
            if new is None:
                raise ConvertError(f"{f.name}: tensor {name} has no GGUF name for {arch}")
            if n == "embeddings.position_embeddings.weight" and pos_offset:
                load = (lambda f=load: f()[pos_offset:])
            tensors.append((new, load))
    write_tensors(w, tensors, qt, progress)
    part.replace(out)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="llamars-convert", description="Convert a Hugging Face checkpoint to GGUF: BERT-family encoders (BERT, XLM-RoBERTa, nomic-bert, jina-bert-v2, ModernBERT) and Llama / Qwen 2 / Qwen 3 decoders.")
    p.add_argument("model_dir", help="directory with config.json, *.safetensors and tokenizer.json / vocab.txt")
    p.add_argument("out", help="the GGUF file to write")
    p.add_argument("--type", "--outtype", dest="type", default="f16", choices=TYPES, help="weight type of the 2-D tensors (default f16)")
    a = p.parse_args(argv)

    def show(i: int, n: int, name: str) -> None:
        sys.stderr.write(f"\rllamars-convert: {i}/{n} tensors ({name})\x1b[K")
        if i == n:
            sys.stderr.write("\n")

    try:
        path = convert(a.model_dir, a.out, a.type, progress=show)
    except ConvertError as e:
        print(f"llamars-convert: {e}", file=sys.stderr)
        return 2
    print(f"llamars-convert: wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {a.type})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
