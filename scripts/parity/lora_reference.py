"""llama.cpp's logits on the real model under LoRA adapters and a control vector: the
reference tests/test_lora.py compares llamars with.

    python scripts/parity/lora_reference.py MODEL.gguf [OUT.json]

Needs llama-cpp-python 0.3.36 importable (see tiny_reference.py) with numpy and gguf.
The adapters and the control vector are written by tests/lora_util.py from fixed seeds
(their sha256 is recorded: the test skips a file its gguf package writes differently).
Settings as ../shared/reference/make_reference.py (2 threads, n_batch 512, no flash
attention). Per case (adapter scales set on the context with `llama_set_adapters_lora`,
the control vector with `llama_set_adapter_cvec`) and prompt: each position's top two
token ids and log-probabilities under teacher forcing.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from top2 import top2_rows  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
import lora_util  # noqa: E402

ADAPTERS = {"f32": dict(seed=1, dtype="float32", b_std=0.01), "f16": dict(seed=2, dtype="float16", b_std=0.01)}
CVEC = dict(seed=3, layers=[2, 5, 9, 14], strength=0.8)
# (name, [(adapter, scale)], control vector on)
CASES = [
    ("f32@0.5", [("f32", 0.5)], False),
    ("f32@1", [("f32", 1.0)], False),
    ("f16@1", [("f16", 1.0)], False),
    ("f32@1+f16@0.5", [("f32", 1.0), ("f16", 0.5)], False),
    ("cvec", [], True),
]
N_PROMPTS = 6


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def files(base: str, d: Path) -> dict:
    out = {}
    for name, a in ADAPTERS.items():
        out[name] = lora_util.write_adapter(base, d / f"{name}.gguf", seed=a["seed"], dtype=np.dtype(a["dtype"]), b_std=a["b_std"])
    _, shapes = lora_util.base_shapes(base)
    n_embd = shapes["token_embd.weight"][0]
    out["cvec"] = lora_util.write_control_vector(d / "cvec.gguf", n_embd, CVEC["layers"], seed=CVEC["seed"])
    return out


def main() -> None:
    import llama_cpp as L
    from llama_cpp import Llama

    base = sys.argv[1]
    out_f = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "tests" / "fixtures" / "lora_llamacpp.json"
    prompts = json.loads((ROOT.parent / "shared" / "reference" / "prompts_public.json").read_text())[:N_PROMPTS]
    with tempfile.TemporaryDirectory() as td:
        f = files(base, Path(td))
        llm = Llama(model_path=base, n_ctx=2048, n_threads=2, n_batch=512, logits_all=True, verbose=False, seed=0,
                    flash_attn=False, lora_path=str(f["f32"]), lora_scale=1.0)
        ptr = {"f32": llm._lora_adapter, "f16": L.llama_adapter_lora_init(llm._model.model, str(f["f16"]).encode())}
        n_embd, n_layer = llm.n_embd(), L.llama_model_n_layer(llm._model.model)
        cv = np.zeros(n_embd * max(CVEC["layers"]), dtype=np.float32)
        d = lora_util.read_directions(f["cvec"])
        for il, v in d.items():
            cv[n_embd * (il - 1): n_embd * il] += v * CVEC["strength"]
        ref = {"llama_cpp_python": L.__version__, "adapters": {k: {**a, "sha256": sha(f[k])} for k, a in ADAPTERS.items()},
               "cvec": {**CVEC, "sha256": sha(f["cvec"])}, "prompts": [], "cases": []}
        for p in prompts:
            ref["prompts"].append({"text": p, "tokens": llm.tokenize(p.encode(), add_bos=True, special=True)})
        for name, loras, cvec in CASES:
            arr = (L.llama_adapter_lora_p_ctypes * max(1, len(loras)))(*[ptr[a] for a, _ in loras])
            sc = (ctypes.c_float * max(1, len(loras)))(*[s for _, s in loras])
            if L.llama_set_adapters_lora(llm._ctx.ctx, arr, len(loras), sc):
                sys.exit(f"{name}: llama_set_adapters_lora failed")
            if cvec:
                buf = cv.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
                rc = L.llama_set_adapter_cvec(llm._ctx.ctx, buf, cv.size, n_embd, 1, n_layer)
            else:
                rc = L.llama_set_adapter_cvec(llm._ctx.ctx, None, 0, n_embd, -1, -1)
            if rc:
                sys.exit(f"{name}: llama_set_adapter_cvec failed")
            rows = top2_rows(llm, ref["prompts"])
            ref["cases"].append({"name": name, "lora": loras, "cvec": cvec, "positions": rows})
            print(name, "done", flush=True)
    out_f.write_text(json.dumps(ref, indent=0))
    print("wrote", out_f)


if __name__ == "__main__":
    main()
