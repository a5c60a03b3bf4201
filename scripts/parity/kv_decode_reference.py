"""llama.cpp's greedy decoding on the real model with every KV cache type pair it accepts,
one token per evaluation (the one-token order of its matmuls, where kv_reference.py's teacher
forcing gives the batched one): the reference tests/test_kv_types.py compares llamars's
generation with.

    python scripts/parity/kv_decode_reference.py MODEL.gguf [OUT.json]

Needs llama-cpp-python 0.3.36 importable with numpy (settings as kv_reference.py). Per
configuration: after the first reference prompt, each of N_STEPS greedy steps' token and
the log-probabilities of the top two tokens.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kv_reference import ROOT, configurations  # noqa: E402

N_STEPS = 16


def decode(llm, tokens: list) -> list:
    llm.reset()
    llm.eval(tokens)
    steps = []
    for _ in range(N_STEPS):
        x = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
        m = x.max()
        lp = x - m - math.log(np.exp(x - m).sum())
        top = np.argsort(-lp)[:2]
        steps.append([int(top[0]), round(float(lp[top[0]]), 6), round(float(lp[top[1]]), 6)])
        llm.eval([int(top[0])])  # one token: ggml's one-token matmul order
    return steps


def main() -> None:
    import llama_cpp as L

    base = sys.argv[1]
    out_f = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "kv_types_decode_llamacpp.json"
    prompt = json.loads((ROOT.parent / "shared" / "reference" / "prompts_public.json").read_text())[0]
    ref = {"llama_cpp_python": L.__version__, "n_steps": N_STEPS, "configs": []}
    for k, v, fa, llm in configurations(base):
        if "tokens" not in ref:
            ref["tokens"] = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        ref["configs"].append({"k": k, "v": v, "fa": fa, "steps": decode(llm, ref["tokens"])})
    out_f.write_text(json.dumps(ref, separators=(",", ":")))
    print("wrote", out_f)


if __name__ == "__main__":
    main()
