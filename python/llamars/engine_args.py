"""`Engine`'s arguments checked and put the way the core takes them: sizes, GPU layers,
speculative decoding (the engine-wide `speculative=` and a call's `speculative=`), LoRA
adapters and control vectors (and a call's `lora=`)."""
from __future__ import annotations

import os
from typing import Union

from .errors import InvalidRequestError

#: `n_gpu_layers="all"`: more layers than any model has (the core clamps it).
ALL_LAYERS = 1 << 30


def check_sizes(*, n_ctx, n_batch, n_ubatch, n_parallel, n_threads, cache_reuse, cache_ram, draft_model, draft_n_ctx,
                exact=None) -> None:
    """The sizes (and the other plain settings) `Engine` takes, each refused with what it must be."""
    for name, v, lo, what in (("n_ctx", n_ctx, 0, " (0 = the model's training context)"), ("n_batch", n_batch, 1, ""),
                              ("n_ubatch", n_ubatch, 1, ""), ("n_parallel", n_parallel, 1, ""),
                              ("n_threads", 1 if n_threads is None else n_threads, 1, ""), ("cache_reuse", cache_reuse, 0, ""),
                              ("cache_ram", cache_ram, -1, " (MiB; -1 = no limit, 0 = off)")):
        if v < lo:
            raise InvalidRequestError(f"{name} must be >= {lo}{what}, got {v}")
    if draft_model is not None and not isinstance(draft_model, (str, os.PathLike)):
        raise InvalidRequestError(f"draft_model: must be a GGUF file path, got {draft_model!r}")
    if isinstance(draft_n_ctx, bool) or not isinstance(draft_n_ctx, int) or draft_n_ctx < 0:
        raise InvalidRequestError(f"draft_n_ctx must be >= 0 (0: the model's context), got {draft_n_ctx!r}")
    if exact is not None and not isinstance(exact, bool):
        raise InvalidRequestError(f"exact must be True, False or None, got {exact!r}")


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


def _path_scale(item, what: str) -> tuple:
    """A file, or (file, scale)."""
    if isinstance(item, (str, os.PathLike)):
        return (os.fspath(item), 1.0)
    if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], (str, os.PathLike)):
        s = item[1]
        if isinstance(s, bool) or not isinstance(s, (int, float)) or s != s or s in (float("inf"), float("-inf")):
            raise InvalidRequestError(f"{what}: the scale of {item[0]!r} must be a finite number, got {s!r}")
        return (os.fspath(item[0]), float(s))
    raise InvalidRequestError(f"{what}: each item must be a GGUF file path or a (path, scale) pair, got {item!r}")


def adapter_args(lora, lora_init_without_apply, control_vectors, control_vector_layer_range) -> tuple:
    """`Engine(lora=..., control_vectors=...)` as the core takes them: lists of (path, scale)
    (a bare path: scale 1), the flag, and the layer range ((-1, -1): every layer)."""
    def items(v, what):
        if v is None:
            return []
        return [_path_scale(x, what) for x in ([v] if isinstance(v, (str, os.PathLike)) else v)]

    rng = control_vector_layer_range if control_vector_layer_range is not None else (-1, -1)
    if not (isinstance(rng, (tuple, list)) and len(rng) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in rng)):
        raise InvalidRequestError(f"control_vector_layer_range: must be (first, last) layer numbers, got {rng!r}")
    return (items(lora, "lora"), bool(lora_init_without_apply), items(control_vectors, "control_vectors"), tuple(rng))


def lora_fields(v):
    """A call's `lora=` as llama-server's list: [{"id", "scale"}] as given, {id: scale}, or
    [(id, scale)] pairs; the core checks ids and values."""
    if isinstance(v, dict) and not {"id", "scale"} & set(v):
        return [{"id": k, "scale": s} for k, s in v.items()]
    if isinstance(v, (list, tuple)):
        return [{"id": x[0], "scale": x[1]} if isinstance(x, (tuple, list)) and len(x) == 2 else x for x in v]
    return v


def lora_pairs(v) -> list:
    """A `lora=` / `set_lora` argument as (id, scale) pairs for the core."""
    out = []
    for i, d in enumerate(lora_fields(v) if v is not None else []):
        if not isinstance(d, dict) or not isinstance(d.get("id"), int) or isinstance(d.get("id"), bool) or d["id"] < 0:
            raise InvalidRequestError(f"lora[{i}]: must be {{'id': adapter id, 'scale': factor}}, got {d!r}")
        s = d.get("scale", 0.0)
        if isinstance(s, bool) or not isinstance(s, (int, float)):
            raise InvalidRequestError(f"lora[{i}].scale: must be a number, got {s!r}")
        out.append((d["id"], float(s)))
    return out
