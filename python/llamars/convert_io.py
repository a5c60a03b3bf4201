"""What both halves of `llamars-convert` (convert.py: encoders, convert_decoder.py:
decoders) share: reading `.safetensors` files without torch, the output types and their
rules, and writing the tensors with progress."""
from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Callable, Iterator, Optional

import numpy as np

from .convert_vocab import ConvertError, need

TYPES = ("f32", "f16", "q8_0")
_SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64}


def file_types(out_type: str):
    """(tensor type of the matrices, general.file_type) of an --outtype."""
    if out_type not in TYPES:
        raise ConvertError(f"--outtype must be one of {', '.join(TYPES)}, got {out_type!r}")
    gguf = need("gguf")
    q, f = gguf.GGMLQuantizationType, gguf.LlamaFileType
    return {"f32": (q.F32, f.ALL_F32), "f16": (q.F16, f.MOSTLY_F16), "q8_0": (q.Q8_0, f.MOSTLY_Q8_0)}[out_type]


def read_safetensors(path: Path) -> Iterator[tuple[str, Callable[[], np.ndarray]]]:
    """(name, loader) for every tensor of a .safetensors file, memory-mapped; BF16 is
    widened to F32."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ConvertError(f"{path}: not a safetensors file (shorter than its header)")
        (n,) = struct.unpack("<Q", head)
        if n > 100 << 20:
            raise ConvertError(f"{path}: header of {n} bytes is not a safetensors header")
        meta = json.loads(f.read(n))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    for name, t in meta.items():
        if name == "__metadata__":
            continue
        dt, shape, (a, b) = t["dtype"], t["shape"], t["data_offsets"]

        def load(name=name, dt=dt, shape=shape, a=a, b=b) -> np.ndarray:
            if dt not in _SAFETENSORS_DTYPES:
                raise ConvertError(f"{path}: tensor {name} has dtype {dt}; supported: F32, F16, BF16, F64")
            raw = data[a:b]
            if dt == "BF16":
                return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
            return raw.view(_SAFETENSORS_DTYPES[dt]).reshape(shape)

        yield name, load


def _qtype(gguf, name: str, ndim: int, want):
    f32 = gguf.GGMLQuantizationType.F32
    if ndim <= 1 or name.endswith("_norm.weight") or not name.endswith(".weight"):
        return f32
    if name in ("position_embd.weight", "token_types.weight"):
        return f32
    return want


def write_tensors(w, tensors: list, qt, progress: Optional[Callable[[int, int, str], None]]) -> None:
    """Quantize (name, loader) pairs by the type rules onto the writer `w` and write the
    file (header, keys, tensors); a type a row cannot take falls back to F16."""
    gguf = need("gguf")
    total = len(tensors)
    for i, (name, load) in enumerate(tensors):
        data = np.ascontiguousarray(load(), dtype=np.float32)
        t = _qtype(gguf, name, data.ndim, qt)
        try:
            q = gguf.quants.quantize(data, t)
        except gguf.QuantError:
            t = gguf.GGMLQuantizationType.F16
            q = gguf.quants.quantize(data, t)
        w.add_tensor(name, q, raw_dtype=t)
        if progress:
            progress(i + 1, total, name)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


