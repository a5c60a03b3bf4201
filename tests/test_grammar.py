"""Constrained generation: GBNF, Lark (%llguidance) and JSON schema through the engine,
the native /completion fields and OpenAI's response_format."""
from __future__ import annotations

import json

import httpx
import pytest
from server_util import LiveServer

from llamars import InvalidRequestError
from llamars.config import ServerConfig
from llamars.server.app import create_app

PERSON = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 20}, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
    "required": ["name", "age"],
    "additionalProperties": False,
}


def test_gbnf_constrains_greedy_and_sampled_output(engine):
    r = engine.generate("Is the sky blue? Answer:", max_tokens=10, temperature=0.0, grammar='root ::= " " ("yes" | "no") "."')
    assert r.text in (" yes.", " no.") and r.stop_reason == "eos"
    for seed in range(4):
        r = engine.generate("Pick letters:", max_tokens=20, temperature=1.0, seed=seed, grammar="root ::= [a-c]{3} \"!\"  # three letters")
        assert len(r.text) == 4 and set(r.text[:3]) <= set("abc") and r.text.endswith("!")


def test_lark_grammar(engine):
    r = engine.generate("Count:", max_tokens=20, temperature=0.0, grammar='%llguidance {}\nstart: " " NUM ("," NUM)*\nNUM: /[0-9]{1,2}/')
    assert r.text.startswith(" ") and all(x.isdigit() for x in r.text[1:].split(","))


def test_json_schema(engine):
    r = engine.generate("A person as JSON:", max_tokens=80, temperature=0.0, json_schema=PERSON)
    obj = json.loads(r.text)
    assert set(obj) == {"name", "age"} and isinstance(obj["name"], str) and 0 <= obj["age"] <= 150
    r = engine.generate("Numbers:", max_tokens=40, temperature=0.7, seed=1, json_schema={"type": "array", "items": {"type": "integer"}, "maxItems": 3})
    assert isinstance(json.loads(r.text), list)


def test_grammar_errors_name_the_field(engine):
    with pytest.raises(InvalidRequestError, match="grammar: line 1"):
        engine.generate("x", grammar="root ::= [a-")
    with pytest.raises(InvalidRequestError, match="grammar: no `root` rule"):
        engine.generate("x", grammar='item ::= "a"')
    with pytest.raises(InvalidRequestError, match="json_schema"):
        engine.generate("x", json_schema="{not json")
    with pytest.raises(InvalidRequestError, match="json_schema"):
        engine.generate("x", json_schema={"type": "no-such-type"})
    with pytest.raises(InvalidRequestError, match="not both"):
        engine.generate("x", grammar='root ::= "a"', json_schema={"type": "string"})


@pytest.fixture(scope="module")
def gserver(engine):
    s = LiveServer(create_app(ServerConfig(model=engine.model_path), engine=engine)).start()
    yield s
    s.stop()


def test_server_grammar_fields(gserver):
    r = httpx.post(gserver.url + "/completion", json={"prompt": "Is fire hot? Answer:", "n_predict": 8, "temperature": 0, "grammar": 'root ::= " " ("yes" | "no")'}, timeout=60).json()
    assert r["content"] in (" yes", " no") and r["stop_type"] == "eos"
    r = httpx.post(gserver.url + "/completion", json={"prompt": "A person as JSON:", "n_predict": 80, "temperature": 0, "json_schema": PERSON}, timeout=60).json()
    assert set(json.loads(r["content"])) == {"name", "age"}
    bad = httpx.post(gserver.url + "/completion", json={"prompt": "x", "grammar": "root ::= \"a"})
    assert bad.status_code == 400 and bad.json()["error"]["message"].startswith("grammar:")
    bad = httpx.post(gserver.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {}}})
    assert bad.status_code == 400 and "response_format" in bad.json()["error"]["message"]


def test_openai_response_format(gserver):
    import openai  # installed by scripts/setup: a missing SDK is a failure, not a skip
    c = openai.OpenAI(base_url=gserver.url + "/v1", api_key="x")
    msgs = [{"role": "user", "content": "Give me a person as JSON."}]
    r = c.chat.completions.create(model="x", messages=msgs, max_tokens=80, temperature=0,
                                  response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON}})
    assert set(json.loads(r.choices[0].message.content)) == {"name", "age"}
    r = c.chat.completions.create(model="x", messages=msgs, max_tokens=60, temperature=0, response_format={"type": "json_object"})
    text = r.choices[0].message.content
    # this small model rambles inside the object: a finished answer parses, a cut one is an object's prefix
    assert text.lstrip().startswith("{")
    if r.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(text), dict)


def test_server_wide_grammar_flag(engine):
    from llamars.config import SamplingDefaults

    cfg = ServerConfig(model=engine.model_path, sampling=SamplingDefaults(grammar='root ::= " " ("yes" | "no")'))
    s = LiveServer(create_app(cfg, engine=engine)).start()
    try:
        r = httpx.post(s.url + "/completion", json={"prompt": "Is water wet? Answer:", "n_predict": 8, "temperature": 0}, timeout=60).json()
        assert r["content"] in (" yes", " no")
        # a request's own constraint replaces the server's
        r = httpx.post(s.url + "/completion", json={"prompt": "Count:", "n_predict": 8, "temperature": 0, "grammar": 'root ::= " " [0-9]{3}'}, timeout=60).json()
        assert len(r["content"]) == 4 and r["content"][1:].isdigit()
    finally:
        s.stop()
