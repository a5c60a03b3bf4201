"""The default chat model (SmolLM2-135M-Instruct Q4_1) against llama.cpp on the same file.

- llama-cpp-python 0.3.36 (tests/fixtures/chat_model/, written by
  ../shared/reference/make_reference.py on six chat prompts, the Gemma reference's tool):
  tokenization exact three ways, greedy replies identical, and under teacher forcing every
  argmax equal and the top log-probabilities equal to the reference's 5 decimals.
- llama-server (tests/fixtures/llama_server/chat-model-greedy.json, capture_chat_model.py,
  `-fa off`): the chat template renders the same prompt, it tokenizes to the same ids, and
  the greedy replies are the same tokens and text (llama-server lists the final EOS).

Measured 2026-12-02 (after SwiGLU follows ggml's `ggml_v_silu`): mean |Δ log-prob| 2e-6,
max 5e-6, argmax 208/208, greedy 6/6, under LLAMARS_ISA=avx512 and scalar."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from llamars import Engine
from llamars.chat.plan import plan_chat
from llamars.models import chat_model

FIXTURE = Path(__file__).parent / "fixtures" / "llama_server" / "chat-model-greedy.json"
CASES = json.loads(FIXTURE.read_text())["cases"]
REFERENCE = json.loads((Path(__file__).parent / "fixtures" / "chat_model" / "smollm2-135m-instruct-q4_1.llama-cpp.json").read_text())


@pytest.fixture(scope="module")
def eng():
    e = Engine(str(chat_model()), n_ctx=2048)
    yield e
    e.close()


@pytest.mark.parametrize("case", CASES, ids=[c["messages"][0]["content"][:24] for c in CASES])
def test_prompt_tokens_and_greedy_reply_match_llama_server(eng, case):
    prompt = plan_chat(eng.chat_template, case["messages"]).prompt
    assert prompt == case["prompt"]
    assert eng.tokenize(prompt, add_special=True, parse_special=True) == case["prompt_tokens"]
    r = eng.generate(case["prompt_tokens"], max_tokens=case_n(case), temperature=0.0, cache_prompt=False)
    assert r.text == case["content"]
    want = case["tokens"][:-1] if case["stop_type"] == "eos" else case["tokens"]
    assert r.tokens == want


def case_n(case) -> int:
    return len(case["tokens"])


def test_the_first_reply_of_the_readme_is_what_the_model_says(eng):
    """README.md's "Get started" shows this reply; llama-server gives the same text."""
    r = eng.chat([{"role": "user", "content": "Write a short list of three fruits"}], max_tokens=128, temperature=0.0)
    assert r.finish_reason == "stop"
    assert r.content.startswith("1. Bananas\n2. Apples\n3. Oranges\n\n")
    assert CASES[0]["content"].startswith("1. Bananas\n2. Apples\n3. Oranges\n\n")
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "\n".join("    " + ln if ln else "" for ln in r.content.split("\n")) in readme


def test_tokenization_matches_llama_cpp(eng):
    for t in REFERENCE["tokenize"]:
        assert eng.tokenize(t["text"], add_special=True, parse_special=True) == t["add_bos_parse_special"], t["text"]
        assert eng.tokenize(t["text"], add_special=False, parse_special=False) == t["no_bos_no_special"], t["text"]
        assert eng.tokenize(t["text"], add_special=False, parse_special=True) == t["no_bos_parse_special"], t["text"]


def test_teacher_forced_logprobs_close_to_llama_cpp(eng):
    deltas, agree, total = [], 0, 0
    for g in REFERENCE["greedy"]:
        n = len(g["prompt_tokens"])
        x = eng.logits(g["prompt_tokens"] + g["generated_tokens"])[n - 1 :].astype(np.float64)
        m = x.max(axis=1, keepdims=True)
        lp = x - m - np.log(np.exp(x - m).sum(axis=1, keepdims=True))
        for k, st in enumerate(g["steps"]):
            top = st["top_ids"][0]
            deltas.append(abs(lp[k, top] - st["top_logprobs"][0]))
            agree += int(lp[k].argmax() == top)
            total += 1
    print(f"\nSmolLM2 vs llama.cpp, teacher forced: mean |d logprob| {np.mean(deltas):.4f}, max {np.max(deltas):.4f}, "
          f"argmax {agree}/{total}")
    assert agree == total and np.mean(deltas) <= 1e-4 and np.max(deltas) <= 2e-5


def test_greedy_replies_match_llama_cpp(eng):
    for g in REFERENCE["greedy"]:
        r = eng.generate(g["prompt_tokens"], max_tokens=64, temperature=0.0, cache_prompt=False)
        assert r.tokens == g["generated_tokens"], g["prompt"][-60:]  # (neither lists the EOS)
