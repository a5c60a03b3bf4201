"""Models for speed benchmarks, with random weights of real shapes and types:

    # a llama-family model with llama.cpp's Q4_K_M type mix; default TinyLlama-1.1B's shape
    # (22 layers, embd 2048, ff 5632, 32 heads, 4 kv heads, vocab 32000, untied output);
    # --type Q4_0|IQ4_NL|Q5_0|Q8_0|MXFP4|IQ2_XXS|IQ2_XS|IQ2_S|IQ3_XXS|IQ3_S|IQ1_S|TQ1_0|TQ2_0: the layers' matrices of that type
    python benchmarks/make_bench_model.py llama OUT.gguf [--preset NAME] [--arch llama|qwen2] [--type T]
        [--layers N --embd N --ff N --heads N --kv-heads N --vocab N] [--tied|--no-tied]

    # real models' exact tensor shapes and Q4_K_M types (flags given still override):
    #   llama-3.2-1b  llama, 16 layers, embd 2048, ff 8192, 32/8 heads, vocab 128256, tied
    #   qwen2.5-1.5b  qwen2 (q/k/v biases), 28 layers, embd 1536, ff 8960, 12/2 heads,
    #                 vocab 151936, tied
    #   llama-3.1-8b  llama, 32 layers, embd 4096, ff 14336, 32/8 heads, vocab 128256, untied
    #   qwen3-30b-a3b qwen3moe, 48 layers, embd 2048, 32/4 heads of 128, q/k norms, 128
    #                 experts of ff 768 with 8 per token, vocab 151936, untied (use --layers:
    #                 each layer is ~350 MB)

    # gpt-oss-20b's shapes: 24 layers, embd 2880, 64/8 heads of 64, sinks, every other layer
    # local (window 128), 32 experts of ff 2880 with 4 per token, MXFP4 experts, the other
    # matrices Q8_0, vocab 201088, YaRN (factor 32 over 4096); ~440 MB a layer
    python benchmarks/make_bench_model.py gpt-oss OUT.gguf [--layers N]
    python benchmarks/make_bench_model.py llama /tmp/bm/llama-3.2-1b.gguf --preset llama-3.2-1b
    python benchmarks/make_bench_model.py llama /tmp/bm/qwen2.5-1.5b.gguf --preset qwen2.5-1.5b
    python benchmarks/make_bench_model.py llama /tmp/bm/llama-3.1-8b.gguf --preset llama-3.1-8b [--layers 4]

    # the exact header (metadata, vocabulary, tensor table) of an existing model with random
    # tensor data: the same shapes and types, so the same cost per token; HEADER is the
    # first bytes of a GGUF up to its tensor data (`header` writes it)
    python benchmarks/make_bench_model.py header MODEL.gguf HEADER.bin
    python benchmarks/make_bench_model.py like HEADER.bin OUT.gguf

    # a draft model for speculative decoding from a real one: its first N layers (the same
    # vocabulary, embeddings, output and weights, `block_count` N; an early-exit draft)
    python benchmarks/make_bench_model.py first-layers MODEL.gguf OUT.gguf --layers N

The Q4_K_M mix is llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for dense
models: Q4_K by default; output.weight Q6_K; token_embd.weight Q4_K, or Q6_K when the
output is tied to it (no output.weight); attn_v and ffn_down Q6_K on the "use_more_bits"
layers (i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2), else Q4_K; norms, biases and Llama 3's
rope_freqs.weight F32 (rows not a multiple of 256 fall back to Q5_0 / Q8_0 as there).
The vocabulary is a small SentencePiece one padded to --vocab (tokenizer speed is no part
of pp/tg). The file is written one tensor at a time.

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
    2: (32, 18, ((0, 2e-3),)),  # Q4_0
    20: (32, 18, ((0, 2e-3),)),  # IQ4_NL
    12: (256, 144, ((0, 2e-5), (2, 1.5e-4))),  # Q4_K
    13: (256, 176, ((0, 1e-5), (2, 1.5e-4))),  # Q5_K
    14: (256, 210, ((208, 1e-5),)),  # Q6_K
    39: (32, 17, ()),  # MXFP4 (its E8M0 scale byte is set in fill)
    # --type: the layers' matrices of one type (random grid indices / codes, weights ≲ 0.05)
    16: (256, 66, ((0, 1e-4),)),  # IQ2_XXS
    17: (256, 74, ((0, 1e-4),)),  # IQ2_XS
    22: (256, 82, ((0, 1e-4),)),  # IQ2_S
    18: (256, 98, ((0, 5e-5),)),  # IQ3_XXS
    21: (256, 110, ((0, 1e-4),)),  # IQ3_S
    19: (256, 50, ((0, 2e-3),)),  # IQ1_S
    34: (256, 54, ((52, 0.02),)),  # TQ1_0
    35: (256, 66, ((64, 0.02),)),  # TQ2_0
}
TYPE_IDS = {"Q4_0": 2, "IQ4_NL": 20, "Q5_0": 6, "Q8_0": 8, "MXFP4": 39, "IQ2_XXS": 16, "IQ2_XS": 17, "IQ2_S": 22, "IQ3_XXS": 18, "IQ3_S": 21, "IQ1_S": 19, "TQ1_0": 34, "TQ2_0": 35}


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
    if ggml_type == 39:
        blocks[:, 0] = 121  # 2^-7: codes up to ±12 give weights up to ~0.09


# Real models' shapes (with --layers and the other shape flags still overriding);
# rope_scale: Llama 3's rope_freqs.weight factors (factor, low 1, high 4, original 8192)
PRESETS = {
    "llama-3.2-1b": dict(arch="llama", layers=16, embd=2048, ff=8192, heads=32, kv_heads=8, vocab=128256, tied=True,
                         rope_base=500000.0, eps=1e-5, ctx=131072, rope_scale=32.0),
    "qwen2.5-1.5b": dict(arch="qwen2", layers=28, embd=1536, ff=8960, heads=12, kv_heads=2, vocab=151936, tied=True,
                         rope_base=1000000.0, eps=1e-6, ctx=32768, rope_scale=None),
    "llama-3.1-8b": dict(arch="llama", layers=32, embd=4096, ff=14336, heads=32, kv_heads=8, vocab=128256, tied=False,
                         rope_base=500000.0, eps=1e-5, ctx=131072, rope_scale=8.0),
    "qwen3-30b-a3b": dict(arch="qwen3moe", layers=48, embd=2048, ff=6144, heads=32, kv_heads=4, vocab=151936, tied=False,
                          rope_base=1000000.0, eps=1e-6, ctx=40960, rope_scale=None, head_dim=128, experts=(128, 8, 768)),
}
# TinyLlama-1.1B's shape when neither a preset nor a flag gives one
DEFAULTS = dict(arch="llama", layers=22, embd=2048, ff=5632, heads=32, kv_heads=4, vocab=32000, tied=False,
                rope_base=10000.0, eps=1e-5, ctx=4096, rope_scale=None)

Q4_K, Q6_K = 12, 14
# llama.cpp's tensor_type_fallback when a row length is not a multiple of 256
_FALLBACK = {Q4_K: 6, Q6_K: 8}  # Q5_0, Q8_0


def use_more_bits(i: int, n: int) -> bool:
    """llama.cpp's use_more_bits (src/llama-quant.cpp): the first and last eighth of the
    layers and every third one between them."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_type(name: str, il: int, n_layer: int, tied: bool, row: int) -> int:
    """The type llama.cpp's llama_tensor_get_type gives a 2-D weight for Q4_K_M (dense
    llama-like models): output.weight Q6_K, token_embd.weight Q4_K, or Q6_K when tied to
    the output; attn_v and ffn_down Q6_K on use_more_bits layers; every other weight Q4_K."""
    if name == "output.weight" or (name == "token_embd.weight" and tied):
        return Q6_K if row % 256 == 0 else 8  # Q8_0 when the rows do not split into 256-blocks
    ty = Q4_K
    if name.endswith(("attn_v.weight", "ffn_down.weight")) and use_more_bits(il, n_layer):
        ty = Q6_K
    return ty if row % 256 == 0 else _FALLBACK[ty]


