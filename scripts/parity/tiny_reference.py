"""llama.cpp's logits on the tiny generated models (tests/tiny_models.py), every architecture
and weight type: the reference `tests/test_tiny_parity.py` compares llamars with bit for bit.

    python scripts/parity/tiny_reference.py [OUT.json] [--arch llama ...] [--type Q4_K ...]

Needs llama-cpp-python 0.3.36 importable: either installed (`pip install
llama-cpp-python==0.3.36`, a CPU source build of ~8 minutes), or its source tree beside the
llama.cpp that `benchmarks/build_llama_server.sh` builds:

    PYTHONPATH=~/.cache/llamars/llama-server-build/src \\
    LLAMA_CPP_LIB_PATH=~/.cache/llamars/llama-server-build/build/bin \\
    python scripts/parity/tiny_reference.py

(that Python also needs numpy, gguf, diskcache, jinja2). Settings are those of
../shared/reference/make_reference.py (2 threads, n_batch 512, no flash attention) with the
tiny models' context. Per model: the sha256 of its file (the test skips a model its gguf
package writes differently), then for a prompt evaluated as one batch, and for a sequence
evaluated one token at a time (n_batch 1): the sha256 of every position's f32 logits and
the top 3 (id, logit bits).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests"))
import tiny_models  # noqa: E402

# token ids (every tiny vocabulary has 400 entries): a prompt evaluated as one batch of 12
# (a multiple of neither 8 nor 16: Q4_K's and Q6_K's batch orders and their remainders);
# the prompt and 4 more tokens evaluated one token at a time (the decode kernels)
PROMPT = [1, 300, 17, 345, 259, 299, 264, 311, 388, 260, 271, 333]
DECODE = [290, 5, 399, 262]
OUT = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures", "tiny_llamacpp_logits.json")


def digest(rows: np.ndarray) -> list:
    """Per position: sha256 of the f32 logits, and the top 3 as (id, f32 bits)."""
    out = []
    for r in np.asarray(rows, dtype=np.float32):
        top = np.argsort(-r, kind="stable")[:3]
        out.append({"sha256": hashlib.sha256(r.tobytes()).hexdigest(), "top": [[int(i), int(r[i].view(np.uint32))] for i in top]})
    return out


def file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def llama_cpp_logits(path: str, ctx: int):
    """(prompt evaluated as one batch: its rows, prompt + decode tokens one at a time
    (n_batch 1): every row)."""
    from llama_cpp import Llama

    rows = []
    for n_batch, ids in ((512, PROMPT), (1, PROMPT + DECODE)):
        llm = Llama(model_path=path, n_ctx=ctx, n_threads=2, n_batch=n_batch, logits_all=True, verbose=False, seed=0)
        llm.eval(ids)
        rows.append(np.array(llm.scores[: len(ids)]))
        llm.close()
    return rows


def write_reference(out: str, models: list, write, ctx_of, dig) -> None:
    """llama.cpp's prefill and decode rows for each (key, type) in `models`, written by
    `write(path, key, type)` with context `ctx_of(key)`, as the JSON fixture `out`
    (`dig(rows, ids)`: a row digest)."""
    import importlib.metadata

    import llama_cpp

    ref = {"llama_cpp_python": llama_cpp.__version__, "gguf": importlib.metadata.version("gguf"), "prompt": PROMPT, "decode": DECODE, "models": {}}
    with tempfile.TemporaryDirectory() as d:
        for key, wtype in models:
            path = os.path.join(d, f"{key}-{wtype}.gguf")
            write(path, key, wtype)
            prefill, steps = llama_cpp_logits(path, ctx_of(key))
            ref["models"][f"{key}/{wtype}"] = {"file_sha256": file_sha256(path), "prefill": dig(prefill, PROMPT), "decode": dig(steps, PROMPT + DECODE)}
            print(f"{key}/{wtype}: done", file=sys.stderr, flush=True)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w") as f:
        json.dump(ref, f, indent=0, sort_keys=True)
        f.write("\n")
    print(f"wrote {out}: {len(ref['models'])} models")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", nargs="?", default=OUT)
    ap.add_argument("--arch", nargs="*", default=tiny_models.ARCHS)
    ap.add_argument("--type", nargs="*", default=tiny_models.WEIGHT_TYPES)
    a = ap.parse_args()
    import importlib.metadata

    import llama_cpp

    write_reference(a.out, [(x, t) for x in a.arch for t in a.type], tiny_models.write_parity_model, lambda x: tiny_models.SPECS[x].ctx, lambda rows, ids: digest(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
