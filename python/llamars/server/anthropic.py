"""Anthropic Messages API ↔ the chat pipeline: request → OpenAI-style messages, tools and
tool choice; a reply → content blocks; streamed deltas → Anthropic's events. Errors are
`AnthropicError`s naming the field (the route's dialect answers them)."""
from __future__ import annotations

import json
import uuid
from typing import Any, Dict, List, Optional, Tuple

from ..schemas.anthropic import CountTokensRequest, MessagesRequest
from ..tools.reply import Reply, ReplyDelta
from .errors import ApiError

STOP_REASONS = {"eos": "end_turn", "limit": "max_tokens", "word": "stop_sequence"}


def _text_of(blocks: Any, where: str) -> str:
    if isinstance(blocks, str):
        return blocks
    if not isinstance(blocks, list):
        raise ApiError(400, f"{where}: must be a string or an array of text blocks")
    out = []
    for j, b in enumerate(blocks):
        if not isinstance(b, dict) or b.get("type") != "text" or not isinstance(b.get("text"), str):
            kind = b.get("type") if isinstance(b, dict) else type(b).__name__
            if kind == "image":
                raise ApiError(400, f"{where}[{j}]: image blocks are not supported (this server has no multimodal model)")
            raise ApiError(400, f"{where}[{j}]: expected a text block, got {kind!r}")
        out.append(b["text"])
    return "\n".join(out)


def _document_text(b: dict, where: str) -> str:
    """A document block's text: plain-text sources (`text`, or `content` text blocks) are
    read as the message's text; a PDF (base64) or URL source needs a multimodal model."""
    src = b.get("source") if isinstance(b.get("source"), dict) else {}
    kind = src.get("type")
    if kind == "text" and isinstance(src.get("data"), str):
        text = src["data"]
    elif kind == "content":
        text = _text_of(src.get("content"), f"{where}.source.content")
    else:
        raise ApiError(400, f"{where}.source: {kind!r} documents are not supported (only plain-text documents; "
                            "a PDF needs a multimodal model)")
    title = b.get("title")
    return f"{title}\n\n{text}" if isinstance(title, str) and title else text


