"""The vocabulary half of `llamars-convert`: a checkpoint's tokenizer (`tokenizer.json`,
or BERT's `vocab.txt`) as the `tokenizer.ggml.*` keys llama.cpp writes for it.

- WordPiece (BERT): `tokenizer.ggml.model = bert`, llama.cpp's phantom-space form
  (word-initial pieces as `▁piece`, `##` continuations bare), the normalizer switches.
- Unigram (XLM-RoBERTa, bge-m3): `tokenizer.ggml.model = t5`, pieces and scores in id
  order, SentencePiece's precompiled charsmap, `add_space_prefix` and
  `remove_extra_whitespaces` read from the `tokenizer.json` pipeline itself. Only the
  pipeline llamars reproduces is accepted (`Precompiled`, optionally followed by
  `Replace(" {2,}", " ")`; `Metaspace` with `▁` that splits); another is refused naming
  the component, rather than converted into a file that tokenizes differently.
- byte-level BPE (ModernBERT, Llama 3, Qwen 2 / 3): `tokenizer.ggml.model = gpt2`, the
  tokens in id order and the merges, with the pre-tokenizer preset read from the pipeline:
  `ByteLevel` with GPT-2's regex (`gpt-2`; ModernBERT's converter names it `modern-bert`),
  or a `Split` by Llama 3's (`llama-bpe`) or Qwen 2's (`qwen2`) regex then `ByteLevel`
  without one. Another pipeline is refused naming it; of normalizers only Qwen's NFC is
  accepted (llama.cpp does not normalize: the two agree on NFC text).
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import InvalidRequestError


class ConvertError(InvalidRequestError):
    """The checkpoint cannot be converted; the message says why and what to do."""


@dataclass
class Vocab:
    model: str  # "bert" | "t5"
    tokens: list
    types: list
    scores: Optional[list] = None
    #: extra keys: name (without "tokenizer.ggml.") -> bool
    flags: dict = field(default_factory=dict)
    charsmap: Optional[bytes] = None
    #: BPE merges ("left right"), in rank order
    merges: Optional[list] = None
    #: llama.cpp's pre-tokenizer preset (BPE)
    pre: str = "default"


def need(module: str):
    try:
        return __import__(module)
    except ImportError:
        raise ConvertError(f"llamars-convert needs the '{module}' package: pip install 'llamars[convert]'") from None


def read_vocab(model_dir: Path) -> Vocab:
    tj = model_dir / "tokenizer.json"
    tcp = model_dir / "tokenizer_config.json"
    tc = json.loads(tcp.read_text()) if tcp.is_file() else {}
    if tj.is_file():
        spec = json.loads(tj.read_text(encoding="utf-8"))
        kind = (spec.get("model") or {}).get("type")
        if kind == "Unigram":
            return _unigram(tj, spec)
        if kind == "BPE":
            return _bpe(tj, spec)
        if kind != "WordPiece":
            raise ConvertError(f"{tj}: tokenizer model {kind!r}; this converter handles WordPiece (BERT), Unigram (XLM-RoBERTa) and byte-level BPE (ModernBERT) vocabularies")
        tok = need("tokenizers").Tokenizer.from_file(str(tj))
        vocab = tok.get_vocab(with_added_tokens=True)
        special = {a["content"] for a in spec.get("added_tokens", []) if a.get("special")}
        norm = spec.get("normalizer") or {}
        lowercase = bool(norm.get("lowercase", tc.get("do_lower_case", True)))
        strip = norm.get("strip_accents")
    elif (model_dir / "vocab.txt").is_file():
        lines = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
        vocab = {t: i for i, t in enumerate(lines) if t or i < len(lines) - 1}
        special = {t for t in vocab if t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")}
        lowercase = bool(tc.get("do_lower_case", True))
        strip = tc.get("strip_accents")
    else:
        raise ConvertError(f"{model_dir}: neither tokenizer.json nor vocab.txt is there")
    return _wordpiece(vocab, special, lowercase, lowercase if strip is None else bool(strip))


def _wordpiece(vocab: dict, special: set, lowercase: bool, strip_accents: bool) -> Vocab:
    gguf = need("gguf")
    n = max(vocab.values()) + 1
    by_id: list = [None] * n
    for t, i in vocab.items():
        by_id[i] = t
    tokens, types = [], []
    for i, t in enumerate(by_id):
        if t is None:
            tokens.append(f"[PAD{i}]")
            types.append(int(gguf.TokenType.UNUSED))
        elif t in special:
            tokens.append(t)
            types.append(int(gguf.TokenType.CONTROL))
        else:
            # llama.cpp's phantom-space form of a WordPiece vocabulary
            tokens.append(t[2:] if t.startswith("##") else "\u2581" + t)
            types.append(int(gguf.TokenType.NORMAL))
    flags = {"normalizer.lowercase": lowercase, "normalizer.strip_accents": strip_accents}
    return Vocab("bert", tokens, types, flags=flags)


def _unigram(tj: Path, spec: dict) -> Vocab:
    gguf = need("gguf")
    model = spec["model"]
    norms = spec.get("normalizer") or {"type": "Sequence", "normalizers": []}
    seq = norms.get("normalizers", []) if norms.get("type") == "Sequence" else [norms]
    charsmap, collapse = None, False
    for i, n in enumerate(seq):
        t = n.get("type")
        if t == "Precompiled" and i == 0:
            charsmap = base64.b64decode(n.get("precompiled_charsmap") or "") or None
        elif t == "Replace" and n.get("pattern") == {"Regex": " {2,}"} and n.get("content") == " " and i == len(seq) - 1:
            collapse = True
        else:
            raise ConvertError(f"{tj}: normalizer step {i} ({json.dumps(n)[:120]}) is not one llamars reproduces for a Unigram vocabulary (Precompiled, then Replace(' {{2,}}', ' '))")
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") != "Metaspace" or pre.get("replacement", "\u2581") != "\u2581" or not pre.get("split", True):
        raise ConvertError(f"{tj}: pre_tokenizer {json.dumps(pre)[:120]}: a Unigram vocabulary needs Metaspace('▁', split=true)")
    scheme = pre.get("prepend_scheme", "always" if pre.get("add_prefix_space", True) else "never")
    if scheme not in ("always", "never"):
        raise ConvertError(f"{tj}: Metaspace prepend_scheme {scheme!r}; llamars reproduces 'always' and 'never'")
    pieces = model.get("vocab") or []
    unk = model.get("unk_id")
    if unk is None or not 0 <= unk < len(pieces):
        raise ConvertError(f"{tj}: the Unigram model has no unk_id inside its vocabulary")
    if model.get("byte_fallback"):
        raise ConvertError(f"{tj}: Unigram with byte_fallback is not supported")
    added = {a["id"]: a for a in spec.get("added_tokens", [])}
    tokens, scores, types = [], [], []
    T = gguf.TokenType
    for i, (piece, score) in enumerate(pieces):
        a = added.get(i)
        tokens.append(piece)
        scores.append(float(score))
        if i == unk:
            types.append(int(T.UNKNOWN))
        elif a is not None:
            types.append(int(T.CONTROL if a.get("special") else T.USER_DEFINED))
        else:
            types.append(int(T.NORMAL))
    for i in sorted(k for k in added if k >= len(pieces)):
        if i != len(tokens):
            raise ConvertError(f"{tj}: added token id {i} leaves a gap after the {len(tokens)} pieces")
        tokens.append(added[i]["content"])
        scores.append(0.0)
        types.append(int(T.CONTROL if added[i].get("special") else T.USER_DEFINED))
    ids = _post_processor_ids(spec)
    flags = {"add_space_prefix": scheme == "always", "remove_extra_whitespaces": collapse,
             "add_bos_token": bool(ids) and ids[0] is not None, "add_eos_token": bool(ids) and ids[-1] is not None}
    return Vocab("t5", tokens, types, scores=scores, flags=flags, charsmap=charsmap)


def _post_processor_ids(spec: dict) -> list:
    """The special-token ids of the `tokenizer.json` post-processor's single-sequence
    template (None for the sequence itself), or [] without one."""
    pp = spec.get("post_processor") or {}
    if pp.get("type") in ("RobertaProcessing", "BertProcessing"):
        return [pp["cls"][1], None, pp["sep"][1]]
    return [s.get("SpecialToken", {}).get("id") for s in pp.get("single") or []]


# the Split regex of a tokenizer.json -> llama.cpp's pre-tokenizer preset
_SPLIT_PRESETS = {
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "llama-bpe",
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+": "qwen2",
}


def _bpe_preset(tj: Path, spec: dict) -> str:
    """llama.cpp's pre-tokenizer preset for the byte-level pipeline of `spec`."""
    norm = spec.get("normalizer")
    if norm and norm.get("type") != "NFC":
        raise ConvertError(f"{tj}: normalizer {json.dumps(norm)[:120]}: a byte-level BPE vocabulary is converted only without one (or Qwen's NFC)")
    pre = spec.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and not pre.get("add_prefix_space"):
        return "gpt-2"
    steps = pre.get("pretokenizers") or []
    if pre.get("type") == "Sequence" and len(steps) == 2 and steps[0].get("type") == "Split" and steps[1].get("type") == "ByteLevel" \
            and not steps[1].get("use_regex", True) and not steps[1].get("add_prefix_space") and steps[0].get("behavior") == "Isolated":
        preset = _SPLIT_PRESETS.get((steps[0].get("pattern") or {}).get("Regex"))
        if preset:
            return preset
    raise ConvertError(f"{tj}: pre_tokenizer {json.dumps(pre)[:200]}: not a byte-level pipeline llamars knows the llama.cpp preset of "
                       "(GPT-2's ByteLevel, or Split by Llama 3's or Qwen 2's regex then ByteLevel)")


