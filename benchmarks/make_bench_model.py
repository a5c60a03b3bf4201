"""Models for speed benchmarks, with random weights of real shapes and types:

    # a llama-architecture model of about 1.1B parameters, Q4_K weights (TinyLlama's shape)
    python benchmarks/make_bench_model.py llama OUT.gguf [--layers 22 --embd 2048 --ff 5632]

    # the exact header (metadata, vocabulary, tensor table) of an existing model with random
    # tensor data: the same shapes and types, so the same cost per token; HEADER is the
    # first bytes of a GGUF up to its tensor data (`header` writes it)
    python benchmarks/make_bench_model.py header MODEL.gguf HEADER.bin
    python benchmarks/make_bench_model.py like HEADER.bin OUT.gguf

Quantized blocks get random quant bits and scale fields set so weights stay near
±0.02 (enough for finite activations through every layer; the text is noise).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

# (block elements, block bytes, f16 scale fields with their values) per ggml type id
_BLOCKS = {
    0: (1, 4, ()),  # F32
    1: (1, 2, ()),  # F16
    6: (32, 22, ((0, 2e-3),)),  # Q5_0
    8: (32, 34, ((0, 2e-4),)),  # Q8_0
    12: (256, 144, ((0, 2e-5), (2, 1.5e-4))),  # Q4_K
    13: (256, 176, ((0, 1e-5), (2, 1.5e-4))),  # Q5_K
    14: (256, 210, ((208, 1e-5),)),  # Q6_K
}


def fill(buf: np.ndarray, ggml_type: int, n_elems: int, rng: np.random.Generator, *, norm: bool = False) -> None:
    """Random contents for one tensor's bytes (`norm`: an F32 vector of ~1 for norms)."""
    if ggml_type not in _BLOCKS:
        raise SystemExit(f"type id {ggml_type} is not supported by this generator")
    bs, ts, fields = _BLOCKS[ggml_type]
    if ggml_type == 0:
        v = (1.0 + 0.05 * rng.standard_normal(n_elems)) if norm else 0.02 * rng.standard_normal(n_elems)
        buf[:] = v.astype(np.float32).view(np.uint8)
        return
    if ggml_type == 1:
        buf[:] = (0.02 * rng.standard_normal(n_elems)).astype(np.float16).view(np.uint8)
        return
    blocks = buf.reshape(-1, ts)
    blocks[:] = rng.integers(0, 256, size=blocks.shape, dtype=np.uint8)
    for at, val in fields:
        blocks[:, at : at + 2] = np.full(len(blocks), val, np.float16).view(np.uint8).reshape(-1, 2)


