"""Chat templates: built-in formats, HF-compatible Jinja rendering, prefill,
validation and template selection.  Pure Python; needs no model."""
from __future__ import annotations

import pytest

from llamars.chat import BUILTIN_NAMES, ChatTemplate, TemplateError, select_template

CONVO = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello."},
    {"role": "user", "content": "What is 2+2?"},
]


def render(name, messages=CONVO, **kw):
    return ChatTemplate.builtin(name).render(messages, **kw)


# ------------------------------------------------------------ exact formats
def test_gemma_exact():
    assert render("gemma") == (
        "<start_of_turn>user\nYou are terse.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello.<end_of_turn>\n"
        "<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n"
        "<start_of_turn>model\n"
    )


def test_gemma_no_bos_and_no_generation_prompt():
    out = ChatTemplate.builtin("gemma", bos_token="<bos>", eos_token="<eos>").render(
        CONVO, add_generation_prompt=False)
    assert not out.startswith("<bos>")
    assert out.endswith("<start_of_turn>user\nWhat is 2+2?<end_of_turn>\n")


def test_gemma_without_system_and_system_only():
    assert render("gemma", [{"role": "user", "content": "Hi"}]) == (
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n")
    assert render("gemma", [{"role": "system", "content": "Be nice."}]) == (
        "<start_of_turn>user\nBe nice.<end_of_turn>\n<start_of_turn>model\n")


def test_chatml_exact():
    assert render("chatml") == (
        "<|im_start|>system\nYou are terse.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nHello.<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    assert not render("chatml", add_generation_prompt=False).endswith("<|im_start|>assistant\n")


def test_llama3_exact():
    assert render("llama3") == (
        "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


def test_mistral_exact():
    assert render("mistral") == (
        "[SYSTEM_PROMPT] You are terse.[/SYSTEM_PROMPT]"
        "[INST] Hi[/INST] Hello.</s>[INST] What is 2+2?[/INST]"
    )
    assert ChatTemplate.builtin("mistral-v7").name == "mistral"


def test_phi3_exact():
    assert render("phi3") == (
        "<|system|>\nYou are terse.<|end|>\n<|user|>\nHi<|end|>\n"
        "<|assistant|>\nHello.<|end|>\n<|user|>\nWhat is 2+2?<|end|>\n<|assistant|>\n"
    )


def test_llama2_exact():
    assert render("llama2") == (
        "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi [/INST] Hello. </s>"
        "<s>[INST] What is 2+2? [/INST]"
    )


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_every_builtin_renders_all_roles(name):
    msgs = CONVO + [{"role": "assistant", "content": "4"},
                    {"role": "developer", "content": "DEV"},
                    {"role": "tool", "content": "TOOL"},
                    {"role": "user", "content": "ok", "name": "bob"}]
    out = render(name, msgs)
    for text in ("You are terse.", "Hi", "Hello.", "What is 2+2?", "4", "DEV", "TOOL", "ok"):
        assert text in out, (name, text)
    assert out.index("Hi") < out.index("Hello.") < out.index("What is 2+2?") < out.index("ok")


# ---------------------------------------------------------- content parts
def test_content_part_arrays_are_joined():
    parts = [{"role": "user", "content": [{"type": "text", "text": "a"},
                                          {"type": "text", "text": "b"}]}]
    assert render("chatml", parts) == "<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n"
    # custom templates also see a plain string
    t = ChatTemplate.from_source("{{ messages[0]['content'] is string }}|{{ messages[0]['content'] }}")
    assert t.render(parts) == "True|a\nb"


def test_non_text_content_part_names_the_message():
    msgs = [{"role": "user", "content": "x"},
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}]
    with pytest.raises(TemplateError, match=r"messages\[1\]\.content\[0\].*image_url"):
        render("chatml", msgs)


def test_null_content():
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": None},
            {"role": "user", "content": "?"}]
    assert "<|im_start|>assistant\n<|im_end|>" in render("chatml", msgs)
    t = ChatTemplate.from_source("{{ messages[1]['content'] is none }}")
    assert t.render(msgs) == "True"


# ---------------------------------------------------------------- prefill
@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_assistant_prefill_leaves_turn_open(name):
    msgs = CONVO + [{"role": "assistant", "content": "The answer is"}]
    out = render(name, msgs)
    assert out.endswith("The answer is")
    assert out.count("The answer is") == 1


def test_prefill_exact_gemma_and_chatml():
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Well, "}]
    assert render("gemma", msgs) == (
        "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\nWell, ")
    assert render("chatml", msgs) == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nWell, "
    # without add_generation_prompt the final assistant turn is closed as usual
    assert render("chatml", msgs, add_generation_prompt=False).endswith("Well, <|im_end|>\n")


def test_prefill_fallback_when_template_drops_assistant_content():
    src = ("{% for m in messages %}{% if m.role == 'user' %}U:{{ m.content }};{% endif %}"
           "{% endfor %}{% if add_generation_prompt %}A:{% endif %}")
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}]
    assert ChatTemplate.from_source(src).render(msgs) == "U:Hi;A:Yo"