def llama3_rope_factors(head_dim: int, base: float, factor: float) -> np.ndarray:
    """rope_freqs.weight of Llama 3.1 / 3.2 (convert_hf_to_gguf.py's llama3 rope scaling)."""
    low, high, old_ctx = 1.0, 4.0, 8192
    freqs = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    out = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < old_ctx / high:
            out.append(1.0)
        elif wavelen > old_ctx / low:
            out.append(factor)
        else:
            smooth = (old_ctx / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


def _tensor_bytes(ty: int, dims) -> int:
    bs, ts, _ = _BLOCKS[ty]
    n = int(np.prod(dims))
    assert n % bs == 0, (ty, dims)
    return n // bs * ts


def write_streaming(out: str, kvs, specs, rng: np.random.Generator, align: int = 32) -> None:
    """A GGUF v3 file of `kvs` and the tensors `specs` = (name, type, dims, contents), the
    contents generated and written one tensor at a time (an 8B model never sits in memory);
    contents: "norm" (~1), "weight" (random, fill()) or an array of the tensor's values."""
    import struct

    import tiny_models as tm

    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(specs), len(kvs)))
    for kv in kvs:
        head += tm.encode_string(kv.key) + struct.pack("<I", int(kv.vtype)) + tm.encode_value(kv.vtype, kv.value)
    rel, offsets = 0, []
    for name, ty, dims, _ in specs:
        head += tm.encode_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        head += struct.pack("<IQ", ty, rel)
        offsets.append(rel)
        rel = (rel + _tensor_bytes(ty, dims) + align - 1) // align * align
    data_at = (len(head) + align - 1) // align * align
    with open(out, "wb") as f:
        f.write(bytes(head) + b"\0" * (data_at - len(head)))
        for i, ((name, ty, dims, what), off) in enumerate(zip(specs, offsets)):
            if isinstance(what, np.ndarray):
                buf = np.ascontiguousarray(what, np.float32).view(np.uint8)
            else:
                buf = np.empty(_tensor_bytes(ty, dims), np.uint8)
                fill(buf, ty, int(np.prod(dims)), rng, norm=what == "norm")
            f.seek(data_at + off)
            f.write(buf.tobytes())
            print(f"\r  {i + 1}/{len(specs)} tensors", end="", file=sys.stderr, flush=True)
        f.truncate(data_at + rel)
    print(file=sys.stderr)


