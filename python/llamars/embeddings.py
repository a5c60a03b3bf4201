"""Embeddings from a model's final hidden states: pooling and normalisation with
llama.cpp's semantics (`--pooling`, `embd_normalize`)."""
from __future__ import annotations

from typing import Optional

import numpy as np

from .errors import InvalidRequestError

POOLINGS = ("none", "mean", "cls", "last", "rank")
# GGUF `<arch>.pooling_type` values
_GGUF_POOLING = {0: "none", 1: "mean", 2: "cls", 3: "last", 4: "rank"}


def default_pooling(gguf_value: Optional[int]) -> str:
    """The model's own pooling when its GGUF names one; else `last` (the hidden state
    that saw the whole input, the usual choice for decoder-only models)."""
    return _GGUF_POOLING.get(gguf_value, "last") if gguf_value is not None else "last"


def pool(hidden: np.ndarray, pooling: str) -> np.ndarray:
    """hidden [n_tokens, n_embd] → [1, n_embd] (or [n_tokens, n_embd] for `none`); `rank`
    is the classifier's (Engine.classify), not a pooling of hidden states."""
    if pooling == "none":
        return hidden
    if pooling == "mean":
        return hidden.mean(axis=0, keepdims=True)
    if pooling == "cls":
        return hidden[:1]
    if pooling == "last":
        return hidden[-1:]
    raise InvalidRequestError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")


def normalize(rows: np.ndarray, embd_normalize: float) -> np.ndarray:
    """llama.cpp's embd_normalize per row: -1 none, 0 max-absolute (int16 range),
    1 taxicab, 2 Euclidean, p > 2 p-norm."""
    x = rows.astype(np.float64)
    if embd_normalize < 0:
        return rows
    if embd_normalize == 0:
        s = np.abs(x).max(axis=1, keepdims=True) / 32760.0
    elif embd_normalize == 1:
        s = np.abs(x).sum(axis=1, keepdims=True)
    elif embd_normalize == 2:
        s = np.sqrt((x * x).sum(axis=1, keepdims=True))
    else:  # p-norm, scaled by the row's largest magnitude so a large p neither overflows nor underflows
        a = np.abs(x)
        m = a.max(axis=1, keepdims=True)
        m1 = np.where(m > 0, m, 1.0)
        s = m * ((a / m1) ** embd_normalize).sum(axis=1, keepdims=True) ** (1.0 / embd_normalize)
    inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)
    return (x * inv).astype(np.float32)
