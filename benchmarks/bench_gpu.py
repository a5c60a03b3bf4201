"""GPU offload throughput: pp (prompt) and tg (decode) tokens/s with every layer on a
GPU, next to the CPU path of the same build on the same machine, and next to llama.cpp's
CPU figures (measured in the same run when llama-cpp-python is installed, else given
with --llamacpp-pp/--llamacpp-tg, e.g. llama-bench's from a run of bench_engine.py elsewhere).

    python benchmarks/bench_gpu.py MODEL.gguf [MODEL2.gguf ...] [--device Vulkan0]
        [--pp 512] [--tg 128] [--reps 3] [--cpu-threads N] [--no-cpu]

Token streams: bench_lib.synthetic_tokens (the same ids on both sides).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_lib import bench_llamacpp, run_llamars  # noqa: E402


def bench(path: str, n_pp: int, n_tg: int, reps: int, **kw):
    from llamars import Engine

    t0 = time.perf_counter()
    eng = Engine(path, n_ctx=max(2048, n_pp + n_tg + 8), n_batch=512, **kw)
    load = time.perf_counter() - t0
    pp, tg = run_llamars(eng, n_pp, n_tg, reps)
    return pp, tg, load, eng.info


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--device", default=None, help="adapter name (default: the best GPU)")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cpu-threads", type=int, default=None)
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU path of llamars")
    ap.add_argument("--llamacpp-pp", type=float, action="append", default=[], help="llama.cpp CPU pp figure per model, when not measured here")
    ap.add_argument("--llamacpp-tg", type=float, action="append", default=[])
    a = ap.parse_args()
    from llamars import Engine

    print("devices:", ", ".join(f"{d['name']} ({d['description']}, {d['kind']})" for d in Engine.devices()) or "none", flush=True)
    for i, m in enumerate(a.models):
        print(f"\nmodel {m}: pp{a.pp} / tg{a.tg}, median of {a.reps}", flush=True)
        print("  llamars GPU (all layers):", file=sys.stderr, flush=True)
        gpp, gtg, load, info = bench(m, a.pp, a.tg, a.reps, n_gpu_layers="all", device=a.device, n_threads=a.cpu_threads)
        print(f"  {info['gpu_note']}; loaded in {load:.1f} s", flush=True)
        print(f"  llamars GPU: pp{a.pp} {gpp:9.1f} tok/s   tg{a.tg} {gtg:7.1f} tok/s", flush=True)
        rows = []
        if not a.no_cpu:
            print("  llamars CPU:", file=sys.stderr, flush=True)
            cpp, ctg, _, cinfo = bench(m, a.pp, a.tg, a.reps, n_threads=a.cpu_threads)
            print(f"  llamars CPU ({cinfo['n_threads']} threads): pp{a.pp} {cpp:9.1f} tok/s   tg{a.tg} {ctg:7.1f} tok/s", flush=True)
            rows.append(("llamars CPU, same machine", cpp, ctg))
        ref = bench_llamacpp(m, a.pp, a.tg, a.cpu_threads or os.cpu_count() or 1, a.reps)
        if ref is not None:
            rows.append(("llama.cpp CPU, same machine", ref[0], ref[1]))
        elif i < len(a.llamacpp_pp) and i < len(a.llamacpp_tg):
            rows.append(("llama.cpp CPU (given)", a.llamacpp_pp[i], a.llamacpp_tg[i]))
        for name, p, t in rows:
            print(f"  GPU / {name}: pp {gpp / p:6.2f}x   tg {gtg / t:6.2f}x   ({name}: pp {p:.1f}, tg {t:.1f})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
