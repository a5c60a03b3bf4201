"""The agent loop in-process, `Engine.chat(messages, tools=toolbox, execute=True)`: the
model is offered the toolbox's tools; each call it makes is approved (`approve(name,
arguments) -> bool`, default: every call), run by the toolbox and its result added as a
`tool` message; then the model continues, until it answers without calls or `max_steps`
model turns have run. The result is the last turn's `ChatResult`, whose `messages` holds
every message the loop added (assistant turns and tool results), ready to extend the
conversation with."""
from __future__ import annotations

import json
from typing import Any, Callable, List, Optional

from .. import _fronts
from ..errors import InvalidRequestError
from .toolbox import Toolbox, result_text

DENIED = "The user denied this tool call."


def run_agent(engine, messages: list, *, tools: Any = None, approve: Optional[Callable[[str, dict], bool]] = None,
              max_steps: int = 8, on_step: Optional[Callable[[dict], None]] = None, **chat_kwargs: Any):
    if not isinstance(tools, Toolbox):
        raise InvalidRequestError("tools: execute=True needs a llamars.agent.Toolbox (the tools to run), "
                                  "e.g. Toolbox(['read_file'], root='.')")
    if max_steps < 1:
        raise InvalidRequestError("max_steps: must be at least 1")
    history: List[dict] = list(messages)
    added: List[dict] = []

    def add(m: dict) -> None:
        history.append(m)
        added.append(m)
        if on_step is not None:
            on_step(m)

    defs = tools.definitions()
    result = None
    for _ in range(max_steps):
        result = engine.chat(history, tools=defs, **chat_kwargs)
        add(result.message())
        if not result.tool_calls:
            break
        for call in result.tool_calls:
            name = call["function"]["name"]
            try:
                args = json.loads(call["function"]["arguments"] or "{}")
            except ValueError:
                args = None
            if not isinstance(args, dict):
                text = "Error: the arguments are not a JSON object"
            elif approve is not None and not approve(name, args):
                text = DENIED
            else:
                try:
                    text = result_text(tools.call(name, args))
                except (KeyError, ValueError) as e:  # unknown tool, arguments that do not fit
                    text = f"Error: {e}"
            add({"role": "tool", "tool_call_id": call.get("id", ""), "name": name, "content": text})
    result.messages = added
    return result


_fronts.register("agent", run_agent)
