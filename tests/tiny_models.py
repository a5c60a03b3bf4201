"""Tiny GGUF files for tests: a byte-level GGUF encoder (so tests can also build
malformed files, and know the byte offset of every field) and tiny but complete
models for each supported architecture, with random weights of any tensor type.

The encoder follows ggml/docs/gguf.md (little-endian, versions 2 and 3). Files it
writes are read back by `gguf.GGUFReader` in the tests, so it is checked against an
independent reader. Weights of the types `gguf.quants` can quantize are quantized
with it; K-quants and IQ4 types are built directly as valid random blocks whose f16
scale fields are set so that the dequantized weights have a chosen std.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as QT, GGUFValueType as VT
from gguf.quants import dequantize, quantize

# ---------------------------------------------------------------- encoder

_SCALAR_FMT = {
    VT.UINT8: "<B",
    VT.INT8: "<b",
    VT.UINT16: "<H",
    VT.INT16: "<h",
    VT.UINT32: "<I",
    VT.INT32: "<i",
    VT.FLOAT32: "<f",
    VT.BOOL: "<B",
    VT.UINT64: "<Q",
    VT.INT64: "<q",
    VT.FLOAT64: "<d",
}


@dataclass
class Arr:
    """A typed GGUF array value; items of an ARRAY-typed Arr are Arr themselves."""

    elem_type: int
    items: list


@dataclass
class KV:
    key: str
    vtype: int
    value: object


@dataclass
class Tensor:
    name: str
    ggml_type: int
    dims: List[int]  # ggml order: dims[0] is the row length
    data: bytes


@dataclass
class Layout:
    """Where each field landed in the encoded file (absolute byte offsets)."""

    kv: Dict[str, Tuple[int, int, int, int]] = field(default_factory=dict)  # key -> (key_at, type_at, value_at, end)
    tensor_info: Dict[str, Dict[str, int]] = field(default_factory=dict)  # name -> {name,n_dims,dims,type,offset,end}
    tensor_data: Dict[str, Tuple[int, int]] = field(default_factory=dict)  # name -> (abs start, nbytes)
    kv_start: int = 24
    header_end: int = 0
    data_offset: int = 0
    size: int = 0


def encode_string(s) -> bytes:
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def encode_value(vtype: int, value) -> bytes:
    vtype = VT(vtype)
    if vtype in _SCALAR_FMT:
        if vtype == VT.BOOL:
            value = int(bool(value))
        return struct.pack(_SCALAR_FMT[vtype], value)
    if vtype == VT.STRING:
        return encode_string(value)
    if vtype == VT.ARRAY:
        assert isinstance(value, Arr), "ARRAY values are written as Arr(elem_type, items)"
        out = [struct.pack("<IQ", int(value.elem_type), len(value.items))]
        out += [encode_value(value.elem_type, it) for it in value.items]
        return b"".join(out)
    raise ValueError(f"unknown value type {vtype}")


def tensor_nbytes(ggml_type: int, dims: Sequence[int]) -> int:
    bs, ts = GGML_QUANT_SIZES[QT(ggml_type)]
    n = int(np.prod(dims))
    assert n % bs == 0
    return n // bs * ts


def _align(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def build_gguf(
    kvs: Sequence[KV],
    tensors: Sequence[Tensor],
    *,
    version: int = 3,
    magic: bytes = b"GGUF",
    n_tensors: Optional[int] = None,
    n_kv: Optional[int] = None,
) -> Tuple[bytes, Layout]:
    """Encode a complete GGUF file. The alignment is `general.alignment` when present,
    else 32. `n_tensors` / `n_kv` override the counts written in the header."""
    alignment = 32
    for kv in kvs:
        if kv.key == "general.alignment":
            alignment = int(kv.value)
    lay = Layout()
    buf = bytearray()
    buf += magic + struct.pack("<I", version)
    buf += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)
    lay.kv_start = len(buf)
    for kv in kvs:
        key_at = len(buf)
        buf += encode_string(kv.key)
        type_at = len(buf)
        buf += struct.pack("<I", int(kv.vtype))
        value_at = len(buf)
        buf += encode_value(kv.vtype, kv.value)
        lay.kv[kv.key] = (key_at, type_at, value_at, len(buf))
    rel = 0
    rel_offsets = []
    for t in tensors:
        info = {"name": len(buf)}
        buf += encode_string(t.name)
        info["n_dims"] = len(buf)
        buf += struct.pack("<I", len(t.dims))
        info["dims"] = len(buf)
        for d in t.dims:
            buf += struct.pack("<Q", d)
        info["type"] = len(buf)
        buf += struct.pack("<I", int(t.ggml_type))
        info["offset"] = len(buf)
        buf += struct.pack("<Q", rel)
        info["end"] = len(buf)
        lay.tensor_info[t.name] = info
        rel_offsets.append(rel)
        rel = _align(rel + len(t.data), alignment)
    lay.header_end = len(buf)
    lay.data_offset = _align(len(buf), alignment)
    buf += b"\0" * (lay.data_offset - len(buf))
    for t, r in zip(tensors, rel_offsets):
        assert len(buf) == lay.data_offset + r
        lay.tensor_data[t.name] = (len(buf), len(t.data))
        buf += t.data
        buf += b"\0" * (_align(len(buf), alignment) - len(buf))
    lay.size = len(buf)
    return bytes(buf), lay


def write_gguf(path, kvs, tensors, **kw) -> Layout:
    data, lay = build_gguf(kvs, tensors, **kw)
    Path(path).write_bytes(data)
    return lay


# ---------------------------------------------------------------- weights

#: Every weight type the engine computes with.
WEIGHT_TYPES = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0",
                "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M"]

IQ1_M_SCALE = -1  # not a byte offset: see set_iq1_m_scale

# Byte offsets of the f16 scale fields in one block (ggml-common.h); the second
# entry, when present, is the `dmin` field subtracted as dmin * min.
_RAW_SCALE_FIELDS = {
    QT.Q2_K: (80, 82),
    QT.Q3_K: (108, None),
    QT.Q4_K: (0, 2),
    QT.Q5_K: (0, 2),
    QT.Q6_K: (208, None),
    QT.IQ4_NL: (0, None),
    QT.IQ4_XS: (0, None),
    # grid types (gguf cannot quantize to them): random grid indices, signs and scales
    QT.IQ2_XXS: (0, None),
    QT.IQ2_XS: (0, None),
    QT.IQ2_S: (0, None),
    QT.IQ3_XXS: (0, None),
    QT.IQ3_S: (0, None),
    QT.IQ1_S: (0, None),
    # IQ1_M has no f16 field: its scale is spread over the top nibbles of the scale words
    QT.IQ1_M: (IQ1_M_SCALE, None),
}


def _set_f16(blocks: np.ndarray, at: int, values: np.ndarray) -> None:
    if at == IQ1_M_SCALE:
        set_iq1_m_scale(blocks, values)
        return
    blocks[:, at : at + 2] = values.astype(np.float16).view(np.uint8).reshape(-1, 2)


def set_iq1_m_scale(blocks: np.ndarray, values: np.ndarray) -> None:
    """IQ1_M blocks (56 bytes): nibble k of the f16 scale goes to the top nibble of the k-th
    u16 of `scales` (bytes 48..56), the rest of the word keeps its 3-bit sub-scales."""
    h = values.astype(np.float16).view(np.uint16).astype(np.uint16)
    for k in range(4):
        hi = 49 + 2 * k
        blocks[:, hi] = (blocks[:, hi] & 0x0F) | (((h >> (4 * k)) & 0xF).astype(np.uint8) << 4)


def random_raw_blocks(qtype: QT, n_rows: int, n_cols: int, std: float, rng: np.random.Generator) -> np.ndarray:
    """Valid random blocks of a K-quant / IQ4 type: uint8 [n_rows, row_bytes].

    Quant bits and sub-block scales are random bytes; each block's `d` is drawn from
    ±U(0.5, 1) (+ only for types with a min, whose `dmin` is then chosen so the block's
    mean is ~0).
    Dequantization is linear in the f16 fields, so a final rescale of all of them
    sets the std of the dequantized weights to `std`."""
    bs, ts = GGML_QUANT_SIZES[qtype]
    assert n_cols % bs == 0
    nb = n_rows * n_cols // bs
    blocks = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    d_at, dmin_at = _RAW_SCALE_FIELDS[qtype]
    d = rng.uniform(0.5, 1.0, nb)
    if dmin_at is None:
        # signed scales (as llama.cpp's quantizers write them) keep the weight mean ~0
        # for codebooks that are not symmetric (IQ4: -127..113)
        d *= rng.choice([-1.0, 1.0], nb)
    dmin = np.zeros(nb)
    if dmin_at is not None:
        # mean of the d·scale·q part, and of the -1·min part, per block
        _set_f16(blocks, d_at, d)
        _set_f16(blocks, dmin_at, np.zeros(nb))
        a = dequantize(blocks, qtype).reshape(nb, bs).mean(axis=1)
        _set_f16(blocks, d_at, np.zeros(nb))
        _set_f16(blocks, dmin_at, np.ones(nb))
        b = dequantize(blocks, qtype).reshape(nb, bs).mean(axis=1)
        dmin = np.where(b < 0, -a / np.where(b < 0, b, -1.0), 0.0)
        dmin = np.clip(dmin, 0.0, 1e3)
    _set_f16(blocks, d_at, d)
    if dmin_at is not None:
        _set_f16(blocks, dmin_at, dmin)
    s = float(dequantize(blocks, qtype).std())
    d, dmin = d * (std / s), dmin * (std / s)  # off only by the f16 rounding of the fields
    assert np.isfinite(d).all() and np.abs(d).max() < 6e4 and np.abs(dmin).max() < 6e4
    _set_f16(blocks, d_at, d)
    if dmin_at is not None:
        _set_f16(blocks, dmin_at, dmin)
    return blocks.reshape(n_rows, -1)


def make_weight(name: str, type_name: str, n_in: int, n_out: int, std: float, rng: np.random.Generator) -> Tensor:
    """A [n_out rows x n_in] weight matrix of `type_name` (ggml dims [n_in, n_out])."""
    qt = QT[type_name]
    if qt in _RAW_SCALE_FIELDS:
        data = random_raw_blocks(qt, n_out, n_in, std, rng)
    else:
        w = (rng.standard_normal((n_out, n_in)) * std).astype(np.float32)
        data = w if qt == QT.F32 else quantize(w, qt)
    return Tensor(name, int(qt), [n_in, n_out], np.ascontiguousarray(data).tobytes())


def make_vector(name: str, values: np.ndarray) -> Tensor:
    v = np.asarray(values, dtype=np.float32).reshape(-1)
    return Tensor(name, int(QT.F32), [v.size], v.tobytes())


# ---------------------------------------------------------------- vocabulary

_WORDS = (
    "hello world model the of and to in is it you that he was for on are with as his they be at one have this from "
    "or had by word but what some we can out other were all there when up use your how said an each "
    "she which do their time if will way about many then them would like so these her long make thing "
    "see him two has look more day could go come did my no most people over know water than call first "
    "who may down side been now find"
).split()


def spm_vocab(gemma_order: bool = False):
    """(tokens, scores, token_types, special ids): a small SentencePiece-style vocab:
    special tokens, the 256 byte tokens <0x00>..<0xFF>, then single characters and the
    prefixes of common words (so every piece is reachable by pairwise merges), scored
    so that longer pieces merge first."""
    if gemma_order:
        specials = [("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2)]
        ids = {"pad": 0, "eos": 1, "bos": 2, "unk": 3}
    else:
        specials = [("<unk>", 2), ("<s>", 3), ("</s>", 3)]
        ids = {"unk": 0, "bos": 1, "eos": 2}
    tokens = [t for t, _ in specials]
    types = [ty for _, ty in specials]
    scores = [0.0] * len(specials)
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        types.append(6)
        scores.append(0.0)
    pieces: List[str] = []
    for ch in "\u2581abcdefghijklmnopqrstuvwxyz.,":
        pieces.append(ch)
    for w in _WORDS:
        full = "\u2581" + w
        for k in range(2, len(full) + 1):
            p = full[:k]
            if p not in pieces:
                pieces.append(p)
        if len(pieces) >= 141:
            break
    pieces = pieces[:141]
    for p in pieces:
        tokens.append(p)
        types.append(1)
        scores.append(-100.0 + len(p) * 10.0 - len(tokens) * 0.01)
    return tokens, scores, types, ids


# ---------------------------------------------------------------- models


@dataclass(frozen=True)
class Spec:
    arch: str
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_embd: int = 256
    n_ff: int = 512
    rope_base: float = 10000.0
    eps: float = 1e-5
    window: int = 0
    ctx: int = 128


SPECS: Dict[str, Spec] = {
    "llama": Spec("llama", n_layer=3, n_head=4, n_head_kv=2, head_dim=64, eps=1e-5),
    "qwen2": Spec("qwen2", n_layer=2, n_head=4, n_head_kv=2, head_dim=64, rope_base=1e6, eps=1e-6),
    # head_dim 128 != n_embd / n_head: exercises attention.key_length
    "qwen3": Spec("qwen3", n_layer=2, n_head=4, n_head_kv=2, head_dim=128, rope_base=1e6, eps=1e-6),
    # 6 layers: with the fixed pattern of 6, layers 0-4 are local (window 4), layer 5 global
    "gemma3": Spec("gemma3", n_layer=6, n_head=4, n_head_kv=1, head_dim=128, rope_base=1e6, eps=1e-6, window=4),
    "phi3": Spec("phi3", n_layer=2, n_head=4, n_head_kv=4, head_dim=64, eps=1e-5),
}
ARCHS = list(SPECS)

# Weight std per role, chosen so attention is neither uniform nor one-hot and every
# sub-layer moves the residual stream (a missing or misplaced piece shows in the logits).
STD_QK = 0.08
STD_OTHER = 0.05
STD_BIAS = 0.5


def model_kvs(arch: str, *, extra: Sequence[KV] = (), drop: Sequence[str] = ()) -> List[KV]:
    s = SPECS[arch]
    tokens, scores, types, ids = spm_vocab(gemma_order=arch == "gemma3")
    a = arch
    kvs = hparam_kvs(a, f"tiny-{arch}", s)
    if s.head_dim * s.n_head != s.n_embd:
        kvs += [KV(f"{a}.attention.key_length", VT.UINT32, s.head_dim), KV(f"{a}.attention.value_length", VT.UINT32, s.head_dim)]
    if arch in ("llama", "phi3"):
        kvs.append(KV(f"{a}.rope.dimension_count", VT.UINT32, s.head_dim))
    if s.window:
        kvs.append(KV(f"{a}.attention.sliding_window", VT.UINT32, s.window))
    kvs += spm_kvs(tokens, scores, types, ids)
    return [kv for kv in kvs if kv.key not in drop] + list(extra)


def hparam_kvs(a: str, name: str, s) -> List[KV]:
    """The architecture name and the shape keys every decoder has (`s`: a spec with ctx,
    n_embd, n_layer, n_ff, n_head, n_head_kv, eps and rope_base)."""
    return [
        KV("general.architecture", VT.STRING, a),
        KV("general.name", VT.STRING, name),
        KV(f"{a}.context_length", VT.UINT32, s.ctx),
        KV(f"{a}.embedding_length", VT.UINT32, s.n_embd),
        KV(f"{a}.block_count", VT.UINT32, s.n_layer),
        KV(f"{a}.feed_forward_length", VT.UINT32, s.n_ff),
        KV(f"{a}.attention.head_count", VT.UINT32, s.n_head),
        KV(f"{a}.attention.head_count_kv", VT.UINT32, s.n_head_kv),
        KV(f"{a}.attention.layer_norm_rms_epsilon", VT.FLOAT32, s.eps),
        KV(f"{a}.rope.freq_base", VT.FLOAT32, s.rope_base),
    ]


def spm_kvs(tokens, scores, types, ids, *, full: bool = True) -> List[KV]:
    """The `tokenizer.ggml.*` metadata of a SentencePiece vocabulary (`full`: also the
    unknown token and the BOS / EOS switches)."""
    kvs = [
        KV("tokenizer.ggml.model", VT.STRING, "llama"),
        KV("tokenizer.ggml.tokens", VT.ARRAY, Arr(VT.STRING, tokens)),
        KV("tokenizer.ggml.scores", VT.ARRAY, Arr(VT.FLOAT32, scores)),
        KV("tokenizer.ggml.token_type", VT.ARRAY, Arr(VT.INT32, types)),
        KV("tokenizer.ggml.bos_token_id", VT.UINT32, ids["bos"]),
        KV("tokenizer.ggml.eos_token_id", VT.UINT32, ids["eos"]),
    ]
    if full:
        kvs += [
            KV("tokenizer.ggml.unknown_token_id", VT.UINT32, ids["unk"]),
            KV("tokenizer.ggml.add_bos_token", VT.BOOL, True),
            KV("tokenizer.ggml.add_eos_token", VT.BOOL, False),
        ]
    return kvs


def n_vocab(arch: str) -> int:
    return len(spm_vocab(gemma_order=arch == "gemma3")[0])


def model_tensors(arch: str, wtype: str, seed: int = 0) -> List[Tensor]:
    """Every tensor of a tiny `arch` model; 2-D weights in `wtype`, norms and biases F32."""
    s = SPECS[arch]
    rng = np.random.default_rng(seed)
    e, H, Hk, D, F = s.n_embd, s.n_head, s.n_head_kv, s.head_dim, s.n_ff
    nv = n_vocab(arch)

    def norm(name, n, mean=1.0, sd=0.1):
        return make_vector(name, mean + sd * rng.standard_normal(n))

    ts = [make_weight("token_embd.weight", wtype, e, nv, STD_OTHER, rng), norm("output_norm.weight", e)]
    if arch != "gemma3":  # gemma3 ties the output to the embeddings
        ts.append(make_weight("output.weight", wtype, e, nv, STD_OTHER, rng))
    for il in range(s.n_layer):
        p = f"blk.{il}."
        ts.append(norm(p + "attn_norm.weight", e))
        if arch == "phi3":
            # fused [q; k; v] rows; q/k rows get the larger std
            qkv = make_weight(p + "attn_qkv.weight", wtype, e, (H + 2 * Hk) * D, STD_QK, rng)
            ts.append(qkv)
        else:
            ts.append(make_weight(p + "attn_q.weight", wtype, e, H * D, STD_QK, rng))
            ts.append(make_weight(p + "attn_k.weight", wtype, e, Hk * D, STD_QK, rng))
            ts.append(make_weight(p + "attn_v.weight", wtype, e, Hk * D, STD_OTHER, rng))
        if arch == "qwen2":
            ts.append(make_vector(p + "attn_q.bias", STD_BIAS * rng.standard_normal(H * D)))
            ts.append(make_vector(p + "attn_k.bias", STD_BIAS * rng.standard_normal(Hk * D)))
            ts.append(make_vector(p + "attn_v.bias", STD_BIAS * rng.standard_normal(Hk * D)))
        if arch in ("qwen3", "gemma3"):
            # QK-norm weights around 1.5 keep attention scores O(2) after the norm
            ts.append(norm(p + "attn_q_norm.weight", D, mean=1.5, sd=0.3))
            ts.append(norm(p + "attn_k_norm.weight", D, mean=1.5, sd=0.3))
        ts.append(make_weight(p + "attn_output.weight", wtype, H * D, e, STD_OTHER, rng))
        if arch == "gemma3":
            ts.append(norm(p + "post_attention_norm.weight", e))
        ts.append(norm(p + "ffn_norm.weight", e))
        if arch == "phi3":
            ts.append(make_weight(p + "ffn_up.weight", wtype, e, 2 * F, STD_OTHER, rng))  # [gate; up]
        else:
            ts.append(make_weight(p + "ffn_gate.weight", wtype, e, F, STD_OTHER, rng))
            ts.append(make_weight(p + "ffn_up.weight", wtype, e, F, STD_OTHER, rng))
        ts.append(make_weight(p + "ffn_down.weight", wtype, F, e, STD_OTHER, rng))
        if arch == "gemma3":
            ts.append(norm(p + "post_ffw_norm.weight", e))
    return ts


def write_model(path, arch: str, wtype: str = "F32", seed: int = 0, *, extra_kvs=(), drop_kvs=(), drop_tensors=(), **kw) -> Layout:
    """Write a tiny `arch` model with `wtype` weights to `path`; returns the layout."""
    tensors = [t for t in model_tensors(arch, wtype, seed) if t.name not in drop_tensors]
    return write_gguf(path, model_kvs(arch, extra=extra_kvs, drop=drop_kvs), tensors, **kw)


def write_parity_model(path, arch: str, wtype: str) -> Layout:
    """The model the llama.cpp logits reference (`scripts/parity/tiny_reference.py`) was made
    from: `write_model`, except that phi3's is not named "phi3" (llama.cpp sets token
    attributes by that name, looking up "<|endoftext|>", which the tiny vocabulary lacks)."""
    if arch == "phi3":
        return write_model(path, arch, wtype, drop_kvs=("general.name",), extra_kvs=(KV("general.name", VT.STRING, "tiny-p3"),))
    return write_model(path, arch, wtype)


def split_paths(directory, stem: str, n: int) -> List[Path]:
    return [Path(directory) / f"{stem}-{i:05d}-of-{n:05d}.gguf" for i in range(1, n + 1)]


def write_split_model(directory, stem: str, arch: str, wtype: str = "F32", seed: int = 0, n_parts: int = 3) -> List[Path]:
    """The same model as `write_model`, as `n_parts` files named like llama.cpp's
    gguf-split: STEM-0000k-of-0000N.gguf. Part 1 holds all metadata; every part has
    split.no / split.count / split.tensors.count and a share of the tensors."""
    tensors = model_tensors(arch, wtype, seed)
    chunks = np.array_split(np.arange(len(tensors)), n_parts)
    paths = split_paths(directory, stem, n_parts)
    for k, (p, idx) in enumerate(zip(paths, chunks)):
        split_kvs = [
            KV("split.no", VT.UINT16, k),
            KV("split.count", VT.UINT16, n_parts),
            KV("split.tensors.count", VT.INT32, len(tensors)),
        ]
        kvs = model_kvs(arch, extra=split_kvs) if k == 0 else split_kvs
        write_gguf(p, kvs, [tensors[i] for i in idx])
    return paths


# ---------------------------------------------------------------- encoders (BERT)

BERT = Spec("bert", n_layer=2, n_head=4, n_head_kv=4, head_dim=32, n_embd=128, n_ff=256, eps=1e-12, ctx=64)


def wpm_vocab() -> Tuple[List[str], List[int]]:
    """(tokens, token types) of a small WordPiece vocabulary in llama.cpp's GGUF form:
    [PAD] [UNK] [CLS] [SEP] [MASK], then word-initial pieces `▁word` / `▁x` and
    continuation letters `x` (a checkpoint's `##x`)."""
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    types = [3] * 5
    for w in list(_WORDS) + list("abcdefghijklmnopqrstuvwxyz") + list(".,?!"):
        if "\u2581" + w not in tokens:
            tokens.append("\u2581" + w)
    tokens += list("abcdefghijklmnopqrstuvwxyz") + ["ing", "ed"]
    types += [1] * (len(tokens) - len(types))
    return tokens, types


def bert_kvs(reranker: bool, arch: str = "bert") -> List[KV]:
    s = BERT
    tokens, types = wpm_vocab()
    a = arch
    rope = [KV(f"{a}.rope.freq_base", VT.FLOAT32, 1000.0)] if arch == "nomic-bert" else []
    if arch == "modern-bert":
        # a global layer, then a local one with a symmetric window of ±2 tokens
        rope = [KV(f"{a}.rope.freq_base", VT.FLOAT32, 160000.0), KV(f"{a}.rope.freq_base_swa", VT.FLOAT32, 10000.0),
                KV(f"{a}.attention.sliding_window", VT.UINT32, 4)]
    return rope + [
        KV("general.architecture", VT.STRING, a),
        KV("general.name", VT.STRING, f"tiny-{arch}-reranker" if reranker else f"tiny-{arch}"),
        KV(f"{a}.context_length", VT.UINT32, s.ctx),
        KV(f"{a}.embedding_length", VT.UINT32, s.n_embd),
        KV(f"{a}.block_count", VT.UINT32, s.n_layer),
        KV(f"{a}.feed_forward_length", VT.UINT32, s.n_ff),
        KV(f"{a}.attention.head_count", VT.UINT32, s.n_head),
        KV(f"{a}.attention.layer_norm_epsilon", VT.FLOAT32, s.eps),
        KV(f"{a}.attention.causal", VT.BOOL, False),
        KV(f"{a}.pooling_type", VT.UINT32, 4 if reranker else 1),
        KV("tokenizer.ggml.token_type_count", VT.UINT32, 2),
        KV("tokenizer.ggml.model", VT.STRING, "bert"),
        KV("tokenizer.ggml.pre", VT.STRING, "default"),
        KV("tokenizer.ggml.tokens", VT.ARRAY, Arr(VT.STRING, tokens)),
        KV("tokenizer.ggml.token_type", VT.ARRAY, Arr(VT.INT32, types)),
        KV("tokenizer.ggml.padding_token_id", VT.UINT32, 0),
        KV("tokenizer.ggml.unknown_token_id", VT.UINT32, 1),
        KV("tokenizer.ggml.bos_token_id", VT.UINT32, 2),
        KV("tokenizer.ggml.seperator_token_id", VT.UINT32, 3),
        KV("tokenizer.ggml.eos_token_id", VT.UINT32, 3),
        KV("tokenizer.ggml.mask_token_id", VT.UINT32, 4),
        KV("tokenizer.ggml.add_bos_token", VT.BOOL, True),
        KV("tokenizer.ggml.add_eos_token", VT.BOOL, True),
        KV("tokenizer.ggml.add_sep_token", VT.BOOL, False),
    ]


def bert_tensors(wtype: str, reranker: bool, seed: int = 0, arch: str = "bert") -> List[Tensor]:
    """A tiny BERT (llama.cpp's tensor names); with `reranker`, the classification head
    (cls dense + tanh, cls.output with one label). `nomic-bert`: RoPE (no position table),
    a fused QKV projection and a SwiGLU FFN without biases. `jina-bert-v2`: ALiBi (no
    position table), a fused [gate; up] GEGLU projection with one bias over both halves, and
    as a reranker jina-reranker-v1's single [n_embd → 1] classifier layer."""
    s = BERT
    rng = np.random.default_rng(seed)
    e, F = s.n_embd, s.n_ff
    nv = len(wpm_vocab()[0])

    def vec(name, n, mean=0.0, sd=STD_BIAS):
        return make_vector(name, mean + sd * rng.standard_normal(n))

    def ln(name):
        return [vec(name + ".weight", e, 1.0, 0.1), vec(name + ".bias", e, 0.0, 0.1)]

    nomic, jina = arch == "nomic-bert", arch == "jina-bert-v2"
    if arch == "modern-bert":
        return _modern_bert_tensors(wtype, rng)
    ts = [make_weight("token_embd.weight", wtype, e, nv, 0.5, rng),
          make_weight("token_types.weight", "F32", e, 2, 0.5, rng), *ln("token_embd_norm")]
    if not nomic and not jina:
        ts.append(make_weight("position_embd.weight", "F32", e, s.ctx, 0.5, rng))
    for il in range(s.n_layer):
        p = f"blk.{il}."
        if nomic:
            ts.append(make_weight(p + "attn_qkv.weight", wtype, e, 3 * e, STD_QK * 1.5, rng))
        else:
            for name, std in (("attn_q", STD_QK * 1.5), ("attn_k", STD_QK * 1.5), ("attn_v", STD_OTHER * 2)):
                ts += [make_weight(p + name + ".weight", wtype, e, e, std, rng), vec(p + name + ".bias", e, sd=0.1)]
        ts += [make_weight(p + "attn_output.weight", wtype, e, e, STD_OTHER * 2, rng), vec(p + "attn_output.bias", e, sd=0.1), *ln(p + "attn_output_norm")]
        if nomic:
            ts += [make_weight(p + "ffn_gate.weight", wtype, e, F, STD_OTHER * 2, rng), make_weight(p + "ffn_up.weight", wtype, e, F, STD_OTHER * 2, rng),
                   make_weight(p + "ffn_down.weight", wtype, F, e, STD_OTHER * 2, rng), *ln(p + "layer_output_norm")]
            continue
        if jina:
            ts += [make_weight(p + "ffn_up.weight", wtype, e, 2 * F, STD_OTHER * 2, rng), vec(p + "ffn_up.bias", 2 * F, sd=0.1),
                   make_weight(p + "ffn_down.weight", wtype, F, e, STD_OTHER * 2, rng), vec(p + "ffn_down.bias", e, sd=0.1), *ln(p + "layer_output_norm")]
            continue
        ts += [make_weight(p + "ffn_up.weight", wtype, e, F, STD_OTHER * 2, rng), vec(p + "ffn_up.bias", F, sd=0.1)]
        ts += [make_weight(p + "ffn_down.weight", wtype, F, e, STD_OTHER * 2, rng), vec(p + "ffn_down.bias", e, sd=0.1), *ln(p + "layer_output_norm")]
    if reranker and jina:
        ts += [make_weight("cls.weight", "F32", e, 1, 0.3, rng), vec("cls.bias", 1, sd=0.1)]
    elif reranker:
        ts += [make_weight("cls.weight", "F32", e, e, 0.1, rng), vec("cls.bias", e, sd=0.1),
               make_weight("cls.output.weight", "F32", e, 1, 0.3, rng), vec("cls.output.bias", 1, sd=0.1)]
    return ts


def _modern_bert_tensors(wtype: str, rng: np.random.Generator) -> List[Tensor]:
    """ModernBERT: pre-LayerNorms without biases (none before the first layer's attention),
    a fused QKV projection and a fused [gate; up] GEGLU projection without biases, a final
    norm."""
    s = BERT
    e, F = s.n_embd, s.n_ff
    nv = len(wpm_vocab()[0])

    def norm(name):
        return make_vector(name, 1.0 + 0.1 * rng.standard_normal(e))

    ts = [make_weight("token_embd.weight", wtype, e, nv, 0.5, rng), norm("token_embd_norm.weight")]
    for il in range(s.n_layer):
        p = f"blk.{il}."
        if il:
            ts.append(norm(p + "attn_norm.weight"))
        ts += [make_weight(p + "attn_qkv.weight", wtype, e, 3 * e, STD_QK * 1.5, rng), make_weight(p + "attn_output.weight", wtype, e, e, STD_OTHER * 2, rng),
               norm(p + "ffn_norm.weight"), make_weight(p + "ffn_up.weight", wtype, e, 2 * F, STD_OTHER * 2, rng),
               make_weight(p + "ffn_down.weight", wtype, F, e, STD_OTHER * 2, rng)]
    return ts + [norm("output_norm.weight")]


def write_bert_model(path, wtype: str = "F32", reranker: bool = False, seed: int = 0, arch: str = "bert") -> Layout:
    return write_gguf(path, bert_kvs(reranker, arch), bert_tensors(wtype, reranker, seed, arch))
