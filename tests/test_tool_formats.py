"""Tool calling, per native format: detection from the chat template, rendering of tools,
prior calls and tool results (tests/fixtures/tool_templates/, small templates written in
each format's style), parsing of model outputs whole and streamed in fragments, the
grammars each format constrains calls with (compiled by the real engine), and validation
of the OpenAI tool fields. Pure Python except the grammar checks, which load the model."""
from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional

import pytest

from llamars import InvalidRequestError
from llamars.chat.plan import capabilities, plan_chat
from llamars.chat.templates import ChatTemplate
from llamars.tools import FORMATS, ReplyParser, ToolSpecError, detect_format, parse_reply, parse_tool_choice, parse_tools
from llamars.tools.spec import normalize_history

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "tool_templates"

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search", "description": "Search the web",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"},
            "filters": {"type": "object", "properties": {
                "lang": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "range": {"type": "object", "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}}},
            }},
        }, "required": ["query"]}}},
]

# A conversation with one earlier tool call and its result.
HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "c"}'}}]},
    {"role": "tool", "tool_call_id": "call_7", "content": "18°C and sunny"},
]


def template(stem: str) -> ChatTemplate:
    return ChatTemplate.from_source((FIXTURES / f"{stem}.jinja").read_text(encoding="utf-8"), stem, bos_token="<s>", eos_token="</s>")


# ================================================================ templates
# stem → (format, the prior call as the template writes it, the result as it writes it)
NATIVE = {
    "hermes": ("hermes",
               '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}\n</tool_call>',
               "<|im_start|>user\n<tool_response>\n18°C and sunny\n</tool_response>\n<|im_end|>"),
    "llama3": ("llama3",
               '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}<|eom_id|>',
               "<|start_header_id|>ipython<|end_header_id|>\n\n18°C and sunny<|eot_id|>"),
    "mistral_nemo": ("mistral-nemo",
                     '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}, "id": "call_7"}]</s>',
                     '[TOOL_RESULTS]{"content": "18°C and sunny", "call_id": "call_7"}[/TOOL_RESULTS]'),
    "functionary_v3_2": ("functionary-v3.2",
                         '<|start_header_id|>assistant<|end_header_id|>\n\n>>>get_weather\n{"city": "Paris", "unit": "c"}<|eot_id|>',
                         "<|start_header_id|>tool<|end_header_id|>\n\n18°C and sunny<|eot_id|>"),
    "deepseek_r1": ("deepseek-r1",
                    '<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"city": "Paris", "unit": "c"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
                    "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18°C and sunny<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"),
    "command_r7b": ("command-r7b",
                    '<|START_ACTION|>[\n    {"tool_call_id": "call_7", "tool_name": "get_weather", "parameters": {"city": "Paris", "unit": "c"}}\n]<|END_ACTION|>',
                    '<|START_TOOL_RESULT|>[\n    {"tool_call_id": "call_7", "results": {"0": "18°C and sunny"}, "is_error": null}\n]<|END_TOOL_RESULT|>'),
}
GEN_PROMPT_END = {
    "hermes": "<|im_start|>assistant\n",
    "llama3": "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "mistral_nemo": "[/TOOL_RESULTS]",
    "functionary_v3_2": "<|start_header_id|>assistant<|end_header_id|>\n\n>>>",
    "deepseek_r1": "<｜Assistant｜><think>\n",
    "command_r7b": "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
}


@pytest.mark.parametrize("stem", sorted(NATIVE))
def test_native_template_detection_and_capabilities(stem):
    t = template(stem)
    assert detect_format(t.source).name == NATIVE[stem][0]
    caps = capabilities(t)
    assert (caps.system, caps.tools, caps.tool_calls, caps.tool_responses) == (True, True, True, True)


