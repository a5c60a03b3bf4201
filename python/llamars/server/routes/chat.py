"""POST /chat/completions and /v1/chat/completions: OpenAI chat, rendered through the
model's chat template. A trailing assistant message is continued (prefill)."""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Optional

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import Request, post

from ...agent.toolbox import Toolbox
from ...schemas.openai import ChatRequest
from .. import shapes
from ..errors import ApiError
from ..chat_turn import ChatTurn
from ..service import Service
from ..sse import DONE, event, event_stream
from .tools import with_server_tools


def _logprobs(e, probs: list) -> dict:
    def one(i, lp):
        text, bs = shapes.piece(e, i)
        return {"token": text, "logprob": lp, "bytes": bs}

    return {"content": [{**one(p["id"], p["logprob"]), "top_logprobs": [one(t["id"], t["logprob"]) for t in p["top_logprobs"]]} for p in probs]}


def _response_schema(rf):
    """OpenAI response_format → a JSON schema (None for plain text)."""
    if not rf:
        return None
    t = rf.get("type", "text")
    if t == "text":
        return None
    if t == "json_object":
        return rf.get("schema") or {"type": "object"}
    if t == "json_schema":
        js = rf.get("json_schema") or {}
        schema = js.get("schema") if isinstance(js, dict) else None
        if not isinstance(schema, dict):
            raise ApiError(400, "response_format.json_schema.schema: a JSON schema object is required")
        return schema
    raise ApiError(400, f"response_format.type: must be text, json_object or json_schema, got {t!r}")


def _message(reply) -> dict:
    m = {"role": "assistant", "content": reply.content if (reply.content or not reply.tool_calls) else None}
    if reply.reasoning is not None:
        m["reasoning_content"] = reply.reasoning
    if reply.tool_calls:
        m["tool_calls"] = reply.tool_calls
    return m


def _finish(r, reply) -> str:
    if reply.tool_calls and r.stop_reason != "limit":
        return "tool_calls"
    return shapes.finish_reason(r)


def delta_dict(d) -> dict:
    """A ReplyDelta in OpenAI's streaming shape."""
    out: dict = {}
    if d.reasoning:
        out["reasoning_content"] = d.reasoning
    if d.content:
        out["content"] = d.content
    if d.calls:
        out["tool_calls"] = [
            {"index": c.index, **({"id": c.id, "type": "function"} if c.id else {}),
             "function": {**({"name": c.name} if c.name else {}), "arguments": c.arguments}}
            for c in d.calls
        ]
    return out


def check_messages(messages: list) -> None:
    """llama-server's checks of a chat's messages (an empty list is accepted: the prompt is
    the template's generation prompt alone)."""
    for i, m in enumerate(messages):
        if m.role != "assistant" and m.content is None:
            raise ApiError(400, f"messages[{i}].content: All non-assistant messages must contain 'content'")
    if len(messages) >= 2 and messages[-1].role == "assistant" and messages[-2].role == "assistant":
        raise ApiError(400, "messages: Cannot have 2 or more assistant messages at the end of the list.")


