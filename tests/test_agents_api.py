"""Tool calling through /v1/chat/completions (openai SDK), the Anthropic Messages API
(anthropic SDK) and Engine.chat, end to end on the real model and a real server; plus
bad-input tables in each API's own error shape."""
from __future__ import annotations

import json

import anthropic
import httpx
import jsonschema
import openai
import pytest
from server_util import LiveServer

from llamars.config import ServerConfig
from llamars.errors import InvalidRequestError
from llamars.server.app import create_app

WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 24}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city", "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "description": "Local time in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 24}}, "required": ["city"]}}},
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
ASK = [{"role": "user", "content": "What is the weather like in Paris right now?"}]
G = {"temperature": 0, "max_tokens": 90}


@pytest.fixture(scope="module")
def server(model_path):
    s = LiveServer(create_app(ServerConfig(model=model_path, n_ctx=4096, n_parallel=2, alias="gemma-test"))).start()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def claude(server):
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=120)


def _valid(call_name: str, arguments: str) -> dict:
    args = json.loads(arguments)
    jsonschema.validate(args, SCHEMAS[call_name])
    return args


# ------------------------------------------------------------------ OpenAI tools
def test_required_tool_call(oai):
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="required", **G)
    ch = r.choices[0]
    assert ch.finish_reason == "tool_calls"
    assert ch.message.content is None and len(ch.message.tool_calls) == 1
    tc = ch.message.tool_calls[0]
    assert tc.type == "function" and tc.id.startswith("call_") and tc.function.name in SCHEMAS
    _valid(tc.function.name, tc.function.arguments)


def test_named_tool_call_streamed(oai):
    st = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, stream=True,
                                     tool_choice={"type": "function", "function": {"name": "get_time"}}, **G)
    name, args, ids, finish, saw_args_before_name = None, "", set(), None, False
    for chunk in st:
        c = chunk.choices[0]
        for d in c.delta.tool_calls or []:
            assert d.index == 0
            if d.id:
                ids.add(d.id)
            if d.function.name:
                name = d.function.name
            if d.function.arguments:
                saw_args_before_name |= name is None
                args += d.function.arguments
        finish = c.finish_reason or finish
    assert name == "get_time" and len(ids) == 1 and not saw_args_before_name
    assert finish == "tool_calls"
    _valid(name, args)


def test_named_tool_call_not_streamed_matches_schema(oai):
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS,
                                    tool_choice={"type": "function", "function": {"name": "get_weather"}}, **G)
    tc = r.choices[0].message.tool_calls[0]
    assert tc.function.name == "get_weather"
    assert _valid("get_weather", tc.function.arguments)["unit"] in ("celsius", "fahrenheit")


def test_tool_result_turn_continues(oai):
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="required", **G)
    msg = r.choices[0].message
    tc = msg.tool_calls[0]
    follow = ASK + [msg.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": tc.id, "content": "Sunny, 24 degrees"}]
    r2 = oai.chat.completions.create(model="any", messages=follow, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=24)
    ch = r2.choices[0]
    assert ch.message.tool_calls is None and ch.message.content
    assert ch.finish_reason in ("stop", "length")
    # the call and its result reached the prompt (folded into turns the template can show)
    r3 = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=1)
    assert r2.usage.prompt_tokens > r3.usage.prompt_tokens + 10


def test_auto_after_a_tool_result_ends_in_content(oai):
    """The agent loop ends: on a template with no tool format of its own (the default
    model's), the turn after tool results under tool_choice auto answers in content,
    as llama-server's turn there does, instead of calling the tool again; required
    still calls."""
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="required", **G)
    msg = r.choices[0].message
    follow = ASK + [msg.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": tc.id, "content": "Sunny, 24 degrees"} for tc in msg.tool_calls]
    for stream in (False, True):
        if stream:
            parts = list(oai.chat.completions.create(model="any", messages=follow, tools=TOOLS, tool_choice="auto", stream=True, **G))
            content = "".join(p.choices[0].delta.content or "" for p in parts if p.choices)
            assert not any(p.choices[0].delta.tool_calls for p in parts if p.choices)
            finish = [p.choices[0].finish_reason for p in parts if p.choices and p.choices[0].finish_reason][-1]
        else:
            r2 = oai.chat.completions.create(model="any", messages=follow, tools=TOOLS, tool_choice="auto", **G)
            assert r2.choices[0].message.tool_calls is None
            content, finish = r2.choices[0].message.content, r2.choices[0].finish_reason
        assert content and not content.lstrip().startswith("{") and finish in ("stop", "length")
    r3 = oai.chat.completions.create(model="any", messages=follow, tools=TOOLS, tool_choice="required", **G)
    assert r3.choices[0].message.tool_calls and r3.choices[0].finish_reason == "tool_calls"


def test_auto_is_constrained_to_calls_or_a_reply(oai):
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="auto", **G)
    m = r.choices[0].message
    if m.tool_calls:
        assert r.choices[0].finish_reason == "tool_calls"
        for tc in m.tool_calls:
            _valid(tc.function.name, tc.function.arguments)
    else:  # the generic format's {"response": ...} turned into plain content
        assert m.content and not m.content.lstrip().startswith("{")


