"""Structured output on the real model: 26 JSON schemas (the kinds of features llama.cpp's
schema tests cover) × seeds — every output parses and validates with `jsonschema`; GBNF
samples (arithmetic, lists, JSON, a C-like fragment, escapes) — every output is accepted
by an independent reference recognizer (tests/gbnf_ref.py)."""
from __future__ import annotations

import datetime
import json
import re
import uuid

import jsonschema
import pytest
from gbnf_ref import accepts

S = {"type": "string", "maxLength": 16}
SCHEMAS = {
    "string": {"type": "string", "maxLength": 30},
    "integer": {"type": "integer"},
    "number": {"type": "number"},
    "boolean": {"type": "boolean"},
    "null": {"type": "null"},
    "enum": {"enum": ["red", "green", "blue", 42, None]},
    "const": {"const": {"kind": "fixed", "n": 3}},
    "object-required": {"type": "object", "properties": {"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 150}},
                        "required": ["name", "age"], "additionalProperties": False},
    "object-optional": {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "integer"}, "c": S}, "additionalProperties": False},
    "nested": {"type": "object", "properties": {"user": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": S, "maxItems": 3}},
                                                          "required": ["id", "tags"], "additionalProperties": False}},
               "required": ["user"], "additionalProperties": False},
    "array-bounds": {"type": "array", "items": {"type": "integer", "minimum": -50, "maximum": 50}, "minItems": 2, "maxItems": 4},
    "prefix-items": {"type": "array", "prefixItems": [{"type": "string", "maxLength": 8}, {"type": "integer"}, {"type": "boolean"}], "items": False},
    "string-length": {"type": "string", "minLength": 3, "maxLength": 6},
    "pattern": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{3}$"},
    "date": {"type": "string", "format": "date"},
    "time": {"type": "string", "format": "time"},
    "date-time": {"type": "string", "format": "date-time"},
    "uuid": {"type": "string", "format": "uuid"},
    "int-range": {"type": "integer", "minimum": 10, "maximum": 99},
    "exclusive": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    "any-of": {"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"x": S}, "required": ["x"], "additionalProperties": False}]},
    "one-of": {"oneOf": [{"type": "boolean"}, {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"}]},
    "all-of": {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                         {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"]}]},
    "ref-defs": {"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}, "required": ["x", "y"], "additionalProperties": False}},
                 "type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 1, "maxItems": 3},
    "nullable": {"type": "object", "properties": {"v": {"type": ["string", "null"], "maxLength": 10}}, "required": ["v"], "additionalProperties": False},
    "additional-schema": {"type": "object", "additionalProperties": {"type": "integer"}, "maxProperties": 3},
}
FORMATS = {
    "date": lambda s: datetime.date.fromisoformat(s),
    "time": lambda s: re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]\d\d:\d\d)?", s) or (_ for _ in ()).throw(ValueError(s)),
    "date-time": lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00")),
    "uuid": lambda s: uuid.UUID(s),
}
PROMPT = "Write one example value as JSON:\n"


@pytest.mark.parametrize("seed", [11, 12])
@pytest.mark.parametrize("name", list(SCHEMAS))
def test_json_schema_outputs_validate(engine, name, seed):
    schema = SCHEMAS[name]
    r = engine.generate(PROMPT, json_schema=schema, temperature=1.0, seed=seed, max_tokens=160)
    assert r.stop_reason == "eos", f"{name}: the grammar did not finish in 160 tokens: {r.text!r}"
    value = json.loads(r.text)
    jsonschema.validate(value, schema)
    fmt = schema.get("format")
    if fmt:
        FORMATS[fmt](value)


def test_there_are_at_least_25_schemas():
    assert len(SCHEMAS) >= 25


GRAMMARS = {
    "arithmetic": r'''
root  ::= expr
expr  ::= term (ws op ws term){0,3}
term  ::= num | "(" inner ")"
inner ::= num (op num){1,2}
op    ::= [-+*/]
num   ::= [1-9] [0-9]{0,3}
ws    ::= " "?
''',
    "list": r'''
# a markdown list of up to five short items
root ::= item{1,5}
item ::= "- " [a-z] [a-z ]{0,18} "\n"
''',
    "json": r'''
root  ::= "{" ws pair (ws "," ws pair){0,3} ws "}"
pair  ::= str ws ":" ws value
value ::= str | num | "true" | "false" | "null"
str   ::= "\"" [a-zA-Z0-9 _]{0,12} "\""
num   ::= "-"? [0-9]{1,6} ("." [0-9]{1,3})?
ws    ::= [ \t\n]{0,2}
''',
    "c-like": r'''
root    ::= line{1,3}
line    ::= decl | comment
comment ::= "// " [^\n\x00]{1,24} "\n"
decl    ::= type " " ident " = " expr ";\n"
type    ::= "int" | "float" | "char"
ident   ::= [a-z_] [a-z0-9_]{0,8}
expr    ::= atom (" " op " " atom){0,2}
atom    ::= ident | [0-9]{1,4}
op      ::= "+" | "-" | "*" | "/" | "%"
''',
    "escapes": r'''
root ::= "\x41" "\u00e9" [\x30-\x32] sep "\U0001F600"?
sep  ::= "\t" | "\\" | "\""
''',
}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", list(GRAMMARS))
def test_gbnf_samples_are_in_the_language(engine, name, seed):
    g = GRAMMARS[name]
    r = engine.generate("Here is an example:\n", grammar=g, temperature=1.0, seed=seed, max_tokens=200)
    assert r.stop_reason == "eos", f"{name}: the grammar did not finish: {r.text!r}"
    assert accepts(g, r.text), f"{name}: {r.text!r} is not in the language"


def test_reference_recognizer_rejects_what_it_should():
    assert accepts(GRAMMARS["arithmetic"], "12 + (3*4)")
    assert not accepts(GRAMMARS["arithmetic"], "12 + (3)")
    assert accepts(GRAMMARS["escapes"], "Aé1\\")
    assert accepts(GRAMMARS["escapes"], "Aé2\t\U0001F600")
    assert not accepts(GRAMMARS["escapes"], "Aé3\t")
    assert accepts(GRAMMARS["c-like"], "// hi\nint x = y + 2;\n")
    assert not accepts(GRAMMARS["c-like"], "int 9x = 1;\n")


def test_escapes_force_exact_text(engine):
    r = engine.generate("x", grammar=r'root ::= "\x48\x69" " " "\u00fcber" [\u4e00-\u4e00]', temperature=0, max_tokens=20)
    assert r.text == "Hi über一" and r.stop_reason == "eos"
