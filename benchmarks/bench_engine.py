"""Prompt (ppN) and decode (tgN) throughput of llamars against llama.cpp's own `llama-bench`,
measured the same way in the same run, with the ratios and the decode memory bandwidth.

    python benchmarks/bench_engine.py [MODEL.gguf ...] [--pp 512] [--tg 128] [--threads 2]
        [--reps 5] [--llama-bench PATH]

MODEL defaults to the default model (`llamars.models.reference_model()`, Gemma 3 270M
Q4_K_M); several may be given. Both sides run as subprocesses with the same flags:
`llamars bench -m MODEL -p N -n 0 -t T -r 1 -o json` (and `-p 0 -n N` for tg) against
`llama-bench` with the same ones (plus `-ngl 0`). Each call loads the model, does its
warm-up and measures one repetition. Each of the `--reps` rounds runs llamars pp,
llama-bench pp, llamars tg, llama-bench tg, the order within each pair alternating by
round, so slow drifts of a shared machine hit both sides alike.

Prints, per model: the median tokens/s of each side with [min-max] over the rounds,
the ratio llamars / llama-bench of the medians with [min-max] of the per-round ratios;
then the bytes of weights one decode token reads (every tensor, except one row of
token_embd.weight when the output is not tied to it; from the GGUF) and the GB/s each
side's tg median achieves with them, next to the machine's read bandwidth measured at the
start (numpy: 1 process, and --threads processes at once, each summing its own 512 MiB
array 4 times per timing; best of 5). MB and GB are 10^6 and 10^9 bytes. A note says when other work kept
the CPUs busy just before the start (the figures are then noisy). Progress goes to stderr.
A header line gives both versions, threads, sizes and the bandwidth; a model whose run
fails is reported as failed (exit status 1) and the next one is measured.

llama-bench: --llama-bench PATH, else $LLAMA_BENCH, else
~/.cache/llamars/llama-server-build/build/bin/llama-bench, which
`benchmarks/build_llama_server.sh` builds (llama.cpp of the llama-cpp-python 0.3.36 sdist,
~10 minutes on 2 cores). Without one, llamars is measured alone.

Models of real models' shapes and Q4_K_M type mixes, random weights:
`benchmarks/make_bench_model.py llama OUT.gguf --preset llama-3.2-1b|qwen2.5-1.5b|llama-3.1-8b`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_lib import (  # noqa: E402
    BUILD_HINT,
    cpu_busy,
    decode_bytes,
    find_llama_bench,
    llama_bench_cmd,
    llama_bench_version,
    llamars_cmd,
    llamars_version,
    read_bandwidth,
    run_json,
)

SIDES = ("llamars", "llama.cpp")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def spread(xs) -> str:
    return f"[{min(xs):.1f}-{max(xs):.1f}]" if len(xs) > 1 else ""


def bench_model(model: str, a, exe) -> dict:
    """{(side, test): [tok/s per round]} of the interleaved rounds, plus 'rows' (a JSON row per side)."""
    tests = [("pp", a.pp, 0), ("tg", 0, a.tg)]
    res = {(s, t): [] for s in SIDES for t, _, _ in tests}
    rows = {}
    sides = SIDES if exe else SIDES[:1]
    for r in range(a.reps):
        for test, n_p, n_g in tests:
            order = sides if r % 2 == 0 else sides[::-1]
            for side in order:
                cmd = llamars_cmd(model, n_p, n_g, a.threads) if side == "llamars" else llama_bench_cmd(exe, model, n_p, n_g, a.threads)
                rate, row = run_json(cmd)
                res[(side, test)].append(rate)
                rows.setdefault(side, row)
                n = n_p or n_g
                log(f"  round {r + 1}/{a.reps}: {side:<9} {test}{n} {rate:8.1f} tok/s")
    res["rows"] = rows
    return res


def report(model: str, a, res: dict, bw) -> None:
    rows = res["rows"]
    names = {"pp": f"pp{a.pp}", "tg": f"tg{a.tg}"}
    desc = ""
    if "llama.cpp" in rows:
        r = rows["llama.cpp"]
        desc = f" ({r.get('model_type', '?')}, {r.get('model_size', 0) / 2**20:.0f} MiB, {r.get('model_n_params', 0) / 1e9:.2f} B params)"
    elif "llamars" in rows:
        r = rows["llamars"]
        desc = f" ({r.get('model', '?')}, {r.get('size', 0) / 2**20:.0f} MiB, {r.get('params', 0) / 1e9:.2f} B params)"
    print(f"\nmodel {model}{desc}")
    print(f"  {'tok/s':<8} {'llamars':>10} {'[min-max]':<15} {'llama-bench':>11} {'[min-max]':<15} {'llamars/llama-bench':>19} [min-max]")
    meds = {}
    for test in ("pp", "tg"):
        ours = res[("llamars", test)]
        theirs = res[("llama.cpp", test)]
        mo = statistics.median(ours)
        meds[("llamars", test)] = mo
        line = f"  {names[test]:<8} {mo:>10.1f} {spread(ours):<15}"
        if theirs:
            mt = statistics.median(theirs)
            meds[("llama.cpp", test)] = mt
            ratios = [x / y for x, y in zip(ours, theirs)]
            rs = f"[{min(ratios):.2f}-{max(ratios):.2f}]" if len(ratios) > 1 else ""
            line += f" {mt:>11.1f} {spread(theirs):<15} {mo / mt:>18.2f}x {rs}"
        else:
            line += f" {'-':>11} {'':<15} {'-':>19}"
        print(line)
    read, total, mix = decode_bytes(model)
    one, agg = bw
    print(f"  weights {total / 1e6:.1f} MB ({mix}); one decode token reads {read / 1e6:.1f} MB")
    for side in SIDES:
        if (side, "tg") in meds:
            tps = meds[(side, "tg")]
            gbs = read * tps / 1e9  # bytes / (1 / tok/s)
            print(f"  {side:<9} tg{a.tg} {tps:7.1f} tok/s -> {gbs:6.1f} GB/s of weights "
                  f"({100 * gbs / agg:3.0f}% of the {a.threads}-process read bandwidth, {100 * gbs / one:3.0f}% of 1 process)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", metavar="MODEL", help="GGUF models (default: the default model)")
    ap.add_argument("--pp", type=int, default=512, help="prompt tokens of the pp test (default 512)")
    ap.add_argument("--tg", type=int, default=128, help="generated tokens of the tg test (default 128)")
    ap.add_argument("--threads", type=int, default=2, help="threads of both engines (default 2)")
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds (default 5)")
    ap.add_argument("--llama-bench", default=None, metavar="PATH", help="llama-bench binary (default: $LLAMA_BENCH, else the build_llama_server.sh build)")
    a = ap.parse_args()
    if a.reps < 1 or a.pp < 1 or a.tg < 1 or a.threads < 1:
        ap.error("--reps, --pp, --tg and --threads must be at least 1")
    if not a.models:
        from llamars.models import reference_model

        a.models = [str(reference_model())]
    busy = cpu_busy()
    exe = find_llama_bench(a.llama_bench)
    if exe is None:
        print(BUILD_HINT + "\nMeasuring llamars alone.\n", flush=True)
    log(f"measuring read bandwidth (numpy, 512 MiB per process, 1 and {a.threads} processes) ...")
    bw = read_bandwidth(a.threads)
    ref = f"llama-bench {llama_bench_version(exe)} ({exe})" if exe else "no llama-bench"
    print(f"llamars {llamars_version()} vs {ref}")
    print(f"{a.threads} threads, pp{a.pp} / tg{a.tg}, {a.reps} interleaved round(s) of one repetition each side")
    print(f"read bandwidth: 1 process {bw[0]:.1f} GB/s, {a.threads} processes {bw[1]:.1f} GB/s", flush=True)
    if busy is not None and busy > 0.25:
        print(f"note: {busy:.1f} CPUs were busy before the start: other work shares the machine, expect noise", flush=True)
    failed = 0
    for model in a.models:
        log(f"model {model}:")
        try:
            res = bench_model(model, a, exe)
        except RuntimeError as e:
            print(f"\nmodel {model}: failed: {e}", flush=True)
            failed += 1
            continue
        report(model, a, res, bw)
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
