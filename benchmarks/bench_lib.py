"""Helpers of the engine benchmarks: running `llamars bench` and llama.cpp's `llama-bench`
as subprocesses (bench_engine.py), the bytes of weights one decode token reads, the
machine's memory read bandwidth, and the in-process pp/tg loops bench_gpu.py uses.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import List, Optional, Tuple

BUILD_BIN = os.path.expanduser("~/.cache/llamars/llama-server-build/build/bin")
DEFAULT_LLAMA_BENCH = os.path.join(BUILD_BIN, "llama-bench")

BUILD_HINT = (
    "llama-bench not found: build it with `benchmarks/build_llama_server.sh` (llama.cpp of the\n"
    "llama-cpp-python 0.3.36 sdist, ~10 minutes on 2 cores; it lands in\n"
    f"{DEFAULT_LLAMA_BENCH}), or pass --llama-bench PATH / set LLAMA_BENCH."
)


# ---------------------------------------------------------------- subprocess runs


def find_llama_bench(flag: Optional[str]) -> Optional[str]:
    """`flag`, else $LLAMA_BENCH, else the build_llama_server.sh location (None if none runs)."""
    for cand in (flag, os.environ.get("LLAMA_BENCH"), DEFAULT_LLAMA_BENCH):
        if not cand:
            continue
        path = shutil.which(os.path.expanduser(cand))
        if path:
            return path
        if flag and cand == flag:
            raise SystemExit(f"--llama-bench {flag}: not an executable")
    return None


def find_llama_server(flag: Optional[str]) -> Optional[str]:
    """`flag`, else $LLAMA_SERVER, else the build_llama_server.sh location, else `llama-server`
    on PATH (None if there is none)."""
    for cand in (flag, os.environ.get("LLAMA_SERVER"), os.path.join(BUILD_BIN, "llama-server"), shutil.which("llama-server")):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def llamars_cmd(model: str, n_prompt: int, n_gen: int, threads: int) -> List[str]:
    """`llamars bench` of one test, one repetition (after its warm-up), JSON on stdout (the
    `llamars` console script's code, run by this interpreter)."""
    return [sys.executable, "-c", "import sys; from llamars.commands import main; sys.exit(main())", "bench", "-m", model, "-p", str(n_prompt), "-n", str(n_gen),
            "-t", str(threads), "-r", "1", "-o", "json"]


def llama_bench_cmd(exe: str, model: str, n_prompt: int, n_gen: int, threads: int) -> List[str]:
    """The same test in llama-bench (-ngl 0: the CPU path even in a GPU build)."""
    return [exe, "-m", model, "-p", str(n_prompt), "-n", str(n_gen), "-t", str(threads), "-r", "1", "-ngl", "0", "-o", "json"]


def run_json(cmd: List[str]) -> Tuple[float, dict]:
    """Run one bench command; (tokens/s of its single test, its JSON row)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"`{' '.join(cmd)}` exited {p.returncode}:\n{tail}")
    out = p.stdout
    try:
        rows = json.loads(out[out.index("["):])
    except (ValueError, json.JSONDecodeError) as e:
        raise RuntimeError(f"`{' '.join(cmd)}`: no JSON rows on stdout ({e}): {out[-300:]!r}")
    if len(rows) != 1:
        raise RuntimeError(f"`{' '.join(cmd)}`: expected one test row, got {len(rows)}")
    row = rows[0]
    return float(row["samples_ts"][0] if row.get("samples_ts") else row["avg_ts"]), row


def llamars_version() -> str:
    try:
        from llamars import __version__

        return __version__
    except Exception:  # noqa: BLE001 - only for the banner
        return "?"


def llama_bench_version(exe: str) -> str:
    p = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("version")]
    return lines[0].split(":", 1)[1].strip() if lines else "?"


# ---------------------------------------------------------------- model bytes


def decode_bytes(path: str) -> Tuple[int, int, str]:
    """(bytes of weights one decode token reads, bytes of all tensors, a type summary).

    Every tensor is read whole except token_embd.weight, of which one row is read, unless
    there is no output.weight: then the output projection reads the tied matrix whole; of a
    mixture of experts' expert tensors the share of the experts a token is routed to
    (`llamars.inspect`'s `bytes_per_token`, which follows these rules)."""
    from gguf import GGUFReader

    from llamars import _core

    r = GGUFReader(path)
    total = sum(int(t.n_bytes) for t in r.tensors)
    read = _core.inspect(path)["model"]["bytes_per_token"]
    by_type: dict = {}
    for t in r.tensors:
        by_type[t.tensor_type.name] = by_type.get(t.tensor_type.name, 0) + int(t.n_bytes)
    mix = ", ".join(f"{k} {v / 1e6:.0f} MB" for k, v in sorted(by_type.items(), key=lambda kv: -kv[1]))
    return read, total, mix


# ---------------------------------------------------------------- machine


def cpu_busy(seconds: float = 0.5) -> Optional[float]:
    """CPUs' worth of busy time over the next `seconds` (from /proc/stat; None elsewhere):
    other work running beside a benchmark."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
        return sum(v), v[3] + v[4]  # all, idle + iowait

    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except (OSError, ValueError):
        return None
    return (os.cpu_count() or 1) * (1 - (i1 - i0) / max(1, t1 - t0))


# ---------------------------------------------------------------- memory bandwidth

_BW_MIB = 512


_BW_PASSES = 4  # sums per timed rep: ~0.1 s, so start-up skew between processes is small


def _bw_worker(barrier, q, n_mib: int, reps: int) -> None:
    import numpy as np

    a = np.ones((n_mib << 20) // 8, np.int64)  # int64 adds: no pairwise float sum, memory-bound
    a.sum()
    spans = []
    for _ in range(reps):
        if barrier is not None:
            barrier.wait()
        t = time.perf_counter()
        for _ in range(_BW_PASSES):
            a.sum()
        spans.append((t, time.perf_counter()))
    if q is None:
        return spans
    q.put(spans)


def _bandwidth(procs: int, n_mib: int, reps: int) -> float:
    """Best-of-`reps` aggregate read GB/s of `procs` processes each summing its own array
    at the same time (a rep spans from the first start to the last end)."""
    if procs == 1:
        results = [_bw_worker(None, None, n_mib, reps)]
    else:
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        barrier, q = ctx.Barrier(procs), ctx.Queue()
        ps = [ctx.Process(target=_bw_worker, args=(barrier, q, n_mib, reps)) for _ in range(procs)]
        for p in ps:
            p.start()
        results = [q.get(timeout=120) for _ in ps]
        for p in ps:
            p.join()
    best = min(max(r[i][1] for r in results) - min(r[i][0] for r in results) for i in range(reps))
    return procs * _BW_PASSES * (n_mib << 20) / best / 1e9


def read_bandwidth(procs: int, n_mib: int = _BW_MIB, reps: int = 5) -> Tuple[float, float]:
    """(single-process GB/s, `procs`-process aggregate GB/s) of summing n_mib MiB arrays
    (each timed rep sums the array 4 times; the best of `reps`)."""
    one = _bandwidth(1, n_mib, reps)
    return one, (_bandwidth(procs, n_mib, reps) if procs > 1 else one)


# ---------------------------------------------------------------- in-process (bench_gpu.py)


def synthetic_tokens(n: int) -> list:
    return [2] + [(i * 7919) % 200000 + 1000 for i in range(n - 1)]


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
    """The same loops in llama-cpp-python, when installed (else None)."""
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


# ---------------------------------------------------------------- concurrent clients
def run_concurrently(n: int, fn) -> float:
    """Run fn(i) for i < n on n threads; returns wall seconds."""
    ts = [threading.Thread(target=fn, args=(i,)) for i in range(n)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return time.perf_counter() - t0
