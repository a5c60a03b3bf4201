"""Print a GGUF file's metadata and tensor table, like gguf-dump.

    python -m llamars.inspect model.gguf [--all]
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, TextIO

from . import _core


def _fmt(value, full: bool) -> str:
    if isinstance(value, list):
        n = len(value)
        shown = value if full else value[:8]
        body = ", ".join(_fmt(v, full) for v in shown)
        return f"[{body}{', ...' if n > len(shown) else ''}] ({n} items)" if n > len(shown) else f"[{body}]"
    if isinstance(value, str):
        s = value if full or len(value) <= 120 else value[:117] + "..."
        return repr(s)
    return str(value)


def inspect(path, *, file: Optional[TextIO] = None, full: bool = False) -> dict:
    """Parse `path` and print its metadata and tensors; returns the parsed dict."""
    info = _core.inspect(os.fspath(path))
    out = file if file is not None else sys.stdout
    print(f"* File: {info['path']}", file=out)
    print(
        f"* GGUF v{info['version']}, {info['file_size']:,} bytes in {info['n_files']} file(s), "
        f"alignment {info['alignment']}, data at {info['data_offset']}",
        file=out,
    )
    print(f"* {len(info['metadata'])} key/value pairs:", file=out)
    for i, (k, ty, v) in enumerate(info["metadata"], 1):
        print(f"  {i:4d}: {ty:<16} {k:<45} = {_fmt(v, full)}", file=out)
    print(f"* {len(info['tensors'])} tensors:", file=out)
    total = 0
    for i, (name, ty, dims, offset, size, f) in enumerate(info["tensors"], 1):
        n = 1
        for d in dims:
            n *= d
        total += n
        shape = " x ".join(str(d) for d in dims)
        print(f"  {i:4d}: {name:<36} {ty:<7} {shape:<20} {n:>12,} elements  @{offset}" + (f" (part {f + 1})" if info["n_files"] > 1 else ""), file=out)
    print(f"* {total:,} parameters", file=out)
    m = info.get("model")
    if m:
        if m["n_expert"]:
            print(f"* mixture of experts: {m['n_expert_used']} of {m['n_expert']} experts per token, "
                  f"{m['n_params_active']:,} parameters active per token", file=out)
        print(f"* {m['bytes_per_token']:,} bytes of weights read per generated token ({m['arch']})", file=out)
    return info


def main(argv=None, prog: str = "python -m llamars.inspect") -> int:
    p = argparse.ArgumentParser(prog=prog, description="Print a GGUF model's metadata and tensors.")
    p.add_argument("path", help="GGUF file (for a split model, any part)")
    p.add_argument("--all", action="store_true", help="print arrays and strings in full")
    a = p.parse_args(argv)
    try:
        inspect(a.path, full=a.all)
    except _core.LlamarsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
