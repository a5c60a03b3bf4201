"""`Engine`'s arguments checked and put the way the core takes them: GPU layers and
speculative decoding (the engine-wide `speculative=` and a call's `speculative=`)."""
from __future__ import annotations

import os
from typing import Union

from .errors import InvalidRequestError

#: `n_gpu_layers="all"`: more layers than any model has (the core clamps it).
ALL_LAYERS = 1 << 30


def gpu_layers(n: Union[int, str, None]) -> int:
    """`n_gpu_layers` as the core takes it: a count >= 0 ('all': every layer and the
    output layer; an error if they do not fit), or -1 for 'auto' (as many as fit)."""
    if n is None:
        return 0
    if isinstance(n, str):
        s = n.strip().lower()
        if s == "all":
            return ALL_LAYERS
        if s in ("auto", "-1"):
            return -1
        try:
            n = int(s)
        except ValueError:
            raise InvalidRequestError(f"n_gpu_layers must be a number of layers, 'auto' or 'all', got {n!r}") from None
    if isinstance(n, bool) or not isinstance(n, int) or n < -1:
        raise InvalidRequestError(f"n_gpu_layers must be a number of layers >= 0, 'auto' or 'all', got {n!r}")
    return n


def spec_config(spec) -> tuple:
    """`Engine(speculative=...)` as the core's (types, [(parameter, value), ...]); the core
    checks the names and values."""
    if spec is None or spec is False:
        return ("none", [], None, None)
    if isinstance(spec, str):
        spec = {"type": spec}
    if not isinstance(spec, dict):
        raise InvalidRequestError("speculative: must be a type name (e.g. 'ngram-simple') or a dict")
    spec = dict(spec)
    kind = spec.pop("type", "ngram-simple")
    if not isinstance(kind, str):
        raise InvalidRequestError("speculative: type must be a string such as 'ngram-simple' or 'ngram-mod,ngram-simple'")
    files = []
    for k in ("lookup_cache_static", "lookup_cache_dynamic"):
        f = spec.pop(k, None)
        if f is not None and not isinstance(f, (str, os.PathLike)):
            raise InvalidRequestError(f"speculative: {k} must be a file path, got {f!r}")
        files.append(os.fspath(f) if f is not None else None)
    for k, v in spec.items():
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise InvalidRequestError(f"speculative: {k} must be an integer >= 0, got {v!r}")
    return (kind, list(spec.items()), *files)


def spec_fields(spec) -> dict:
    """A call's `speculative=` as the request fields `speculative.n_max` / `.n_min` / `.p_min`."""
    if spec is None or spec is True:
        return {}
    if spec is False:
        return {"speculative.n_max": 0}
    if not isinstance(spec, dict):
        raise InvalidRequestError("speculative: must be a dict with n_max / n_min / p_min, or False")
    unknown = set(spec) - {"n_max", "n_min", "p_min"}
    if unknown:
        raise InvalidRequestError(f"speculative: unknown key(s) {', '.join(sorted(unknown))} (keys: n_max, n_min, p_min)")
    return {f"speculative.{k}": v for k, v in spec.items()}
