"""How the server holds up under hostile load, as figures (tests/test_hostile.py checks
the behaviour; this measures it):

- /health latency (median, p99, max over polls every 20 ms) while a body of SIZE MB is
  tokenized (`/tokenize`) and while a chat of N messages is rendered (`/apply-template`);
- time from a client's disconnect to its slot being free, for a streamed completion, a
  plain one, an `n_cmpl` fan-out and a chat completion (median of ROUNDS);
- time from a client's disconnect to the server's CPU going idle, for a list of
  embedding inputs (they run outside the slots, so the CPU is the observable).

    python benchmarks/bench_hostile.py [MODEL.gguf] [--mb 30] [--messages 100000] [--rounds 5]

The server runs in this process under uvicorn on 127.0.0.1, with two slots.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import threading
import time

import httpx

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from server_util import LiveServer  # noqa: E402


def health_while(url: str, work) -> dict:
    t = threading.Thread(target=work)
    lat = []
    with httpx.Client(base_url=url, timeout=120) as c:
        t.start()
        while t.is_alive():
            t0 = time.perf_counter()
            c.get("/health")
            lat.append((time.perf_counter() - t0) * 1e3)
            time.sleep(0.02)
    t.join()
    lat.sort()
    return {"polls": len(lat), "median_ms": round(statistics.median(lat), 2), "p99_ms": round(lat[int(0.99 * (len(lat) - 1))], 2),
            "max_ms": round(lat[-1], 2)}


def processing(url: str) -> int:
    return sum(s["is_processing"] for s in httpx.get(url + "/slots", timeout=10).json())


def disconnect_to_free(url: str, port: int, path: str, body: dict) -> float:
    payload = json.dumps(body).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    while processing(url) == 0:
        time.sleep(0.01)
    time.sleep(0.2)  # generating
    t0 = time.perf_counter()
    s.close()
    while processing(url):
        time.sleep(0.002)
    return (time.perf_counter() - t0) * 1e3


def cpu_idle_after(sock, window: float = 0.1, idle_cpu: float = 0.01, limit: float = 60.0) -> float:
    """Close `sock`, then ms until this process (the server runs in it) uses less than
    `idle_cpu` CPU seconds in a `window`."""
    t0 = time.perf_counter()
    sock.close()
    while time.perf_counter() - t0 < limit:
        c0 = time.process_time()
        time.sleep(window)
        if time.process_time() - c0 < idle_cpu:
            return (time.perf_counter() - t0 - window) * 1e3
    return float("inf")


def embeddings_disconnect_to_idle(port: int, n_inputs: int = 64) -> float:
    payload = json.dumps({"content": ["lorem ipsum dolor sit amet " * 60] * n_inputs}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /embedding HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
              + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    time.sleep(1.0)  # computing
    return cpu_idle_after(s)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?")
    ap.add_argument("--mb", type=float, default=30)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    from llamars.config import ServerConfig
    from llamars.models import reference_model
    from llamars.server.app import create_app

    model = a.model or str(reference_model())
    srv = LiveServer(create_app(ServerConfig(model=model, n_ctx=4096, n_parallel=2, embedding=True))).start()
    out: dict = {"model": os.path.basename(model)}
    try:
        text = "lorem ipsum dolor sit amet " * int(a.mb * 1e6 / 27)
        res = {}

        def tokenize():
            t0 = time.perf_counter()
            r = httpx.post(srv.url + "/tokenize", json={"content": text}, timeout=3600)
            res["tokenize"] = {"status": r.status_code, "tokens": len(r.json().get("tokens", [])), "s": round(time.perf_counter() - t0, 2)}

        out[f"health_while_tokenizing_{a.mb:g}MB"] = {**health_while(srv.url, tokenize), **res["tokenize"]}

        msgs = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(a.messages)]

        def render():
            t0 = time.perf_counter()
            r = httpx.post(srv.url + "/apply-template", json={"messages": msgs}, timeout=3600)
            res["render"] = {"status": r.status_code, "s": round(time.perf_counter() - t0, 2)}

        out[f"health_while_rendering_{a.messages}_messages"] = {**health_while(srv.url, render), **res["render"]}

        long = {"prompt": "Tell me a story", "n_predict": -1, "ignore_eos": True}
        cases = {
            "stream": ("/completion", {**long, "stream": True}),
            "non_stream": ("/completion", long),
            "n_cmpl_2": ("/completion", {**long, "n_cmpl": 2}),
            "chat": ("/v1/chat/completions", {"messages": [{"role": "user", "content": "Tell me a story"}], "max_tokens": 100_000, "ignore_eos": True}),
        }
        rounds: dict = {k: [] for k in cases}
        idle = []
        for _ in range(a.rounds):  # interleaved
            for k, (path, body) in cases.items():
                rounds[k].append(disconnect_to_free(srv.url, srv.port, path, body))
            idle.append(embeddings_disconnect_to_idle(srv.port))
        out["embeddings_64_inputs_disconnect_to_idle_cpu_ms"] = {"median": round(statistics.median(idle), 1), "max": round(max(idle), 1)}
        out["disconnect_to_free_slot_ms_median"] = {k: round(statistics.median(v), 1) for k, v in rounds.items()}
        out["disconnect_to_free_slot_ms_max"] = {k: round(max(v), 1) for k, v in rounds.items()}
    finally:
        srv.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