def _bpe(tj: Path, spec: dict) -> Vocab:
    gguf = need("gguf")
    model = spec["model"]
    pre = _bpe_preset(tj, spec)
    if model.get("byte_fallback") or model.get("dropout"):
        raise ConvertError(f"{tj}: BPE with byte_fallback or dropout is not supported")
    vocab = dict(model.get("vocab") or {})
    added = {a["id"]: a for a in spec.get("added_tokens", [])}
    for i, a in added.items():
        vocab[a["content"]] = i
    n = max(vocab.values()) + 1 if vocab else 0
    tokens: list = [None] * n
    for t, i in vocab.items():
        tokens[i] = t
    if any(t is None for t in tokens):
        raise ConvertError(f"{tj}: token ids are not contiguous ({tokens.count(None)} missing below {n})")
    T = gguf.TokenType
    types = [int(T.CONTROL if added[i].get("special") else T.USER_DEFINED) if i in added else int(T.NORMAL) for i in range(n)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model.get("merges") or []]
    ids = _post_processor_ids(spec)
    flags = {"add_bos_token": bool(ids) and ids[0] is not None, "add_eos_token": bool(ids) and ids[-1] is not None}
    return Vocab("gpt2", tokens, types, flags=flags, merges=merges, pre=pre)


def write_vocab(w, v: Vocab, model_dir: Path, pre: Optional[str] = None) -> None:
    """The vocabulary's keys on the GGUF writer `w` (`pre`: the pre-tokenizer preset, else
    the vocabulary's own), special ids from the checkpoint."""
    gguf = need("gguf")
    w.add_tokenizer_model(v.model)
    w.add_tokenizer_pre(pre or v.pre)
    w.add_token_list(v.tokens)
    w.add_token_types(v.types)
    if v.merges is not None:
        w.add_token_merges(v.merges)
    if v.scores is not None:
        w.add_token_scores(v.scores)
    for k, val in v.flags.items():
        if k not in ("add_bos_token", "add_eos_token"):
            w.add_bool(f"tokenizer.ggml.{k}", val)
    if v.charsmap:
        w.add_key_value("tokenizer.ggml.precompiled_charsmap", list(v.charsmap), gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT8)
    sv = gguf.SpecialVocab(model_dir, n_vocab=len(v.tokens))
    for k in ("add_bos_token", "add_eos_token"):
        if k in v.flags:
            sv.add_special_token[k[4:-6]] = v.flags[k]
    sv.add_to_gguf(w)
