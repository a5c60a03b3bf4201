"""POST /chat/completions and /v1/chat/completions: OpenAI chat, rendered through the
model's chat template. A trailing assistant message is continued (prefill)."""
from __future__ import annotations

import asyncio
import time
import uuid

from litestar.di import NamedDependency
from litestar.params import JSONBody
from litestar import Request, post

from ...schemas.openai import ChatRequest
from .. import shapes
from ..errors import ApiError
from ..service import Service
from ..sse import DONE, EventStream, event
from .completion import _collect


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


@post(["/chat/completions", "/v1/chat/completions"], status_code=200, summary="OpenAI chat completions")
async def chat_completions(request: Request, data: JSONBody[ChatRequest], svc: NamedDependency[Service]) -> object:
    e = svc.need()
    if not data.messages:
        raise ApiError(400, "messages: at least one message is required")
    if not 1 <= data.n <= 16:
        raise ApiError(400, f"n: must be within [1, 16], got {data.n}")
    if data.tools or (data.tool_choice not in (None, "none", "auto")):
        raise ApiError(501, "tools: tool calling is not supported yet", "not_supported_error")
    schema = _response_schema(data.response_format)
    if data.top_logprobs is not None and not 0 <= data.top_logprobs <= 20:
        raise ApiError(400, f"top_logprobs: must be within [0, 20], got {data.top_logprobs}")
    n_predict = data.max_completion_tokens if data.max_completion_tokens is not None else data.max_tokens
    kw = svc.gen_kwargs(
        data,
        n_predict=n_predict,
        stop=data.stop,
        n_probs=(data.top_logprobs or 1) if data.logprobs else 0,
        cache_prompt=data.cache_prompt,
        id_slot=data.id_slot if data.id_slot >= 0 else None,
        n_keep=data.n_keep,
        **({"json_schema": schema} if schema is not None else {}),
    )
    prompt = svc.render_chat(data.messages, True, data.chat_template_kwargs)
    ids = svc.chat_prompt_ids(prompt)
    cid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
    model = data.model or svc.model_id
    base = {"id": cid, "created": created, "model": model, "system_fingerprint": svc.fingerprint}

    if not data.stream:
        results = await asyncio.gather(*(_collect(svc, ids, kw) for _ in range(data.n)))
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": r.text},
                "logprobs": _logprobs(e, r.probs) if data.logprobs else None,
                "finish_reason": shapes.finish_reason(r),
            }
            for i, r in enumerate(results)
        ]
        ct = sum(len(r.tokens) for r in results)
        return {
            **base,
            "object": "chat.completion",
            "choices": choices,
            "usage": shapes.usage(len(ids), ct),
            "timings": shapes.timings(results[0]),
        }
    if data.n > 1:
        raise ApiError(501, "n: streaming several choices is not supported yet", "not_supported_error")

    def chunk(delta: dict, finish=None, logprobs=None) -> bytes:
        return event({**base, "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish}]})

    s = await svc.aengine.astream(ids, **kw)  # refused requests fail here, before the 200

    async def chunks():
        try:
            yield chunk({"role": "assistant", "content": None})
            async for c in s:
                lp = None
                if data.logprobs and c.token is not None:
                    lp = _logprobs(e, [{"id": c.token, "logprob": c.logprob, "top_logprobs": [{"id": i, "logprob": v} for i, v in c.top_logprobs]}])
                if c.text or lp:
                    yield chunk({"content": c.text}, logprobs=lp)
            r = s.result
            yield chunk({}, finish=shapes.finish_reason(r))
            if data.stream_options and data.stream_options.include_usage:
                yield event({**base, "object": "chat.completion.chunk", "choices": [], "usage": shapes.usage(len(ids), len(r.tokens)), "timings": shapes.timings(r)})
            yield DONE
        finally:
            await s.aclose()

    return EventStream(chunks())


ROUTES = [chat_completions]
