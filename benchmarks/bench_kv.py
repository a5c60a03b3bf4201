"""KV cache types: bytes per token, the context a memory budget holds, and decode speed at a
long context, for llamars and (when a llama-cpp-python is given) llama.cpp with the same
cache types and flash attention, in interleaved rounds.

    python benchmarks/bench_kv.py [--model M.gguf] [--types f16,q8_0,q4_0] [--ctx 4096]
        [--gen 32] [--reps 3] [--budget-mib 1024] [--llamacpp-python PATH/bin/python]

Decode speed: a prompt of `--ctx` tokens is evaluated, then `--gen` tokens are generated one
at a time; tokens/s of the generation only (the prompt is not timed). Flash attention is on
for every type (llama.cpp needs it for a quantized V).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

LLAMACPP = r"""
import json, sys, time
from llama_cpp import Llama
a = json.loads(sys.argv[1])
T = {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2, "q4_1": 3, "iq4_nl": 20, "q5_0": 6, "q5_1": 7}
llm = Llama(model_path=a["model"], n_ctx=a["ctx"] + a["gen"] + 8, n_threads=a["threads"], n_batch=512, verbose=False,
            flash_attn=True, type_k=T[a["type"]], type_v=T[a["type"]])
llm.eval(a["prompt"])
t = time.perf_counter()
tok = a["prompt"][-1]
for _ in range(a["gen"]):
    llm.eval([tok])
print(json.dumps({"tps": a["gen"] / (time.perf_counter() - t)}))
"""


def llamars_decode(model: str, ty: str, prompt: list, gen: int, threads: int) -> tuple:
    from llamars import Engine

    with Engine(model, n_ctx=len(prompt) + gen + 8, n_threads=threads, cache_type_k=ty, cache_type_v=ty, flash_attn="on",
                progress=False) as e:
        r = e.generate(prompt, max_tokens=gen, temperature=0.0, ignore_eos=True)
        return r.timings.predicted_per_second, e.info["kv_bytes_per_token"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--types", default="f16,q8_0,q4_0")
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--gen", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget-mib", type=int, default=1024)
    ap.add_argument("--llamacpp-python", help="a Python with llama-cpp-python installed (the llama.cpp side)")
    a = ap.parse_args()
    from llamars.models import reference_model

    model = a.model or str(reference_model(progress=False))
    types = [t.strip() for t in a.types.split(",") if t.strip()]
    # a long prompt of ordinary tokens (the model's own tokenization of repeated text)
    from llamars import Engine

    with Engine(model, n_ctx=64, progress=False) as e:
        words = e.tokenize("The history of the river valley is long and full of small stories. ", add_special=False)
    prompt = ([2] + words * (a.ctx // len(words) + 1))[: a.ctx]
    ours = {t: [] for t in types}
    theirs = {t: [] for t in types}
    per_token = {}
    for rep in range(a.reps):
        for t in types:
            tps, bpt = llamars_decode(model, t, prompt, a.gen, a.threads)
            ours[t].append(tps)
            per_token[t] = bpt
            if a.llamacpp_python:
                arg = json.dumps({"model": model, "type": t, "ctx": a.ctx, "gen": a.gen, "threads": a.threads, "prompt": prompt})
                out = subprocess.run([a.llamacpp_python, "-c", LLAMACPP, arg], capture_output=True, text=True, check=True)
                theirs[t].append(json.loads(out.stdout.strip().splitlines()[-1])["tps"])
            print(f"round {rep + 1}/{a.reps} {t}: llamars {ours[t][-1]:.1f} tok/s"
                  + (f", llama.cpp {theirs[t][-1]:.1f}" if theirs[t] else ""), file=sys.stderr, flush=True)
    budget = a.budget_mib << 20
    print(f"\nmodel {model}, context {a.ctx}, {a.gen} generated tokens, {a.threads} threads, flash attention on, "
          f"medians of {a.reps}\n")
    print("| type | KV bytes / token | n_ctx in " + f"{a.budget_mib} MiB | decode llamars tok/s | decode llama.cpp tok/s | ratio |")
    print("|---|---|---|---|---|---|")
    for t in types:
        mo = statistics.median(ours[t])
        mt = statistics.median(theirs[t]) if theirs[t] else None
        print(f"| {t} | {per_token[t]} | {budget // per_token[t]} | {mo:.1f} | "
              + (f"{mt:.1f} | {mo / mt:.2f}× |" if mt else "– | – |"))
    if "f16" in per_token and "q8_0" in per_token:
        print(f"\nq8_0 holds {per_token['f16'] / per_token['q8_0']:.2f}× the context of f16 in the same memory")


if __name__ == "__main__":
    main()
