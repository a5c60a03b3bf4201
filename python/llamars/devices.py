"""What this machine offers to run on: the GPU adapters wgpu finds and the CPU, as
`--list-devices` and the notebook view show them."""
from __future__ import annotations

import os
import platform

from . import _core


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def system_memory_mib() -> int:
    """Physical memory in MiB (0 when the system does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):
        return 0


def devices_text() -> str:
    lines = ["Available devices:"]
    for d in _core.list_devices():
        dev_mem = f"{d['memory_bytes'] // (1024 * 1024)} MiB, " if d.get("memory_bytes") else ""
        lines.append(f"  {d['name']}: {d['description']} ({dev_mem}{d['kind']}, {d['backend']}, "
                     f"max buffer {d['max_buffer_bytes'] // (1024 * 1024)} MiB)")
    ram = system_memory_mib()
    lines.append(f"  CPU: {cpu_name()} ({os.cpu_count() or 1} threads{f', {ram} MiB' if ram else ''})")
    if not _core.gpu_built():
        lines.append("note: this build has no wgpu backend; -ngl and -dev run everything on the CPU")
    return "\n".join(lines)
