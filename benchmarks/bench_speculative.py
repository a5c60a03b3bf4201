"""Single-stream decode with speculative decoding (n-gram lookup, `--spec-type ngram-simple`
or another n-gram type with --spec-type)
on input-grounded prompts, against the same server without it and against llama.cpp's
llama-server with and without the same speculation, all in one run.

    python benchmarks/bench_speculative.py [MODEL.gguf] [--tg 256] [--threads 2] [--rounds 3]
        [--spec-type ngram-mod] [--spec-args "--spec-ngram-simple-size-n 12"] [--llama-server PATH]
        [--model-draft DRAFT.gguf]

Four servers run side by side on loopback (llamars-server and llama-server, each with and
without `--spec-type TYPE` plus `--spec-args`), one slot each; only one works at a
time. Each round sends every prompt to every server (the server order rotating by round),
greedy, `cache_prompt` off, `n_predict` --tg; a figure is the server's own
`timings.predicted_n / predicted_ms` (decode only, the prompt excluded). Prints per prompt
and overall the median decode tokens/s of each server, the draft acceptance
(`draft_n_accepted / draft_n`), and the ratios: llamars speculative over llamars plain,
and over llama-server speculative. Greedy outputs with and without speculation are
compared (they must be equal for llamars). Progress goes to stderr.

With --model-draft both speculative servers draft with that model (`--spec-type draft-simple
-md DRAFT`); `make_bench_model.py first-layers MODEL OUT --layers N` cuts a draft with the same
vocabulary from MODEL.

The prompts: rewriting a given code file with one change, and summarising a passage
quoting it (the output repeats long stretches of the input: what n-gram drafts are for).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_batching import find_llama_server, free_port  # noqa: E402
from bench_server import wait_up  # noqa: E402

CODE = '''import json
import os


def load_config(path):
    """Read the configuration file and return its settings."""
    with open(path) as f:
        data = json.load(f)
    settings = {}
    for key, value in data.items():
        if key.startswith("_"):
            continue
        settings[key] = value
    return settings


def save_config(path, settings):
    """Write the settings back to the configuration file."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(settings, f, indent=2)
    os.replace(tmp, path)


def merge_config(base, override):
    """Return the base settings updated with the override settings."""
    merged = dict(base)
    for key, value in override.items():
        merged[key] = value
    return merged
'''

PASSAGE = (
    "The river rises in the hills north of the town and flows south through a narrow valley. "
    "In spring the snow melts and the river floods the low fields along its banks. The farmers "
    "who live in the valley have built stone walls to protect their houses from the water. "
    "Every year they repair the walls before the floods arrive, and every year the river tests "
    "them. The oldest wall was built more than two hundred years ago and still stands today."
)

PROMPTS = {
    "code rewrite": "Here is a Python file:\n\n```python\n" + CODE + "```\n\nHere is the same file with the function "
                    "`load_config` renamed to `read_config`, everything else unchanged:\n\n```python\n",
    "quoting summary": "Passage:\n" + PASSAGE + "\n\nSummary, quoting the passage's own sentences:\n\"The river rises",
}


def post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=900) as r:
        return json.loads(r.read())


def start(cmd: list, what: str) -> tuple:
    port = free_port()
    proc = subprocess.Popen(cmd + ["--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_up(url, proc, what)
    except Exception:
        proc.kill()
        raise
    return proc, url


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--tg", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--spec-type", default=None,
                    help="the --spec-type of both servers' speculative runs (default ngram-simple; draft-simple with --model-draft)")
    ap.add_argument("--model-draft", "-md", default=None, metavar="FILE",
                    help="a draft model for both servers' speculative runs (`make_bench_model.py first-layers` cuts one from MODEL)")
    ap.add_argument("--spec-args", default="", help="extra flags for both servers' speculative runs")
    ap.add_argument("--llama-server", default=None)
    a = ap.parse_args()
    if a.model is None:
        from llamars.models import reference_model

        a.model = str(reference_model())
    common = ["-m", a.model, "-c", "4096", "-np", "1", "-t", str(a.threads)]
    spec_type = a.spec_type or ("draft-simple" if a.model_draft else "ngram-simple")
    spec = ["--spec-type", spec_type, *(["-md", a.model_draft] if a.model_draft else []), *shlex.split(a.spec_args)]
    ours = [sys.executable, "-m", "llamars.cli", *common]
    sides = {"llamars": ours, "llamars+spec": ours + spec}
    binary = find_llama_server(a.llama_server)
    if binary:
        theirs = [binary, *common, "--no-webui", "-ngl", "0"]
        sides.update({"llama-server": theirs, "llama-server+spec": theirs + spec})
    else:
        print("llama-server not found (benchmarks/build_llama_server.sh): llamars only", file=sys.stderr)
    servers = {}
    try:
        for name, cmd in sides.items():
            print(f"starting {name}", file=sys.stderr, flush=True)
            servers[name] = start(cmd, name)
        rate = {(n, p): [] for n in sides for p in PROMPTS}
        drafts = {(n, p): [0, 0] for n in sides for p in PROMPTS}
        texts = {}
        names = list(sides)
        for r in range(a.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for p, prompt in PROMPTS.items():
                for n in order:
                    body = {"prompt": prompt, "n_predict": a.tg, "temperature": 0, "cache_prompt": False}
                    d = post(servers[n][1], body)
                    t = d["timings"]
                    rate[(n, p)].append(t["predicted_n"] / (t["predicted_ms"] / 1e3))
                    drafts[(n, p)][0] += t.get("draft_n", 0)
                    drafts[(n, p)][1] += t.get("draft_n_accepted", 0)
                    texts[(n, p)] = d["content"]
                    print(f"round {r} {p:16} {n:18} {rate[(n, p)][-1]:7.1f} tok/s  ({t['predicted_n']} tokens)",
                          file=sys.stderr, flush=True)
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
    med = {k: statistics.median(v) for k, v in rate.items()}
    print(f"\nmodel {os.path.basename(a.model)}, {a.threads} threads, n_predict {a.tg}, greedy, {a.rounds} rounds, "
          f"--spec-type {spec_type}" + (f" -md {os.path.basename(a.model_draft)}" if a.model_draft else "")
          + " (median decode tok/s; drafts accepted/drafted)")
    print(f"{'prompt':18}" + "".join(f"{n:>22}" for n in sides))
    for p in PROMPTS:
        cells = []
        for n in sides:
            dn, da = drafts[(n, p)]
            cells.append(f"{med[(n, p)]:8.1f}" + (f" ({da}/{dn})" if dn else "").rjust(14))
        print(f"{p:18}" + "".join(f"{c:>22}" for c in cells))
    for p in PROMPTS:
        same = texts[("llamars", p)] == texts[("llamars+spec", p)]
        line = f"{p}: llamars+spec / llamars {med[('llamars+spec', p)] / med[('llamars', p)]:.2f}x (same text: {same})"
        if binary:
            line += (f"; / llama-server+spec {med[('llamars+spec', p)] / med[('llama-server+spec', p)]:.2f}x"
                     f"; llama-server+spec / llama-server {med[('llama-server+spec', p)] / med[('llama-server', p)]:.2f}x")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
