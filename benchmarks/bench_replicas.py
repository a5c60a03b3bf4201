"""llamars-server replicas on Ray Serve (`pip install 'llamars[ray]'`): aggregate throughput of
2 replicas against 1 on the same load, and the prompt-cache hit rate of multi-turn
conversations with and without prefix-affinity routing.

    python benchmarks/bench_replicas.py [MODEL.gguf] [--conversations 16] [--turns 4]
        [--clients 4] [--threads 1] [--rounds 3]

A local Ray head (127.0.0.1) serves the model with each configuration in turn (1 replica,
2 replicas with affinity, 2 replicas without it), `--rounds` times interleaved; the load is
`--conversations` chat conversations of `--turns` turns, their turns interleaved over
`--clients` concurrent clients, each turn greedy with `--tg` tokens. llama-server's RAM prompt cache (`--cache-ram`, on by default)
lets a replica reuse any conversation it has seen, so affinity shows most where that cache
is off or too small for the traffic (`--server-args "--cache-ram 0"`). Reported per configuration, medians over rounds: completion tokens
per second of wall time, and cache hit rate = prompt tokens served from a replica's prompt
cache / prompt tokens, over the turns after the first. Each replica runs `--threads` threads
on one Ray CPU, so on a machine with few cores replicas compete for the same cores: the
figure says what this machine gives, not what separate machines would.
"""
from __future__ import annotations

import argparse
import collections
import socket
import statistics
import sys
import os
import shlex
import threading

import httpx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import run_concurrently  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(url: str, conversations: int, turns: int, clients: int, tg: int) -> dict:
    """Run the conversations, their turns interleaved: a client takes the conversation that
    has waited longest for its next turn, so one conversation's turns come from different
    clients at different moments (as users of a shared server send them). Returns tokens/s
    and the cache hit rate of later turns."""
    lock = threading.Lock()
    stats = {"completion": 0, "prompt_later": 0, "cached_later": 0, "errors": 0}
    ready = collections.deque(
        (i, 0, [{"role": "system", "content": f"You are a helpful assistant for project {i}. " * 3},
                {"role": "user", "content": f"Tell me something about subject {i}."}]) for i in range(conversations))

    def client() -> None:
        with httpx.Client(base_url=url, timeout=600) as c:
            while True:
                with lock:
                    if not ready:
                        return
                    i, t, msgs = ready.popleft()
                r = c.post("/v1/chat/completions", json={"messages": msgs, "max_tokens": tg, "temperature": 0, "ignore_eos": True})
                if r.status_code != 200:
                    with lock:
                        stats["errors"] += 1
                    continue
                d = r.json()
                u = d["usage"]
                with lock:
                    stats["completion"] += u["completion_tokens"]
                    if t > 0:
                        stats["prompt_later"] += u["prompt_tokens"]
                        stats["cached_later"] += u["prompt_tokens_details"]["cached_tokens"]
                    if t + 1 < turns:
                        ready.append((i, t + 1, msgs + [{"role": "assistant", "content": d["choices"][0]["message"]["content"]},
                                                        {"role": "user", "content": "Go on."}]))

    wall = run_concurrently(clients, lambda _: client())
    return {"tok_s": stats["completion"] / wall, "hit": stats["cached_later"] / max(1, stats["prompt_later"]), "errors": stats["errors"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--conversations", type=int, default=16)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--tg", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--slots", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--server-args", default="", help="more llamars-server flags for each replica, e.g. \"--cache-ram 0\"")
    a = ap.parse_args()
    try:
        import ray
        from ray import serve
    except ImportError:
        print("bench_replicas: needs Ray Serve: pip install 'llamars[ray]'", file=sys.stderr)
        return 2
    from llamars.models import reference_model
    from llamars.ray import build

    model = a.model or str(reference_model())
    args = ["-c", str(2048 * a.slots), "-np", str(a.slots), "-t", str(a.threads), *shlex.split(a.server_args)]
    configs = [("1 replica", 1, True), ("2 replicas, affinity", 2, True), ("2 replicas, no affinity", 2, False)]
    ray.init(num_cpus=8, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    url = f"http://127.0.0.1:{port}"
    got = {c[0]: [] for c in configs}
    try:
        for rnd in range(a.rounds):
            for label, n, aff in configs:
                serve.delete("llamars")  # fresh replicas: no prompt cache left from the previous configuration
                serve.run(build(model=model, replicas=n, server_args=args, affinity=aff), name="llamars", route_prefix="/")
                r = load(url, a.conversations, a.turns, a.clients, a.tg)
                got[label].append(r)
                print(f"round {rnd + 1} {label}: {r['tok_s']:.1f} tok/s, cache hit {100 * r['hit']:.0f}%, errors {r['errors']}", flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    print(f"\n{model}: {a.conversations} conversations x {a.turns} turns, {a.clients} clients, tg {a.tg}, "
          f"-np {a.slots} -t {a.threads} {a.server_args} per replica, median of {a.rounds}")
    print("| configuration | tok/s | vs 1 replica | cache hit (later turns) |")
    print("|---|---|---|---|")
    base = statistics.median(x["tok_s"] for x in got[configs[0][0]])
    for label, _, _ in configs:
        tok = statistics.median(x["tok_s"] for x in got[label])
        hit = statistics.median(x["hit"] for x in got[label])
        print(f"| {label} | {tok:.1f} | {tok / base:.2f}x | {100 * hit:.0f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
