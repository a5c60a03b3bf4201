"""Decode speed unconstrained vs JSON-schema-constrained vs GBNF-constrained on the
same model, prompt and sampler settings (median of --reps runs each, interleaved).

    python benchmarks/bench_sampling.py [MODEL.gguf] [--tg 64] [--threads 2] [--reps 5]

The first constrained request builds the grammar engine for the vocabulary (reported
separately); the figures exclude it.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time

SCHEMA = {
    "type": "object",
    "properties": {"items": {"type": "array", "items": {"type": "string", "maxLength": 12}}},
    "required": ["items"],
}
GBNF = 'root ::= " " item ("," " " item)*\nitem ::= [a-z]+'


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    if a.model is None:
        from llamars.models import reference_model

        a.model = str(reference_model())
    from llamars import Engine

    eng = Engine(a.model, n_ctx=2048, n_threads=a.threads)
    prompt = "A shopping list:"
    t = time.perf_counter()
    eng.generate(prompt, max_tokens=2, json_schema=SCHEMA)
    print(f"grammar engine built in {time.perf_counter() - t:.2f} s (once per model)", flush=True)
    runs = {"unconstrained": {}, "json_schema": {"json_schema": SCHEMA}, "gbnf": {"grammar": GBNF}}
    rates: dict = {k: [] for k in runs}
    for _ in range(a.reps):
        for name, kw in runs.items():
            r = eng.generate(prompt, max_tokens=a.tg, temperature=0.8, seed=1, ignore_eos=True, cache_prompt=False, **kw)
            if len(r.tokens) < 8:
                continue  # the grammar finished almost at once: no rate to speak of
            rates[name].append(r.timings.predicted_per_second)
    base = statistics.median(rates["unconstrained"])
    print(f"{'':16} {'tok/s':>8} {'x unconstrained':>16}")
    for name, v in rates.items():
        if v:
            m = statistics.median(v)
            print(f"{name:16} {m:8.1f} {m / base:15.2f}x")
    eng.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
