"""A model larger than the machine's memory opens: the weights stay in the memory map
(no copy at load), `inspect` reports its parameters, experts and the bytes a token reads,
and a token's forward pass touches only what it reads. The file is sparse (its tensor data
are holes that read as zeros), so it costs no disk."""
from __future__ import annotations

import os
import struct
import time

import numpy as np
import pytest

import tiny_models as tm
from llamars import Engine, _core


def _mem_total() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    return 0


def _rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def write_sparse_moe(path, n_layer: int) -> int:
    """A qwen3moe with Qwen3-30B-A3B's layer shapes (F16, 128 experts of ff 768, 8 per token)
    and the tiny vocabulary: the header written, the data a hole. Returns the file size."""
    e, H, Hk, D, ne, nu, fe = 2048, 32, 4, 128, 128, 8, 768
    tokens, scores, types, ids = tm.spm_vocab()
    nv = len(tokens)
    a = "qwen3moe"
    kvs = [
        tm.KV("general.architecture", tm.VT.STRING, a),
        tm.KV(f"{a}.context_length", tm.VT.UINT32, 4096),
        tm.KV(f"{a}.embedding_length", tm.VT.UINT32, e),
        tm.KV(f"{a}.block_count", tm.VT.UINT32, n_layer),
        tm.KV(f"{a}.feed_forward_length", tm.VT.UINT32, 6144),
        tm.KV(f"{a}.attention.head_count", tm.VT.UINT32, H),
        tm.KV(f"{a}.attention.head_count_kv", tm.VT.UINT32, Hk),
        tm.KV(f"{a}.attention.key_length", tm.VT.UINT32, D),
        tm.KV(f"{a}.attention.value_length", tm.VT.UINT32, D),
        tm.KV(f"{a}.attention.layer_norm_rms_epsilon", tm.VT.FLOAT32, 1e-6),
        tm.KV(f"{a}.expert_count", tm.VT.UINT32, ne),
        tm.KV(f"{a}.expert_used_count", tm.VT.UINT32, nu),
        tm.KV(f"{a}.expert_feed_forward_length", tm.VT.UINT32, fe),
        tm.KV("tokenizer.ggml.model", tm.VT.STRING, "llama"),
        tm.KV("tokenizer.ggml.tokens", tm.VT.ARRAY, tm.Arr(tm.VT.STRING, tokens)),
        tm.KV("tokenizer.ggml.scores", tm.VT.ARRAY, tm.Arr(tm.VT.FLOAT32, scores)),
        tm.KV("tokenizer.ggml.token_type", tm.VT.ARRAY, tm.Arr(tm.VT.INT32, types)),
        tm.KV("tokenizer.ggml.bos_token_id", tm.VT.UINT32, ids["bos"]),
        tm.KV("tokenizer.ggml.eos_token_id", tm.VT.UINT32, ids["eos"]),
    ]
    F32, F16 = 0, 1
    specs = [("token_embd.weight", F16, [e, nv]), ("output_norm.weight", F32, [e]), ("output.weight", F16, [e, nv])]
    for il in range(n_layer):
        p = f"blk.{il}."
        specs += [(p + "attn_norm.weight", F32, [e]), (p + "attn_q.weight", F16, [e, H * D]), (p + "attn_k.weight", F16, [e, Hk * D]),
                  (p + "attn_v.weight", F16, [e, Hk * D]), (p + "attn_q_norm.weight", F32, [D]), (p + "attn_k_norm.weight", F32, [D]),
                  (p + "attn_output.weight", F16, [H * D, e]), (p + "ffn_norm.weight", F32, [e]), (p + "ffn_gate_inp.weight", F32, [e, ne]),
                  (p + "ffn_gate_exps.weight", F16, [e, fe, ne]), (p + "ffn_up_exps.weight", F16, [e, fe, ne]), (p + "ffn_down_exps.weight", F16, [fe, e, ne])]
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(specs), len(kvs)))
    for kv in kvs:
        head += tm.encode_string(kv.key) + struct.pack("<I", int(kv.vtype)) + tm.encode_value(kv.vtype, kv.value)
    rel = 0
    for name, ty, dims in specs:
        head += tm.encode_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ty, rel)
        rel = (rel + int(np.prod(dims)) * (4 if ty == F32 else 2) + 31) // 32 * 32
    data_at = (len(head) + 31) // 32 * 32
    with open(path, "wb") as f:
        f.write(bytes(head) + b"\0" * (data_at - len(head)))
        f.truncate(data_at + rel)
    return data_at + rel


def test_a_model_larger_than_memory_opens_and_runs(tmp_path):
    total = _mem_total()
    if not total:
        pytest.skip("no /proc/meminfo: the machine's memory is unknown")
    per_layer = 3 * 2048 * 768 * 128 * 2 + 2 * 2048 * 4096 * 2 + 2 * 2048 * 512 * 2
    n_layer = int(1.25 * total) // per_layer + 1
    p = tmp_path / "bigger-than-ram.gguf"
    size = write_sparse_moe(p, n_layer)
    assert size > total, (size, total)
    if os.stat(p).st_blocks * 512 > 64 << 20:
        pytest.skip(f"{tmp_path}'s filesystem does not keep holes ({os.stat(p).st_blocks * 512} bytes allocated)")
    info = _core.inspect(str(p))["model"]
    assert info["n_expert"] == 128 and info["n_expert_used"] == 8
    assert info["bytes_per_token"] < size // 10  # 8 of 128 experts
    before = _rss()
    t0 = time.monotonic()
    e = Engine(str(p), n_ctx=256, n_threads=2)
    loaded = time.monotonic() - t0
    grown = _rss() - before
    # nothing copied: well under 1% of the file resident after loading
    assert grown < size // 100, f"loading grew the resident set by {grown >> 20} MiB of a {size >> 30} GiB file"
    assert loaded < 60, loaded
    # one token reads the attention and 8 of 128 experts per layer (the data are zeros)
    row = np.asarray(e.logits([1])[-1])
    assert row.shape == (len(tm.spm_vocab()[0]),) and np.all(np.isfinite(row))
    e.close()
