"""The OpenAI Responses API end to end: the real model, a real uvicorn server and the real
`openai` SDK — plain, streamed, `previous_response_id` chains, background + retrieve +
cancel + resumed streams, structured output, function tools and their results, deletion,
a restart over the same data directory, and a bad-input table in OpenAI's error shape."""
from __future__ import annotations

import json
import time

import httpx
import jsonschema
import openai
import pytest
from server_util import LiveServer

from llamars.config import ServerConfig
from llamars.server import responses_convert as conv
from llamars.server.app import create_app
from llamars.server.response_store_sqlite import SQLiteStore

G = {"temperature": 0, "max_output_tokens": 24}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"],
}
TOOLS = [{"type": "function", "name": "get_weather", "description": "Current weather in a city", "parameters": WEATHER}]
ASK = "What is the weather like in Paris right now?"
TERMINAL = ("completed", "incomplete", "failed", "cancelled")


def _server(model_path, data_dir) -> LiveServer:
    return LiveServer(create_app(ServerConfig(model=model_path, n_ctx=4096, n_parallel=2, alias="gemma-test", data_dir=str(data_dir)))).start()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("responses-data")


@pytest.fixture(scope="module")
def server(model_path, data_dir):
    s = _server(model_path, data_dir)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def oai(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, timeout=120) as c:
        yield c


def _wait(oai, rid: str, timeout: float = 60.0):
    t = time.monotonic()
    while True:
        r = oai.responses.retrieve(rid)
        if r.status in TERMINAL:
            return r
        assert time.monotonic() - t < timeout, f"{rid} still {r.status}"
        time.sleep(0.1)


def _text(events) -> str:
    return "".join(e.delta for e in events if e.type == "response.output_text.delta")


# ------------------------------------------------------------------ plain and streamed
def test_plain(oai):
    r = oai.responses.create(model="any", input="Name a primary color.", **G)
    assert r.object == "response" and r.id.startswith("resp_") and r.model == "any"
    assert r.status in ("completed", "incomplete") and r.output_text.strip()
    assert r.usage.input_tokens > 5 and 0 < r.usage.output_tokens <= 24
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens" and r.usage.output_tokens == 24
    msg = r.output[-1]
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_") and msg.content[0].type == "output_text"
    assert r.store is True and r.background is False and r.temperature == 0 and r.max_output_tokens == 24
    # the same turn through chat completions gives the same text
    c = oai.chat.completions.create(model="any", messages=[{"role": "user", "content": "Name a primary color."}], temperature=0, max_tokens=24)
    assert c.choices[0].message.content == r.output_text
    assert oai.responses.retrieve(r.id).output_text == r.output_text


