"""Native tool-call formats: how a model writes tool calls, detected from its chat
template; for each, the grammar that makes the output a valid call of the offered tools
(lazy on the format's trigger words for `tool_choice: auto`) and the parser that turns
the output, complete or still growing, back into text and calls.

| format        | detected by (template source)               | the model writes                                   |
|---------------|---------------------------------------------|----------------------------------------------------|
| hermes        | `<tool_call>`                               | `<tool_call>{"name", "arguments"}</tool_call>`     |
| llama3        | `<|start_header_id|>` and `ipython`         | `{"name", "parameters"}` (after `<|python_tag|>`)  |
| mistral-nemo  | `[TOOL_CALLS]`                              | `[TOOL_CALLS][{"name", "arguments", "id"}]`        |
| functionary   | `>>>all`                                    | `NAME\\n{args}` … `>>>NAME\\n{args}`; `all\\n` text  |
| deepseek-r1   | `<｜tool▁calls▁begin｜>`                      | `<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME` + json |
| command-r7b   | `<|START_ACTION|>`                          | `<|START_ACTION|>[{"tool_name", "parameters"}]…`   |
| gpt-oss       | `<|channel|>` (harmony, `harmony.py`)       | `<|channel|>commentary to=functions.NAME …<|message|>{args}` |
| generic       | anything else                               | `{"tool_call": {…}}` / `{"tool_calls": […]}` / `{"response": "…"}` |
"""
from __future__ import annotations

import json
import re
from typing import List

from .base import Call, Constraint, Format, Parsed, _call_at, _call_start, _hold, _json_rule, _one_of
from .harmony import Harmony, is_harmony
from .jsonscan import object_fields, partial_string, skip_ws, value_end
from .spec import Tool



