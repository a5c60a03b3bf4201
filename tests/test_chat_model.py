"""The default chat model (SmolLM2-135M-Instruct Q4_1) against llama-server on the same
file (tests/fixtures/llama_server/chat-model-greedy.json, recorded by
capture_chat_model.py with -fa off): the chat template renders the same prompt, the
prompt tokenizes to the same ids, and the greedy reply starts with the same token.

Whole greedy replies and log-probabilities are not compared: on this model llamars and
this llama.cpp build are not bit-identical (per-op sums agree to ~1e-6 in the first
layers; the model's very large activations in its last layers amplify the rounding), so
the first reply token's log-probability differs by 0.016-0.131 over the six prompts and
the greedy replies share their first 1-28 tokens (measured; see the notes of the CPU
kernels issue, which owns exactness on every type)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from llamars import Engine
from llamars.chat.plan import plan_chat
from llamars.models import chat_model

FIXTURE = Path(__file__).parent / "fixtures" / "llama_server" / "chat-model-greedy.json"
CASES = json.loads(FIXTURE.read_text())["cases"]


@pytest.fixture(scope="module")
def eng():
    e = Engine(str(chat_model()), n_ctx=2048)
    yield e
    e.close()


@pytest.mark.parametrize("case", CASES, ids=[c["messages"][0]["content"][:24] for c in CASES])
def test_prompt_tokens_and_first_reply_token_match_llama_server(eng, case):
    prompt = plan_chat(eng.chat_template, case["messages"]).prompt
    assert prompt == case["prompt"]
    assert eng.tokenize(prompt, add_special=True, parse_special=True) == case["prompt_tokens"]
    r = eng.generate(case["prompt_tokens"], max_tokens=1, temperature=0.0, cache_prompt=False)
    assert r.tokens[0] == case["tokens"][0]


def test_the_first_reply_of_the_readme_is_what_the_model_says(eng):
    """README.md's "Get started" shows this reply; llama-server gives the same text."""
    r = eng.chat([{"role": "user", "content": "Write a short list of three fruits"}], max_tokens=128, temperature=0.0)
    assert r.finish_reason == "stop"
    assert r.content.startswith("1. Bananas\n2. Apples\n3. Oranges\n\n")
    assert CASES[0]["content"].startswith("1. Bananas\n2. Apples\n3. Oranges\n\n")
    readme = (Path(__file__).parents[1] / "README.md").read_text()
    assert "\n".join("    " + ln if ln else "" for ln in r.content.split("\n")) in readme
