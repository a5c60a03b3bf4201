"""What every tool-call format shares: the parsed shapes (`Call`, `Parsed`), the grammar a
format asks for (`Constraint`), the `Format` interface, and the helpers formats build on
(hold-back of a marker's prefix while streaming, call objects in partial JSON, the JSON
schema of a call, `%json` rules hardened by the core)."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .. import _core
from .jsonscan import object_fields, skip_ws
from .spec import Tool, ToolChoice


@dataclass
class Call:
    name: Optional[str]  # None until the name is complete
    arguments: str  # JSON text of the arguments, as far as it has arrived
    done: bool = False
    id: Optional[str] = None


@dataclass
class Parsed:
    content: str
    calls: List[Call] = field(default_factory=list)


@dataclass
class Constraint:
    """`lark` (llguidance Lark text) or `json_schema`; `triggers` make it lazy."""

    lark: Optional[str] = None
    json_schema: Optional[dict] = None
    triggers: List[str] = field(default_factory=list)


def close_thinking(c: Constraint, close: str) -> Constraint:
    """`c` for a prompt that opened the model's thinking block: a forced (not lazy)
    grammar first closes the block, so the calls follow the (empty) reasoning instead of
    being read as unfinished thoughts. A lazy grammar starts at its trigger, after the
    thinking, and stays as it is."""
    if c.triggers:
        return c
    head = f'%llguidance {{}}\nstart: {json.dumps(close)} ("\\n" "\\n"?)? tool_calls\n'
    if c.lark:
        body = c.lark[len("%llguidance {}\n") :].replace("start:", "tool_calls:", 1)
        return Constraint(lark=head + body)
    return Constraint(lark=head + "tool_calls: %json " + json.dumps(c.json_schema) + "\n")


def _hold(text: str, markers: Tuple[str, ...]) -> str:
    """While streaming: `text` without a tail that may be the start of a marker."""
    cut = len(text)
    for m in markers:
        for k in range(min(len(m) - 1, len(text)), 0, -1):
            if text.endswith(m[:k]):
                cut = min(cut, len(text) - k)
                break
    return text[:cut]


def _call_start(text: str, markers: Tuple[str, ...], opener: str, partial: bool) -> int:
    """Where the tool-call part of `text` begins: the first marker followed (after
    blanks) by `opener`, or a marker that is itself the call's JSON (Llama 3's `{"name"`);
    -1 if none. A marker followed by other text is just text (a model may write
    `<tool_call>` in prose); one at the end of a partial text is undecided and counts,
    so the content before it is held."""
    pos = 0
    while True:
        k, m = min(((text.find(m, pos), m) for m in markers if m in text[pos:]), default=(-1, ""))
        if k < 0 or m.startswith("{"):
            return k
        j = skip_ws(text, k + len(m))
        if (partial and j >= len(text)) or text.startswith(opener, j):
            return k
        pos = k + 1


def _call_at(s: str, i: int, name_key: str, args_key: str, id_key: Optional[str] = None) -> Tuple[Call, Optional[int]]:
    """The call object starting at `s[i]` and the index after it (None if incomplete)."""
    fields, end = object_fields(s, i)
    name = None
    if name_key in fields and fields[name_key][1] is not None:
        a, b = fields[name_key]
        v = json.loads(s[a:b])
        name = v if isinstance(v, str) else None
    args = "{}" if end is not None else ""
    if args_key in fields:
        a, b = fields[args_key]
        args = s[a:b] if b is not None else s[a:].rstrip()
    cid = None
    if id_key and id_key in fields and fields[id_key][1] is not None:
        a, b = fields[id_key]
        v = json.loads(s[a:b])
        cid = str(v)
    return Call(name, args, end is not None, cid), end


def _call_schema(t: Tool, name_key: str = "name", args_key: str = "arguments", extra: Optional[dict] = None, first: Optional[dict] = None) -> dict:
    # the grammar keeps this key order: the order the format's template writes (and the model learnt)
    props = {**(first or {}), name_key: {"const": t.name}, args_key: t.parameters, **(extra or {})}
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def _one_of(tools: List[Tool], choice: ToolChoice, **kw) -> dict:
    chosen = [t for t in tools if choice.name in (None, t.name)]
    schemas = [_call_schema(t, **kw) for t in chosen]
    return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}


def _json_rule(schema: dict) -> str:
    """A `%json` rule, with the core's bounds on whitespace and digits (as for json_schema)."""
    return "%json " + _core.harden_json_schema(json.dumps(schema))


class Format:
    name = "generic"
    markers: Tuple[str, ...] = ()  # text that starts the tool-call part of an output
    held: Tuple[str, ...] = ()  # other markup kept out of the content (held while partial)
    reasoning: Tuple[str, str] = ("<think>", "</think>")
    #: the whole reply is split by the format (`parse_channels`: reasoning too), not by
    #: reasoning tags (harmony)
    channels = False
    #: control tokens the format's markup uses: rendered in the generated text
    preserved: Tuple[str, ...] = ()

    def constraint(self, tools: List[Tool], choice: ToolChoice, parallel: bool) -> Constraint:
        raise NotImplementedError

    def parse(self, text: str, partial: bool) -> Parsed:
        raise NotImplementedError

    def strip_content(self, text: str) -> str:
        return text

    def parse_channels(self, text: str, partial: bool) -> Tuple[Optional[str], Parsed]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<tool format {self.name}>"