def test_tool_choice_none_is_plain_text(oai, engine):
    r = oai.chat.completions.create(model="any", messages=ASK, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=12)
    assert r.choices[0].message.tool_calls is None and r.choices[0].message.content


@pytest.mark.parametrize("body,field", [
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}}]}, "tools[0].function.parameters.type"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}, "tools[0].function.parameters"),
    ({"tools": [{"type": "retrieval"}]}, "tools[0].type"),
    ({"tools": TOOLS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice.function.name"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tools": TOOLS, "messages": ASK + [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_time", "arguments": "{oops"}}]}]},
     "messages[1].tool_calls[0].function.arguments"),
    ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tools"),
])
def test_openai_tool_bad_input(server, body, field):
    payload = {"messages": ASK, "max_tokens": 4, **body}
    r = httpx.post(server.url + "/v1/chat/completions", json=payload, timeout=60)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and field in err["message"], err
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}


# ------------------------------------------------------------------ Anthropic
def test_anthropic_create(claude):
    m = claude.messages.create(model="claude-any", max_tokens=12, system="Answer briefly.", messages=[{"role": "user", "content": "Say hello"}],
                               extra_body={"temperature": 0})
    assert m.type == "message" and m.role == "assistant" and m.id.startswith("msg_") and m.model == "claude-any"
    assert m.content[0].type == "text" and m.content[0].text
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 12 and m.usage.input_tokens > 0


def test_anthropic_stop_sequence(claude):
    free = claude.messages.create(model="m", max_tokens=12, messages=[{"role": "user", "content": "Say hello"}], extra_body={"temperature": 0})
    word = free.content[0].text.split()[1]  # greedy text: stop at its second word
    m = claude.messages.create(model="m", max_tokens=12, messages=[{"role": "user", "content": "Say hello"}],
                               stop_sequences=[word], extra_body={"temperature": 0})
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == word
    assert free.content[0].text.startswith(m.content[0].text) and word not in m.content[0].text


def test_anthropic_stream_matches_create(claude):
    kw = dict(model="m", max_tokens=16, messages=[{"role": "user", "content": "Tell me about the sea"}], extra_body={"temperature": 0})
    full = claude.messages.create(**kw)
    pieces, types = [], []
    with claude.messages.stream(**kw) as st:
        for ev in st:
            types.append(ev.type)
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                pieces.append(ev.delta.text)
        final = st.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == full.content[0].text == final.content[0].text
    assert types[0] == "message_start" and types[-1] == "message_stop"
    assert "content_block_start" in types and "content_block_stop" in types and "message_delta" in types
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 16


def test_anthropic_raw_stream_events(server):
    body = {"model": "m", "max_tokens": 6, "stream": True, "messages": [{"role": "user", "content": "Hi"}], "temperature": 0}
    r = httpx.post(server.url + "/v1/messages", json=body, headers={"anthropic-version": "2023-06-01", "x-api-key": "k"}, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    names = [ln[7:] for ln in r.text.splitlines() if ln.startswith("event: ")]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]


ANTH_TOOLS = [{"name": "get_weather", "description": "Current weather in a city", "input_schema": WEATHER}]


def test_anthropic_tool_use_any(claude):
    kw = dict(model="m", max_tokens=90, messages=[{"role": "user", "content": "Weather in Paris?"}], tools=ANTH_TOOLS,
              tool_choice={"type": "any", "disable_parallel_tool_use": True}, extra_body={"temperature": 0})
    m = claude.messages.create(**kw)
    assert m.stop_reason == "tool_use"
    tu = [b for b in m.content if b.type == "tool_use"]
    assert len(tu) == 1 and tu[0].name == "get_weather" and tu[0].id.startswith("toolu_")
    jsonschema.validate(tu[0].input, WEATHER)
    with claude.messages.stream(**kw) as st:
        final = st.get_final_message()
    assert final.stop_reason == "tool_use" and [b.type for b in final.content] == ["tool_use"]
    jsonschema.validate(final.content[0].input, WEATHER)
    # the tool result turn continues
    m2 = claude.messages.create(model="m", max_tokens=16, tools=ANTH_TOOLS, tool_choice={"type": "none"}, extra_body={"temperature": 0},
                                messages=[{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": [tu[0].model_dump()]},
                                          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tu[0].id, "content": "Sunny"}]}])
    assert m2.content[0].type == "text" and m2.stop_reason in ("end_turn", "max_tokens")