_REPLY = {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"], "additionalProperties": False}


class Generic(Format):
    """Templates with no tool format of their own: the whole reply is one JSON object
    (llama.cpp's generic format), always grammar-constrained. llama-server gives these
    templates no tool calls at all (their turns end in content); here `tool_choice: auto`
    may call a tool on a turn that follows the user, and the turn after tool results
    answers in content (`answer`), so an agent loop ends as it does there; `required`
    or a named function still calls."""

    name = "generic"

    def answer(self) -> Constraint:
        """The reply after tool results under `tool_choice: auto`: `{"response": …}` only."""
        return Constraint(json_schema=_REPLY)

    def constraint(self, tools, choice, parallel):
        call = _one_of(tools, choice)
        if parallel:
            calls = {"type": "object", "properties": {"tool_calls": {"type": "array", "items": call, "minItems": 1}}, "required": ["tool_calls"], "additionalProperties": False}
        else:
            calls = {"type": "object", "properties": {"tool_call": call}, "required": ["tool_call"], "additionalProperties": False}
        if choice.mode == "required":
            schema = calls
        else:
            schema = {"anyOf": [calls, _REPLY]}
        return Constraint(json_schema=schema)

    def system_prompt(self, tools: List[Tool]) -> str:
        listed = json.dumps([t.as_openai() for t in tools], ensure_ascii=False, indent=2)
        return (
            "You can call any of the following tools to satisfy the user's requests: " + listed + "\n\n"
            "Respond in JSON format, either with `tool_call` (a request to call tools) or with `response` reply to the user's request"
        )

    def parse(self, text, partial):
        i = skip_ws(text, 0)
        if i >= len(text) or text[i] != "{":
            return Parsed(text if not partial or i < len(text) else "")
        fields, end = object_fields(text, i)
        if "response" in fields:
            a, b = fields["response"]
            if text[a : a + 1] == '"':
                return Parsed(partial_string(text, a))
        calls: List[Call] = []
        if "tool_call" in fields:
            a, _ = fields["tool_call"]
            if text[a : a + 1] == "{":
                calls.append(_call_at(text, a, "name", "arguments", "id")[0])
        elif "tool_calls" in fields:
            a, _ = fields["tool_calls"]
            j = skip_ws(text, a + 1) if text[a : a + 1] == "[" else len(text)
            while j < len(text) and text[j] == "{":
                c, e = _call_at(text, j, "name", "arguments", "id")
                calls.append(c)
                if e is None:
                    break
                j = skip_ws(text, e)
                if j < len(text) and text[j] == ",":
                    j = skip_ws(text, j + 1)
        if not partial and not any(c.done for c in calls) and (end is None or not fields):
            return Parsed(text)  # not the format's JSON (or cut off before any call ended)
        return Parsed("", calls)


class _Tagged(Format):
    """Calls written as JSON objects after an opening tag (Hermes, Llama 3, Mistral)."""

    open_tag = ""
    close_tag = ""
    name_key, args_key, id_key = "name", "arguments", None
    in_array = False

    def call_rule(self) -> str:
        return "fn"

    def constraint(self, tools, choice, parallel):
        extra = {"id": {"type": "string", "pattern": "^[a-zA-Z0-9]{9}$"}} if self.id_key else None
        fn = _json_rule(_one_of(tools, choice, name_key=self.name_key, args_key=self.args_key, extra=extra))
        more = '("\\n"? call)*' if parallel else ""
        close = f' "\\n"? {json.dumps(self.close_tag)}' if self.close_tag else ""
        lark = f'%llguidance {{}}\nstart: call {more}\ncall: {json.dumps(self.open_tag)} "\\n"? fn{close}\nfn: {fn}\n'
        if self.in_array:
            arr = {"type": "array", "items": _one_of(tools, choice, name_key=self.name_key, args_key=self.args_key, extra=extra), "minItems": 1}
            if not parallel:
                arr["maxItems"] = 1
            lark = f"%llguidance {{}}\nstart: {json.dumps(self.open_tag)} arr\narr: {_json_rule(arr)}\n"
        return Constraint(lark=lark, triggers=[] if choice.mode == "required" else list(self.markers))

    def parse(self, text, partial):
        k = _call_start(text, self.markers, "[" if self.in_array else "{", partial)
        if k < 0:
            return Parsed(_hold(text, self.markers + self.held) if partial else text)
        content, calls, j = text[:k], [], k
        while True:
            j = skip_ws(text, j)
            tag = next((m for m in self.markers if text.startswith(m, j)), None)
            if tag is None:
                break
            j = skip_ws(text, j + len(tag))
            if self.in_array:
                if text[j : j + 1] != "[":
                    break
                j = skip_ws(text, j + 1)
                while text[j : j + 1] == "{":
                    c, e = _call_at(text, j, self.name_key, self.args_key, self.id_key)
                    calls.append(c)
                    if e is None:
                        break
                    j = skip_ws(text, e)
                    if text[j : j + 1] == ",":
                        j = skip_ws(text, j + 1)
                break
            if text[j : j + 1] != "{":
                break
            c, e = _call_at(text, j, self.name_key, self.args_key, self.id_key)
            calls.append(c)
            if e is None:
                break
            j = skip_ws(text, e)
            if self.close_tag and text.startswith(self.close_tag, j):
                j += len(self.close_tag)
        return Parsed(content, calls)


class Hermes(_Tagged):
    name = "hermes"
    markers = ("<tool_call>",)
    open_tag, close_tag = "<tool_call>", "</tool_call>"


class Llama3(_Tagged):
    name = "llama3"
    markers = ("<|python_tag|>", '{"name"', '{ "name"')
    name_key, args_key = "name", "parameters"

    def constraint(self, tools, choice, parallel):
        fn = _json_rule(_one_of(tools, choice, name_key="name", args_key="parameters"))
        lark = f'%llguidance {{}}\nstart: "<|python_tag|>"? fn\nfn: {fn}\n'
        return Constraint(lark=lark, triggers=[] if choice.mode == "required" else list(self.markers))

    def parse(self, text, partial):
        k = _call_start(text, self.markers, "{", partial)
        if k < 0:
            return Parsed(_hold(text, self.markers) if partial else text)
        j = k + len("<|python_tag|>") if text.startswith("<|python_tag|>", k) else k
        j = skip_ws(text, j)
        if text[j : j + 1] != "{":
            return Parsed(text[:k])
        c, _ = _call_at(text, j, "name", "parameters")
        return Parsed(text[:k], [c])


class MistralNemo(_Tagged):
    name = "mistral-nemo"
    markers = ("[TOOL_CALLS]",)
    open_tag = "[TOOL_CALLS]"
    id_key = "id"
    in_array = True


class CommandR7B(_Tagged):
    name = "command-r7b"
    markers = ("<|START_ACTION|>",)
    open_tag, close_tag = "<|START_ACTION|>", "<|END_ACTION|>"
    name_key, args_key, id_key = "tool_name", "parameters", "tool_call_id"
    in_array = True
    reasoning = ("<|START_THINKING|>", "<|END_THINKING|>")
    held = ("<|START_RESPONSE|>", "<|END_RESPONSE|>")

    def constraint(self, tools, choice, parallel):
        item = _one_of(tools, choice, name_key="tool_name", args_key="parameters", first={"tool_call_id": {"type": "string", "pattern": "^[0-9]{1,3}$"}})
        arr = {"type": "array", "items": item, "minItems": 1, **({} if parallel else {"maxItems": 1})}
        lark = f'%llguidance {{}}\nstart: "<|START_ACTION|>" arr "<|END_ACTION|>"\narr: {_json_rule(arr)}\n'
        return Constraint(lark=lark, triggers=[] if choice.mode == "required" else list(self.markers))

    def strip_content(self, text):
        return text.replace("<|START_RESPONSE|>", "").replace("<|END_RESPONSE|>", "")


class DeepSeekR1(Format):
    name = "deepseek-r1"
    B, CB, SEP, CE, E = "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>", "<｜tool▁calls▁end｜>"
    markers = (B, CB)

    def constraint(self, tools, choice, parallel):
        chosen = [t for t in tools if choice.name in (None, t.name)]
        alts = " | ".join(f"fn{i}" for i in range(len(chosen)))
        rules = "\n".join(
            f'fn{i}: {json.dumps(self.CB + "function" + self.SEP + t.name)} "\\n```json\\n" {_json_rule(t.parameters)} "\\n```" {json.dumps(self.CE)}'
            for i, t in enumerate(chosen)
        )
        more = '("\\n"? call)*' if parallel else ""
        lark = f'%llguidance {{}}\nstart: {json.dumps(self.B)}? call {more} {json.dumps(self.E)}?\ncall: {alts}\n{rules}\n'
        return Constraint(lark=lark, triggers=[] if choice.mode == "required" else list(self.markers))

    def parse(self, text, partial):
        k = min((p for p in (text.find(m) for m in self.markers) if p >= 0), default=-1)
        if k < 0:
            return Parsed(_hold(text, self.markers) if partial else text)
        calls, j = [], k
        while True:
            j = text.find(self.CB, j)
            if j < 0:
                break
            s = text.find(self.SEP, j)
            if s < 0:
                break
            nl = text.find("\n", s)
            if nl < 0:
                break
            name = text[s + len(self.SEP) : nl].strip()
            a = text.find("```json", nl)
            if a < 0:
                calls.append(Call(name, "", False))
                break
            a = skip_ws(text, a + len("```json"))
            e = value_end(text, a)
            calls.append(Call(name, text[a:e] if e else text[a:].rstrip(), e is not None))
            if e is None:
                break
            j = e
        return Parsed(text[:k], calls)


_IDENT = re.compile(r"[A-Za-z0-9_.:-]+")


class Functionary(Format):
    """Functionary v3.2: the reply is a series of `NAME\\n{args}` or `all\\ntext`
    segments separated by `>>>` (the generation prompt already wrote the first `>>>`).
    As llama.cpp's parser, a call is a name line followed by a JSON object; text that is
    no segment is content, and a `>>>` inside an argument string is not a separator."""

    name = "functionary-v3.2"
    markers = (">>>",)

    def constraint(self, tools, choice, parallel):
        chosen = [t for t in tools if choice.name in (None, t.name)]
        alts = " | ".join(f"fn{i}" for i in range(len(chosen)))
        rules = "\n".join(f'fn{i}: {json.dumps(t.name + chr(10))} {_json_rule(t.parameters)}' for i, t in enumerate(chosen))
        more = '(">>>" call)*' if parallel else ""
        lazy = choice.mode != "required"
        # the prompt wrote the first `>>>`; a lazy grammar may start at the trigger `>>>`
        lead = '">>>"? ' if lazy else ""
        lark = f'%llguidance {{}}\nstart: {lead}call {more}\ncall: {alts}\n{rules}\n'
        triggers = [">>>"] + [t.name + "\n" for t in chosen] if lazy else []
        return Constraint(lark=lark, triggers=triggers)

    def parse(self, text, partial):
        content: List[str] = []
        calls: List[Call] = []
        i = 3 if text.startswith(">>>") else 0  # the start of a segment (after its `>>>`)
        while i < len(text):
            nl = text.find("\n", i)
            head = text[i:nl] if nl >= 0 else text[i:]
            may_be_header = head == "all" or _IDENT.fullmatch(head) is not None
            if nl < 0:
                if partial and ("all".startswith(head) or may_be_header or ">>>".startswith(text[i:])):
                    break  # the segment header is still arriving
                content.append(text[max(i - 3, 0) :])
                break
            if head == "all":
                end = text.find(">>>", nl + 1)
                body = text[nl + 1 : end if end >= 0 else len(text)]
                content.append(_hold(body, self.markers) if partial and end < 0 else body)
                if end < 0:
                    break
                i = end + 3
                continue
            a = skip_ws(text, nl + 1)
            if may_be_header and text[a : a + 1] == "{":
                e = value_end(text, a)
                calls.append(Call(head, text[a:e] if e else text[a:].rstrip(), e is not None))
                if e is None:
                    break
                j = skip_ws(text, e)
                if text.startswith(">>>", j):
                    i = j + 3
                    continue
                rest = text[j:]
                content.append(_hold(rest, self.markers) if partial else rest)
                break
            if partial and may_be_header and a >= len(text):
                break  # a name line: the arguments have not begun
            content.append(text[max(i - 3, 0) :])
            break
        return Parsed("".join(content), calls)


FORMATS = {f.name: f for f in (Generic(), Hermes(), Llama3(), MistralNemo(), Functionary(), DeepSeekR1(), CommandR7B(), Harmony())}


def detect_format(source: str) -> Format:
    """The tool-call format a chat template's source speaks (llama.cpp's detection)."""
    s = source or ""
    if is_harmony(s):
        return FORMATS["gpt-oss"]
    if "<|START_ACTION|>" in s and "<|START_THINKING|>" in s:
        return FORMATS["command-r7b"]
    if "<｜tool▁calls▁begin｜>" in s:
        return FORMATS["deepseek-r1"]
    if ">>>all" in s:
        return FORMATS["functionary-v3.2"]
    if "[TOOL_CALLS]" in s:
        return FORMATS["mistral-nemo"]
    if "<tool_call>" in s:
        return FORMATS["hermes"]
    if "<|start_header_id|>" in s and "ipython" in s:
        return FORMATS["llama3"]
    return FORMATS["generic"]