@pytest.mark.parametrize("stem", sorted(NATIVE))
def test_native_template_renders_tools_calls_and_results(stem):
    fmt_name, call_text, result_text = NATIVE[stem]
    plan = plan_chat(template(stem), HISTORY, tools=TOOLS)
    p = plan.prompt
    assert plan.format is FORMATS[fmt_name] and plan.choice.mode == "auto"
    # every tool's definition (name, description, parameter schema) is shown once, before the conversation
    first_user = p.index("Weather in Paris?")
    for t in TOOLS:
        fn = t["function"]
        assert p.count(fn["description"]) == 1
        assert p.index(fn["description"]) < first_user and p.index(fn["name"]) < first_user
    assert '"filters"' in p and '"enum"' in p
    # the prior call (name + arguments as JSON) sits in the assistant turn, the result after it
    assert call_text in p, p
    assert result_text in p, p
    assert first_user < p.index(call_text) < p.index(result_text)
    assert "Be brief." in p
    assert p.endswith(GEN_PROMPT_END[stem])
    assert plan.thinking_open == (stem == "deepseek_r1")
    # a native format may call again after the tool results (only the generic format answers)
    assert plan.constraint == FORMATS[fmt_name].constraint(parse_tools(TOOLS), plan.choice, False) != FORMATS["generic"].answer()
    # no tools: no tool definitions, and no format
    plain = plan_chat(template(stem), [{"role": "user", "content": "Hi"}])
    assert "Search the web" not in plain.prompt and plain.format is None and plain.constraint is None


def test_llama3_template_lists_tools_as_json():
    p = plan_chat(template("llama3"), HISTORY, tools=TOOLS).prompt
    assert "Environment: ipython" in p
    assert json.dumps(TOOLS[0], indent=4) in p


def test_capabilities_of_plain_and_builtin_templates():
    caps = capabilities(ChatTemplate.builtin("gemma"))
    assert (caps.system, caps.tools, caps.tool_calls) == (True, False, False)
    bare = ChatTemplate.from_source("{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}")
    caps = capabilities(bare)
    assert (caps.system, caps.tools, caps.tool_calls) == (True, False, False)
    strict = ChatTemplate.from_source(
        "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('no system') }}{% endif %}{{ m.content }}{% endfor %}")
    assert capabilities(strict).system is False


def test_gemma_generic_format_folds_tool_history():
    t = ChatTemplate.builtin("gemma")
    assert detect_format(t.source).name == "generic"
    plan = plan_chat(t, HISTORY, tools=TOOLS)
    p = plan.prompt
    assert plan.format is FORMATS["generic"]
    # the generic system prompt (folded into gemma's first user turn) lists the tools
    assert p.startswith("<start_of_turn>user\nBe brief.\n\nYou can call any of the following tools")
    assert '"name": "get_weather"' in p and '"name": "search"' in p and "Search the web" in p
    assert "`tool_call`" in p and "`response`" in p
    # the prior call becomes the model's JSON, the result a user turn in JSON
    turns = p.split("<start_of_turn>")
    model_turn = next(x for x in turns if x.startswith("model\n{"))
    body = json.loads(model_turn[len("model\n"):].split("<end_of_turn>")[0])
    assert body == {"tool_call": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}, "id": "call_7"}}
    result_turn = turns[turns.index(model_turn) + 1]
    assert result_turn.startswith("user\n")
    assert json.loads(result_turn[len("user\n"):].split("<end_of_turn>")[0]) == {"tool_response": {"tool": "get_weather", "content": "18°C and sunny"}}
    assert p.endswith("<start_of_turn>model\n")
    # the generic format's grammar is a JSON schema, not lazy; after the tool results,
    # under auto, it allows only the reply (the loop ends in content, as llama-server's)
    kw = plan.gen_kwargs()
    assert set(kw) == {"json_schema"}
    assert kw["json_schema"] == {"type": "object", "properties": {"response": {"type": "string"}}, "required": ["response"], "additionalProperties": False}
    # a turn that follows the user may call; required must call, also after results
    first = plan_chat(t, HISTORY[:2], tools=TOOLS)
    assert HISTORY[1]["role"] == "user" and first.constraint == FORMATS["generic"].constraint(parse_tools(TOOLS), first.choice, False)
    assert "anyOf" in first.gen_kwargs()["json_schema"]
    again = plan_chat(t, HISTORY, tools=TOOLS, tool_choice="required").gen_kwargs()["json_schema"]
    assert "response" not in json.dumps(again) and "tool_call" in json.dumps(again)


