"""gpt-oss's harmony chat format: replies split by channel (analysis → reasoning, final →
content, `to=functions.NAME` → a tool call), whole and streamed; and a tiny gpt-oss model
(tests/tiny_archs.py: MXFP4 experts, sinks, harmony's control tokens in its vocabulary)
served end to end, a required tool call and a streamed chat through the OpenAI SDK."""
from __future__ import annotations

import json

import openai
import pytest
from server_util import LiveServer

import tiny_archs as ta
from llamars import Engine
from llamars.config import ServerConfig
from llamars.server.app import create_app
from llamars.tools.formats import FORMATS, detect_format
from llamars.tools.reply import ReplyParser, parse_reply

H = FORMATS["gpt-oss"]
THINK_ANSWER = "<|channel|>analysis<|message|>The user greets.<|end|><|start|>assistant<|channel|>final<|message|>Hello there!"
CALL = ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        '<|constrain|>json<|message|>{"city": "Paris"}')


def test_detected_from_the_template():
    assert detect_format("{{ '<|start|>assistant<|channel|>final<|message|>' }}") is H


def test_reasoning_and_content_by_channel():
    r = parse_reply(THINK_ANSWER, H)
    assert (r.reasoning, r.content, r.tool_calls) == ("The user greets.", "Hello there!", [])
    # reasoning_format none: the thinking stays in the content
    r = parse_reply(THINK_ANSWER, H, reasoning="none")
    assert r.reasoning is None and r.content.startswith("The user greets.") and r.content.endswith("Hello there!")


def test_tool_call_from_the_recipient():
    r = parse_reply(CALL, H)
    assert r.reasoning == "Need weather." and r.content == ""
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in r.tool_calls] == [("get_weather", {"city": "Paris"})]
    # cut off inside the arguments (max tokens): not a call
    assert parse_reply(CALL[:-3], H).tool_calls == []
    # the recipient on the role line, the channel after it
    alt = '<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>{"word": "x"}'
    assert parse_reply(alt, H).tool_calls[0]["function"]["name"] == "lookup"


@pytest.mark.parametrize("reply", [THINK_ANSWER, CALL], ids=["answer", "call"])
def test_streamed_deltas_add_up_and_never_show_markup(reply):
    p = ReplyParser(H)
    content, reasoning, args, names = "", "", "", []
    for ch in reply:
        d = p.feed(ch)
        content += d.content
        reasoning += d.reasoning
        for c in d.calls:
            args += c.arguments
            names += [c.name] if c.name else []
        assert "<|" not in content and "<|" not in reasoning and "|>" not in content
    final, last = p.finish()
    content += last.content
    reasoning += last.reasoning
    args += "".join(c.arguments for c in last.calls)
    assert content == final.content and reasoning == (final.reasoning or "")
    if final.tool_calls:
        assert names == ["get_weather"] and json.loads(args) == {"city": "Paris"}


# ------------------------------------------------------------------ served end to end

# a minimal harmony template (the real one also renders the developer message's tool
# namespace); the generation prompt ends as gpt-oss's does
TEMPLATE = (
    "{% for m in messages %}<|start|>{{ m['role'] }}<|message|>{{ m['content'] or '' }}<|end|>{% endfor %}"
    "{% if tools %}<|start|>developer<|message|>{{ tools | tojson }}<|end|>{% endif %}"
    "{% if add_generation_prompt %}<|start|>assistant{% endif %}"
)


@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory):
    p = tmp_path_factory.mktemp("gptoss") / "gpt-oss-MXFP4.gguf"
    ta.write_model(p, "gpt-oss", "MXFP4", seed=2)
    return str(p)


@pytest.fixture(scope="module")
def server(gpt_oss):
    s = LiveServer(create_app(ServerConfig(model=gpt_oss, n_ctx=4096, n_parallel=1, alias="tiny-gpt-oss", chat_template=TEMPLATE))).start()
    yield s
    s.stop()


def test_control_tokens_render_only_when_preserved(gpt_oss):
    e = Engine(gpt_oss, n_ctx=256)
    ch = e.tokenize("<|channel|>", add_special=False, parse_special=True)
    assert len(ch) == 1 and e.token_to_piece(ch[0], special=True) == b"<|channel|>"
    assert e.token_to_piece(ch[0], special=False) == b""
    # a grammar that must write the marker: its text shows only when preserved
    g = '%llguidance {}\nstart: <|channel|> "final"\n'
    plain = e.generate("hello", max_tokens=16, temperature=0.0, grammar=g).text
    kept = e.generate("hello", max_tokens=16, temperature=0.0, grammar=g, preserved_tokens=["<|channel|>"]).text
    assert plain == "final" and kept == "<|channel|>final"
    e.close()


def test_served_required_tool_call_and_streamed_chat(server):
    oai = openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0, timeout=120)
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"word": {"type": "string", "maxLength": 6}}, "required": ["word"]}}}]
    r = oai.chat.completions.create(model="tiny-gpt-oss", messages=[{"role": "user", "content": "the word"}], tools=tools, tool_choice="required", temperature=0, max_tokens=300)
    m = r.choices[0].message
    assert r.choices[0].finish_reason == "tool_calls", m
    assert m.tool_calls[0].function.name == "lookup" and isinstance(json.loads(m.tool_calls[0].function.arguments)["word"], str)
    chunks = list(oai.chat.completions.create(model="tiny-gpt-oss", messages=[{"role": "user", "content": "hello"}], temperature=0, max_tokens=12, stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "<|" not in text and chunks[-1].choices[0].finish_reason in ("length", "stop")
