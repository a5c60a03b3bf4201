"""llama.cpp's logits on the real model with every KV cache type pair it accepts (`-ctk`,
`-ctv`) and flash attention on and off: the reference tests/test_kv_types.py compares
llamars with.

    python scripts/parity/kv_reference.py MODEL.gguf [OUT.json]

Needs llama-cpp-python 0.3.36 importable (see tiny_reference.py) with numpy. Settings as
../shared/reference/make_reference.py (2 threads, n_batch 512). llama.cpp accepts every
pair with flash attention, and without it only an f32, f16 or bf16 V. Per configuration
and prompt: each position's top two token ids and log-probabilities under teacher forcing.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from top2 import top2_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TYPES = {"f32": 0, "f16": 1, "bf16": 30, "q8_0": 8, "q4_0": 2, "q4_1": 3, "iq4_nl": 20, "q5_0": 6, "q5_1": 7}
N_PROMPTS = 3


def configurations(base: str):
    """Each (k, v, fa, llm) llama.cpp accepts, a fresh llama-cpp-python model for each."""
    from llama_cpp import Llama

    for fa in (True, False):
        for k in TYPES:
            for v in TYPES:
                if not fa and v not in ("f32", "f16", "bf16"):
                    continue
                llm = Llama(model_path=base, n_ctx=512, n_threads=2, n_batch=512, logits_all=True, verbose=False, seed=0,
                            flash_attn=fa, type_k=TYPES[k], type_v=TYPES[v])
                yield k, v, fa, llm
                del llm
                print(k, v, "fa" if fa else "no-fa", flush=True)


def main() -> None:
    import llama_cpp as L

    base = sys.argv[1]
    out_f = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "kv_types_llamacpp.json"
    prompts = json.loads((ROOT.parent / "shared" / "reference" / "prompts_public.json").read_text())[:N_PROMPTS]
    ref = {"llama_cpp_python": L.__version__, "prompts": [], "configs": []}
    for k, v, fa, llm in configurations(base):
        if not ref["prompts"]:
            ref["prompts"] = [{"text": p, "tokens": llm.tokenize(p.encode(), add_bos=True, special=True)} for p in prompts]
        ref["configs"].append({"k": k, "v": v, "fa": fa, "positions": top2_rows(llm, ref["prompts"])})
    out_f.write_text(json.dumps(ref, separators=(",", ":")))
    print("wrote", out_f)


if __name__ == "__main__":
    main()