def padded_vocab_kvs(n_vocab: int) -> list:
    """The tiny SentencePiece vocabulary padded with filler words to `n_vocab` tokens (its
    speed is no part of pp / tg), as tokenizer metadata."""
    import tiny_models as tm

    tokens, scores, types, ids = tm.spm_vocab()
    while len(tokens) < n_vocab:
        tokens.append(f"\u2581w{len(tokens)}")
        scores.append(-1000.0 - len(tokens) * 0.001)
        types.append(1)
    return tm.spm_kvs(tokens, scores, types, ids, full=False)


def write_llama(out: str, cfg: dict, seed: int) -> None:
    """A dense llama-family model (`llama`, or `qwen2` with q/k/v biases) of `cfg`'s shape
    with llama.cpp's Q4_K_M type mix; norms, biases and rope factors F32."""
    import tiny_models as tm
    from gguf import GGUFValueType as VT

    arch, n_layer, n_embd, n_ff = cfg["arch"], cfg["layers"], cfg["embd"], cfg["ff"]
    n_head, n_head_kv, n_vocab, tied = cfg["heads"], cfg["kv_heads"], cfg["vocab"], cfg["tied"]
    if n_embd % n_head and not cfg.get("head_dim"):
        raise SystemExit(f"--embd {n_embd} is not a multiple of --heads {n_head}")
    hd = cfg.get("head_dim") or n_embd // n_head
    n_expert, n_used, n_ff_exp = cfg.get("experts") or (0, 0, 0)
    if n_vocab < len(tm.spm_vocab()[0]):
        raise SystemExit(f"--vocab must be at least {len(tm.spm_vocab()[0])}")
    a = arch
    kvs = [
        tm.KV("general.architecture", VT.STRING, arch),
        tm.KV("general.name", VT.STRING, cfg.get("name") or f"bench-{arch}-{n_layer}x{n_embd}"),
        tm.KV("general.file_type", VT.UINT32, 15),  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        tm.KV(f"{a}.context_length", VT.UINT32, cfg["ctx"]),
        tm.KV(f"{a}.embedding_length", VT.UINT32, n_embd),
        tm.KV(f"{a}.block_count", VT.UINT32, n_layer),
        tm.KV(f"{a}.feed_forward_length", VT.UINT32, n_ff),
        tm.KV(f"{a}.attention.head_count", VT.UINT32, n_head),
        tm.KV(f"{a}.attention.head_count_kv", VT.UINT32, n_head_kv),
        tm.KV(f"{a}.attention.layer_norm_rms_epsilon", VT.FLOAT32, cfg["eps"]),
        tm.KV(f"{a}.rope.freq_base", VT.FLOAT32, cfg["rope_base"]),
    ]
    if arch == "llama":
        kvs.append(tm.KV(f"{a}.rope.dimension_count", VT.UINT32, hd))
    if hd * n_head != n_embd:
        kvs += [tm.KV(f"{a}.attention.key_length", VT.UINT32, hd), tm.KV(f"{a}.attention.value_length", VT.UINT32, hd)]
    if n_expert:
        kvs += [tm.KV(f"{a}.expert_count", VT.UINT32, n_expert), tm.KV(f"{a}.expert_used_count", VT.UINT32, n_used),
                tm.KV(f"{a}.expert_feed_forward_length", VT.UINT32, n_ff_exp)]
    kvs += padded_vocab_kvs(n_vocab)

    def w(name, il, n_in, n_out):  # a weight matrix: n_out rows of n_in
        ty = q4_k_m_type(name, il, n_layer, tied, n_in)
        if cfg.get("type") and il >= 0 and n_in % 256 == 0:
            ty = TYPE_IDS[cfg["type"]]  # --type: the layers' matrices (not token_embd / output)
        return (name, ty, [n_in, n_out], "weight")

    # the global tensors, then layer by layer (llama.cpp counts attn_v tensors in file order)
    specs = [w("token_embd.weight", -1, n_embd, n_vocab)]
    if cfg.get("rope_scale"):
        specs.append(("rope_freqs.weight", 0, [hd // 2], llama3_rope_factors(hd, cfg["rope_base"], cfg["rope_scale"])))
    specs.append(("output_norm.weight", 0, [n_embd], "norm"))
    if not tied:
        specs.append(w("output.weight", -1, n_embd, n_vocab))
    kv_dim, q_dim = n_head_kv * hd, n_head * hd

    def exps(name, il, n_in, n_out):  # a stack of n_expert matrices, typed as its 2-D twin
        return (name, q4_k_m_type(name.replace("_exps", ""), il, n_layer, tied, n_in), [n_in, n_out, n_expert], "weight")

    for il in range(n_layer):
        b = f"blk.{il}."
        specs.append((b + "attn_norm.weight", 0, [n_embd], "norm"))
        specs += [w(b + "attn_q.weight", il, n_embd, q_dim), w(b + "attn_k.weight", il, n_embd, kv_dim),
                  w(b + "attn_v.weight", il, n_embd, kv_dim)]
        if arch == "qwen2":
            specs += [(b + "attn_q.bias", 0, [n_embd], "weight"), (b + "attn_k.bias", 0, [kv_dim], "weight"),
                      (b + "attn_v.bias", 0, [kv_dim], "weight")]
        if arch in ("qwen3", "qwen3moe"):
            specs += [(b + "attn_q_norm.weight", 0, [hd], "norm"), (b + "attn_k_norm.weight", 0, [hd], "norm")]
        specs += [w(b + "attn_output.weight", il, q_dim, n_embd), (b + "ffn_norm.weight", 0, [n_embd], "norm")]
        if n_expert:
            # the router stays F32 (llama.cpp's quantizer skips ffn_gate_inp)
            specs += [(b + "ffn_gate_inp.weight", 0, [n_embd, n_expert], "weight"),
                      exps(b + "ffn_gate_exps.weight", il, n_embd, n_ff_exp), exps(b + "ffn_up_exps.weight", il, n_embd, n_ff_exp),
                      exps(b + "ffn_down_exps.weight", il, n_ff_exp, n_embd)]
        else:
            specs += [w(b + "ffn_gate.weight", il, n_embd, n_ff), w(b + "ffn_up.weight", il, n_embd, n_ff),
                      w(b + "ffn_down.weight", il, n_ff, n_embd)]
    write_streaming(out, kvs, specs, np.random.default_rng(seed))
    n_params = sum(int(np.prod(d)) for _, _, d, _ in specs)
    n_q6 = sum(1 for _, ty, _, _ in specs if ty == Q6_K)
    print(f"wrote {out}: {arch}, {n_layer} layers, {n_params / 1e9:.2f}B parameters, {'tied' if tied else 'untied'} output, "
          f"{cfg.get('type') or 'Q4_K_M'} mix ({n_q6} Q6_K tensors), {os.path.getsize(out) / 2**20:.0f} MiB")


def write_gpt_oss(out: str, n_layer: int, seed: int) -> None:
    """A model with gpt-oss-20b's shapes and tensors (MXFP4 experts, Q8_0 elsewhere)."""
    import tiny_models as tm
    from gguf import GGUFValueType as VT

    e, n_head, n_kv, hd, n_exp, n_used, ff, nv = 2880, 64, 8, 64, 32, 4, 2880, 201088
    a = "gpt-oss"
    kvs = [
        tm.KV("general.architecture", VT.STRING, a),
        tm.KV("general.name", VT.STRING, f"bench-gpt-oss-20b-{n_layer}-layers"),
        tm.KV("general.file_type", VT.UINT32, 38),  # LLAMA_FTYPE_MOSTLY_MXFP4_MOE
        tm.KV(f"{a}.context_length", VT.UINT32, 131072),
        tm.KV(f"{a}.embedding_length", VT.UINT32, e),
        tm.KV(f"{a}.block_count", VT.UINT32, n_layer),
        tm.KV(f"{a}.feed_forward_length", VT.UINT32, ff),
        tm.KV(f"{a}.attention.head_count", VT.UINT32, n_head),
        tm.KV(f"{a}.attention.head_count_kv", VT.UINT32, n_kv),
        tm.KV(f"{a}.attention.key_length", VT.UINT32, hd),
        tm.KV(f"{a}.attention.value_length", VT.UINT32, hd),
        tm.KV(f"{a}.rope.dimension_count", VT.UINT32, hd),
        tm.KV(f"{a}.attention.layer_norm_rms_epsilon", VT.FLOAT32, 1e-5),
        tm.KV(f"{a}.attention.sliding_window", VT.UINT32, 128),
        tm.KV(f"{a}.rope.freq_base", VT.FLOAT32, 150000.0),
        tm.KV(f"{a}.rope.scaling.type", VT.STRING, "yarn"),
        tm.KV(f"{a}.rope.scaling.factor", VT.FLOAT32, 32.0),
        tm.KV(f"{a}.rope.scaling.original_context_length", VT.UINT32, 4096),
        tm.KV(f"{a}.expert_count", VT.UINT32, n_exp),
        tm.KV(f"{a}.expert_used_count", VT.UINT32, n_used),
        tm.KV(f"{a}.expert_feed_forward_length", VT.UINT32, ff),
    ] + padded_vocab_kvs(nv)
    Q8, MX, F32 = 8, 39, 0
    specs = [("token_embd.weight", Q8, [e, nv], "weight"), ("output_norm.weight", F32, [e], "norm"), ("output.weight", Q8, [e, nv], "weight")]
    for il in range(n_layer):
        b = f"blk.{il}."
        specs += [
            (b + "attn_norm.weight", F32, [e], "norm"),
            (b + "attn_q.weight", Q8, [e, n_head * hd], "weight"), (b + "attn_q.bias", F32, [n_head * hd], "weight"),
            (b + "attn_k.weight", Q8, [e, n_kv * hd], "weight"), (b + "attn_k.bias", F32, [n_kv * hd], "weight"),
            (b + "attn_v.weight", Q8, [e, n_kv * hd], "weight"), (b + "attn_v.bias", F32, [n_kv * hd], "weight"),
            (b + "attn_output.weight", Q8, [n_head * hd, e], "weight"), (b + "attn_output.bias", F32, [e], "weight"),
            (b + "attn_sinks.weight", F32, [n_head], "weight"),
            (b + "post_attention_norm.weight", F32, [e], "norm"),
            (b + "ffn_gate_inp.weight", F32, [e, n_exp], "weight"), (b + "ffn_gate_inp.bias", F32, [n_exp], "weight"),
            (b + "ffn_gate_exps.weight", MX, [e, ff, n_exp], "weight"), (b + "ffn_gate_exps.bias", F32, [ff, n_exp], "weight"),
            (b + "ffn_up_exps.weight", MX, [e, ff, n_exp], "weight"), (b + "ffn_up_exps.bias", F32, [ff, n_exp], "weight"),
            (b + "ffn_down_exps.weight", MX, [ff, e, n_exp], "weight"), (b + "ffn_down_exps.bias", F32, [e, n_exp], "weight"),
        ]
    write_streaming(out, kvs, specs, np.random.default_rng(seed))
    n_params = sum(int(np.prod(d)) for _, _, d, _ in specs)
    print(f"wrote {out}: gpt-oss, {n_layer} layers, {n_params / 1e9:.2f}B parameters, MXFP4 experts, {os.path.getsize(out) / 2**20:.0f} MiB")


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


def write_first_layers(model: str, out: str, n_layer: int) -> None:
    """`model` cut to its first `n_layer` layers: every metadata key copied (`block_count`
    set to `n_layer`), the tensors of later layers left out."""
    import gguf

    r = gguf.GGUFReader(model)
    f = r.fields["general.architecture"]
    arch = bytes(f.parts[f.data[0]]).decode()
    count_key = f"{arch}.block_count"
    have = int(r.fields[count_key].contents())
    if not 0 < n_layer <= have:
        raise SystemExit(f"--layers {n_layer}: {model} has {have} layers")
    w = gguf.GGUFWriter(out, arch)
    for name, field in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        value = n_layer if name == count_key else field.contents()
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, value, vtype, sub_type=sub)
    kept = [t for t in r.tensors if not (t.name.startswith("blk.") and int(t.name.split(".")[1]) >= n_layer)]
    for t in kept:
        w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)  # quantized: the (rows, bytes) shape
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file(progress=False)
    w.close()
    print(f"wrote {out}: the first {n_layer} of {have} layers of {model} ({len(kept)} tensors)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("llama", help="a llama / qwen2 model with llama.cpp's Q4_K_M type mix")
    a.add_argument("out")
    a.add_argument("--preset", choices=sorted(PRESETS), help="a real model's shape (flags below override it)")
    a.add_argument("--arch", choices=("llama", "qwen2", "qwen3moe"), help="qwen2: q/k/v biases (default llama)")
    a.add_argument("--layers", type=int, help="default 22 (TinyLlama) or the preset's")
    a.add_argument("--embd", type=int, help="default 2048")
    a.add_argument("--ff", type=int, help="default 5632")
    a.add_argument("--heads", type=int, help="default 32")
    a.add_argument("--kv-heads", type=int, help="default 4")
    a.add_argument("--vocab", type=int, help="default 32000")
    a.add_argument("--tied", action=argparse.BooleanOptionalAction, default=None,
                   help="no output.weight: the output reuses token_embd.weight (then Q6_K)")
    a.add_argument("--type", choices=sorted(TYPE_IDS), help="every layer matrix of this type instead of the Q4_K_M mix "
                   "(token_embd and output keep theirs)")
    a.add_argument("--seed", type=int, default=0)
    go = sub.add_parser("gpt-oss", help="gpt-oss-20b's shapes: MXFP4 experts, Q8_0 elsewhere")
    go.add_argument("out")
    go.add_argument("--layers", type=int, default=24)
    go.add_argument("--seed", type=int, default=0)
    h = sub.add_parser("header")
    h.add_argument("model")
    h.add_argument("out")
    lk = sub.add_parser("like")
    lk.add_argument("header")
    lk.add_argument("out")
    lk.add_argument("--seed", type=int, default=0)
    fl = sub.add_parser("first-layers", help="a real model's first N layers (a draft model)")
    fl.add_argument("model")
    fl.add_argument("out")
    fl.add_argument("--layers", type=int, required=True)
    args = ap.parse_args()
    if args.cmd == "llama":
        cfg = dict(DEFAULTS, **(PRESETS[args.preset] if args.preset else {}))
        if args.preset:
            cfg["name"] = f"bench-{args.preset}"
        if args.arch == "qwen2" and not args.preset:
            cfg.update(rope_base=1000000.0, eps=1e-6, ctx=32768)
        for k in ("arch", "layers", "embd", "ff", "heads", "kv_heads", "vocab", "tied", "type"):
            if getattr(args, k) is not None:
                cfg[k] = getattr(args, k)
        if args.layers is not None and args.preset:
            cfg["name"] += f"-{args.layers}-layers"
        write_llama(args.out, cfg, args.seed)
    elif args.cmd == "gpt-oss":
        write_gpt_oss(args.out, args.layers, args.seed)
    elif args.cmd == "header":
        write_header(args.model, args.out)
    elif args.cmd == "first-layers":
        write_first_layers(args.model, args.out, args.layers)
    else:
        write_like(args.header, args.out, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
