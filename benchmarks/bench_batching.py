"""Aggregate decode throughput with 1, 2, 4 and 8 concurrent greedy streams, for the
llamars batching engine and, when a llama.cpp `llama-server` binary is available, for
llama-server under the same load (same model, threads, slots and token counts).

    python benchmarks/bench_batching.py [MODEL.gguf] [--tg 64] [--threads 2]
        [--streams 1,2,4,8] [--llama-server PATH]

llama-server is looked up in --llama-server, $LLAMA_SERVER, then PATH; build it from
the llama-cpp-python source distribution with benchmarks/build_llama_server.sh.
Throughput = generated tokens of all streams / wall time from first request to last
token; each stream's prompt is short (a few tokens), so the figure is decode-bound.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import find_llama_server, run_concurrently  # noqa: E402

PROMPTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "def fibonacci(n):",
    "Water boils at a temperature of",
    "My favourite book is",
    "The quick brown fox",
    "In 1969, the first person to walk on the Moon was",
]


def bench_llamars(path: str, streams: list, n_tg: int, threads: int) -> dict:
    from llamars import Engine

    top = max(streams)
    eng = Engine(path, n_ctx=top * 512, n_parallel=top, n_threads=threads)
    eng.generate("warm up", max_tokens=4, temperature=0.0)
    out = {}
    for n in streams:
        counts = [0] * n

        def one(i):
            r = eng.generate(PROMPTS[i % len(PROMPTS)], max_tokens=n_tg, temperature=0.0, ignore_eos=True, cache_prompt=False)
            counts[i] = len(r.tokens)

        wall = run_concurrently(n, one)
        out[n] = sum(counts) / wall
        print(f"  llamars   {n} stream(s): {out[n]:7.1f} tok/s aggregate", file=sys.stderr, flush=True)
    eng.close()
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def bench_llama_server(binary: str, path: str, streams: list, n_tg: int, threads: int) -> dict:
    top = max(streams)
    port = free_port()
    cmd = [binary, "-m", path, "--host", "127.0.0.1", "--port", str(port), "-np", str(top), "-c", str(top * 512),
           "-t", str(threads), "-tb", str(threads), "--no-webui"]
    print(f"  starting {' '.join(cmd)}", file=sys.stderr, flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        t0 = time.time()
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if proc.poll() is not None or time.time() - t0 > 120:
                raise RuntimeError("llama-server did not come up (run it by hand to see why)")
            time.sleep(0.2)
        post(base + "/completion", {"prompt": "warm up", "n_predict": 4, "temperature": 0})
        out = {}
        for n in streams:
            counts = [0] * n

            def one(i):
                r = post(base + "/completion", {"prompt": PROMPTS[i % len(PROMPTS)], "n_predict": n_tg, "temperature": 0,
                                                "ignore_eos": True, "cache_prompt": False})
                counts[i] = r["timings"]["predicted_n"]

            wall = run_concurrently(n, one)
            out[n] = sum(counts) / wall
            print(f"  llama.cpp {n} stream(s): {out[n]:7.1f} tok/s aggregate", file=sys.stderr, flush=True)
        return out
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?", help="GGUF model (default: the Gemma 3 270M package)")
    ap.add_argument("--tg", type=int, default=64, help="tokens generated per stream")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", default="1,2,4,8")
    ap.add_argument("--llama-server", default=None, help="path to a llama-server binary")
    a = ap.parse_args()
    streams = [int(x) for x in a.streams.split(",")]
    if a.model is None:
        from llamars.models import reference_model

        a.model = str(reference_model())
    print(f"model {a.model}, {a.threads} threads, {a.tg} tokens per stream, streams {streams}", flush=True)
    ours = bench_llamars(a.model, streams, a.tg, a.threads)
    binary = find_llama_server(a.llama_server)
    ref = bench_llama_server(binary, a.model, streams, a.tg, a.threads) if binary else None
    print(f"\n{'streams':>8} {'llamars tok/s':>14} {'x single':>9}" + (f" {'llama.cpp tok/s':>16} {'ratio':>7}" if ref else ""))
    for n in streams:
        line = f"{n:>8} {ours[n]:>14.1f} {ours[n] / ours[streams[0]]:>8.2f}x"
        if ref:
            line += f" {ref[n]:>16.1f} {ours[n] / ref[n]:>6.2f}x"
        print(line)
    if not ref:
        print("\nllama-server: not found (benchmarks/build_llama_server.sh builds it; or pass --llama-server PATH)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
