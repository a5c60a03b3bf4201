"""`llamars bench [MODEL]`: prompt processing (ppN) and text generation (tgN) speed, run
and printed the way llama.cpp's llama-bench does: a warm-up run, then `-r` repetitions
per test, tokens per second as mean ± standard deviation, one table row per test.

ppN evaluates N prompt tokens in batches of `-b` (a fresh prompt each repetition, no
prompt cache); tgN decodes N tokens one by one from the start of the context (as
llama-bench, plus greedy sampling of each token, which llama-bench leaves out)."""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import List, Optional

from ..models import FILE_TYPES


def _ints(s: str) -> List[int]:
    try:
        out = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {s!r}") from None
    if any(v < 0 for v in out):
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {s!r}")
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="llamars bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", nargs="?", help="GGUF model (default: the default chat model)")
    p.add_argument("-m", "--model", dest="model_flag", help="GGUF model (as llama-bench's -m)")
    p.add_argument("-p", "--n-prompt", type=_ints, default=[512], help="prompt lengths, comma-separated (default 512; 0 skips)")
    p.add_argument("-n", "--n-gen", type=_ints, default=[128], help="generation lengths, comma-separated (default 128; 0 skips)")
    p.add_argument("-b", "--batch-size", type=int, default=2048, help="batch size (default 2048)")
    p.add_argument("-t", "--threads", type=_ints, default=None, help="CPU threads, comma-separated (default: physical cores)")
    p.add_argument("-ngl", "--n-gpu-layers", default="0", help="layers on the GPU: a count, auto or all (default 0)")
    p.add_argument("-r", "--repetitions", type=int, default=5, help="repetitions per test (default 5)")
    p.add_argument("-o", "--output", choices=("md", "csv", "json", "jsonl"), default="md", help="output format (default md)")
    p.add_argument("--progress", action="store_true", help="a line per repetition on stderr (otherwise one updating line on a terminal)")
    return p


def describe(info: dict) -> str:
    """`arch size type`, as llama-bench's model column (the size from the parameter count)."""
    n = info["n_params"]
    size = f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"
    return f"{info['arch']} {size} {FILE_TYPES.get(info.get('file_type'), 'unknown type')}"


def run_test(eng, n_prompt: int, n_gen: int, reps: int, say) -> List[float]:
    """Tokens per second of each repetition (after a warm-up run)."""
    n_vocab = eng.n_vocab
    lo = min(1000, n_vocab // 4)  # above the special tokens of most vocabularies
    bos = eng.info.get("bos")
    first = bos if eng.info.get("add_bos") and bos is not None else lo
    out = []
    for r in range(reps + 1):
        if n_prompt:
            toks = [first] + [(i * 7919 + r * 104729) % (n_vocab - lo) + lo for i in range(n_prompt - 1)]
            res = eng.generate(toks, max_tokens=1, temperature=0.0, ignore_eos=True, cache_prompt=False)
            rate = res.timings.prompt_per_second
        else:
            s = eng.stream([first], max_tokens=n_gen, temperature=0.0, ignore_eos=True, cache_prompt=False)
            for _ in s:
                pass
            rate = s.result.timings.predicted_per_second
        if r:  # rep 0 is the warm-up
            out.append(rate)
        say(f"{'pp' if n_prompt else 'tg'}{n_prompt or n_gen}: {'warm-up' if r == 0 else f'rep {r}/{reps}'} {rate:.1f} t/s")
    return out


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    if a.repetitions < 1:
        print("error: -r/--repetitions: must be at least 1", file=sys.stderr)
        return 1
    from .. import Engine, LlamarsError, __version__
    from ..models import default_model
    from ..progress import interactive

    tty = interactive(sys.stderr)

    def say(line: str) -> None:
        if a.progress:
            print(f"llamars bench: {line}", file=sys.stderr, flush=True)
        elif tty:
            print(f"\r\x1b[Kllamars bench: {line}", end="", file=sys.stderr, flush=True)

    rows = []
    try:
        path = a.model_flag or a.model or str(default_model())
        for threads in a.threads or [None]:
            n_ctx = max([256] + [p + 8 for p in a.n_prompt] + [g + 8 for g in a.n_gen])
            eng = Engine(path, n_ctx=n_ctx, n_threads=threads, n_batch=max(1, min(a.batch_size, n_ctx)),
                         n_ubatch=max(1, min(512, a.batch_size, n_ctx)), n_gpu_layers=a.n_gpu_layers, progress=None)
            try:
                info = eng.info
                backend = "CPU" if not eng.n_gpu_layers_offloaded else (eng.gpu_device or {}).get("backend", "GPU")
                tests = [(p, 0) for p in a.n_prompt if p] + [(0, g) for g in a.n_gen if g]
                for n_prompt, n_gen in tests:
                    rates = run_test(eng, n_prompt, n_gen, a.repetitions, say)
                    rows.append(dict(model=describe(info), size=info["size"], params=info["n_params"], backend=backend,
                                     threads=info["n_threads"], n_gpu_layers=eng.n_gpu_layers_offloaded,
                                     test=f"pp{n_prompt}" if n_prompt else f"tg{n_gen}", n_prompt=n_prompt, n_gen=n_gen,
                                     avg_ts=statistics.fmean(rates), stddev_ts=statistics.stdev(rates) if len(rates) > 1 else 0.0,
                                     samples_ts=rates, build=f"llamars {__version__}"))
            finally:
                eng.close()
    except (LlamarsError, OSError) as e:
        if tty and not a.progress:
            print(file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    if tty and not a.progress:
        print("\r\x1b[K", end="", file=sys.stderr, flush=True)
    print(render(rows, a.output))
    return 0


def render(rows: List[dict], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rows, indent=2)
    if fmt == "jsonl":
        return "\n".join(json.dumps(r) for r in rows)
    if fmt == "csv":
        keys = ["build", "model", "size", "params", "backend", "threads", "n_gpu_layers", "test", "n_prompt", "n_gen", "avg_ts", "stddev_ts"]
        return "\n".join([",".join(keys)] + [",".join(f'"{r[k]}"' for k in keys) for r in rows])
    head = f"| {'model':<30} | {'size':>10} | {'params':>10} | {'backend':<10} | {'threads':>7} | {'test':>13} | {'t/s':>20} |"
    rule = f"| {'-' * 30} | {'-' * 9}: | {'-' * 9}: | {'-' * 10} | {'-' * 6}: | {'-' * 12}: | {'-' * 19}: |"
    lines = [head, rule]
    for r in rows:
        size = r["size"] / 2**30
        size_s = f"{size:.2f} GiB" if size >= 1 else f"{r['size'] / 2**20:.2f} MiB"
        params = r["params"]
        params_s = f"{params / 1e9:.2f} B" if params >= 1e9 else f"{params / 1e6:.2f} M"
        ts = f"{r['avg_ts']:.2f} ± {r['stddev_ts']:.2f}"
        lines.append(f"| {r['model']:<30} | {size_s:>10} | {params_s:>10} | {r['backend']:<10} | {r['threads']:>7} | {r['test']:>13} | {ts:>20} |")
    build = rows[0]["build"] if rows else ""
    return "\n".join(lines) + (f"\n\nbuild: {build}" if build else "")