def test_instructions_and_item_input(oai):
    a = oai.responses.create(model="any", instructions="Answer in French.", input=[{"role": "user", "content": "Hello!"}], **G)
    b = oai.responses.create(model="any", input=[{"type": "message", "role": "developer", "content": "Answer in French."},
                                                 {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hello!"}]}], **G)
    assert a.output_text == b.output_text and a.usage.input_tokens == b.usage.input_tokens
    assert a.instructions == "Answer in French."


def test_streamed(oai):
    events = list(oai.responses.create(model="any", input="Name a primary color.", stream=True, **G))
    types = [e.type for e in events]
    assert types[:4] == ["response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"]
    assert types[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done", types[-1]]
    assert types[-1] in ("response.completed", "response.incomplete")
    assert set(types[4:-4]) == {"response.output_text.delta"}
    seq = [e.sequence_number for e in events]
    assert seq == list(range(len(events)))
    final = events[-1].response
    assert events[0].response.status == "in_progress" and final.id == events[0].response.id
    assert _text(events) == final.output_text == events[-4].text and final.output_text.strip()
    assert final.output[0].id == events[2].item.id
    assert 1 <= len(types[4:-4]) <= final.usage.output_tokens <= 24
    # stored: retrieved afterwards, and its events replay
    assert oai.responses.retrieve(final.id).output_text == final.output_text
    replay = list(oai.responses.retrieve(final.id, stream=True, starting_after=1))
    assert [e.sequence_number for e in replay] == seq[2:]


def test_not_stored(oai):
    r = oai.responses.create(model="any", input="Hi", store=False, **G)
    assert r.store is False and r.output_text
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)


# ------------------------------------------------------------------ chains
def test_previous_response_chain(oai):
    r1 = oai.responses.create(model="any", input="My name is Ada. Remember it.", instructions="Be brief.", **G)
    r2 = oai.responses.create(model="any", input="What is my name?", previous_response_id=r1.id, **G)
    assert r2.previous_response_id == r1.id and r2.output_text
    # the second prompt holds the first turn (its input and its reply) before the new question
    alone = oai.responses.create(model="any", input="What is my name?", store=False, **G)
    assert r2.usage.input_tokens >= alone.usage.input_tokens + r1.usage.output_tokens + 5
    items = oai.responses.input_items.list(r2.id)
    assert [i.content[0].text for i in items.data] == ["What is my name?"]
    r3 = oai.responses.create(model="any", input="And again?", previous_response_id=r2.id, **G)
    assert r3.usage.input_tokens > r2.usage.input_tokens + r2.usage.output_tokens
    # the chain survives the deletion of an earlier link
    oai.responses.delete(r1.id)
    r4 = oai.responses.create(model="any", input="Once more?", previous_response_id=r2.id, **G)
    assert r4.usage.input_tokens > r2.usage.input_tokens + r2.usage.output_tokens


# ------------------------------------------------------------------ background
def test_background_retrieve(oai):
    r = oai.responses.create(model="any", input="Count from one to five.", background=True, **G)
    assert r.status in ("queued", "in_progress") and r.background is True
    done = _wait(oai, r.id)
    assert done.status in ("completed", "incomplete") and done.output_text.strip() and done.usage.output_tokens > 0
    # a finished background response replays its whole stream from the store
    events = list(oai.responses.retrieve(r.id, stream=True))
    assert events[0].type == "response.created" and events[0].response.status == "queued"
    assert events[-1].type in ("response.completed", "response.incomplete") and _text(events) == done.output_text


def test_background_cancel(oai, http):
    r = oai.responses.create(model="any", input="Write a very long story about a dragon.", background=True, temperature=0,
                             max_output_tokens=1500, extra_body={"ignore_eos": True})
    t = time.monotonic()
    while oai.responses.retrieve(r.id).status != "in_progress" or not any(s["is_processing"] for s in http.get("/slots").json()):
        assert time.monotonic() - t < 30
        time.sleep(0.05)
    time.sleep(0.3)
    c = oai.responses.cancel(r.id)
    assert c.status == "cancelled" and c.id == r.id
    assert oai.responses.retrieve(r.id).status == "cancelled"
    assert oai.responses.cancel(r.id).status == "cancelled"  # idempotent
    t = time.monotonic()
    while any(s["is_processing"] for s in http.get("/slots").json()):  # the engine let the slot go
        assert time.monotonic() - t < 5, "slot still busy after cancel"
        time.sleep(0.05)


def test_background_stream_resume(oai):
    st = oai.responses.create(model="any", input="Count from one to ten.", background=True, stream=True, temperature=0, max_output_tokens=30)
    first = []
    for ev in st:
        first.append(ev)
        if ev.sequence_number >= 6:
            break
    st.close()  # leaving a background stream does not stop the generation
    rid = first[0].response.id
    rest = list(oai.responses.retrieve(rid, stream=True, starting_after=first[-1].sequence_number))
    assert rest[0].sequence_number == first[-1].sequence_number + 1
    seq = [e.sequence_number for e in first + rest]
    assert seq == list(range(len(seq)))
    assert rest[-1].type in ("response.completed", "response.incomplete")
    assert _text(first + rest) == rest[-1].response.output_text == _wait(oai, rid).output_text


# ------------------------------------------------------------------ structured output and tools
def test_structured_output(oai):
    schema = {"type": "object", "properties": {"color": {"type": "string", "enum": ["red", "green", "blue"]},
                                               "hex": {"type": "string", "maxLength": 7}},
              "required": ["color", "hex"], "additionalProperties": False}
    r = oai.responses.create(model="any", input="Pick a color and give its hex code.", temperature=0, max_output_tokens=60,
                             text={"format": {"type": "json_schema", "name": "color", "schema": schema, "strict": True}})
    assert r.status == "completed" and r.text.format.type == "json_schema"
    jsonschema.validate(json.loads(r.output_text), schema)


def test_required_tool_call_and_result(oai):
    r = oai.responses.create(model="any", input=ASK, tools=TOOLS, tool_choice="required", temperature=0, max_output_tokens=80)
    calls = [o for o in r.output if o.type == "function_call"]
    assert r.status == "completed" and len(calls) >= 1
    fc = calls[0]
    assert fc.name == "get_weather" and fc.call_id and fc.id.startswith("fc_")
    jsonschema.validate(json.loads(fc.arguments), WEATHER)
    assert r.tools[0].name == "get_weather" and r.tool_choice == "required"
    # the tool's result, chained
    r2 = oai.responses.create(model="any", previous_response_id=r.id, tools=TOOLS, temperature=0, max_output_tokens=30,
                              input=[{"type": "function_call_output", "call_id": fc.call_id, "output": "Sunny, 21 degrees"}])
    assert r2.status in ("completed", "incomplete") and r2.output and r2.usage.input_tokens > r.usage.input_tokens
    # the same round trip with the whole history in `input`
    r3 = oai.responses.create(model="any", tools=TOOLS, temperature=0, max_output_tokens=30, store=False, input=[
        {"role": "user", "content": ASK},
        {"type": "function_call", "call_id": fc.call_id, "name": fc.name, "arguments": fc.arguments},
        {"type": "function_call_output", "call_id": fc.call_id, "output": "Sunny, 21 degrees"},
    ])
    assert r3.usage.input_tokens == r2.usage.input_tokens and r3.output_text == r2.output_text


def test_named_tool_streamed(oai):
    events = list(oai.responses.create(model="any", input=ASK, tools=TOOLS, stream=True, temperature=0, max_output_tokens=80,
                                       tool_choice={"type": "function", "name": "get_weather"}))
    added = [e for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert len(added) >= 1 and added[0].item.name == "get_weather"
    iid = added[0].item.id
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta" and e.item_id == iid)
    done = next(e for e in events if e.type == "response.function_call_arguments.done" and e.item_id == iid)
    assert done.arguments == args
    jsonschema.validate(json.loads(args), WEATHER)
    final = events[-1].response
    assert events[-1].type == "response.completed" and [o.arguments for o in final.output if o.type == "function_call"][0] == args


def test_stream_left_early_is_cancelled(oai, http):
    st = oai.responses.create(model="any", input="Write a long story.", stream=True, temperature=0, max_output_tokens=1500,
                              extra_body={"ignore_eos": True})
    events = []
    for ev in st:
        events.append(ev)
        if ev.type == "response.output_text.delta":
            break
    st.close()  # the only reader of a foreground stream left: the generation stops
    t = time.monotonic()
    while any(s["is_processing"] for s in http.get("/slots").json()):
        assert time.monotonic() - t < 5, "slot still busy after the client left"
        time.sleep(0.05)
    assert _wait(oai, events[0].response.id, timeout=5).status == "cancelled"


def test_delete(oai):
    r = oai.responses.create(model="any", input="Hi", **G)
    oai.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(r.id)
    with pytest.raises(openai.NotFoundError):
        oai.responses.delete(r.id)


# ------------------------------------------------------------------ restart
def test_restart_keeps_responses(model_path, tmp_path):
    a = _server(model_path, tmp_path)
    try:
        c = openai.OpenAI(base_url=a.url + "/v1", api_key="x", max_retries=0, timeout=120)
        r = c.responses.create(model="any", input="Name a primary color.", **G)
        running = c.responses.create(model="any", input="Write a long story.", background=True, temperature=0,
                                     max_output_tokens=1500, extra_body={"ignore_eos": True})
        time.sleep(0.3)
    finally:
        a.stop()  # the running background response is stopped and marked failed
    # a background response whose process died: the next start marks it failed
    st = SQLiteStore(tmp_path)
    st.save({"id": "resp_orphan", "object": "response", "status": "in_progress", "background": True, "created_at": 1, "output": []})
    st.close()
    b = _server(model_path, tmp_path)
    try:
        c = openai.OpenAI(base_url=b.url + "/v1", api_key="x", max_retries=0, timeout=120)
        again = c.responses.retrieve(r.id)
        assert again.output_text == r.output_text and again.usage.total_tokens == r.usage.total_tokens
        stopped = c.responses.retrieve(running.id)
        assert stopped.status == "failed" and "shut down" in stopped.error.message
        orphan = c.responses.retrieve("resp_orphan")
        assert orphan.status == "failed" and "stopped" in orphan.error.message
        r2 = c.responses.create(model="any", input="Again?", previous_response_id=r.id, **G)
        assert r2.usage.input_tokens > r.usage.input_tokens
    finally:
        b.stop()


# ------------------------------------------------------------------ bad input
BAD = [
    ({}, "input"),
    ({"input": 5}, "input"),
    ({"input": [{"type": "bogus"}]}, "input[0].type"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content[0].type"),
    ({"input": [{"role": "wizard", "content": "x"}]}, "input[0].role"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{nope"}]}, "input[0].arguments"),
    ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id"),
    ({"input": "hi", "tools": [{"type": "function", "name": "bad name!", "parameters": {}}]}, "tools[0].name"),
    ({"input": "hi", "tools": [{"type": "function", "name": "f", "parameters": {"type": "array"}}]}, "tools[0].parameters"),
    ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": "hi", "tool_choice": "required"}, "tool_choice"),
    ({"input": "hi", "tools": TOOLS, "tool_choice": {"type": "function", "name": "nope"}}, "tool_choice"),
    ({"input": "hi", "previous_response_id": "resp_doesnotexist"}, "previous_response_id"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "background": True, "store": False}, "background"),
    ({"input": "hi", "text": {"format": {"type": "json_schema", "name": "x"}}}, "text.format.schema"),
    ({"input": "hi", "text": {"format": {"type": "xml"}}}, "text.format.type"),
    ({"input": "hi", "temperature": "hot"}, "temperature"),
    ({"input": "hi", "stream": "yes"}, "stream"),
    ({"input": "hi", "tools": TOOLS, "tool_choice": "required", "text": {"format": {"type": "json_object"}}}, "text.format"),
]


@pytest.mark.parametrize("body,field", BAD, ids=[f for _, f in BAD])
def test_bad_input(http, body, field):
    r = http.post("/v1/responses", json=body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()["error"]
    assert {"code", "message", "type"} <= set(err) and field in err["message"], err


def test_bad_ids(http, oai):
    for method, path in [("GET", "/v1/responses/resp_nope"), ("POST", "/v1/responses/resp_nope/cancel"),
                         ("DELETE", "/v1/responses/resp_nope"), ("GET", "/v1/responses/resp_nope/input_items"),
                         ("GET", "/v1/responses/resp_nope?stream=true")]:
        r = http.request(method, path)
        assert r.status_code == 404 and "resp_nope" in r.json()["error"]["message"], (method, path, r.text)
    plain = oai.responses.create(model="any", input="Hi", **G)
    with pytest.raises(openai.BadRequestError, match="background"):
        oai.responses.cancel(plain.id)
    with pytest.raises(openai.BadRequestError, match="stream"):
        list(oai.responses.retrieve(plain.id, stream=True))
    r = http.get(f"/v1/responses/{plain.id}/input_items?limit=0")
    assert r.status_code == 400 and "limit" in r.json()["error"]["message"]


# ------------------------------------------------------------------ conversion (no model)
def test_items_to_messages():
    items = conv.parse_input([
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "a"},
        {"role": "user", "content": [{"type": "input_text", "text": "b"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": {"x": 1}},
        {"type": "function_call_output", "call_id": "c1", "output": "one"},
        {"type": "reasoning", "summary": []},
    ])
    assert all(i["id"] for i in items)
    msgs = conv.to_messages("Rules.", items)
    assert msgs[0] == {"role": "system", "content": "Rules.\n\nBe terse."}
    assert msgs[1] == {"role": "user", "content": "a\n\nb"}
    assert msgs[2]["role"] == "assistant" and msgs[2]["content"] == "ok" and [c["id"] for c in msgs[2]["tool_calls"]] == ["c1", "c2"]
    assert msgs[2]["tool_calls"][1]["function"]["arguments"] == '{"x": 1}'
    assert msgs[3] == {"role": "tool", "tool_call_id": "c1", "content": "one", "name": "f"} and len(msgs) == 4