def write_llama(out: str, n_layer: int, n_embd: int, n_ff: int, n_head: int, n_head_kv: int, n_vocab: int, seed: int) -> None:
    import tiny_models as tm
    from gguf import GGUFValueType as VT

    tokens, scores, types, ids = tm.spm_vocab()
    while len(tokens) < n_vocab:
        tokens.append(f"\u2581w{len(tokens)}")
        scores.append(-1000.0 - len(tokens) * 0.001)
        types.append(1)
    kvs = [
        tm.KV("general.architecture", VT.STRING, "llama"),
        tm.KV("general.name", VT.STRING, f"bench-llama-{n_layer}x{n_embd}"),
        tm.KV("llama.context_length", VT.UINT32, 4096),
        tm.KV("llama.embedding_length", VT.UINT32, n_embd),
        tm.KV("llama.block_count", VT.UINT32, n_layer),
        tm.KV("llama.feed_forward_length", VT.UINT32, n_ff),
        tm.KV("llama.attention.head_count", VT.UINT32, n_head),
        tm.KV("llama.attention.head_count_kv", VT.UINT32, n_head_kv),
        tm.KV("llama.attention.layer_norm_rms_epsilon", VT.FLOAT32, 1e-5),
        tm.KV("llama.rope.freq_base", VT.FLOAT32, 10000.0),
        tm.KV("tokenizer.ggml.model", VT.STRING, "llama"),
        tm.KV("tokenizer.ggml.tokens", VT.ARRAY, tm.Arr(VT.STRING, tokens)),
        tm.KV("tokenizer.ggml.scores", VT.ARRAY, tm.Arr(VT.FLOAT32, scores)),
        tm.KV("tokenizer.ggml.token_type", VT.ARRAY, tm.Arr(VT.INT32, types)),
        tm.KV("tokenizer.ggml.bos_token_id", VT.UINT32, ids["bos"]),
        tm.KV("tokenizer.ggml.eos_token_id", VT.UINT32, ids["eos"]),
    ]
    hd = n_embd // n_head
    rng = np.random.default_rng(seed)
    specs = [("token_embd.weight", 12, [n_embd, n_vocab], False), ("output_norm.weight", 0, [n_embd], True), ("output.weight", 14, [n_embd, n_vocab], False)]
    for il in range(n_layer):
        b = f"blk.{il}."
        specs += [
            (b + "attn_norm.weight", 0, [n_embd], True),
            (b + "attn_q.weight", 12, [n_embd, n_embd], False),
            (b + "attn_k.weight", 12, [n_embd, n_head_kv * hd], False),
            (b + "attn_v.weight", 14, [n_embd, n_head_kv * hd], False),
            (b + "attn_output.weight", 12, [n_embd, n_embd], False),
            (b + "ffn_norm.weight", 0, [n_embd], True),
            (b + "ffn_gate.weight", 12, [n_embd, n_ff], False),
            (b + "ffn_up.weight", 12, [n_embd, n_ff], False),
            (b + "ffn_down.weight", 14, [n_ff, n_embd], False),
        ]
    tensors = []
    for i, (name, ty, dims, norm) in enumerate(specs):
        n = int(np.prod(dims))
        bs, ts, _ = _BLOCKS[ty]
        buf = np.zeros(n // bs * ts, np.uint8)
        fill(buf, ty, n, rng, norm=norm)
        tensors.append(tm.Tensor(name, ty, dims, buf.tobytes()))
        print(f"\r  {i + 1}/{len(specs)} tensors", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    tm.write_gguf(out, kvs, tensors)
    n_params = sum(int(np.prod(d)) for _, _, d, _ in specs)
    print(f"wrote {out}: llama, {n_params / 1e9:.2f}B parameters, {os.path.getsize(out) / 2**20:.0f} MiB")


def write_header(model: str, out: str) -> None:
    from gguf import GGUFReader

    r = GGUFReader(model)
    with open(model, "rb") as f, open(out, "wb") as o:
        o.write(f.read(r.data_offset))
    print(f"wrote {out}: {r.data_offset} bytes of header ({len(r.tensors)} tensors)")


def write_like(header: str, out: str, seed: int) -> None:
    from gguf import GGUFReader

    head = open(header, "rb").read()
    # the file size: the end of the last tensor, read from a sparse full-size copy
    with open(out, "wb") as o:
        o.write(head)
        o.truncate(len(head) + (1 << 33))  # sparse room for any tensor table; cut below
    r = GGUFReader(out, "r+")
    end = max(t.data_offset + t.n_bytes for t in r.tensors)
    del r
    with open(out, "r+b") as o:
        o.truncate(end)
    r = GGUFReader(out, "r+")
    rng = np.random.default_rng(seed)
    mm = np.memmap(out, dtype=np.uint8, mode="r+")
    for i, t in enumerate(r.tensors):
        norm = t.name.endswith("norm.weight")
        fill(mm[t.data_offset : t.data_offset + t.n_bytes], int(t.tensor_type), int(t.n_elements), rng, norm=norm)
        print(f"\r  {i + 1}/{len(r.tensors)} tensors", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    mm.flush()
    print(f"wrote {out}: the model of {header} with random weights, {end / 2**20:.0f} MiB")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("llama")
    a.add_argument("out")
    a.add_argument("--layers", type=int, default=22)
    a.add_argument("--embd", type=int, default=2048)
    a.add_argument("--ff", type=int, default=5632)
    a.add_argument("--heads", type=int, default=32)
    a.add_argument("--kv-heads", type=int, default=4)
    a.add_argument("--vocab", type=int, default=32000)
    a.add_argument("--seed", type=int, default=0)
    h = sub.add_parser("header")
    h.add_argument("model")
    h.add_argument("out")
    lk = sub.add_parser("like")
    lk.add_argument("header")
    lk.add_argument("out")
    lk.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.cmd == "llama":
        write_llama(args.out, args.layers, args.embd, args.ff, args.heads, args.kv_heads, args.vocab, args.seed)
    elif args.cmd == "header":
        write_header(args.model, args.out)
    else:
        write_like(args.header, args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
