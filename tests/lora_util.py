"""LoRA adapters and control vectors for a base GGUF model, written with the `gguf` package
(tests/test_lora.py and scripts/parity/lora_reference.py make the same files from a seed).

An adapter holds, for the chosen matrices of every layer, `W.lora_a` [n_in, r] and
`W.lora_b` [r, n_out] (ggml order: numpy arrays (r, n_in) and (n_out, r)) with A ~ N(0, 1/n_in)
and B ~ N(0, b_std²), `adapter.lora.alpha` = alpha (so each product is scaled by alpha / r)."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, Sequence, Tuple

import numpy as np

TARGETS = ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down")


def base_shapes(base: str) -> Tuple[str, Dict[str, Tuple[int, int]]]:
    """The base model's architecture and its matrices' (n_in, n_out) by tensor name."""
    import gguf

    r = gguf.GGUFReader(base)
    f = r.fields["general.architecture"]
    arch = bytes(f.parts[f.data[0]]).decode()
    return arch, {t.name: (int(t.shape[0]), int(t.shape[1])) for t in r.tensors if len(t.shape) == 2}


def write_adapter(base: str, out, *, rank: int = 8, alpha: float = 16.0, seed: int = 0, b_std: float = 0.05,
                  targets: Sequence[str] = TARGETS, dtype=np.float32, arch: str = "", extra: Dict[str, str] = None) -> Path:
    import gguf

    base_arch, shapes = base_shapes(base)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), arch or base_arch)
    w.add_type("adapter")
    w.add_string("adapter.type", "lora")
    w.add_float32("adapter.lora.alpha", alpha)
    for k, v in (extra or {}).items():
        w.add_string(k, v)
    for name in sorted(shapes):
        if not (name.startswith("blk.") and name.split(".")[2] in targets):
            continue
        n_in, n_out = shapes[name]
        a = (rng.standard_normal((rank, n_in)) / np.sqrt(n_in)).astype(dtype)
        b = (rng.standard_normal((n_out, rank)) * b_std).astype(dtype)
        stem = name[: -len(".weight")] if name.endswith(".weight") else name
        w.add_tensor(f"{stem}.weight.lora_a", a)
        w.add_tensor(f"{stem}.weight.lora_b", b)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(out)


def write_control_vector(out, n_embd: int, layers: Sequence[int], *, seed: int = 0, std: float = 0.5) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), "controlvector")
    w.add_string("controlvector.model_hint", "test")
    w.add_uint32("controlvector.layer_count", len(layers))
    for il in layers:
        w.add_tensor(f"direction.{il}", (rng.standard_normal(n_embd) * std).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(out)


def read_directions(path) -> Dict[int, np.ndarray]:
    """A control vector file's directions by layer."""
    import gguf

    r = gguf.GGUFReader(str(path))
    return {int(t.name.split(".")[1]): np.array(t.data, dtype=np.float32) for t in r.tensors}
