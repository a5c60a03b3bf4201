"""`Engine.chat`: one chat turn in-process, with the server's tool calling and
reasoning split, returning a structured `ChatResult`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, List, Optional

from .. import _fronts
from ..errors import InvalidRequestError
from ..tools.spec import ToolSpecError
from .plan import plan_chat
from .templates import TemplateError

if TYPE_CHECKING:
    from ..engine import Engine, GenerationResult


@dataclass
class ChatResult:
    """`content` (text), `reasoning` (the thinking part, None when there was none),
    `tool_calls` (OpenAI shape: id, type, function.name, function.arguments as JSON
    text), `finish_reason` ("stop", "length" or "tool_calls") and the underlying
    `GenerationResult` (tokens, timings, …) as `result`; after an agent loop
    (`execute=True`), `messages` holds the assistant turns and tool results it added."""

    content: str
    reasoning: Optional[str]
    tool_calls: List[dict] = field(default_factory=list)
    finish_reason: str = "stop"
    result: Optional["GenerationResult"] = None
    messages: List[dict] = field(default_factory=list)  # with execute=True: every message the agent loop added

    @property
    def text(self) -> str:
        return self.content

    def message(self) -> dict:
        """The assistant message to append to the conversation for the next turn."""
        m: dict = {"role": "assistant", "content": self.content if (self.content or not self.tool_calls) else None}
        if self.tool_calls:
            m["tool_calls"] = self.tool_calls
        return m


def run_chat(engine: "Engine", messages: list, *, tools: Any = None, tool_choice: Any = None, parallel_tool_calls: bool = False,
             reasoning_format: str = "auto", chat_template_kwargs: Optional[dict] = None, **gen: Any) -> ChatResult:
    try:
        plan = plan_chat(engine.chat_template, messages, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                         reasoning_format=reasoning_format, template_kwargs=chat_template_kwargs)
    except (ToolSpecError, TemplateError) as e:
        raise InvalidRequestError(str(e)) from None
    if plan.constraint is not None and (gen.get("grammar") or gen.get("json_schema")):
        raise InvalidRequestError("tools: tool calls cannot be combined with grammar or json_schema")
    prompt = plan.prompt
    bos = engine.chat_template.bos_token
    ids = engine.tokenize(prompt, add_special=not (bos and prompt.startswith(bos)), parse_special=True)
    r = engine.generate(ids, **{**gen, **plan.gen_kwargs()})
    p = plan.parser()
    p.text = r.text
    reply = p.finish()[0]
    finish = "tool_calls" if reply.tool_calls and r.stop_reason != "limit" else ("length" if r.stop_reason == "limit" else "stop")
    return ChatResult(reply.content, reply.reasoning, reply.tool_calls, finish, r)


_fronts.register("chat", run_chat)
