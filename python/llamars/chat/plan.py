"""One chat turn, planned: the rendered prompt (tools and tool results passed to the
template, or folded into the conversation for templates that cannot render them), the
grammar that keeps tool calls valid, and the parser for the reply. Shared by the
server's chat, Anthropic and Responses routes and by `Engine.chat`."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ..tools.base import Constraint, Format, close_thinking
from ..tools.formats import FORMATS, detect_format
from ..tools.harmony import is_harmony
from ..tools.reply import ReplyParser
from ..tools.spec import Tool, ToolChoice, normalize_history, parse_tool_choice, parse_tools
from .templates import ChatTemplate, TemplateError

REASONING_FORMATS = ("auto", "deepseek", "deepseek-legacy", "none")


@dataclass
class Capabilities:
    """What a template renders by itself (found by rendering probe conversations)."""

    system: bool = True
    tools: bool = False
    tool_calls: bool = False
    tool_responses: bool = False


def _renders(t: ChatTemplate, messages: list, needle: str, tools: Optional[list] = None) -> bool:
    try:
        return needle in t.render(messages, False, tools=tools)
    except (TemplateError, Exception):
        return False


def capabilities(t: ChatTemplate) -> Capabilities:
    cached = getattr(t, "_llamars_caps", None)
    if cached is not None:
        return cached
    user = {"role": "user", "content": "Hi"}
    call = {"id": "call_1", "type": "function", "function": {"name": "llamars_probe_call", "arguments": {"a": "b"}}}
    probe_tool = [{"type": "function", "function": {"name": "llamars_probe_tool", "description": "", "parameters": {"type": "object", "properties": {}}}}]
    asst = {"role": "assistant", "content": None, "tool_calls": [call]}
    caps = Capabilities(
        system=_renders(t, [{"role": "system", "content": "llamars_probe_system"}, user], "llamars_probe_system"),
        tools=_renders(t, [user], "llamars_probe_tool", probe_tool),
        tool_calls=_renders(t, [user, asst], "llamars_probe_call"),
        tool_responses=_renders(t, [user, asst, {"role": "tool", "tool_call_id": "call_1", "content": "llamars_probe_result"}], "llamars_probe_result"),
    )
    t._llamars_caps = caps  # type: ignore[attr-defined]
    return caps


@dataclass
class ChatPlan:
    prompt: str
    format: Optional[Format]  # None: no tools in play
    choice: ToolChoice
    tools: List[Tool] = field(default_factory=list)
    constraint: Optional[Constraint] = None
    reasoning_format: str = "auto"
    thinking_open: bool = False

    def gen_kwargs(self) -> Dict[str, Any]:
        """Engine parameters that enforce the tool-call grammar (and render the format's
        markup tokens in the text, where it has some)."""
        kw: Dict[str, Any] = {}
        if self.format is not None and self.format.preserved:
            kw["preserved_tokens"] = list(self.format.preserved)
        c = self.constraint
        if c is None:
            return kw
        kw.update({"grammar": c.lark} if c.lark else {"json_schema": c.json_schema})
        if c.triggers:
            kw["grammar_triggers"] = list(c.triggers)
        return kw

    # False (--skip-chat-parsing): the reply is all content, reasoning and tool calls included
    parse: bool = True

    def parser(self) -> ReplyParser:
        if not self.parse:
            return ReplyParser(None, "none", False)
        return ReplyParser(self.format, self.reasoning_format, self.thinking_open)


def _as_dicts(messages: Any) -> List[Dict[str, Any]]:
    if not isinstance(messages, (list, tuple)):
        raise TemplateError(f"messages must be an array (got {type(messages).__name__})")
    out = []
    for i, m in enumerate(messages):
        if isinstance(m, dict):
            out.append(dict(m))
        elif hasattr(m, "__struct_fields__"):  # msgspec structs
            out.append({k: getattr(m, k) for k in m.__struct_fields__ if getattr(m, k) is not None})
        else:
            raise TemplateError(f"messages[{i}] must be an object (got {type(m).__name__})")
    return out


def _fold_tool_history(msgs: List[Dict[str, Any]], caps: Capabilities) -> List[Dict[str, Any]]:
    """For templates that cannot render tool calls or results: calls become the
    assistant's JSON (the generic format's own words), results become user turns."""
    names: Dict[str, str] = {}
    out: List[Dict[str, Any]] = []
    for m in msgs:
        calls = m.get("tool_calls") or []
        for c in calls:
            names[c["id"]] = c["function"]["name"]
        if calls and not caps.tool_calls:
            payload = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"], "id": c["id"]} for c in calls]
            body = {"tool_calls": payload} if len(payload) > 1 else {"tool_call": payload[0]}
            text = json.dumps(body, ensure_ascii=False)
            m = {"role": "assistant", "content": ((m.get("content") or "") + "\n" + text).strip() if isinstance(m.get("content"), str) else text}
        elif m.get("role") == "tool" and not (caps.tool_responses and caps.tool_calls):
            # a template that cannot show the call cannot pair a result with it either
            # (built-in formats render `tool` as a bare turn): fold both the same way
            name = m.get("name") or names.get(m.get("tool_call_id") or "", "")
            content = m.get("content")
            m = {"role": "user", "content": json.dumps({"tool_response": {"tool": name, "content": content}}, ensure_ascii=False)}
        out.append(m)
    return out


def _with_system(msgs: List[Dict[str, Any]], text: str) -> List[Dict[str, Any]]:
    if msgs and msgs[0].get("role") in ("system", "developer") and isinstance(msgs[0].get("content"), str):
        return [dict(msgs[0], content=msgs[0]["content"] + "\n\n" + text)] + msgs[1:]
    return [{"role": "system", "content": text}] + msgs


def thinking_kwargs(template: ChatTemplate, kwargs: Dict[str, Any]) -> Dict[str, Any]:
    """The template variables with `enable_thinking` as llama-server passes it: when not
    set, true for a template that reads it (--reasoning auto: the template decides)."""
    out = dict(kwargs)
    if "enable_thinking" not in out and "enable_thinking" in (template.source or ""):
        out["enable_thinking"] = True
    return out


def close_thinking_prompt(template: ChatTemplate, prompt: str, kwargs: Dict[str, Any]) -> str:
    """With thinking off (--reasoning off, enable_thinking false), as llama-server: a
    prompt the template left inside an open thinking block (DeepSeek-R1 distills, QwQ:
    `<think>\n`) gets the block closed (`<think>\n</think>`); a template that can think
    but opened no block (Command R7B) gets an empty one
    (`<|START_THINKING|><|END_THINKING|>`); a template that handles the switch itself
    (Qwen3: `<think>\n\n</think>\n\n`) is left as it rendered."""
    if kwargs.get("enable_thinking") is not False:
        return prompt
    fmt = detect_format(template.source or "")
    start, end = fmt.reasoning if fmt is not None else ("<think>", "</think>")
    tail = prompt.rstrip()
    if tail.endswith(end):
        return prompt
    if tail.endswith(start):
        return prompt + end
    if start in (template.source or "") and start != "<think>":
        return prompt + start + end
    return prompt


def plan_chat(
    template: ChatTemplate,
    messages: list,
    *,
    tools: Any = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = False,
    reasoning_format: str = "auto",
    reasoning_budget: int = -1,
    template_kwargs: Optional[Dict[str, Any]] = None,
    add_generation_prompt: bool = True,
    prefill: bool = True,
    parse: bool = True,
) -> ChatPlan:
    """Raises ToolSpecError / TemplateError (ValueErrors naming the field) on bad input."""
    if reasoning_format not in REASONING_FORMATS:
        raise TemplateError(f"reasoning_format: must be one of {', '.join(REASONING_FORMATS)}, got {reasoning_format!r}")
    tl = parse_tools(tools)
    choice = parse_tool_choice(tool_choice, tl)
    msgs = normalize_history(_as_dicts(messages))
    caps = capabilities(template)
    fmt = detect_format(template.source) if choice.mode != "none" else None
    if fmt is None and is_harmony(template.source):
        fmt = FORMATS["gpt-oss"]  # harmony replies are split by channel with or without tools
    if choice.mode != "none" and fmt is not None and not caps.tools and fmt is not FORMATS["generic"]:
        fmt = FORMATS["generic"]  # the template cannot show the tools: use the generic format
    after_results = bool(msgs) and msgs[-1].get("role") == "tool"
    msgs = _fold_tool_history(msgs, caps)
    render_tools = [t.as_openai() for t in tl] if choice.mode != "none" and caps.tools else None
    if fmt is FORMATS["generic"]:
        msgs = _with_system(msgs, FORMATS["generic"].system_prompt(tl))
    kwargs = dict(template_kwargs or {})
    if reasoning_budget == 0:
        kwargs.setdefault("enable_thinking", False)
    kwargs = thinking_kwargs(template, kwargs)
    prompt = template.render(msgs, add_generation_prompt, tools=render_tools, prefill=prefill, **kwargs)
    if add_generation_prompt and not (prefill and msgs and msgs[-1].get("role") == "assistant"):
        prompt = close_thinking_prompt(template, prompt, kwargs)
    open_tag = (fmt.reasoning if fmt else ("<think>", "</think>"))[0]
    thinking_open = reasoning_format != "none" and prompt.rstrip().endswith(open_tag)
    if fmt is FORMATS["generic"] and choice.mode == "auto" and after_results:
        constraint = FORMATS["generic"].answer()  # (see Generic: the loop ends in content)
    else:
        constraint = fmt.constraint(tl, choice, parallel_tool_calls) if fmt is not None and tl and choice.mode != "none" else None
    if constraint is not None and thinking_open:
        constraint = close_thinking(constraint, fmt.reasoning[1])
    return ChatPlan(prompt, fmt, choice, tl, constraint, reasoning_format, thinking_open, parse)
