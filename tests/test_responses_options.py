"""The Responses API's own generation options on the real model: top_logprobs / include
(the same tokens and log-probabilities as chat completions' logprobs, streamed and not),
truncation=auto (the fewest oldest turns dropped), max_tool_calls, reasoning.effort (to the
chat template) and reasoning.summary."""
from __future__ import annotations

import json

import httpx
import pytest

from llamars.config import ServerConfig
from llamars.server.app import create_app
from llamars.server.responses_stream import Emitter
from llamars.tools.reply import Reply, ReplyDelta
from server_util import LiveServer

EFFORT_TEMPLATE = ("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"
                   "{% if reasoning_effort == 'high' %}{{ 'think it through. ' * 20 }}{% endif %}assistant:")


@pytest.fixture(scope="module")
def http(model_path, tmp_path_factory):
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=1024, n_parallel=2, data_dir=str(tmp_path_factory.mktemp("d"))))).start()
    with httpx.Client(base_url=s.url, timeout=120) as c:
        yield c
    s.stop()


def _events(c: httpx.Client, body: dict) -> list:
    out = []
    with c.stream("POST", "/v1/responses", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


def test_top_logprobs_match_chat_completions(http):
    body = {"input": "Name three colors.", "temperature": 0, "max_output_tokens": 8, "top_logprobs": 3}
    r = http.post("/v1/responses", json=body).json()
    part = r["output"][0]["content"][0]
    lps = part["logprobs"]
    assert r["top_logprobs"] == 3 and len(lps) == r["usage"]["output_tokens"]
    assert "".join(x["token"] for x in lps) == part["text"]
    for x in lps:
        assert len(x["top_logprobs"]) == 3 and x["top_logprobs"][0]["token"] == x["token"]  # greedy: the top one
        assert bytes(x["bytes"]).decode("utf-8", "replace") == x["token"]
    chat = http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "Name three colors."}], "temperature": 0,
                                                    "max_tokens": 8, "logprobs": True, "top_logprobs": 3}).json()
    ref = chat["choices"][0]["logprobs"]["content"]
    assert [x["token"] for x in lps] == [x["token"] for x in ref]
    assert [x["logprob"] for x in lps] == pytest.approx([x["logprob"] for x in ref], abs=1e-5)
    # streamed: the deltas carry the same entries, and the done event all of them
    evs = _events(http, body)
    deltas = [e for e in evs if e["type"] == "response.output_text.delta"]
    streamed = [x for e in deltas for x in e["logprobs"]]
    assert [x["token"] for x in streamed] == [x["token"] for x in lps]
    done = next(e for e in evs if e["type"] == "response.output_text.done")
    assert [x["token"] for x in done["logprobs"]] == [x["token"] for x in lps]


def test_include_logprobs_without_alternatives(http):
    r = http.post("/v1/responses", json={"input": "Hi", "temperature": 0, "max_output_tokens": 4,
                                         "include": ["message.output_text.logprobs"]}).json()
    lps = r["output"][0]["content"][0]["logprobs"]
    assert len(lps) == 4 and all(x["top_logprobs"] == [] for x in lps)
    plain = http.post("/v1/responses", json={"input": "Hi", "temperature": 0, "max_output_tokens": 4}).json()
    assert plain["output"][0]["content"][0]["logprobs"] == []


def _long_conversation(n: int) -> list:
    conv = []
    for i in range(n):
        conv += [{"role": "user", "content": f"Tell me about topic {i}. " + "more words here " * 12},
                 {"role": "assistant", "content": f"Topic {i} is interesting. " + "indeed " * 20}]
    return conv + [{"role": "user", "content": "Which topic was last?"}]


def test_truncation_auto_drops_the_fewest_oldest_turns(http):
    conv = _long_conversation(10)
    body = {"input": conv, "temperature": 0, "max_output_tokens": 2}
    r = http.post("/v1/responses", json=body)
    assert r.status_code == 400 and r.json()["error"]["type"] == "exceed_context_size_error"
    r = http.post("/v1/responses", json={**body, "truncation": "auto"}).json()
    assert r["status"] in ("completed", "incomplete") and r["truncation"] == "auto"
    # the kept suffix starts at the earliest user turn that fits
    fits = []
    for k in range(0, len(conv), 2):
        x = http.post("/v1/responses", json={**body, "input": conv[k:]})
        if x.status_code == 200:
            fits.append((k, x.json()["usage"]["input_tokens"]))
    assert fits and r["usage"]["input_tokens"] == fits[0][1]
    # nothing fits: a clear 400
    huge = [{"role": "user", "content": "word " * 2000}]
    x = http.post("/v1/responses", json={"input": huge, "truncation": "auto"})
    assert x.status_code == 400 and "truncation=auto" in x.json()["error"]["message"]


def test_max_tool_calls_zero_offers_no_tools(http):
    tools = [{"type": "function", "name": "get_weather", "description": "Current weather in a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
    r = http.post("/v1/responses", json={"input": "What is the weather like in Paris right now?", "tools": tools,
                                         "tool_choice": "required", "max_output_tokens": 80, "temperature": 0}).json()
    assert r["status"] == "completed" and "function_call" in [o["type"] for o in r["output"]]
    r = http.post("/v1/responses", json={"input": "Weather in Paris?", "tools": tools, "tool_choice": "required",
                                         "max_tool_calls": 0, "max_output_tokens": 8, "temperature": 0}).json()
    assert [o["type"] for o in r["output"]] == ["message"] and r["max_tool_calls"] == 0


BAD = [
    ({"truncation": "sometimes"}, "truncation"),
    ({"max_tool_calls": -1}, "max_tool_calls"),
    ({"top_logprobs": 21}, "top_logprobs"),
    ({"include": ["bogus"]}, "include[0]"),
    ({"reasoning": {"effort": "huge"}}, "reasoning.effort"),
    ({"reasoning": {"summary": "long"}}, "reasoning.summary"),
    ({"reasoning": {"mood": "x"}}, "reasoning.mood"),
    ({"reasoning": "high"}, "reasoning"),
]


@pytest.mark.parametrize("extra,field", BAD, ids=[f for _, f in BAD])
def test_bad_options(http, extra, field):
    r = http.post("/v1/responses", json={"input": "x", **extra})
    assert r.status_code == 400 and field in r.json()["error"]["message"], r.text


def test_reasoning_effort_reaches_the_template(model_path, tmp_path):
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=1024, chat_template=EFFORT_TEMPLATE, data_dir=str(tmp_path)))).start()
    try:
        with httpx.Client(base_url=s.url, timeout=120) as c:
            n = {}
            for effort in ("low", "high"):
                r = c.post("/v1/responses", json={"input": "Hi", "max_output_tokens": 1, "reasoning": {"effort": effort}}).json()
                n[effort] = r["usage"]["input_tokens"]
                assert r["reasoning"] == {"effort": effort}
        assert n["high"] >= n["low"] + 20
    finally:
        s.stop()


def test_reasoning_summary_and_call_cap_in_the_stream():
    evs = []
    em = Emitter(evs.append, summary=True, max_calls=1)
    em.start({"id": "r", "status": "in_progress"})
    em.feed(ReplyDelta(reasoning="Let me think."))
    em.feed(ReplyDelta(content="Answer."))
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in range(3)]
    out = em.finish(Reply(content="Answer.", reasoning="Let me think.", tool_calls=calls))
    assert [o["type"] for o in out] == ["reasoning", "message", "function_call"]
    assert out[0]["summary"] == [{"type": "summary_text", "text": "Let me think."}]
