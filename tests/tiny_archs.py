"""Tiny GGUF models of the architectures past the first five (tests/tiny_models.py has
those): mixture-of-experts decoders (qwen3moe, qwen2moe with its gated shared expert,
Mixtral as `llama` with experts, olmoe, granitemoe with a shared expert), Granite's dense
model with its multipliers, Gemma 2 (soft-capping, alternating local layers), OLMo 2 / 3,
EXAONE 4 (and its 64-layer sliding-window form), SmolLM3, GLM-4, Qwen 3 with YaRN RoPE, Ministral 3, Command R7B, and gpt-oss (sinks, biased experts with
the clamped SwiGLU, MXFP4 among the types). Random weights of any tensor type, tensor names and
metadata keys as llama.cpp reads them, the same small SentencePiece vocabulary.

Expert tensors are 3-D, ggml dims [n_in, n_out, n_expert]: each expert's matrix is
generated like any 2-D weight and the experts are stacked.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np
from gguf import GGUFValueType as VT

import tiny_models as tm
from tiny_models import KV, Tensor

# router weights: logits of std ~2 over normalised inputs, so the top k are distinct but
# more than one expert carries weight
STD_ROUTER = 0.12


@dataclass(frozen=True)
class ArchSpec:
    arch: str  # general.architecture
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_embd: int = 256
    n_ff: int = 512
    rope_base: float = 10000.0
    eps: float = 1e-5
    ctx: int = 128
    n_expert: int = 0
    n_used: int = 0
    #: expert hidden size written as expert_feed_forward_length (0: the arch uses n_ff)
    n_ff_exp: int = 0
    n_ff_shexp: int = 0
    qkv_bias: bool = False
    #: "head": per-head q/k RMS norms; "full": over the whole projection (OLMoE)
    qk_norm: str = ""
    granite: bool = False
    #: RMS norms before each block (attn_norm, ffn_norm) / on each block's output
    pre_norm: bool = True
    post_norm: bool = False
    #: one [gate; up] matrix (GLM-4)
    fused_up: bool = False
    #: rope.dimension_count (0: the head size)
    n_rot: int = 0
    #: no output.weight: the output reuses token_embd.weight
    tied: bool = False
    window: int = 0
    #: more metadata (key without the architecture prefix -> str, int (UINT32) or float)
    extra: tuple = ()
    #: gpt-oss: attention sinks, an output-projection bias, biased router and experts, and
    #: the FFN's input norm named post_attention_norm
    gpt_oss: bool = False
    #: Cohere 2: one LayerNorm (weight only, attention.layer_norm_epsilon) before attention
    #: and FFN in parallel, no ffn_norm
    parallel: bool = False


SPECS: Dict[str, ArchSpec] = {
    # 8 experts, 4 per token: with a 12-token prompt some experts get 8 or more rows (the
    # tiled kernel's threshold in llama.cpp's mul_mat_id)
    "qwen3moe": ArchSpec("qwen3moe", n_expert=8, n_used=4, n_ff_exp=256, qk_norm="head", rope_base=1e6, eps=1e-6),
    "qwen2moe": ArchSpec("qwen2moe", n_expert=8, n_used=2, n_ff_exp=256, n_ff_shexp=512, qkv_bias=True, rope_base=1e6, eps=1e-6),
    # Mixtral: llama with experts (expert hidden size = feed_forward_length)
    "mixtral": ArchSpec("llama", n_expert=8, n_used=2, n_ff=256),
    "olmoe": ArchSpec("olmoe", n_head_kv=4, n_expert=8, n_used=2, n_ff=256, qk_norm="full"),
    "granite": ArchSpec("granite", granite=True),
    "granitemoe": ArchSpec("granitemoe", n_expert=8, n_used=2, n_ff=256, n_ff_shexp=256, granite=True),
    # every other layer local (window 4), caps small enough that tanh bends the scores
    "gemma2": ArchSpec("gemma2", n_layer=4, post_norm=True, tied=True, window=4, rope_base=1e6, eps=1e-6,
                       extra=(("attn_logit_softcapping", 5.0), ("final_logit_softcapping", 3.0))),
    # norms on each block's output only, q/k norms over the whole projection; olmo3 adds a
    # window (every 4th layer global)
    "olmo2": ArchSpec("olmo2", n_head_kv=4, pre_norm=False, post_norm=True, qk_norm="full"),
    "olmo3": ArchSpec("olmo2", n_layer=4, n_head_kv=4, pre_norm=False, post_norm=True, qk_norm="full", window=4, rope_base=5e5),
    "exaone4": ArchSpec("exaone4", pre_norm=False, post_norm=True, qk_norm="head", rope_base=1e6),
    # EXAONE 4 32B's layout, which llama.cpp keys on its 64 layers: every 4th layer global
    # (window 4 here), RoPE on the local layers only (a smaller FFN keeps the file small)
    "exaone4-swa": ArchSpec("exaone4", n_layer=64, n_ff=256, pre_norm=False, post_norm=True, qk_norm="head", rope_base=1e6, window=4),
    # 4 layers: the last one without RoPE
    "smollm3": ArchSpec("smollm3", n_layer=4, tied=True, rope_base=5e6),
    # pre and post norms, fused gate-up, half the head rotated, q/k/v biases
    "glm4": ArchSpec("glm4", post_norm=True, fused_up=True, n_rot=32, qkv_bias=True),
    # YaRN RoPE (factor 4 over an original context of 32): the blend of interpolated and
    # extrapolated angles and the magnitude factor
    "qwen3-yarn": ArchSpec("qwen3", qk_norm="head", rope_base=1e6, eps=1e-6,
                           extra=(("rope.scaling.type", "yarn"), ("rope.scaling.factor", 4.0), ("rope.scaling.original_context_length", 32))),
    # Ministral 3: YaRN with its own betas and log multiplier, and the attention temperature
    # stepping every 8 positions (the original context)
    "mistral3": ArchSpec("mistral3", rope_base=1e6, extra=(("rope.scaling.type", "yarn"), ("rope.scaling.factor", 4.0),
                                                           ("rope.scaling.original_context_length", 8), ("rope.scaling.yarn_beta_fast", 16.0),
                                                           ("rope.scaling.yarn_log_multiplier", 1.0), ("attention.temperature_scale", 0.5))),
    # Command R7B: parallel blocks, 3 of 4 layers local (window 4) and rotated, logit scale
    "cohere2": ArchSpec("cohere2", n_layer=4, tied=True, window=4, parallel=True, extra=(("logit_scale", 0.5), ("attention.layer_norm_epsilon", 1e-5))),
    # gpt-oss: every other layer local (window 4), sinks, YaRN as the real model has it
    "gpt-oss": ArchSpec("gpt-oss", n_layer=4, n_expert=8, n_used=4, n_ff_exp=256, qkv_bias=True, window=4, rope_base=150000.0,
                        gpt_oss=True, extra=(("rope.scaling.type", "yarn"), ("rope.scaling.factor", 32.0),
                                             ("rope.scaling.original_context_length", 4096))),
}
ARCHS = list(SPECS)

# Granite's multipliers (granite-3.x values, the attention scale a power of two)
GRANITE = {"embedding_scale": 12.0, "residual_scale": 0.22, "logit_scale": 8.0, "attention.scale": 0.015625}


#: harmony's markup as control tokens, appended to the tiny vocabulary of the gpt-oss model
#: (8 of them: 408 tokens, a multiple of 8 rows as real vocabularies are)
HARMONY_TOKENS = ["<|startoftext|>", "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|constrain|>", "<|return|>", "<|call|>"]


def vocab(key: str):
    """(tokens, scores, token types, special ids) of the `key` model."""
    tokens, scores, types, ids = tm.spm_vocab()
    if SPECS[key].gpt_oss:
        tokens, scores, types = tokens + HARMONY_TOKENS, scores + [0.0] * len(HARMONY_TOKENS), types + [3] * len(HARMONY_TOKENS)
    return tokens, scores, types, ids


def model_kvs(key: str) -> List[KV]:
    s = SPECS[key]
    a = s.arch
    tokens, scores, types, ids = vocab(key)
    kvs = tm.hparam_kvs(a, f"tiny-{key}", s) + [KV(f"{a}.rope.dimension_count", VT.UINT32, s.n_rot or s.head_dim)]
    if s.head_dim * s.n_head != s.n_embd:
        kvs += [KV(f"{a}.attention.key_length", VT.UINT32, s.head_dim), KV(f"{a}.attention.value_length", VT.UINT32, s.head_dim)]
    if s.window:
        kvs.append(KV(f"{a}.attention.sliding_window", VT.UINT32, s.window))
    kvs += [KV(f"{a}.{k}", VT.STRING if isinstance(v, str) else VT.UINT32 if isinstance(v, int) else VT.FLOAT32, v) for k, v in s.extra]
    if s.n_expert:
        kvs += [KV(f"{a}.expert_count", VT.UINT32, s.n_expert), KV(f"{a}.expert_used_count", VT.UINT32, s.n_used)]
    if s.n_ff_exp:
        kvs.append(KV(f"{a}.expert_feed_forward_length", VT.UINT32, s.n_ff_exp))
    if s.n_ff_shexp:
        kvs.append(KV(f"{a}.expert_shared_feed_forward_length", VT.UINT32, s.n_ff_shexp))
    if s.granite:
        kvs += [KV(f"{a}.{k}", VT.FLOAT32, v) for k, v in GRANITE.items()]
    return kvs + tm.spm_kvs(tokens, scores, types, ids)


def make_experts(name: str, wtype: str, n_in: int, n_out: int, n: int, std: float, rng) -> Tensor:
    """`n` random [n_out x n_in] matrices of `wtype` stacked: ggml dims [n_in, n_out, n]."""
    parts = [tm.make_weight(name, wtype, n_in, n_out, std, rng) for _ in range(n)]
    return Tensor(name, parts[0].ggml_type, [n_in, n_out, n], b"".join(p.data for p in parts))


def bias2(name: str, n: int, n_expert: int, rng) -> Tensor:
    """Per-expert biases: F32, ggml dims [n, n_expert]."""
    v = (0.3 * rng.standard_normal((n_expert, n))).astype(np.float32)
    return Tensor(name, 0, [n, n_expert], v.tobytes())


def model_tensors(key: str, wtype: str, seed: int = 0) -> List[Tensor]:
    s = SPECS[key]
    rng = np.random.default_rng(seed)
    e, H, Hk, D, F = s.n_embd, s.n_head, s.n_head_kv, s.head_dim, s.n_ff
    nv = len(vocab(key)[0])

    def norm(name, n, mean=1.0, sd=0.1):
        return tm.make_vector(name, mean + sd * rng.standard_normal(n))

    W = tm.make_weight
    ts = [W("token_embd.weight", wtype, e, nv, tm.STD_OTHER, rng), norm("output_norm.weight", e)]
    if not s.tied:
        ts.append(W("output.weight", wtype, e, nv, tm.STD_OTHER, rng))
    fe = s.n_ff_exp or F
    for il in range(s.n_layer):
        p = f"blk.{il}."
        if s.pre_norm:
            ts.append(norm(p + "attn_norm.weight", e))
        ts += [W(p + "attn_q.weight", wtype, e, H * D, tm.STD_QK, rng), W(p + "attn_k.weight", wtype, e, Hk * D, tm.STD_QK, rng),
               W(p + "attn_v.weight", wtype, e, Hk * D, tm.STD_OTHER, rng)]
        if s.qkv_bias:
            ts += [tm.make_vector(p + f"attn_{x}.bias", tm.STD_BIAS * rng.standard_normal(n)) for x, n in (("q", H * D), ("k", Hk * D), ("v", Hk * D))]
        if s.qk_norm:
            qn, kn = (D, D) if s.qk_norm == "head" else (H * D, Hk * D)
            ts += [norm(p + "attn_q_norm.weight", qn, mean=1.5, sd=0.3), norm(p + "attn_k_norm.weight", kn, mean=1.5, sd=0.3)]
        ts.append(W(p + "attn_output.weight", wtype, H * D, e, tm.STD_OTHER, rng))
        if s.gpt_oss:
            ts += [tm.make_vector(p + "attn_output.bias", 0.1 * rng.standard_normal(e)),
                   tm.make_vector(p + "attn_sinks.weight", rng.standard_normal(H)),
                   norm(p + "post_attention_norm.weight", e)]
        if s.post_norm:
            ts.append(norm(p + "post_attention_norm.weight", e))
        if s.pre_norm and not s.gpt_oss and not s.parallel:
            ts.append(norm(p + "ffn_norm.weight", e))
        if not s.n_expert:
            if s.fused_up:
                ts.append(W(p + "ffn_up.weight", wtype, e, 2 * F, tm.STD_OTHER, rng))  # [gate; up]
            else:
                ts += [W(p + "ffn_gate.weight", wtype, e, F, tm.STD_OTHER, rng), W(p + "ffn_up.weight", wtype, e, F, tm.STD_OTHER, rng)]
            ts.append(W(p + "ffn_down.weight", wtype, F, e, tm.STD_OTHER, rng))
            if s.post_norm:
                ts.append(norm(p + "post_ffw_norm.weight", e))
            continue
        # the router stays F32, as llama.cpp's quantizer leaves ffn_gate_inp
        ts.append(W(p + "ffn_gate_inp.weight", "F32", e, s.n_expert, STD_ROUTER, rng))
        ts.append(make_experts(p + "ffn_gate_exps.weight", wtype, e, fe, s.n_expert, tm.STD_OTHER * 2, rng))
        ts.append(make_experts(p + "ffn_up_exps.weight", wtype, e, fe, s.n_expert, tm.STD_OTHER * 2, rng))
        ts.append(make_experts(p + "ffn_down_exps.weight", wtype, fe, e, s.n_expert, tm.STD_OTHER * 2, rng))
        if s.gpt_oss:
            ts += [tm.make_vector(p + "ffn_gate_inp.bias", 0.5 * rng.standard_normal(s.n_expert)),
                   bias2(p + "ffn_gate_exps.bias", fe, s.n_expert, rng), bias2(p + "ffn_up_exps.bias", fe, s.n_expert, rng),
                   bias2(p + "ffn_down_exps.bias", e, s.n_expert, rng)]
        if s.n_ff_shexp:
            fs = s.n_ff_shexp
            ts += [W(p + "ffn_gate_shexp.weight", wtype, e, fs, tm.STD_OTHER, rng), W(p + "ffn_up_shexp.weight", wtype, e, fs, tm.STD_OTHER, rng),
                   W(p + "ffn_down_shexp.weight", wtype, fs, e, tm.STD_OTHER, rng)]
            if s.arch == "qwen2moe":
                ts.append(tm.make_vector(p + "ffn_gate_inp_shexp.weight", STD_ROUTER * rng.standard_normal(e)))
    return ts


def write_model(path, key: str, wtype: str = "F32", seed: int = 0) -> tm.Layout:
    """Write the tiny `key` model (a key of SPECS) with `wtype` weights to `path`."""
    return tm.write_gguf(path, model_kvs(key), model_tensors(key, wtype, seed))
