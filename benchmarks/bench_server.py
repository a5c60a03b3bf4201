"""HTTP overhead of llamars-server: single-stream decode tokens/s through /completion
(SSE and not) against the in-process Engine on the same model, and requests/s on
/health and /tokenize; the same for llama.cpp's llama-server when a binary is found.

    python benchmarks/bench_server.py [MODEL.gguf] [--tg 128] [--threads 2] [--requests 500]
        [--llama-server PATH]

The server runs under uvicorn on loopback in a child process, so client and server do
not share a GIL.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(__file__))
from bench_batching import find_llama_server, free_port  # noqa: E402

PROMPT = "The capital of France is"


def wait_up(url: str, proc: subprocess.Popen, what: str) -> None:
    t0 = time.time()
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        if proc.poll() is not None or time.time() - t0 > 180:
            raise RuntimeError(f"{what} did not come up")
        time.sleep(0.2)


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())


def decode_rate(url: str, n_tg: int, stream: bool) -> float:
    """Generated tokens per second of wall time after the first token (client side)."""
    body = {"prompt": PROMPT, "n_predict": n_tg, "temperature": 0, "ignore_eos": True, "cache_prompt": False, "stream": stream}
    req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t_first = None
    n = 0
    with urllib.request.urlopen(req, timeout=600) as r:
        if not stream:
            d = json.loads(r.read())
            t = d["timings"]
            return t["predicted_n"] / (t["predicted_ms"] / 1e3)
        for line in r:
            if line.startswith(b"data: "):
                ev = json.loads(line[6:])
                if ev.get("stop"):
                    break
                n += 1
                if t_first is None:
                    t_first = time.perf_counter()
    return (n - 1) / (time.perf_counter() - t_first)


def rps(url: str, path: str, body: dict | None, n: int, conc: int = 4) -> float:
    def worker(k):
        for _ in range(k):
            if body is None:
                urllib.request.urlopen(url + path, timeout=30).read()
            else:
                post(url + path, body)

    per = n // conc
    ts = [threading.Thread(target=worker, args=(per,)) for _ in range(conc)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return per * conc / (time.perf_counter() - t0)


def measure(url: str, n_tg: int, n_req: int, label: str, reps: int, inproc=None) -> dict:
    """Decode rates as medians over `reps` rounds; each round also runs the in-process
    Engine (when given) right before the HTTP runs, so slow and fast phases of a noisy
    machine hit both alike."""
    post(url + "/completion", {"prompt": "warm up", "n_predict": 4})
    rates: dict = {"in-process": [], "decode (json)": [], "decode (sse)": []}
    for _ in range(reps):
        if inproc is not None:
            rates["in-process"].append(inproc())
        rates["decode (json)"].append(decode_rate(url, n_tg, False))
        rates["decode (sse)"].append(decode_rate(url, n_tg, True))
    out = {k: statistics.median(v) for k, v in rates.items() if v}
    out["/health req/s"] = rps(url, "/health", None, n_req)
    out["/tokenize req/s"] = rps(url, "/tokenize", {"content": "Hello world, this is a tokenizer benchmark."}, n_req)
    for k, v in out.items():
        print(f"  {label:10} {k:16} {v:9.1f}", file=sys.stderr, flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--tg", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--llama-server", default=None)
    a = ap.parse_args()
    if a.model is None:
        from llamars.models import reference_model

        a.model = str(reference_model())
    from llamars import Engine

    eng = Engine(a.model, n_ctx=2048, n_threads=a.threads)
    eng.generate("warm up", max_tokens=4)

    def inproc() -> float:
        r = eng.generate(PROMPT, max_tokens=a.tg, temperature=0.0, ignore_eos=True, cache_prompt=False)
        return r.timings.predicted_per_second

    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llamars.cli", "-m", a.model, "--port", str(port), "-c", "2048", "-np", "1", "-t", str(a.threads)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc, "llamars-server")
        ours = measure(url, a.tg, a.requests, "llamars", a.reps, inproc)
    finally:
        proc.terminate()
        proc.wait(20)
    eng.close()
    inproc_rate = ours.pop("in-process")
    ref = None
    binary = find_llama_server(a.llama_server)
    if binary:
        port = free_port()
        proc = subprocess.Popen([binary, "-m", a.model, "--port", str(port), "-c", "2048", "-np", "1", "-t", str(a.threads), "--no-webui"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_up(url, proc, "llama-server")
            ref = measure(url, a.tg, a.requests, "llama.cpp", a.reps)
        finally:
            proc.terminate()
            proc.wait(20)
    print(f"\nin-process Engine decode: {inproc_rate:.1f} tok/s (median of {a.reps}, interleaved with the HTTP runs)")
    print(f"{'':18} {'llamars':>10}" + (f" {'llama.cpp':>10} {'ratio':>7}" if ref else ""))
    for k in ours:
        line = f"{k:18} {ours[k]:>10.1f}"
        if ref:
            line += f" {ref[k]:>10.1f} {ours[k] / ref[k]:>6.2f}x"
        print(line)
    for k in ("decode (json)", "decode (sse)"):
        print(f"HTTP cost on {k}: {100 * (1 - ours[k] / inproc_rate):.1f}% of in-process decode speed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