def test_anthropic_count_tokens(claude, server):
    n = claude.messages.count_tokens(model="m", messages=[{"role": "user", "content": "Hello there"}])
    n2 = claude.messages.count_tokens(model="m", system="Be kind.", messages=[{"role": "user", "content": "Hello there"}])
    assert 0 < n.input_tokens < n2.input_tokens
    m = claude.messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "Hello there"}])
    assert m.usage.input_tokens == n.input_tokens


def test_anthropic_structured_output(claude):
    schema = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0, "maximum": 120}},
              "required": ["name", "age"], "additionalProperties": False}
    m = claude.messages.create(model="m", max_tokens=60, messages=[{"role": "user", "content": "Invent a person."}],
                               output_config={"format": {"type": "json_schema", "schema": schema}}, extra_body={"temperature": 0})
    jsonschema.validate(json.loads(m.content[0].text), schema)


def test_anthropic_empty_messages_and_text_documents(server):
    """As llama-server: an empty messages list is a turn with the generation prompt alone;
    a plain-text document block is read as the message's text."""
    r = httpx.post(server.url + "/v1/messages", json={"model": "m", "max_tokens": 2, "messages": []}, timeout=60)
    assert r.status_code == 200 and r.json()["type"] == "message"
    doc = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "The launch code is 4417."},
           "title": "Memo"}
    body = {"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [doc, {"type": "text", "text": "What is the code?"}]}]}
    with_doc = httpx.post(server.url + "/v1/messages/count_tokens", json=body, timeout=60).json()["input_tokens"]
    body["messages"][0]["content"] = [{"type": "text", "text": "What is the code?"}]
    without = httpx.post(server.url + "/v1/messages/count_tokens", json=body, timeout=60).json()["input_tokens"]
    assert with_doc > without + 5


@pytest.mark.parametrize("body,status,needle", [
    ({"model": "m", "messages": [{"role": "user", "content": "x"}]}, 400, "max_tokens"),
    ({"model": "m", "max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}, 400, "max_tokens"),
    ({"model": "m", "max_tokens": -5, "messages": [{"role": "user", "content": "x"}]}, 400, "max_tokens"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "eA=="}}]}]}, 400, "messages[0].content[0].source"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, 400, "messages[0].role"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "video"}]}]}, 400, "messages[0].content[0].type"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "data": ""}}]}]}, 400, "image"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "text"}]}]}, 400, "messages[0].content[0].text"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t"}]}, 400, "tools[0].input_schema"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": [{"name": "t", "input_schema": {"type": "string"}}]}, 400, "input_schema.type"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": ANTH_TOOLS, "tool_choice": {"type": "maybe"}}, 400, "tool_choice.type"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "tools": ANTH_TOOLS, "tool_choice": {"type": "tool", "name": "nope"}}, 400, "nope"),
    ({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "x"}], "temperature": 7}, 400, "temperature"),
    ({"model": "m", "max_tokens": "many", "messages": [{"role": "user", "content": "x"}]}, 400, "max_tokens"),
    ({"model": "m", "max_tokens": 4, "system": 5, "messages": [{"role": "user", "content": "x"}]}, 400, "system"),
])
def test_anthropic_bad_input(server, body, status, needle):
    r = httpx.post(server.url + "/v1/messages", json=body, timeout=60)
    assert r.status_code == status, r.text
    j = r.json()
    assert j["type"] == "error" and j["error"]["type"] == "invalid_request_error" and needle in j["error"]["message"], j
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}


def test_anthropic_sdk_raises_typed_errors(claude):
    with pytest.raises(anthropic.BadRequestError) as ei:
        claude.messages.create(model="m", max_tokens=0, messages=[{"role": "user", "content": "x"}])
    assert ei.value.body["error"]["type"] == "invalid_request_error"


