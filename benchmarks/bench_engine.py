"""Prompt (pp) and decode (tg) throughput of llamars, and of llama.cpp in the same run
when llama-cpp-python is installed; prints both and the ratios.

    python benchmarks/bench_engine.py [MODEL.gguf] [--pp 512] [--tg 128] [--threads 2] [--reps 3]

Token streams match ../shared/reference/bench_llamacpp.py (the same synthetic ids).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time


def synthetic_tokens(n: int) -> list:
    return [2] + [(i * 7919) % 200000 + 1000 for i in range(n - 1)]


def bench_llamars(path: str, n_pp: int, n_tg: int, threads: int, reps: int):
    from llamars import Engine

    eng = Engine(path, n_ctx=max(2048, n_pp + n_tg + 8), n_threads=threads, n_batch=512)
    return run_llamars(eng, n_pp, n_tg, reps)


def run_llamars(eng, n_pp: int, n_tg: int, reps: int):
    """Median pp and tg tokens/s of `reps` runs on a loaded Engine."""
    toks = [t % eng.n_vocab for t in synthetic_tokens(n_pp)]
    eng.logits(toks[:8])  # warm-up
    pp, tg = [], []
    for r in range(reps):
        # pp: one prompt evaluation (logits of the last position only), tg: n_tg decode steps;
        # cache_prompt=False so every rep evaluates the whole prompt (not the cached prefix)
        s = eng.stream(toks, max_tokens=n_tg, temperature=0.0, ignore_eos=True, cache_prompt=False)
        for _ in s:
            pass
        t = s.result.timings
        pp.append(t.prompt_per_second)
        tg.append(t.predicted_per_second)
        print(f"  llamars rep {r + 1}/{reps}: pp{n_pp} {pp[-1]:.1f} tok/s, tg{n_tg} {tg[-1]:.1f} tok/s", file=sys.stderr, flush=True)
    return statistics.median(pp), statistics.median(tg)


def bench_llamacpp(path: str, n_pp: int, n_tg: int, threads: int, reps: int):
    try:
        from llama_cpp import Llama
    except ImportError:
        return None
    llm = Llama(model_path=path, n_ctx=max(2048, n_pp + n_tg + 8), n_threads=threads, n_threads_batch=threads, n_batch=512, verbose=False)
    toks = [t % llm.n_vocab() for t in synthetic_tokens(n_pp)]
    llm.eval(toks[:8])
    llm.reset()
    pp, tg = [], []
    for r in range(reps):
        llm.reset()
        t = time.perf_counter()
        llm.eval(toks)
        pp.append(n_pp / (time.perf_counter() - t))
        t = time.perf_counter()
        for i in range(n_tg):
            llm.eval([1000 + i])
        tg.append(n_tg / (time.perf_counter() - t))
        print(f"  llama.cpp rep {r + 1}/{reps}: pp{n_pp} {pp[-1]:.1f} tok/s, tg{n_tg} {tg[-1]:.1f} tok/s", file=sys.stderr, flush=True)
    return statistics.median(pp), statistics.median(tg)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="GGUF model (default: the Gemma 3 270M package)")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    if a.model is None:
        from llamars.models import reference_model

        a.model = str(reference_model())
    print(f"model {a.model}, {a.threads} threads, pp{a.pp} / tg{a.tg}, median of {a.reps}", flush=True)
    ours = bench_llamars(a.model, a.pp, a.tg, a.threads, a.reps)
    print(f"llamars:   pp{a.pp} {ours[0]:8.1f} tok/s   tg{a.tg} {ours[1]:7.1f} tok/s", flush=True)
    ref = bench_llamacpp(a.model, a.pp, a.tg, a.threads, a.reps)
    if ref is None:
        print("llama.cpp: not installed (pip install llama-cpp-python==0.3.36 to compare in the same run)")
        return 0
    print(f"llama.cpp: pp{a.pp} {ref[0]:8.1f} tok/s   tg{a.tg} {ref[1]:7.1f} tok/s")
    print(f"ratio llamars/llama.cpp: pp {ours[0] / ref[0]:.2f}x   tg {ours[1] / ref[1]:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
