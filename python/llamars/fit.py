"""Memory before loading, as llama-server's `--fit`: what a model needs with given
settings (`_core.memory_plan`: weights, KV cache, activations) against this machine's
available memory, and the context size that fits when the user left it unset.

`--fit on` (the default): a context size not given (`-c 0`, the model's training
context) is lowered to the largest that leaves `--fit-target` MiB (default 1024) free,
not below `--fit-ctx` (default 4096); a size given is kept. The choice is logged and is
the n_ctx that `/props` reports. Router mode uses `need()` to unload idle models, or
refuse, before a load would overcommit the machine."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional, Tuple

MiB = 1 << 20
FIT_TARGET_MIB = 1024  # llama-server's default margin
FIT_CTX = 4096  # llama-server's smallest context --fit may choose


def available() -> Optional[int]:
    """Bytes of memory available to a new process now (Linux: MemAvailable), else None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


@dataclass
class Need:
    n_ctx: int
    n_ctx_train: int
    weights: int
    kv: int
    compute: int

    @property
    def total(self) -> int:
        return self.weights + self.kv + self.compute

    def describe(self) -> str:
        return (f"~{self.total // MiB} MiB (weights {self.weights // MiB}, KV cache {self.kv // MiB} for n_ctx {self.n_ctx}, "
                f"compute {self.compute // MiB})")


def need(path: str, n_ctx: int, n_parallel: int, n_ubatch: int = 512, swa_full: bool = False) -> Need:
    from . import _core

    p = _core.memory_plan(path, n_ctx, n_parallel, n_ubatch, swa_full)
    return Need(p["n_ctx"], p["n_ctx_train"], p["weights"], p["kv"], p["compute"])


def target_bytes(fit_target: Optional[str]) -> int:
    """--fit-target "MiB0,MiB1,…": the first entry is the host's margin here."""
    if not fit_target:
        return FIT_TARGET_MIB * MiB
    first = str(fit_target).split(",")[0].strip()
    try:
        v = int(first)
    except ValueError:
        raise ValueError(f"--fit-target: expected MiB as an integer, got {first!r}") from None
    if v < 0:
        raise ValueError(f"--fit-target: must be >= 0 MiB, got {v}")
    return v * MiB


def fit_ctx(path: str, n_parallel: int, n_ubatch: int, swa_full: bool, margin: int, min_ctx: int,
            free: Optional[int] = None) -> Tuple[int, Need, str]:
    """(n_ctx, its need, the log line) for a context left unset: the training context when
    it fits in `free` less `margin`, else the largest multiple of 256 (and of the slot
    count) that does, not below `min_ctx`."""
    free = available() if free is None else free
    full = need(path, 0, n_parallel, n_ubatch, swa_full)
    if free is None:
        return full.n_ctx, full, f"--fit: available memory unknown; n_ctx {full.n_ctx} (the training context)"
    budget = free - margin
    if full.total <= budget:
        return full.n_ctx, full, ""
    step = 256 * n_parallel
    lo = max(step, (min(min_ctx, full.n_ctx) // step) * step)
    if need(path, lo, n_parallel, n_ubatch, swa_full).total > budget:
        chosen = need(path, lo, n_parallel, n_ubatch, swa_full)
        return lo, chosen, (f"--fit: n_ctx {full.n_ctx} needs {full.describe()}, {free // MiB} MiB available with a "
                            f"{margin // MiB} MiB margin; even the smallest context --fit may choose ({lo}) needs "
                            f"{chosen.describe()}: using n_ctx {lo}")
    hi = (full.n_ctx // step) * step
    while hi - lo > step:  # the largest fitting multiple of step
        mid = ((lo + hi) // 2 // step) * step
        if need(path, mid, n_parallel, n_ubatch, swa_full).total <= budget:
            lo = mid
        else:
            hi = mid
    chosen = need(path, lo, n_parallel, n_ubatch, swa_full)
    return lo, chosen, (f"--fit: n_ctx {full.n_ctx} needs {full.describe()}, {free // MiB} MiB available with a "
                        f"{margin // MiB} MiB margin: using n_ctx {lo} ({chosen.describe()}); set -c to choose")