def test_anthropic_auth_shape(model_path, engine):
    s = LiveServer(create_app(ServerConfig(model=model_path, api_keys=["sekret"]), engine)).start()
    try:
        r = httpx.post(s.url + "/v1/messages", json={"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]})
        assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error" and r.json()["type"] == "error"
        c = anthropic.Anthropic(base_url=s.url, api_key="sekret", max_retries=0)  # sent as x-api-key
        assert c.messages.create(model="m", max_tokens=2, messages=[{"role": "user", "content": "x"}]).usage.output_tokens == 2
    finally:
        s.stop()


# ------------------------------------------------------------------ Engine.chat
def test_engine_chat_tools(engine):
    r = engine.chat(ASK, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_weather"}}, temperature=0, max_tokens=90)
    assert r.finish_reason == "tool_calls" and r.content == "" and r.reasoning is None
    (tc,) = r.tool_calls
    assert tc["function"]["name"] == "get_weather"
    _valid("get_weather", tc["function"]["arguments"])
    follow = ASK + [r.message(), {"role": "tool", "tool_call_id": tc["id"], "content": "Sunny"}]
    r2 = engine.chat(follow, tools=TOOLS, tool_choice="none", temperature=0, max_tokens=8)
    assert r2.tool_calls == [] and r2.content and r2.result.n_tokens <= 8


def test_engine_chat_plain_matches_server_template(engine, oai):
    r = engine.chat([{"role": "user", "content": "Say hi"}], temperature=0, max_tokens=10)
    s = oai.chat.completions.create(model="m", messages=[{"role": "user", "content": "Say hi"}], temperature=0, max_tokens=10)
    assert r.content == s.choices[0].message.content and r.finish_reason == s.choices[0].finish_reason


def test_engine_chat_bad_tools(engine):
    with pytest.raises(InvalidRequestError, match=r"tools\[0\]"):
        engine.chat(ASK, tools=[{"type": "function", "function": {}}])


# ------------------------------------------------------------------ reasoning
THINK = 'root ::= "<think>" [a-z ]{3,12} "</think>" "\\n" [A-Za-z ]{3,12} "."'


def test_reasoning_split_openai(oai):
    kw = dict(model="m", messages=[{"role": "user", "content": "Think, then answer."}], temperature=0, max_tokens=60, extra_body={"grammar": THINK})
    r = oai.chat.completions.create(**kw)
    m = r.choices[0].message
    reasoning = m.model_extra["reasoning_content"]
    assert reasoning and "<think>" not in m.content and "</think>" not in m.content and m.content.endswith(".")
    # streamed: reasoning_content deltas first, then content; the same split
    rs, cs = "", ""
    for ch in oai.chat.completions.create(stream=True, **kw):
        if ch.choices:
            d = ch.choices[0].delta.model_extra or {}
            assert not (cs and d.get("reasoning_content")), "reasoning after content"
            rs += d.get("reasoning_content") or ""
            cs += ch.choices[0].delta.content or ""
    assert (rs, cs) == (reasoning, m.content)
    # reasoning_format none keeps the tags in the content
    raw = oai.chat.completions.create(**{**kw, "extra_body": {"grammar": THINK, "reasoning_format": "none"}}).choices[0].message
    assert raw.content.startswith("<think>") and "reasoning_content" not in (raw.model_extra or {})


def test_reasoning_as_anthropic_thinking_blocks(claude):
    kw = dict(model="m", max_tokens=60, messages=[{"role": "user", "content": "Think, then answer."}], extra_body={"temperature": 0, "grammar": THINK})
    m = claude.messages.create(**kw)
    assert [b.type for b in m.content] == ["thinking", "text"]
    assert m.content[0].thinking and m.content[1].text.endswith(".")
    deltas = []
    with claude.messages.stream(**kw) as st:
        for ev in st:
            if ev.type == "content_block_delta":
                deltas.append(ev.delta.type)
        final = st.get_final_message()
    assert "thinking_delta" in deltas and "text_delta" in deltas
    assert deltas.index("text_delta") > deltas.index("thinking_delta")
    assert final.content[0].thinking == m.content[0].thinking and final.content[1].text == m.content[1].text


def test_reasoning_budget_zero_turns_thinking_off(model_path, engine):
    from llamars.chat.templates import ChatTemplate

    src = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% if enable_thinking is defined and not enable_thinking %}<think></think>{% else %}<think>{% endif %}{% endif %}"
    from llamars.chat.plan import plan_chat

    t = ChatTemplate.from_source(src)
    on = plan_chat(t, [{"role": "user", "content": "hi"}])
    off = plan_chat(t, [{"role": "user", "content": "hi"}], reasoning_budget=0)
    assert on.prompt.endswith("<think>") and on.thinking_open
    assert off.prompt.endswith("<think></think>") and not off.thinking_open
