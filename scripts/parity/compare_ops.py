"""Compare llamars' activations with llama.cpp's, op by op (development tool).

    python scripts/parity/compare_ops.py MODEL.gguf LLAMA.npz TOKENS [--prompt N] [--inject] [--all]

LLAMA.npz comes from llama_dump.py with the same TOKENS (and --prompt). llamars runs the same
evaluation with its activation taps on (`LLAMARS_PROBE_DIR`, rust/model/probe.rs): one batch,
or with --prompt N a greedy generation whose last step matches the dump's. With --inject
(batch mode) each op runs on llama.cpp's inputs, so a row that is not `eq=1.0000` names the
op whose arithmetic differs; without it, differences accumulate through the layers. Prints
the ops that differ (all of them with --all): the fraction of bit-identical elements and the
largest absolute and relative differences.
"""
import argparse
import os
import shutil
import tempfile

import numpy as np

OPS = ["attn_norm", "Qcur", "Kcur", "Vcur", "Qcur_normed", "Kcur_normed", "Qrope", "Krope", "kqv_out", "attn_o",
       "attn_post_norm", "sa_out", "ffn_norm", "ffn_gate", "ffn_up", "ffn_geglu", "ffn_out", "ffn_post_norm", "l_out"]


def ggml_name(op, il, nodes_per_layer):
    # unnamed ggml nodes: RoPE'd Q and the attention output projection, by graph position
    return {"Qrope": f"node_{9 + nodes_per_layer * il}", "Krope": f"Kcur-{il}#2",
            "attn_o": f"node_{34 + nodes_per_layer * il}"}.get(op, f"{op}-{il}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("dump")
    ap.add_argument("tokens")
    ap.add_argument("--prompt", type=int, default=None)
    ap.add_argument("--inject", action="store_true")
    ap.add_argument("--all", action="store_true")
    ap.add_argument("--nodes-per-layer", type=int, default=45, help="ggml graph nodes per layer (45: Gemma 3)")
    args = ap.parse_args()
    ll = np.load(args.dump)
    toks = [int(x) for x in args.tokens.split(",")]
    n_layer = 1 + max(int(k.split("-")[1].split("#")[0].split(" ")[0]) for k in ll.files if k.startswith("l_out-"))
    keys = [("inp_scaled", "inp_scaled")]
    keys += [(f"{op}-{il}", ggml_name(op, il, args.nodes_per_layer)) for il in range(n_layer) for op in OPS]
    keys += [("result_norm", "result_norm"), ("result_output", "result_output")]
    keys = [(o, g) for o, g in keys if g in ll.files]

    d = tempfile.mkdtemp(prefix="llamars-probe-")
    os.makedirs(f"{d}/ours")
    os.makedirs(f"{d}/ll")
    if args.inject:
        for ours, g in keys:
            ll[g].astype("<f4").tofile(f"{d}/ll/{ours}.f32")
    os.environ["LLAMARS_PROBE_DIR"] = d
    from llamars import Engine

    eng = Engine(args.model, n_ctx=2048, n_threads=2)
    if args.prompt is None:
        eng.logits(toks)
    else:
        res = eng.generate(toks[: args.prompt], max_tokens=len(toks) - args.prompt + 1, temperature=0.0, cache_prompt=False)
        print("llamars generated", res.tokens)
    shown = 0
    for ours, g in keys:
        path = f"{d}/ours/{ours}.f32"
        if not os.path.exists(path):
            continue
        a, b = np.fromfile(path, dtype="<f4"), ll[g].reshape(-1)
        if a.size != b.size:
            print(f"{ours:22s} size {a.size} vs llama.cpp {b.size}")
            continue
        eq = float((a == b).mean())
        diff = np.abs(a.astype(np.float64) - b)
        if eq < 1.0 or args.all:
            rel = diff.max() / max(float(np.abs(b).max()), 1e-30)
            print(f"{ours:22s} eq={eq:.4f} maxabs={diff.max():.3e} rel={rel:.2e}")
            shown += 1
    print(f"{len(keys)} activations compared, {shown} shown" + ("" if shown or args.all else ": all bit-identical"))
    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
