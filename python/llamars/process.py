"""Process-wide settings from llama-server's flags, applied once before the engine starts
its threads: CPU affinity (`-C` mask, `-Cr` range; the CPUs of both) and priority
(`--prio`, as llama.cpp's nice values). Linux (and other platforms with
`os.sched_setaffinity`); elsewhere affinity is refused with a clear message."""
from __future__ import annotations

import os
import sys
from typing import Optional, Set

from .config import ServerConfig

MAX_CPUS = 512  # llama.cpp's GGML_MAX_N_THREADS

# --prio level -> nice value (llama.cpp's set_process_priority on POSIX)
_NICE = {-1: 5, 0: 0, 1: -5, 2: -10, 3: -20}


def parse_cpu_mask(mask: str) -> Set[int]:
    """A hex mask, optionally 0x-prefixed: bit i set = CPU i (at most 128 digits)."""
    digits = mask[2:] if mask[:2] in ("0x", "0X") else mask
    digits = digits[:128]
    if not digits or any(c not in "0123456789abcdefABCDEF" for c in digits):
        raise ValueError(f"-C/--cpu-mask: {mask!r} is not a hex mask (e.g. 0x3 for CPUs 0 and 1)")
    v = int(digits, 16)
    return {i for i in range(len(digits) * 4) if v >> i & 1}


def parse_cpu_range(r: str) -> Set[int]:
    """lo-hi, inclusive; an empty side means the first / last CPU."""
    lo_s, sep, hi_s = r.partition("-")
    if not sep:
        raise ValueError(f"-Cr/--cpu-range: {r!r} is not a range (expected lo-hi, e.g. 0-3)")
    try:
        lo = int(lo_s) if lo_s.strip() else 0
        hi = int(hi_s) if hi_s.strip() else MAX_CPUS - 1
    except ValueError:
        raise ValueError(f"-Cr/--cpu-range: {r!r} is not a range (expected lo-hi, e.g. 0-3)") from None
    if not 0 <= lo <= hi < MAX_CPUS:
        raise ValueError(f"-Cr/--cpu-range: {r!r} is out of bounds (0 <= lo <= hi < {MAX_CPUS})")
    return set(range(lo, hi + 1))


def cpu_set(config: ServerConfig) -> Optional[Set[int]]:
    """The CPUs -C and -Cr name together (None when neither is given)."""
    if not config.cpu_mask and not config.cpu_range:
        return None
    cpus: Set[int] = set()
    if config.cpu_mask:
        cpus |= parse_cpu_mask(config.cpu_mask)
    if config.cpu_range:
        cpus |= parse_cpu_range(config.cpu_range)
    return cpus


def apply_process_settings(config: ServerConfig) -> None:
    """Raises ValueError for a mask or range naming no CPU this machine has."""
    cpus = cpu_set(config)
    if cpus is not None:
        if not hasattr(os, "sched_setaffinity"):
            raise ValueError(f"-C/-Cr: CPU affinity is not supported on {sys.platform}; start without it")
        online = os.sched_getaffinity(0)
        use = cpus & online
        if not use:
            raise ValueError(f"-C/-Cr name no CPU this process may run on (CPUs {sorted(online)})")
        os.sched_setaffinity(0, use)
        if config.n_threads is None:  # -t auto: one thread per CPU of the mask
            config.n_threads = len(use)
    if config.prio:
        nice = _NICE[config.prio]
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except (OSError, AttributeError) as e:  # raising priority needs privileges, as for llama-server
            print(f"warning: failed to set process priority {config.prio}: {getattr(e, 'strerror', e)}", file=sys.stderr)