def to_chat(req: CountTokensRequest) -> Tuple[List[Dict[str, Any]], Optional[list], Any, bool]:
    """(messages, tools, tool_choice, parallel_tool_calls) for the chat pipeline."""
    msgs: List[Dict[str, Any]] = []
    if req.system is not None:
        msgs.append({"role": "system", "content": _text_of(req.system, "system")})
    for i, m in enumerate(req.messages):
        where = f"messages[{i}]"
        if m.role not in ("user", "assistant"):
            raise ApiError(400, f"{where}.role: must be 'user' or 'assistant', got {m.role!r}")
        if isinstance(m.content, str):
            msgs.append({"role": m.role, "content": m.content})
            continue
        texts, calls, results, thinking = [], [], [], None
        for j, b in enumerate(m.content):
            bw = f"{where}.content[{j}]"
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "text":
                if not isinstance(b.get("text"), str):
                    raise ApiError(400, f"{bw}.text: must be a string")
                texts.append(b["text"])
            elif kind == "tool_use" and m.role == "assistant":
                if not isinstance(b.get("name"), str) or not isinstance(b.get("input", {}), dict):
                    raise ApiError(400, f"{bw}: tool_use needs a name and an input object")
                calls.append({"id": str(b.get("id") or f"toolu_{i}_{j}"), "type": "function",
                              "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}), ensure_ascii=False)}})
            elif kind == "tool_result" and m.role == "user":
                if not isinstance(b.get("tool_use_id"), str):
                    raise ApiError(400, f"{bw}.tool_use_id: must be a string")
                content = b.get("content", "")
                text = _text_of(content, f"{bw}.content") if content is not None else ""
                if b.get("is_error"):
                    text = "Error: " + text
                results.append({"role": "tool", "tool_call_id": b["tool_use_id"], "content": text})
            elif kind in ("thinking", "redacted_thinking") and m.role == "assistant":
                thinking = b.get("thinking") if isinstance(b.get("thinking"), str) else thinking
            elif kind == "document":
                texts.append(_document_text(b, bw))
            elif kind == "image":
                raise ApiError(400, f"{bw}: image input is not supported (this server has no multimodal model)")
            else:
                raise ApiError(400, f"{bw}.type: {kind!r} is not a supported {m.role} content block")
        msgs.extend(results)
        if texts or calls or not results:
            out: Dict[str, Any] = {"role": m.role, "content": "\n".join(texts) if texts else (None if calls else "")}
            if calls:
                out["tool_calls"] = calls
            if thinking:
                out["reasoning_content"] = thinking
            msgs.append(out)
    tools = None
    if req.tools:
        tools = []
        for i, t in enumerate(req.tools):
            if not isinstance(t, dict) or not isinstance(t.get("name"), str):
                raise ApiError(400, f"tools[{i}].name: a tool needs a name")
            if t.get("type") not in (None, "custom"):
                raise ApiError(400, f"tools[{i}].type: server tools ({t.get('type')!r}) are not supported; define a custom tool with input_schema")
            schema = t.get("input_schema")
            if not isinstance(schema, dict):
                raise ApiError(400, f"tools[{i}].input_schema: a JSON schema object is required")
            if schema.get("type", "object") != "object":
                raise ApiError(400, f"tools[{i}].input_schema.type: must be 'object', got {schema.get('type')!r}")
            tools.append({"type": "function", "function": {"name": t["name"], "description": t.get("description") or "", "parameters": schema}})
    choice: Any = None
    parallel = False
    tc = req.tool_choice
    if tc is not None:
        if tc.type == "auto":
            choice = "auto"
        elif tc.type == "any":
            choice = "required"
        elif tc.type == "none":
            choice = "none"
        elif tc.type == "tool":
            if not tc.name:
                raise ApiError(400, "tool_choice.name: required when type is 'tool'")
            choice = {"type": "function", "function": {"name": tc.name}}
        else:
            raise ApiError(400, f"tool_choice.type: must be auto, any, none or tool, got {tc.type!r}")
        parallel = not tc.disable_parallel_tool_use and tc.type in ("auto", "any")
    return msgs, tools, choice, parallel


def check(req: MessagesRequest) -> None:
    if req.max_tokens < 1:
        raise ApiError(400, f"max_tokens: must be greater than 0, got {req.max_tokens}")
    if req.temperature is not None and not 0 <= req.temperature <= 2:
        raise ApiError(400, f"temperature: must be within [0, 2], got {req.temperature}")
    if req.top_p is not None and not 0 <= req.top_p <= 1:
        raise ApiError(400, f"top_p: must be within [0, 1], got {req.top_p}")
    if req.top_k is not None and req.top_k < 0:
        raise ApiError(400, f"top_k: must be >= 0, got {req.top_k}")


def output_schema(req: MessagesRequest) -> Optional[dict]:
    """`output_config.format` (structured outputs) → a JSON schema, or None."""
    oc = req.output_config or {}
    fmt = oc.get("format") if isinstance(oc, dict) else None
    if fmt is None:
        return None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema" or not isinstance(fmt.get("schema"), dict):
        raise ApiError(400, "output_config.format: expected {\"type\": \"json_schema\", \"schema\": {...}}")
    return fmt["schema"]


def _input(arguments: str) -> dict:
    try:
        v = json.loads(arguments or "{}")
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


def content_blocks(reply: Reply) -> List[dict]:
    blocks: List[dict] = []
    if reply.reasoning:
        blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": ""})
    if reply.content or not reply.tool_calls:
        blocks.append({"type": "text", "text": reply.content})
    for c in reply.tool_calls:
        blocks.append({"type": "tool_use", "id": tool_id(c["id"]), "name": c["function"]["name"], "input": _input(c["function"]["arguments"])})
    return blocks


def tool_id(call_id: str) -> str:
    return call_id if call_id.startswith("toolu_") else "toolu_" + call_id.removeprefix("call_")


def stop_reason(result, reply: Reply) -> str:
    if reply.tool_calls and result.stop_reason != "limit":
        return "tool_use"
    return STOP_REASONS.get(result.stop_reason, "end_turn")


def message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def usage(result, n_prompt: int) -> dict:
    return {"input_tokens": n_prompt, "output_tokens": len(result.tokens),
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": result.tokens_cached}


class BlockStream:
    """ReplyDeltas → Anthropic stream events: one content block at a time (thinking,
    text, each tool_use), opened on its first delta and closed when another begins."""

    def __init__(self) -> None:
        self.index = -1
        self.kind: Optional[str] = None
        self.call: Optional[int] = None

    def _open(self, kind: str, block: dict, call: Optional[int] = None) -> List[Tuple[str, dict]]:
        ev = self.close()
        self.index += 1
        self.kind, self.call = kind, call
        ev.append(("content_block_start", {"type": "content_block_start", "index": self.index, "content_block": block}))
        return ev

    def close(self) -> List[Tuple[str, dict]]:
        if self.kind is None:
            return []
        ev = []
        if self.kind == "thinking":
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": {"type": "signature_delta", "signature": ""}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": self.index}))
        self.kind = None
        return ev

    def feed(self, d: ReplyDelta) -> List[Tuple[str, dict]]:
        ev: List[Tuple[str, dict]] = []
        if d.reasoning:
            if self.kind != "thinking":
                ev += self._open("thinking", {"type": "thinking", "thinking": "", "signature": ""})
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": {"type": "thinking_delta", "thinking": d.reasoning}}))
        if d.content:
            if self.kind != "text":
                ev += self._open("text", {"type": "text", "text": ""})
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": {"type": "text_delta", "text": d.content}}))
        for c in d.calls:
            if c.name is not None or self.kind != "tool_use" or self.call != c.index:
                ev += self._open("tool_use", {"type": "tool_use", "id": tool_id(c.id or f"call_{c.index}"), "name": c.name or "", "input": {}}, c.index)
            if c.arguments:
                ev.append(("content_block_delta", {"type": "content_block_delta", "index": self.index, "delta": {"type": "input_json_delta", "partial_json": c.arguments}}))
        return ev