def test_generic_folds_parallel_calls_and_keeps_content():
    msgs = [
        {"role": "user", "content": "Paris and Oslo?"},
        {"role": "assistant", "content": "Checking both.", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "rain"},
    ]
    p = plan_chat(ChatTemplate.builtin("chatml"), msgs, tools=TOOLS).prompt
    turn = p.split("<|im_start|>assistant\n")[1].split("<|im_end|>")[0]
    head, js = turn.split("\n", 1)
    assert head == "Checking both."
    assert json.loads(js) == {"tool_calls": [
        {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a"},
        {"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "b"}]}
    assert '{"tool_response": {"tool": "get_weather", "content": "sunny"}}' in p
    assert '{"tool_response": {"tool": "get_weather", "content": "rain"}}' in p


def test_tool_choice_none_renders_no_tools():
    plan = plan_chat(template("hermes"), HISTORY, tools=TOOLS, tool_choice="none")
    assert plan.format is None and plan.constraint is None and plan.gen_kwargs() == {}
    assert "<tools>" not in plan.prompt
    assert '<tool_call>\n{"name": "get_weather"' in plan.prompt  # the history still renders natively


def test_plan_rejects_bad_messages_with_a_field_name():
    from llamars.chat.templates import TemplateError

    with pytest.raises((TemplateError, ToolSpecError), match=r"messages\[0\]"):
        plan_chat(template("hermes"), ["hi"], tools=TOOLS)


# ================================================================ parsing
@dataclass
class Case:
    id: str
    fmt: str
    text: str
    content: str = ""
    calls: List[tuple] = field(default_factory=list)  # (name, arguments object)
    reasoning: Optional[str] = None
    thinking_open: bool = False


W_PARIS = ("get_weather", {"city": "Paris"})
W_ZURICH = ("get_weather", {"city": "Zürich", "unit": "c"})
S_NESTED = ("search", {"query": 'say "hi" — 日本語 é 😀 \\ done', "filters": {"lang": "fr", "tags": ["a", "b\nc"], "range": {"from": 1, "to": 20}}})
S_NESTED_JSON = r'{"query": "say \"hi\" — 日本語 \u00e9 \ud83d\ude00 \\ done", "filters": {"lang": "fr", "tags": ["a", "b\nc"], "range": {"from": 1, "to": 20}}}'
THINK = "The user wants the weather, so I call get_weather."


def _hermes(name, args, sep="\n"):
    return f"<tool_call>{sep}" + json.dumps({"name": name, "arguments": args}, ensure_ascii=False) + f"{sep}</tool_call>"


def _ds(name, args_json):
    return f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args_json}\n```<｜tool▁call▁end｜>"


DSB, DSE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"

CASES = [
    # ------------------------------------------------------------ hermes
    Case("hermes-plain", "hermes", "The sky is blue because of Rayleigh scattering.", "The sky is blue because of Rayleigh scattering."),
    Case("hermes-one", "hermes", _hermes(*W_PARIS), "", [W_PARIS]),
    Case("hermes-content-first", "hermes", "Let me check the weather.\n" + _hermes(*W_ZURICH), "Let me check the weather.", [W_ZURICH]),
    Case("hermes-parallel", "hermes", _hermes(*W_PARIS) + "\n" + _hermes(*W_ZURICH), "", [W_PARIS, W_ZURICH]),
    Case("hermes-think", "hermes", f"<think>\n{THINK}\n</think>\n\n" + _hermes(*W_PARIS), "", [W_PARIS], THINK),
    Case("hermes-nested-escapes", "hermes", '<tool_call>\n{"name": "search", "arguments": ' + S_NESTED_JSON + "}\n</tool_call>", "", [S_NESTED]),
    Case("hermes-compact", "hermes", '<tool_call>{"name":"get_weather","arguments":{"city":"Paris"}}</tool_call>', "", [W_PARIS]),
    Case("hermes-spacious", "hermes", 'Ok.\n\n<tool_call>\n  {\n    "name" : "get_weather",\n    "arguments" : { "city" : "Zürich" ,\n "unit":"c" }\n  }\n</tool_call>\n', "Ok.", [W_ZURICH]),
    Case("hermes-tag-in-prose", "hermes", "Wrap each call in <tool_call> tags, like this.", "Wrap each call in <tool_call> tags, like this."),
    Case("hermes-prose-then-call", "hermes", "Calls go in <tool_call> tags:\n" + _hermes(*W_PARIS), "Calls go in <tool_call> tags:", [W_PARIS]),
    Case("hermes-args-first", "hermes", '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>', "", [W_PARIS]),
    # ------------------------------------------------------------ llama 3.x
    Case("llama3-one", "llama3", '{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [W_PARIS]),
    Case("llama3-python-tag", "llama3", "<|python_tag|>" + '{"name": "search", "parameters": ' + S_NESTED_JSON + "}", "", [S_NESTED]),
    Case("llama3-content-first", "llama3", 'I will look that up.\n{"name": "get_weather", "parameters": {"city": "Zürich", "unit": "c"}}', "I will look that up.", [W_ZURICH]),
    Case("llama3-spaced", "llama3", '{ "name" : "get_weather", "parameters" : {"city":"Paris"} }', "", [W_PARIS]),
    Case("llama3-think", "llama3", f"<think>{THINK}</think>" + '{"name": "get_weather", "parameters": {"city": "Paris"}}', "", [W_PARIS], THINK),
    Case("llama3-plain", "llama3", "Paris is sunny today.", "Paris is sunny today."),
    # ------------------------------------------------------------ mistral nemo
    Case("nemo-one", "mistral-nemo", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]', "", [W_PARIS]),
    Case("nemo-parallel", "mistral-nemo",
         '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}, {"name": "search", "arguments": ' + S_NESTED_JSON + ', "id": "Zz9Yy8Xx7"}]',
         "", [W_PARIS, S_NESTED]),
    Case("nemo-content-first", "mistral-nemo", 'Sure, checking.[TOOL_CALLS] [\n  {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "c"}}\n]', "Sure, checking.", [W_ZURICH]),
    Case("nemo-marker-in-prose", "mistral-nemo", "The [TOOL_CALLS] token starts a list of calls.", "The [TOOL_CALLS] token starts a list of calls."),
    Case("nemo-plain", "mistral-nemo", "No tools needed: it is 4.", "No tools needed: it is 4."),
    # ------------------------------------------------------------ functionary v3.2 (the prompt wrote the first >>>)
    Case("fn-text", "functionary-v3.2", "all\nThe weather is nice.", "The weather is nice."),
    Case("fn-one", "functionary-v3.2", 'get_weather\n{"city": "Paris"}', "", [W_PARIS]),
    Case("fn-content-then-calls", "functionary-v3.2", 'all\nLet me check both.>>>get_weather\n{"city": "Zürich", "unit": "c"}>>>search\n' + S_NESTED_JSON,
         "Let me check both.", [W_ZURICH, S_NESTED]),
    Case("fn-leading-arrows", "functionary-v3.2", '>>>get_weather\n{"city": "Paris"}', "", [W_PARIS]),
    Case("fn-arrows-in-args", "functionary-v3.2", 'search\n{"query": "a >>> b", "filters": {}}', "", [("search", {"query": "a >>> b", "filters": {}})]),
    Case("fn-free-text", "functionary-v3.2", "Hello\nthere, no header here.", "Hello\nthere, no header here."),
    # ------------------------------------------------------------ deepseek r1 (the prompt opened <think>)
    Case("ds-one", "deepseek-r1", f"{THINK}\n</think>\n\n" + DSB + _ds("get_weather", '{"city": "Paris"}') + DSE, "", [W_PARIS], THINK, True),
    Case("ds-parallel", "deepseek-r1", f"{THINK}\n</think>\n\n" + DSB + _ds("get_weather", '{"city": "Zürich", "unit": "c"}') + "\n" + _ds("search", S_NESTED_JSON) + DSE,
         "", [W_ZURICH, S_NESTED], THINK, True),
    Case("ds-content-first", "deepseek-r1", f"{THINK}</think>I will check.\n" + DSB + _ds("get_weather", '{"city": "Paris"}') + DSE, "I will check.", [W_PARIS], THINK, True),
    Case("ds-answer", "deepseek-r1", "Simple.\n</think>\n\nParis is the capital of France.", "Paris is the capital of France.", [], "Simple.", True),
    # ------------------------------------------------------------ command r7b
    Case("cr-one", "command-r7b",
         '<|START_THINKING|>I should look up the weather.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"}}\n]<|END_ACTION|>',
         "", [W_PARIS], "I should look up the weather."),
    Case("cr-parallel", "command-r7b",
         '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Zürich", "unit": "c"}}, {"tool_call_id": "1", "tool_name": "search", "parameters": ' + S_NESTED_JSON + "}]<|END_ACTION|>",
         "", [W_ZURICH, S_NESTED]),
    Case("cr-response", "command-r7b", "<|START_THINKING|>Easy one.<|END_THINKING|><|START_RESPONSE|>Hello there!<|END_RESPONSE|>", "Hello there!", [], "Easy one."),
    # ------------------------------------------------------------ generic JSON envelope
    Case("generic-one", "generic", '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}', "", [W_PARIS]),
    Case("generic-parallel", "generic", '{\n  "tool_calls": [\n    {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "c"}},\n    {"name": "search", "arguments": ' + S_NESTED_JSON + "}\n  ]\n}",
         "", [W_ZURICH, S_NESTED]),
    Case("generic-response", "generic", '{"response": "It is \\"sunny\\" in Zürich \\ud83d\\ude00.\\nBye."}', 'It is "sunny" in Zürich 😀.\nBye.'),
    Case("generic-not-json", "generic", "Just text.", "Just text."),
    Case("generic-think", "generic", f"<think>{THINK}</think>\n" + '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"}}}', "", [W_PARIS], THINK),
]


def _check_reply(reply, case):
    assert reply.content == case.content
    assert reply.reasoning == case.reasoning
    got = [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in reply.tool_calls]
    assert got == [(n, a) for n, a in case.calls]
    for c in reply.tool_calls:
        assert c["type"] == "function" and isinstance(c["id"], str) and c["id"]
    assert len({c["id"] for c in reply.tool_calls}) == len(reply.tool_calls)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_complete(case):
    _check_reply(parse_reply(case.text, FORMATS[case.fmt], thinking_open=case.thinking_open), case)


def _fragments(text, rng):
    if rng is None:
        return list(text)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 9)
        out.append(text[i : i + n])
        i += n
    return out


def stream(fmt, text, rng=None, thinking_open=False, reasoning="auto"):
    """Feed `text` in fragments; check the delta invariants; return (reply, content, reasoning, calls)."""
    rp = ReplyParser(FORMATS[fmt] if fmt else None, reasoning, thinking_open)
    deltas = [rp.feed(f) for f in _fragments(text, rng)]
    reply, last = rp.finish()
    deltas.append(last)
    content = "".join(d.content for d in deltas)
    thoughts = "".join(d.reasoning for d in deltas)
    calls: dict = {}
    for d in deltas:
        for cd in d.calls:
            if cd.index not in calls:
                # a call's first delta names it (with its id) before any of its arguments
                assert cd.id and cd.name, cd
                assert cd.index == len(calls)
                calls[cd.index] = {"id": cd.id, "name": cd.name, "arguments": cd.arguments}
            else:
                assert cd.id is None and cd.name is None, cd
                calls[cd.index]["arguments"] += cd.arguments
    return reply, content, thoughts, [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("seed", [None, 1, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_parse_streamed(case, seed):
    rng = random.Random(seed) if seed is not None else None
    reply, content, thoughts, calls = stream(case.fmt, case.text, rng, case.thinking_open)
    _check_reply(reply, case)
    assert content == reply.content
    assert thoughts == (reply.reasoning or "")
    assert len(calls) == len(reply.tool_calls)
    for sent, final in zip(calls, reply.tool_calls):
        assert sent["id"] == final["id"] and sent["name"] == final["function"]["name"]
        assert json.loads(sent["arguments"]) == json.loads(final["function"]["arguments"])


@pytest.mark.parametrize("fmt, text, held", [
    ("hermes", "Sure <tool_ca", "<"),
    ("hermes", "Sure\n<tool_call", "<"),
    ("mistral-nemo", "Sure [TOOL_", "["),
    ("llama3", 'Sure {"na', "{"),
    ("llama3", "Sure <|python_", "<"),
    ("deepseek-r1", "Sure <｜tool▁calls", "<"),
    ("command-r7b", "Sure <|START_ACT", "<"),
    ("command-r7b", "<|START_RESPONSE|>Sure <|END_RESP", "<"),
    ("functionary-v3.2", "all\nSure >>", ">"),
])
def test_trigger_prefix_is_held_back(fmt, text, held):
    for rng in (None, random.Random(5)):
        rp = ReplyParser(FORMATS[fmt], thinking_open=False)
        sent = "".join(rp.feed(f).content for f in _fragments(text, rng))
        assert sent == "Sure", (fmt, sent)
        assert held not in sent


def test_plain_reply_without_tools_is_sent_verbatim():
    text = "  Hello,\n world!  \n"
    for rng in (None, random.Random(3)):
        reply, content, _, calls = stream(None, text, rng)
        assert reply.content == content == text and not calls and reply.reasoning is None
    # reasoning split without tools
    reply, content, thoughts, _ = stream(None, "<think> hm </think>\n\nAnswer: 4.\n", random.Random(1))
    assert (reply.reasoning, reply.content, content, thoughts) == ("hm", "Answer: 4.", "Answer: 4.", "hm")


def test_reasoning_formats():
    text = f"<think>{THINK}</think>\n" + _hermes(*W_PARIS)
    none = parse_reply(text, FORMATS["hermes"], reasoning="none")
    assert none.reasoning is None and none.content.startswith("<think>") and len(none.tool_calls) == 1
    legacy = parse_reply(text, FORMATS["hermes"], reasoning="deepseek-legacy")
    assert legacy.reasoning == THINK and legacy.content == f"<think>{THINK}</think>" and len(legacy.tool_calls) == 1
    reply, content, thoughts, _ = stream("hermes", text, random.Random(2), reasoning="deepseek-legacy")
    assert content == reply.content == legacy.content and thoughts == THINK
    # thinking cut off (no closing tag): all of it is reasoning
    cut = parse_reply("Still thinking about", FORMATS["deepseek-r1"], thinking_open=True)
    assert cut.reasoning == "Still thinking about" and cut.content == "" and not cut.tool_calls


CUT_OFF = [
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par'),
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}'),
    ("hermes", _hermes(*W_PARIS) + '\n<tool_call>\n{"name": "search", "arguments": {"query": "x"'),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Paris"'),
    ("mistral-nemo", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": '),
    ("functionary-v3.2", 'get_weather\n{"city": "Pa'),
    ("functionary-v3.2", 'all\nChecking.>>>get_weather\n{"city": "Paris", "unit": "c"'),
    ("deepseek-r1", "ok</think>\n\n" + DSB + "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\""),
    ("command-r7b", '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"city": "Paris"'),
    ("generic", '{"tool_call": {"name": "get_weather", "arguments": {"city": "Paris"'),
]


@pytest.mark.parametrize("fmt, text", CUT_OFF, ids=[f"{f}-{i}" for i, (f, _) in enumerate(CUT_OFF)])
def test_cut_off_call_is_not_a_call(fmt, text):
    complete_before = 1 if text.startswith(_hermes(*W_PARIS)) else 0
    opened = fmt == "deepseek-r1"
    reply = parse_reply(text, FORMATS[fmt], thinking_open=opened)
    assert len(reply.tool_calls) == complete_before
    for seed in (None, 4):
        reply, _, _, calls = stream(fmt, text, random.Random(seed) if seed else None, thinking_open=opened)
        assert len(reply.tool_calls) == complete_before
        assert len(calls) >= complete_before  # the cut call may have been announced while it streamed
        for c in reply.tool_calls:
            json.loads(c["function"]["arguments"])
    if opened:
        assert reply.reasoning == "ok"


# ================================================================ constraints
CHOICES = ["auto", "required", {"type": "function", "function": {"name": "search"}}]


def _constraint(fmt, choice, parallel):
    tools = parse_tools(TOOLS)
    return FORMATS[fmt].constraint(tools, parse_tool_choice(choice, tools), parallel)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_constraint_shapes(fmt):
    """Native formats get Lark with one %json rule per call shape, lazy (on the format's
    trigger words) only for `auto`; generic gets a JSON schema and is never lazy."""
    for choice in CHOICES:
        for parallel in (False, True):
            c = _constraint(fmt, choice, parallel)
            if fmt == "generic":
                assert c.lark is None and isinstance(c.json_schema, dict) and c.triggers == []
                json.dumps(c.json_schema)
            else:
                assert c.json_schema is None and c.lark.startswith("%llguidance {}\n") and "%json {" in c.lark
                assert bool(c.triggers) == (choice == "auto")
            text = c.lark or json.dumps(c.json_schema)
            named = isinstance(choice, dict)
            assert "search" in text and (("get_weather" in text) != named)


def test_constraint_key_order_follows_the_format():
    cr = _constraint("command-r7b", "required", False).lark
    assert cr.index('"tool_call_id"') < cr.index('"tool_name"') < cr.index('"parameters"')
    nemo = _constraint("mistral-nemo", "required", True).lark
    assert nemo.index('"name"') < nemo.index('"arguments"') < nemo.index('"id"')


def test_jsonscan_on_growing_text():
    from llamars.tools.jsonscan import object_fields, partial_string, value_end

    whole = '{"q": "say \\"hi\\" \\u00e9 \\ud83d\\ude00 \\\\ \\n", "n": -12.5e3, "ok": true, "x": [1, {"y": "}"}]}'
    obj = json.loads(whole)
    assert value_end(whole, 0) == len(whole)
    fields, end = object_fields(whole, 0)
    assert end == len(whole) and list(fields) == ["q", "n", "ok", "x"]
    assert {k: json.loads(whole[a:b]) for k, (a, b) in fields.items()} == obj
    q0 = whole.index('"say')
    for n in range(len(whole)):
        part = whole[:n]
        assert value_end(part, 0) is None  # nothing ends early, not even at a `}` inside a string
        if n > q0:
            assert obj["q"].startswith(partial_string(part, q0))  # never a half-decoded escape
    assert value_end("12", 0) is None and value_end("12,", 0) == 2  # a number at the end may grow


@pytest.fixture(scope="module")
def small_engine(model_path):
    from llamars import Engine

    e = Engine(model_path, n_ctx=512)
    yield e
    e.close()


@pytest.fixture(scope="module")
def harmony_engine(tmp_path_factory):
    """A tiny gpt-oss model: its vocabulary has the harmony markers the format's grammar
    names as special tokens (`<|channel|>`, `<|constrain|>`, `<|message|>`, ...)."""
    import tiny_archs as ta
    from llamars import Engine

    p = tmp_path_factory.mktemp("harmony") / "gpt-oss-F32.gguf"
    ta.write_model(p, "gpt-oss", "F32")
    e = Engine(str(p), n_ctx=512)
    yield e
    e.close()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_constraints_compile_in_the_grammar_engine(request, fmt):
    engine = request.getfixturevalue("harmony_engine" if fmt == "gpt-oss" else "small_engine")
    ids = engine.tokenize("Call a tool:")
    for choice in CHOICES:
        for parallel in (False, True):
            c = _constraint(fmt, choice, parallel)
            kw = {"grammar": c.lark} if c.lark else {"json_schema": c.json_schema}
            if c.triggers:
                kw["grammar_triggers"] = c.triggers
            r = engine.generate(ids, max_tokens=1, temperature=0, **kw)
            assert r.stop_reason in ("length", "eos", "limit"), r.stop_reason


def test_lazy_grammar_end_to_end(small_engine):
    r = small_engine.generate("The capital of France is", temperature=0, max_tokens=30,
                              grammar='root ::= "France" " has 42 cats."', grammar_triggers=["France"])
    assert r.text.endswith("France has 42 cats."), r.text
    # the free text before the trigger is llama.cpp's greedy continuation (" the capital of
    # the country of France. It is ...", ../shared/reference)
    assert r.text.startswith(" the capital of the country of France"), r.text
    with pytest.raises(InvalidRequestError, match="grammar_triggers"):
        small_engine.generate("x", max_tokens=1, grammar_triggers=["France"])


SHORT_TOOL = [{"type": "function", "function": {"name": "search", "description": "Search the web",
                "parameters": {"type": "object", "properties": {"query": {"type": "string", "maxLength": 12}}, "required": ["query"]}}}]


@pytest.mark.parametrize("stem", ["hermes", "functionary_v3_2", "deepseek_r1", "gemma"])
def test_forced_call_is_generated_and_parsed(small_engine, stem):
    """What a forced grammar lets the model write, the format's parser reads as the call
    (the prompt ended in `>>>` for Functionary and opened `<think>` for DeepSeek R1)."""
    t = ChatTemplate.builtin("gemma") if stem == "gemma" else template(stem)
    plan = plan_chat(t, [{"role": "user", "content": "Search the web for cats."}], tools=SHORT_TOOL, tool_choice="required")
    r = small_engine.generate(plan.prompt, max_tokens=60, temperature=0, **plan.gen_kwargs())
    reply = parse_reply(r.text, plan.format, thinking_open=plan.thinking_open)
    assert [c["function"]["name"] for c in reply.tool_calls] == ["search"], r.text
    assert isinstance(json.loads(reply.tool_calls[0]["function"]["arguments"])["query"], str)
    assert reply.content == "" and reply.reasoning in (None, "")


def test_forced_grammar_closes_an_open_thinking_block():
    for choice, forced in (("required", True), ("auto", False)):
        plan = plan_chat(template("deepseek_r1"), [{"role": "user", "content": "Hi"}], tools=TOOLS, tool_choice=choice)
        assert plan.thinking_open
        kw = plan.gen_kwargs()
        assert kw["grammar"].startswith('%llguidance {}\nstart: "</think>"') == forced
        assert ("grammar_triggers" in kw) == (not forced)
    plan = plan_chat(template("deepseek_r1"), [{"role": "user", "content": "Hi"}], tools=TOOLS, tool_choice="required", reasoning_format="none")
    assert not plan.thinking_open and "</think>" not in plan.gen_kwargs()["grammar"]


# ================================================================ validation
def _tool(**fn):
    return {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}, **fn}}


BAD_TOOLS = [
    ({"a": 1}, r"^tools: must be an array"),
    ([_tool(name=None)], r"^tools\[0\]\.function\.name"),
    ([{"type": "function", "function": {"parameters": {}}}], r"^tools\[0\]\.function\.name"),
    ([_tool(), _tool(name="bad name!")], r"^tools\[1\]\.function\.name"),
    ([_tool(), _tool()], r"^tools\[1\]\.function\.name: 'f' is defined twice"),
    ([_tool(parameters=[1])], r"^tools\[0\]\.function\.parameters: must be"),
    ([_tool(parameters={"type": "string"})], r"^tools\[0\]\.function\.parameters\.type"),
    ([{"type": "code_interpreter"}], r"^tools\[0\]\.type"),
    (["get_weather"], r"^tools\[0\]: must be an object"),
    ([_tool(description=5)], r"^tools\[0\]\.function\.description"),
]


@pytest.mark.parametrize("tools, match", BAD_TOOLS)
def test_bad_tools(tools, match):
    with pytest.raises(ToolSpecError, match=match):
        parse_tools(tools)
    with pytest.raises(ToolSpecError, match=match):
        plan_chat(template("hermes"), [{"role": "user", "content": "x"}], tools=tools)


BAD_CHOICES = [
    ("sometimes", TOOLS, r"^tool_choice: must be 'auto'"),
    ({"type": "function", "function": {"name": "nope"}}, TOOLS, r"^tool_choice\.function\.name: 'nope' is not one of the tools"),
    ({"type": "function"}, TOOLS, r"^tool_choice\.function\.name"),
    ("required", [], r"^tool_choice: 'required' needs at least one tool"),
    ("required", None, r"^tool_choice: 'required' needs at least one tool"),
    (3, TOOLS, r"^tool_choice: must be a string or an object"),
]


@pytest.mark.parametrize("choice, tools, match", BAD_CHOICES)
def test_bad_tool_choice(choice, tools, match):
    with pytest.raises(ToolSpecError, match=match):
        parse_tool_choice(choice, parse_tools(tools))
    with pytest.raises(ToolSpecError, match=match):
        plan_chat(template("hermes"), [{"role": "user", "content": "x"}], tools=tools, tool_choice=choice)


def test_good_tool_choices():
    tools = parse_tools(TOOLS)
    assert parse_tool_choice(None, tools).mode == "auto"
    assert parse_tool_choice(None, []).mode == "none"
    assert parse_tool_choice("auto", []).mode == "none"
    assert parse_tool_choice({"type": "function", "function": {"name": "search"}}, tools) == parse_tool_choice({"type": "function", "name": "search"}, tools)
    assert parse_tool_choice({"type": "function", "function": {"name": "search"}}, tools).name == "search"


def _calls(args):
    return [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": args}}]


BAD_HISTORY = [
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": _calls("{not json")}], r"^messages\[1\]\.tool_calls\[0\]\.function\.arguments: not valid JSON"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": _calls("[1, 2]")}], r"^messages\[1\]\.tool_calls\[0\]\.function\.arguments: must be a JSON object"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": _calls(7)}], r"^messages\[1\]\.tool_calls\[0\]\.function\.arguments: must be a JSON object"),
    ([{"role": "user", "content": "x", "tool_calls": _calls("{}")}], r"^messages\[0\]\.tool_calls: only assistant"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": {"a": 1}}], r"^messages\[1\]\.tool_calls: must be an array"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"id": "x"}]}], r"^messages\[1\]\.tool_calls\[0\]\.function"),
    ([{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": [{"function": {"name": "", "arguments": "{}"}}]}], r"^messages\[1\]\.tool_calls\[0\]\.function\.name"),
]


@pytest.mark.parametrize("messages, match", BAD_HISTORY)
def test_bad_history(messages, match):
    with pytest.raises(ToolSpecError, match=match):
        normalize_history(messages)
    with pytest.raises(ToolSpecError, match=match):
        plan_chat(template("hermes"), messages, tools=TOOLS)


def test_history_arguments_become_objects():
    out = normalize_history(HISTORY)
    assert out[2]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris", "unit": "c"}
    assert HISTORY[2]["tool_calls"][0]["function"]["arguments"] == '{"city": "Paris", "unit": "c"}'  # the input is not modified