# ---------------------------------------------------- jinja environment
def test_raise_exception_is_template_error():
    t = ChatTemplate.from_source("{{ raise_exception('roles must alternate') }}")
    with pytest.raises(TemplateError, match="roles must alternate"):
        t.render([{"role": "user", "content": "x"}])
    assert issubclass(TemplateError, ValueError)


def test_tojson_keeps_non_ascii():
    t = ChatTemplate.from_source("{{ messages[0]['content'] | tojson }}|{{ tools | tojson(indent=2) }}")
    out = t.render([{"role": "user", "content": "café"}], tools=[{"name": "é"}])
    assert out == '"café"|[\n  {\n    "name": "é"\n  }\n]'
    t = ChatTemplate.from_source("{{ {'b': 1, 'a': 'ü'} | tojson(sort_keys=true) }}")
    assert t.render([]) == '{"a": "ü", "b": 1}'


def test_trim_blocks_loopcontrols_strftime_and_kwargs():
    src = ("{% for m in messages %}\n{% if loop.index > 1 %}{% break %}{% endif %}\n"
           "{{ m.content }}\n{% endfor %}\n{{ strftime_now('%Y')|length }}"
           "{{ bos_token }}{{ eos_token }}{{ enable_thinking }}")
    t = ChatTemplate.from_source(src, bos_token="<s>", eos_token="</s>")
    out = t.render([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                   enable_thinking=False)
    assert out == "a\n4<s></s>False"


def test_generation_tag_is_accepted():
    t = ChatTemplate.from_source("{% generation %}x{% endgeneration %}")
    assert t.render([]) == "x"


def test_sandbox_blocks_dunder_access():
    for src in ("{{ ''.__class__ }}", "{{ ''.__class__.__mro__ }}",
                "{{ messages.__class__.__subclasses__() }}"):
        t = ChatTemplate.from_source(src)
        try:
            out = t.render([{"role": "user", "content": "x"}])
        except TemplateError as e:
            from jinja2.exceptions import SecurityError, UndefinedError

            assert isinstance(e.__cause__, (SecurityError, UndefinedError))
            assert "<class" not in str(e)
            continue
        assert "<class" not in out


def test_sandbox_is_immutable():
    t = ChatTemplate.from_source("{{ messages.append({'role': 'user'}) }}")
    with pytest.raises(TemplateError):
        t.render([{"role": "user", "content": "x"}])


def test_syntax_error_is_template_error():
    with pytest.raises(TemplateError, match="does not compile"):
        ChatTemplate.from_source("{% for m in messages %}")


def test_tokenizer_adds_bos_strips_leading_bos():
    src = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"
    msgs = [{"role": "user", "content": "x"}]
    assert ChatTemplate.from_source(src, bos_token="<bos>").render(msgs) == "<bos>x"
    t = ChatTemplate.from_source(src, bos_token="<bos>", tokenizer_adds_bos=True)
    assert t.render(msgs) == "x"


# ------------------------------------------------------------ validation
@pytest.mark.parametrize("messages, pattern", [
    ([{"role": "user", "content": "a"}, "oops"], r"messages\[1\] must be an object"),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
      {"role": "bot", "content": "c"}], r"messages\[2\]\.role must be one of"),
    ([{"content": "a"}], r"messages\[0\]\.role must be one of .*missing"),
    ([{"role": 3, "content": "a"}], r"messages\[0\]\.role"),
    ([{"role": "user", "content": 5}], r"messages\[0\]\.content must be"),
    ([{"role": "user", "content": ["x"]}], r"messages\[0\]\.content\[0\] must be an object"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}], r"messages\[0\]\.content\[0\]\.text"),
])
def test_bad_messages(messages, pattern):
    with pytest.raises(TemplateError, match=pattern):
        render("chatml", messages)


