"""OpenAI Responses API ⇄ chat: input items (validated, given ids) → chat messages for
`plan_chat`, a parsed reply → output items, and the response object itself.

Shapes follow the `openai` SDK's types (openai/types/responses/): `message` items with
`input_text` / `output_text` parts, `function_call` items (`call_id`, `name`,
`arguments` as a JSON string), `function_call_output` items, `reasoning` items with
`reasoning_text` content. Every error is an `ApiError(400)` naming the field."""
from __future__ import annotations

import json
import time
import uuid
from typing import Any, Dict, List, Optional

from ..tools.reply import Reply
from .errors import ApiError

_TEXT_PARTS = ("input_text", "output_text", "text", "refusal")
_MEDIA_PARTS = ("input_image", "input_file", "input_audio", "image_url")
_ROLES = ("user", "assistant", "system", "developer")


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


# ---------------------------------------------------------------------- input items
def _text_of(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise ApiError(400, f"{where}: must be a string or an array of content parts")
    out = []
    for j, p in enumerate(content):
        pw = f"{where}[{j}]"
        if not isinstance(p, dict):
            raise ApiError(400, f"{pw}: must be an object")
        t = p.get("type")
        if t in _MEDIA_PARTS:
            raise ApiError(400, f"{pw}.type: {t!r} is not supported (this server reads text only)")
        if t not in _TEXT_PARTS:
            raise ApiError(400, f"{pw}.type: must be one of input_text, output_text, got {t!r}")
        text = p.get("refusal") if t == "refusal" else p.get("text")
        if not isinstance(text, str):
            raise ApiError(400, f"{pw}.text: must be a string")
        out.append(text)
    return "\n".join(out)


def _message_item(it: dict, where: str) -> dict:
    role = it.get("role")
    if role not in _ROLES:
        raise ApiError(400, f"{where}.role: must be one of {', '.join(_ROLES)}, got {role!r}")
    if "content" not in it:
        raise ApiError(400, f"{where}.content: required")
    text = _text_of(it["content"], f"{where}.content")
    part = {"type": "output_text", "text": text, "annotations": []} if role == "assistant" else {"type": "input_text", "text": text}
    return {"id": it.get("id") or new_id("msg"), "type": "message", "role": role, "content": [part], "status": "completed"}


def _call_item(it: dict, where: str) -> dict:
    for k in ("call_id", "name"):
        if not isinstance(it.get(k), str) or not it[k]:
            raise ApiError(400, f"{where}.{k}: a non-empty string is required")
    args = it.get("arguments", "{}")
    if isinstance(args, dict):
        args = json.dumps(args, ensure_ascii=False)
    if not isinstance(args, str):
        raise ApiError(400, f"{where}.arguments: must be a JSON string")
    try:
        if not isinstance(json.loads(args or "{}"), dict):
            raise ValueError("not an object")
    except ValueError as e:
        raise ApiError(400, f"{where}.arguments: must be a JSON object ({e})") from None
    return {"id": it.get("id") or new_id("fc"), "type": "function_call", "call_id": it["call_id"], "name": it["name"],
            "arguments": args or "{}", "status": "completed"}


def _call_output_item(it: dict, where: str) -> dict:
    if not isinstance(it.get("call_id"), str) or not it["call_id"]:
        raise ApiError(400, f"{where}.call_id: a non-empty string is required")
    if "output" not in it:
        raise ApiError(400, f"{where}.output: required")
    out = it["output"]
    if not isinstance(out, str):
        out = _text_of(out, f"{where}.output")
    return {"id": it.get("id") or new_id("fco"), "type": "function_call_output", "call_id": it["call_id"], "output": out, "status": "completed"}


def parse_input(value: Any, field: str = "input") -> List[dict]:
    """The request's `input` as a list of normalized items (each with an `id`)."""
    if value is None:
        raise ApiError(400, f"{field}: required (a string or an array of input items)")
    if isinstance(value, str):
        return [_message_item({"role": "user", "content": value}, field)]
    if not isinstance(value, list):
        raise ApiError(400, f"{field}: must be a string or an array of input items")
    items = []
    for i, it in enumerate(value):
        where = f"{field}[{i}]"
        if not isinstance(it, dict):
            raise ApiError(400, f"{where}: must be an object")
        t = it.get("type", "message" if "role" in it else None)
        if t == "message":
            items.append(_message_item(it, where))
        elif t == "function_call":
            items.append(_call_item(it, where))
        elif t == "function_call_output":
            items.append(_call_output_item(it, where))
        elif t == "reasoning":
            items.append({k: v for k, v in it.items() if k in ("id", "type", "summary", "content", "status")} | {"id": it.get("id") or new_id("rs")})
        else:
            raise ApiError(400, f"{where}.type: must be message, function_call, function_call_output or reasoning, got {t!r}")
    return items


# ---------------------------------------------------------------------- items → chat messages
def to_messages(instructions: Optional[str], items: List[dict]) -> List[dict]:
    """Conversation items → OpenAI chat messages (what `plan_chat` takes). Leading
    system/developer text merges with `instructions`; consecutive user texts merge;
    consecutive function calls become one assistant turn; reasoning items are dropped."""
    msgs: List[Dict[str, Any]] = []
    system = [instructions] if instructions else []
    names: Dict[str, str] = {}
    for it in items:
        t = it["type"]
        if t == "message":
            role = "system" if it["role"] == "developer" else it["role"]
            text = _text_of(it["content"], "input")
            if role == "system" and not msgs:
                system.append(text)
            elif role == "user" and msgs and msgs[-1]["role"] == "user" and isinstance(msgs[-1]["content"], str):
                msgs[-1]["content"] += "\n\n" + text
            else:
                msgs.append({"role": role, "content": text})
        elif t == "function_call":
            names[it["call_id"]] = it["name"]
            call = {"id": it["call_id"], "type": "function", "function": {"name": it["name"], "arguments": it["arguments"]}}
            last = msgs[-1] if msgs else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(call)
            else:
                msgs.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif t == "function_call_output":
            m = {"role": "tool", "tool_call_id": it["call_id"], "content": it["output"]}
            if it["call_id"] in names:
                m["name"] = names[it["call_id"]]
            msgs.append(m)
    if system:
        msgs.insert(0, {"role": "system", "content": "\n\n".join(system)})
    return msgs


def history_of(record: dict) -> List[dict]:
    """The conversation a stored response ends: its context, its input and its output."""
    return list(record["context"]) + list(record["input_items"]) + list(record["response"].get("output") or [])


# ---------------------------------------------------------------------- request fields
def text_format(text: Optional[dict]) -> dict:
    """`text` echoed in the response (default: plain text)."""
    if text is None:
        return {"format": {"type": "text"}}
    if not isinstance(text, dict):
        raise ApiError(400, "text: must be an object")
    fmt = text.get("format")
    return {**text, "format": fmt if fmt is not None else {"type": "text"}}


def text_schema(text: Optional[dict]) -> Optional[dict]:
    """`text.format` → a JSON schema for the grammar (None: free text)."""
    fmt = text_format(text)["format"]
    if not isinstance(fmt, dict):
        raise ApiError(400, "text.format: must be an object")
    t = fmt.get("type", "text")
    if t == "text":
        return None
    if t == "json_object":
        return {"type": "object"}
    if t == "json_schema":
        schema = fmt.get("schema")
        if not isinstance(schema, dict):
            raise ApiError(400, "text.format.schema: a JSON schema object is required")
        if not isinstance(fmt.get("name"), str) or not fmt["name"]:
            raise ApiError(400, "text.format.name: a name is required")
        return schema
    raise ApiError(400, f"text.format.type: must be text, json_object or json_schema, got {t!r}")


def tools_echo(tools: Optional[list], parsed: list) -> List[dict]:
    """The request's tools (already validated into `parsed`) in the Responses shape."""
    flat = [t.get("function", t) for t in tools or [] if isinstance(t, dict)]
    strict = {f.get("name"): f.get("strict") for f in flat if isinstance(f, dict)}
    return [{"type": "function", "name": t.name, "description": t.description or None, "parameters": t.parameters,
             "strict": strict.get(t.name)} for t in parsed]


def base_response(data, *, rid: str, model: str, status: str, tools: List[dict], defaults) -> Dict[str, Any]:
    """The response object before generation (`defaults`: the server's sampling defaults)."""
    return {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "background": bool(data.background),
        "error": None,
        "incomplete_details": None,
        "instructions": data.instructions,
        "max_output_tokens": data.max_output_tokens,
        "max_tool_calls": data.max_tool_calls,
        "model": model,
        "output": [],
        "parallel_tool_calls": bool(data.parallel_tool_calls),
        "previous_response_id": data.previous_response_id,
        "reasoning": data.reasoning,
        "store": bool(data.store),
        "temperature": data.temperature if data.temperature is not None else defaults.temperature,
        "text": text_format(data.text),
        "tool_choice": data.tool_choice if data.tool_choice is not None else ("auto" if tools else "none"),
        "tools": tools,
        "top_logprobs": data.top_logprobs or 0,
        "top_p": data.top_p if data.top_p is not None else defaults.top_p,
        "truncation": data.truncation or "disabled",
        "usage": None,
        "user": data.user,
        "metadata": data.metadata or {},
    }


# ---------------------------------------------------------------------- output
def message_item(text: str, status: str = "completed", item_id: Optional[str] = None) -> dict:
    return {"id": item_id or new_id("msg"), "type": "message", "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def reasoning_item(text: str, status: str = "completed", item_id: Optional[str] = None) -> dict:
    return {"id": item_id or new_id("rs"), "type": "reasoning", "summary": [], "status": status,
            "content": [{"type": "reasoning_text", "text": text}]}


def call_item(call_id: str, name: str, arguments: str, status: str = "completed", item_id: Optional[str] = None) -> dict:
    return {"id": item_id or new_id("fc"), "type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "status": status}


def output_from_reply(reply: Reply, incomplete: bool) -> List[dict]:
    status = "incomplete" if incomplete else "completed"
    out = []
    if reply.reasoning:
        out.append(reasoning_item(reply.reasoning, status))
    if reply.content or not reply.tool_calls:
        out.append(message_item(reply.content, status))
    for c in reply.tool_calls:
        out.append(call_item(c["id"], c["function"]["name"], c["function"]["arguments"], status))
    return out


def usage(n_input: int, n_output: int, cached: int = 0) -> dict:
    return {
        "input_tokens": n_input,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens": n_output,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": n_input + n_output,
    }


def finished(response: dict, result, n_prompt: int, output: List[dict]) -> dict:
    """The response once the engine's `result` is in (completed, or incomplete at the token limit)."""
    incomplete = result.stop_reason == "limit"
    return {
        **response,
        "status": "incomplete" if incomplete else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "completed_at": int(time.time()),
        "output": output,
        "usage": usage(n_prompt, len(result.tokens), result.tokens_cached),
    }


def input_items_page(items: List[dict], *, after: Optional[str], limit: int, order: str) -> dict:
    if not 1 <= limit <= 100:
        raise ApiError(400, f"limit: must be within [1, 100], got {limit}")
    if order not in ("asc", "desc"):
        raise ApiError(400, f"order: must be asc or desc, got {order!r}")
    seq = list(items) if order == "asc" else list(reversed(items))
    if after is not None:
        ids = [it.get("id") for it in seq]
        if after not in ids:
            raise ApiError(400, f"after: no input item {after!r} in this response")
        seq = seq[ids.index(after) + 1:]
    page = seq[:limit]
    return {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None, "has_more": len(seq) > limit}
