"""Dump llama.cpp's intermediate f32 tensors for one token sequence (development tool).

    python scripts/parity/llama_dump.py MODEL.gguf OUT.npz TOKENS [--prompt N]

TOKENS is a comma-separated list of token ids. Without --prompt, all tokens are evaluated in
one batch and that batch is dumped; with --prompt N, the first N tokens are evaluated as one
batch and the rest one token at a time, and the last single-token step is dumped (the
greedy-decode situation). Needs `pip install llama-cpp-python==0.3.36` (CPU build); settings
are those of ../shared/reference/make_reference.py (n_ctx 2048, n_batch 512, 2 threads, no
flash attention). Tensors are keyed by ggml name ("attn_norm-0", "kq-0", "node_34", ...), a
repeated name gets "#1", "#2", ...; compare_ops.py maps them onto llamars' activation taps.
"""
import argparse
import ctypes
import sys

import numpy as np


class GgmlTensor(ctypes.Structure):
    # struct ggml_tensor (ggml.h) up to the fields read here
    _fields_ = [
        ("type", ctypes.c_int),
        ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4),
        ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int),
        ("op_params", ctypes.c_int32 * 16),
        ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10),
        ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t),
        ("data", ctypes.c_void_p),
        ("name", ctypes.c_char * 64),
        ("extra", ctypes.c_void_p),
        ("padding", ctypes.c_char * 8),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("tokens")
    ap.add_argument("--prompt", type=int, default=None, help="tokens in the first batch; the rest are decoded one by one")
    args = ap.parse_args()
    try:
        import llama_cpp as L
    except ImportError:
        sys.exit("llama_dump.py needs llama-cpp-python: pip install llama-cpp-python==0.3.36")

    out, seen = {}, {}

    def on_tensor(t, ask, _ud):
        if ask:
            return True
        tt = ctypes.cast(t, ctypes.POINTER(GgmlTensor)).contents
        if tt.type != 0:  # f32 only
            return True
        ne, nb = list(tt.ne), list(tt.nb)
        size = sum((ne[i] - 1) * nb[i] for i in range(1, 4)) + ne[0] * 4
        raw = np.frombuffer((ctypes.c_char * size).from_address(tt.data), dtype=np.float32)
        arr = np.lib.stride_tricks.as_strided(raw, shape=ne[::-1], strides=nb[::-1]).copy()
        name = tt.name.decode()
        k = seen.get(name, 0)
        seen[name] = k + 1
        out[f"{name}#{k}" if k else name] = arr
        return True

    callback = L.ggml_backend_sched_eval_callback(on_tensor)
    L.llama_backend_init()
    model = L.llama_model_load_from_file(args.model.encode(), L.llama_model_default_params())
    if not model:
        sys.exit(f"llama.cpp could not load {args.model}")
    cp = L.llama_context_default_params()
    cp.n_ctx, cp.n_batch, cp.n_ubatch, cp.n_threads, cp.n_threads_batch = 2048, 512, 512, 2, 2
    cp.flash_attn_type = 0
    cp.cb_eval = callback
    ctx = L.llama_init_from_model(model, cp)
    toks = [int(x) for x in args.tokens.split(",")]
    n_prompt = len(toks) if args.prompt is None else args.prompt
    batch = L.llama_batch_init(len(toks), 0, 1)

    def decode(chunk, p0):
        for i, tk in enumerate(chunk):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = tk, p0 + i, 1, 1
            batch.seq_id[i][0] = 0
        batch.n_tokens = len(chunk)
        out.clear()
        seen.clear()
        if L.llama_decode(ctx, batch) != 0:
            sys.exit("llama_decode failed")

    decode(toks[:n_prompt], 0)
    for k in range(n_prompt, len(toks)):
        decode([toks[k]], k)
    np.savez(args.out, **out)
    print(f"wrote {len(out)} tensors of the last step to {args.out}")


if __name__ == "__main__":
    main()
