"""Record llama.cpp's tokens for deterministic sampler settings on the real model, as
fixtures for tests/test_sampler_parity.py. Needs llama-cpp-python (not a dependency of
llamars; `pip install llama-cpp-python==0.3.36` builds it from source in ~8 minutes; on CPUs with AMX build it with
CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON" or it may stop with
an illegal instruction):

    python scripts/make_sampler_fixtures.py MODEL.gguf tests/fixtures/llama_cpp_samplers.json

Each case builds llama.cpp's own sampler chain (logit bias → penalties → DRY → top-k →
greedy, or temperature + dist) through the C API, feeds it the prompt tokens as
llama-server does (so penalties and DRY see the prompt), then decodes token by token."""
from __future__ import annotations

import ctypes
import json
import sys

import llama_cpp as L
import numpy as np
from llama_cpp import Llama

# prompts whose plain greedy continuation llamars already reproduces token for token
# (../shared/reference), plus two with repetition for the penalties and DRY to act on
PROMPTS = [
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "Here is a list of the planets in our solar system:",
    "In 1969, Neil Armstrong",
    '{"name": "Alice", "age": 30, "city":',
    "one two three one two three one two three one two",
    "The cat sat on the mat. The cat sat on the mat. The cat sat on the",
]
N_GEN = 24
TOP_N = 24

CASES = {
    "top_k_1": {"temperature": 0.8, "top_k": 1, "seed": 1234},
    "repeat_penalty": {"temperature": 0.0, "repeat_penalty": 1.5, "repeat_last_n": 64},
    "presence_frequency": {"temperature": 0.0, "presence_penalty": 0.8, "frequency_penalty": 0.5, "repeat_last_n": 64},
    "all_penalties_window_16": {"temperature": 0.0, "repeat_penalty": 1.3, "presence_penalty": 0.3, "frequency_penalty": 0.3, "repeat_last_n": 16},
    "logit_bias": {"temperature": 0.0, "logit_bias": "BAN_FIRST"},
    "dry": {"temperature": 0.0, "dry_multiplier": 1.0, "dry_base": 1.75, "dry_allowed_length": 2, "dry_penalty_last_n": 256,
            "dry_sequence_breakers": ["\n", ":", "\"", "*"]},
    "dry_and_penalty": {"temperature": 0.0, "dry_multiplier": 0.8, "dry_base": 2.0, "dry_allowed_length": 3, "dry_penalty_last_n": 64,
                        "dry_sequence_breakers": ["\n"], "repeat_penalty": 1.2, "repeat_last_n": 32},
}


def build_chain(llm: Llama, case: dict, bias: list) -> L.llama_sampler_p:
    n_vocab = llm.n_vocab()
    vocab = L.llama_model_get_vocab(llm._model.model)
    chain = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    if bias:
        arr = (L.llama_logit_bias * len(bias))(*[L.llama_logit_bias(t, b) for t, b in bias])
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_logit_bias(n_vocab, len(bias), arr))
    if any(k in case for k in ("repeat_penalty", "presence_penalty", "frequency_penalty")):
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_penalties(
            n_vocab, case.get("repeat_last_n", 64), case.get("repeat_penalty", 1.0), case.get("frequency_penalty", 0.0), case.get("presence_penalty", 0.0)))
    if case.get("dry_multiplier"):
        br = [b.encode() for b in case["dry_sequence_breakers"]]
        arr = (ctypes.c_char_p * len(br))(*br)
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_dry(
            vocab, case["dry_multiplier"], case["dry_base"], case["dry_allowed_length"], case["dry_penalty_last_n"], arr, len(br)))
    if case.get("top_k"):
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_top_k(case["top_k"]))
    if case["temperature"] <= 0:
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_greedy())
    else:
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_temp(case["temperature"]))
        L.llama_sampler_chain_add(chain, L.llama_sampler_init_dist(case["seed"]))
    return chain


def run(llm: Llama, toks: list, case: dict, bias: list) -> list:
    chain = build_chain(llm, case, bias)
    try:
        for t in toks:
            L.llama_sampler_accept(chain, t)
        llm.reset()
        llm.eval(toks)
        out, steps = [], []
        n_vocab = llm.n_vocab()
        for _ in range(N_GEN):
            # the raw logits llama.cpp's chain sees at this step: the best TOP_N, plus
            # every biased token (the chain only lowers the others)
            raw = np.ctypeslib.as_array(L.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,)).copy()
            keep = sorted(set(np.argsort(-raw)[:TOP_N].tolist()) | {t for t, _ in bias})
            t = L.llama_sampler_sample(chain, llm._ctx.ctx, -1)  # also accepts t
            keep = sorted(set(keep) | {int(t)})  # a heavily penalized top may push the pick lower
            steps.append([[int(i), float(str(np.float32(raw[i])))] for i in keep])  # shortest text that is the same float32
            if L.llama_vocab_is_eog(L.llama_model_get_vocab(llm._model.model), t):
                break
            out.append(int(t))
            llm.eval([t])
        return out, steps[: len(out)]
    finally:
        L.llama_sampler_free(chain)


def main() -> None:
    model, out_path = sys.argv[1], sys.argv[2]
    llm = Llama(model_path=model, n_ctx=2048, n_threads=2, n_batch=512, verbose=False)
    cases = []
    for p in PROMPTS:
        toks = llm.tokenize(p.encode(), add_bos=True, special=True)
        greedy = run(llm, toks, {"temperature": 0.0}, [])[0]
        for name, case in CASES.items():
            bias = []
            case = dict(case)
            if case.get("logit_bias") == "BAN_FIRST":
                # never the plain greedy first token; favour the third token of the plain run
                bias = [(greedy[0], float("-inf")), (greedy[2], 3.0)]
                case["logit_bias"] = [[t, b if b != float("-inf") else False] for t, b in bias]
            tokens, steps = run(llm, toks, case, bias)
            cases.append({"prompt": p, "prompt_tokens": toks, "case": name, "params": case, "tokens": tokens, "step_logits": steps})
            print(f"{name:<24} {p[:30]!r:<34} {len(cases[-1]['tokens'])} tokens", flush=True)
    meta = {"model": model.split("/")[-1], "llama_cpp_python": L.__version__, "n_gen": N_GEN}
    json.dump({"meta": meta, "cases": cases}, open(out_path, "w"), ensure_ascii=False, separators=(",", ":"))
    print("wrote", out_path, len(cases), "cases")


if __name__ == "__main__":
    main()