def test_messages_must_be_a_list():
    with pytest.raises(TemplateError, match="messages must be an array"):
        render("chatml", {"role": "user"})


# ------------------------------------------------------------- selection
GGUF_SRC = "GGUF{% for m in messages %}{{ m.content }}{% endfor %}"
MSGS = [{"role": "user", "content": "x"}]


def test_select_file_beats_everything(tmp_path):
    f = tmp_path / "t.jinja"
    f.write_text("FILE{{ messages[0].content }}", encoding="utf-8")
    t = select_template(gguf_template=GGUF_SRC, arch="gemma3", override_name="llama3",
                        override_file=str(f))
    assert t.render(MSGS) == "FILEx"


def test_select_missing_file():
    with pytest.raises(TemplateError, match="cannot read"):
        select_template(gguf_template=None, arch="llama", override_file="/nonexistent/t.jinja")


def test_select_named_override_beats_gguf():
    t = select_template(gguf_template=GGUF_SRC, arch="gemma3", override_name="llama3")
    assert t.name == "llama3"


def test_select_inline_jinja_override():
    t = select_template(gguf_template=GGUF_SRC, arch="gemma3",
                        override_name="INLINE{{ messages|length }}")
    assert t.render(MSGS) == "INLINE1"


def test_select_unknown_name_lists_known():
    with pytest.raises(TemplateError, match="unknown chat template 'nope'.*chatml.*gemma"):
        select_template(gguf_template=GGUF_SRC, arch="gemma3", override_name="nope")
    with pytest.raises(TemplateError, match="known templates"):
        ChatTemplate.builtin("nope")


def test_select_gguf_beats_arch_default():
    t = select_template(gguf_template=GGUF_SRC, arch="gemma3")
    assert t.name == "gguf" and t.render(MSGS) == "GGUFx"
    assert t.source == GGUF_SRC


def test_select_broken_gguf_falls_back_to_arch():
    t = select_template(gguf_template="{% if %}", arch="gemma3")
    assert t.name == "gemma"


@pytest.mark.parametrize("arch, expected", [
    ("gemma", "gemma"), ("gemma2", "gemma"), ("gemma3", "gemma"), ("phi3", "phi3"),
    ("qwen2", "chatml"), ("qwen3", "chatml"), ("llama", "chatml"), ("mystery", "chatml"),
    ("", "chatml"),
])
def test_select_arch_defaults(arch, expected):
    for gguf in (None, ""):
        assert select_template(gguf_template=gguf, arch=arch).name == expected


def test_select_passes_special_tokens():
    t = select_template(gguf_template="{{ bos_token }}|{{ eos_token }}", arch="gemma3",
                        bos_token="<bos>", eos_token="<eos>")
    assert t.render([]) == "<bos>|<eos>"
