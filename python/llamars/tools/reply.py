"""A chat reply as the model writes it → reasoning, content and tool calls, whole or
streamed: `ReplyParser.feed(text)` returns what became safe to send since the last call
(never taking back anything sent), `finish()` the final split."""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .base import Call, Format, Parsed, _hold


@dataclass
class CallDelta:
    index: int
    id: Optional[str] = None  # set (with name) on a call's first delta
    name: Optional[str] = None
    arguments: str = ""


@dataclass
class ReplyDelta:
    content: str = ""
    reasoning: str = ""
    calls: List[CallDelta] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.content or self.reasoning or self.calls)


@dataclass
class Reply:
    content: str
    reasoning: Optional[str]
    tool_calls: List[dict]  # OpenAI shape: {"id", "type": "function", "function": {"name", "arguments"}}


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


class ReplyParser:
    """`fmt` parses tool calls (None: the request offered no tools); `reasoning` is
    `auto`/`deepseek` (split the thinking part out) or `none`; `thinking_open` says the
    prompt already opened the thinking block."""

    def __init__(self, fmt: Optional[Format], reasoning: str = "auto", thinking_open: bool = False, tags: Optional[Tuple[str, str]] = None) -> None:
        self.fmt = fmt
        self.split = reasoning != "none"
        self.legacy = reasoning == "deepseek-legacy"  # thoughts also stay in the content
        self.open, self.close = tags or (fmt.reasoning if fmt else ("<think>", "</think>"))
        self.thinking_open = thinking_open
        self.text = ""
        self._content = ""
        self._reasoning = ""
        self._calls: List[Tuple[str, bool, str]] = []  # (id, name sent, argument text sent)

    # -------------------------------------------------------------- splitting
    def _split_reasoning(self, text: str, partial: bool) -> Tuple[Optional[str], str]:
        if not self.split:
            return None, text
        body = text
        if not self.thinking_open:
            stripped = text.lstrip()
            if not stripped.startswith(self.open):
                if partial and self.open.startswith(stripped):
                    return "", ""  # (blank so far, or) may still become the opening tag
                return None, text
            body = stripped[len(self.open) :]
        k = body.find(self.close)
        if k < 0:
            if partial:
                return _hold(body, (self.close,)).strip(), ""
            return body.strip(), ""
        return body[:k].strip(), body[k + len(self.close) :].lstrip()

    def _parse(self, partial: bool) -> Tuple[Optional[str], Parsed]:
        if self.fmt is not None and self.fmt.channels:
            reasoning, p = self.fmt.parse_channels(self.text, partial)
            if not self.split and reasoning:
                # reasoning_format none: the thinking stays in the content, ahead of it
                p.content = reasoning + ("\n" + p.content if p.content else "")
                reasoning = None
            return reasoning, p
        reasoning, rest = self._split_reasoning(self.text, partial)
        p = Parsed(rest) if self.fmt is None else self.fmt.parse(rest, partial)
        if self.fmt is not None:
            p.content = self.fmt.strip_content(p.content)
        if self.legacy and reasoning is not None and self.text.endswith(rest):
            p.content = self.text[: len(self.text) - len(rest)] + p.content
        return reasoning, p

    # -------------------------------------------------------------- streaming
    def feed(self, text: str) -> ReplyDelta:
        self.text += text
        return self._delta(*self._parse(partial=True), final=False)

    def _content_of(self, reasoning: Optional[str], p: Parsed) -> str:
        """With tools in play or thinking split off, whitespace around the content is
        layout (before a call, after `</think>`) and is trimmed; while streaming that
        holds back trailing whitespace until more text follows, so the deltas always add
        up to the final content. A plain reply is sent exactly as written."""
        if self.fmt is not None or (reasoning is not None and not self.legacy):
            return p.content.strip()
        return p.content

    def _delta(self, reasoning: Optional[str], p: Parsed, final: bool) -> ReplyDelta:
        d = ReplyDelta()
        content = self._content_of(reasoning, p)
        if content.startswith(self._content):
            d.content = content[len(self._content) :]
            self._content = content
        r = reasoning or ""
        if r.startswith(self._reasoning):
            d.reasoning = r[len(self._reasoning) :]
            self._reasoning = r
        for i, c in enumerate(p.calls):
            if c.name is None:
                break
            if i >= len(self._calls):
                self._calls.append((c.id or new_call_id(), False, ""))
            cid, named, sent = self._calls[i]
            cd = CallDelta(i)
            if not named:
                cd.id, cd.name = cid, c.name
            if len(c.arguments) > len(sent) and c.arguments.startswith(sent):
                cd.arguments = c.arguments[len(sent) :]
                sent = c.arguments
            if cd.name is not None or cd.arguments:
                d.calls.append(cd)
            self._calls[i] = (cid, True, sent)
        return d

    def finish(self) -> Tuple[Reply, ReplyDelta]:
        """The whole reply, and what was still unsent of it."""
        reasoning, p = self._parse(partial=False)
        last = self._delta(reasoning, p, final=True)
        calls = []
        for i, c in enumerate(p.calls):
            if c.name is None or not c.done:  # a call cut off (max tokens) is not a call
                continue
            cid = self._calls[i][0] if i < len(self._calls) else (c.id or new_call_id())
            calls.append({"id": cid, "type": "function", "function": {"name": c.name, "arguments": _compact(c.arguments)}})
        return Reply(self._content_of(reasoning, p), reasoning, calls), last


def _compact(arguments: str) -> str:
    """Arguments as compact JSON text (as OpenAI sends them); kept as written if not JSON."""
    try:
        return json.dumps(json.loads(arguments or "{}"), ensure_ascii=False)
    except ValueError:
        return arguments


def parse_reply(text: str, fmt: Optional[Format], reasoning: str = "auto", thinking_open: bool = False) -> Reply:
    """Split a complete reply (no streaming)."""
    rp = ReplyParser(fmt, reasoning, thinking_open)
    rp.text = text
    return rp.finish()[0]


__all__ = ["ReplyParser", "ReplyDelta", "CallDelta", "Reply", "parse_reply", "Call"]
