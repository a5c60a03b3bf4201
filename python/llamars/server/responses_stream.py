"""A streamed reply → the Responses API's event sequence.

    response.created · response.in_progress ·
    per output item: response.output_item.added, then
      message:       response.content_part.added · response.output_text.delta* ·
                     response.output_text.done · response.content_part.done
      reasoning:     response.content_part.added · response.reasoning_text.delta* ·
                     response.reasoning_text.done · response.content_part.done
      function_call: response.function_call_arguments.delta* ·
                     response.function_call_arguments.done
    response.output_item.done ·
    response.completed | response.incomplete | response.failed

`Emitter.feed(ReplyDelta)` opens and closes items as the reply moves from reasoning to
text to tool calls; the final output is exactly what was streamed (the `*.done` events
carry each item whole). Sequence numbers are given by the caller's `emit`."""
from __future__ import annotations

import copy
import json
from typing import Callable, Dict, List, Optional

from ..tools.reply import Reply, ReplyDelta
from . import responses_convert as conv

TERMINAL_EVENT = {"completed": "response.completed", "incomplete": "response.incomplete", "failed": "response.failed"}


def _same_json(a: str, b: str) -> bool:
    """The streamed arguments stand when they say what the parsed ones say (the deltas
    then add up to the `done` event's text)."""
    try:
        return json.loads(a) == json.loads(b)
    except ValueError:
        return False


class _Open:
    def __init__(self, kind: str, item: dict, index: int, call_index: int = -1) -> None:
        self.kind, self.item, self.index, self.call_index = kind, item, index, call_index
        self.text = ""
        self.logprobs: List[dict] = []


class Emitter:
    """`summary`: reasoning items carry their text as `summary` too; `max_calls`: function
    calls past that many are left out; `add_token` queues a token's logprobs entry for the
    next message delta (a reasoning delta or a call drops the queue: those tokens were not
    message text)."""

    def __init__(self, emit: Callable[[dict], None], *, summary: bool = False, max_calls: Optional[int] = None) -> None:
        self._emit = emit
        self.summary, self.max_calls = summary, max_calls
        self._pending: List[dict] = []
        self.items: List[dict] = []  # finished output items, in order
        self._open: Optional[_Open] = None
        self._calls: Dict[int, dict] = {}  # call index → its finished or open item
        self.last: Optional[dict] = None  # the latest event emitted

    def _ev(self, type_: str, **fields) -> None:
        ev = {"type": type_, **fields}
        self.last = ev
        self._emit(ev)

    # ------------------------------------------------------------------ lifecycle
    def start(self, response: dict) -> None:
        self._ev("response.created", response=copy.deepcopy(response))
        self._ev("response.in_progress", response=copy.deepcopy({**response, "status": "in_progress"}))

    def finish(self, reply: Optional[Reply], status: str = "completed") -> List[dict]:
        """Close what is open; tool calls the stream never showed (or showed only in
        part) are completed from `reply`. Returns the output items."""
        calls = reply.tool_calls if reply is not None else []
        calls = calls if self.max_calls is None else calls[:self.max_calls]
        o = self._open
        self._close(status, arguments=calls[o.call_index]["function"]["arguments"] if o and o.kind == "call" and o.call_index < len(calls) else None)
        for i, c in enumerate(calls):
            if i not in self._calls:
                self._open_call(i, c["id"], c["function"]["name"])
                self._close(status, arguments=c["function"]["arguments"])
        if not self.items and reply is not None:  # an empty reply is still one (empty) message
            self._open_text("message")
            self._close(status)
        return self.items

    def terminal(self, response: dict, timings: Optional[dict] = None) -> None:
        """The terminal event; llama.cpp's telemetry: `timings` of the generation on it."""
        t = TERMINAL_EVENT.get(response["status"])
        if t is not None:
            self._ev(t, response=copy.deepcopy(response), **({"timings": timings} if timings else {}))

    # ------------------------------------------------------------------ deltas
    def add_token(self, entry: dict) -> None:
        self._pending.append(entry)

    def feed(self, d: ReplyDelta) -> None:
        if d.reasoning:
            self._text("reasoning", d.reasoning)
        if d.content:
            self._text("message", d.content)
        for c in d.calls:
            self._pending = []
            if self.max_calls is not None and c.index >= self.max_calls:
                continue
            if c.name is not None:
                self._close()
                self._open_call(c.index, c.id or conv.new_id("call"), c.name)
            if c.arguments:
                o = self._open
                if o is None or o.kind != "call" or o.call_index != c.index:
                    continue  # a late fragment of a closed call: finish() sets the whole arguments
                o.text += c.arguments
                self._ev("response.function_call_arguments.delta", item_id=o.item["id"], output_index=o.index, delta=c.arguments)

    def _text(self, kind: str, delta: str) -> None:
        o = self._open
        if o is None or o.kind != kind:
            o = self._open_text(kind)
        o.text += delta
        name = "response.output_text.delta" if kind == "message" else "response.reasoning_text.delta"
        extra = {"logprobs": self._pending} if kind == "message" else {}
        o.logprobs += self._pending if kind == "message" else []
        self._pending = []
        self._ev(name, item_id=o.item["id"], output_index=o.index, content_index=0, delta=delta, **extra)

    def _open_text(self, kind: str) -> _Open:
        self._close()
        index = len(self.items)
        if kind == "message":
            item = conv.message_item("", "in_progress")
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        else:
            item = conv.reasoning_item("", "in_progress")
            part = {"type": "reasoning_text", "text": ""}
        item["content"] = []
        o = self._open = _Open(kind, item, index)
        self._ev("response.output_item.added", output_index=index, item=copy.deepcopy(item))
        self._ev("response.content_part.added", item_id=item["id"], output_index=index, content_index=0, part=part)
        return o

    def _open_call(self, call_index: int, call_id: str, name: str) -> None:
        index = len(self.items)
        item = conv.call_item(call_id, name, "", "in_progress")
        self._open = _Open("call", item, index, call_index)
        self._calls[call_index] = item
        self._ev("response.output_item.added", output_index=index, item=copy.deepcopy(item))

    def _close(self, status: str = "completed", arguments: Optional[str] = None) -> None:
        o, self._open = self._open, None
        if o is None:
            return
        item, iid, idx = o.item, o.item["id"], o.index
        if o.kind == "call":
            args = arguments if arguments is not None and not _same_json(o.text, arguments) else (o.text or "{}")
            self._ev("response.function_call_arguments.done", item_id=iid, output_index=idx, arguments=args)
            item["arguments"] = args
        else:
            if o.kind == "message":
                part = {"type": "output_text", "text": o.text, "annotations": [], "logprobs": o.logprobs}
                self._ev("response.output_text.done", item_id=iid, output_index=idx, content_index=0, text=o.text, logprobs=o.logprobs)
            else:
                part = {"type": "reasoning_text", "text": o.text}
                self._ev("response.reasoning_text.done", item_id=iid, output_index=idx, content_index=0, text=o.text)
                if self.summary:
                    item["summary"] = [{"type": "summary_text", "text": o.text}]
            self._ev("response.content_part.done", item_id=iid, output_index=idx, content_index=0, part=part)
            item["content"] = [part]
        item["status"] = status
        self.items.append(item)
        self._ev("response.output_item.done", output_index=idx, item=copy.deepcopy(item))