@post(["/chat/completions", "/v1/chat/completions"], status_code=200, summary="OpenAI chat completions")
async def chat_completions(request: Request, data: JSONBody[ChatRequest], svc: NamedDependency[Service],
                           toolbox: NamedDependency[Optional[Toolbox]]) -> object:
    e = svc.need()
    check_messages(data.messages)
    if not 1 <= data.n <= 16:
        raise ApiError(400, f"n: must be within [1, 16], got {data.n}")
    schema = _response_schema(data.response_format)
    if data.top_logprobs is not None and not 0 <= data.top_logprobs <= 20:
        raise ApiError(400, f"top_logprobs: must be within [0, 20], got {data.top_logprobs}")
    n_predict, names = data.max_tokens, None
    if data.max_completion_tokens is not None:
        n_predict, names = data.max_completion_tokens, {"max_tokens": "max_completion_tokens"}
    turn = await ChatTurn.prepare(
        svc, data.messages, data, tools=with_server_tools(data.tools, toolbox), tool_choice=data.tool_choice, parallel_tool_calls=data.parallel_tool_calls,
        reasoning_format=data.reasoning_format, template_kwargs=data.chat_template_kwargs, schema=schema,
        conflict="tools: tool calls cannot be combined with response_format, grammar or json_schema",
        n_predict=n_predict, stop=data.stop, names=names, n_probs=(data.top_logprobs or 1) if data.logprobs else 0,
        cache_prompt=data.cache_prompt, id_slot=data.id_slot, n_keep=data.n_keep,
    )
    ids = turn.ids
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    model = data.model or svc.model_id
    base = {"id": cid, "created": created, "model": model, "system_fingerprint": svc.fingerprint}

    if not data.stream:
        results = await turn.complete(data.n)
        choices = [
            {
                "index": i,
                "message": _message(reply),
                "logprobs": _logprobs(e, r.probs) if data.logprobs else None,
                "finish_reason": _finish(r, reply),
            }
            for i, (r, reply) in enumerate(results)
        ]
        ct = sum(len(r.tokens) for r, _ in results)
        out = {
            **base,
            "object": "chat.completion",
            "choices": choices,
            "usage": shapes.usage(len(ids), ct, results[0][0].tokens_cached),  # (llama-server: n_prompt_tokens_cache)
            "timings": shapes.timings(results[0][0]),
        }
        if data.verbose or (data.verbose is None and svc.config.verbose):
            # as llama-server: the raw prompt and result, in /completion's shape
            out["__verbose"] = shapes.native_final(e, results[0][0], turn.req.settings(), model, 0, False, False)
        return out
    if data.n > 1:
        raise ApiError(501, "n: streaming several choices is not supported yet", "not_supported_error")

    def chunk(delta: dict, finish=None, logprobs=None) -> bytes:
        return event({**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    await turn.start()  # refused requests fail here, before the 200

    async def chunks():
        try:
            yield chunk({"role": "assistant", "content": None})
            async for c, delta in turn.deltas():
                lp = None
                if data.logprobs and c.token is not None:
                    lp = _logprobs(e, [{"id": c.token, "logprob": c.logprob, "top_logprobs": [{"id": i, "logprob": v} for i, v in c.top_logprobs]}])
                d = delta_dict(delta) if delta is not None else {}
                if d or lp:
                    yield chunk(d, logprobs=lp)
            r = turn.result
            if turn.last:
                yield chunk(delta_dict(turn.last))
            yield chunk({}, finish=_finish(r, turn.reply))
            if data.stream_options and data.stream_options.include_usage:
                yield event({**base, "object": "chat.completion.chunk", "choices": [], "usage": shapes.usage(len(ids), len(r.tokens), r.tokens_cached), "timings": shapes.timings(r)})
            yield DONE
        finally:
            await turn.aclose()

    return event_stream(request, svc, chunks())


@post(["/chat/completions/input_tokens", "/v1/chat/completions/input_tokens"], status_code=200,
      summary="prompt token count of a chat request")
async def chat_input_tokens(data: JSONBody[ChatRequest], svc: NamedDependency[Service],
                            toolbox: NamedDependency[Optional[Toolbox]]) -> dict:
    """llama-server's count of the tokens a chat request's prompt would take (rendered
    with its tools and template options, as /v1/chat/completions would)."""
    svc.need()
    check_messages(data.messages)

    def count() -> int:
        plan = svc.plan_chat(data.messages, tools=with_server_tools(data.tools, toolbox), tool_choice=data.tool_choice,
                             parallel_tool_calls=data.parallel_tool_calls, reasoning_format=data.reasoning_format,
                             template_kwargs=data.chat_template_kwargs)
        return len(svc.chat_prompt_ids(plan.prompt))

    return {"input_tokens": await asyncio.to_thread(count), "object": "response.input_tokens"}


ROUTES = [chat_completions, chat_input_tokens]
