"""POST /v1/messages (and /messages), POST /v1/messages/count_tokens: the Anthropic
Messages API over the chat pipeline. Errors answer in Anthropic's shape (errors.py picks
the dialect by path); `x-api-key` and `anthropic-version` headers are accepted."""
from __future__ import annotations

from litestar import Request, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ...schemas.anthropic import CountTokensRequest, MessagesRequest
from .. import anthropic as A
from ..errors import ApiError
from ..service import Service
from ..sse import EventStream, named_event
from .completion import _collect


@post(["/v1/messages", "/messages"], status_code=200, summary="Anthropic Messages API")
async def messages(request: Request, data: JSONBody[MessagesRequest], svc: NamedDependency[Service]) -> object:
    A.check(data)
    msgs, tools, choice, parallel = A.to_chat(data)
    plan = svc.plan_chat(msgs, tools=tools, tool_choice=choice, parallel_tool_calls=parallel)
    schema = A.output_schema(data)
    if schema is not None and plan.constraint is not None:
        raise ApiError(400, "output_config.format: structured output cannot be combined with tool use")
    extra = {"json_schema": schema} if schema is not None else plan.gen_kwargs()
    kw = svc.gen_kwargs(data, n_predict=data.max_tokens, stop=data.stop_sequences or [], **extra)
    ids = svc.chat_prompt_ids(plan.prompt)
    mid, model = A.message_id(), data.model

    if not data.stream:
        r = await _collect(svc, ids, kw)
        rp = plan.parser()
        rp.text = r.text
        reply = rp.finish()[0]
        return {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": A.content_blocks(reply),
            "stop_reason": A.stop_reason(r, reply),
            "stop_sequence": r.stopping_word if r.stop_reason == "word" else None,
            "usage": A.usage(r, len(ids)),
        }

    s = await svc.aengine.astream(ids, **kw)  # refused requests fail here, before the 200
    rp, blocks = plan.parser(), A.BlockStream()

    async def events():
        try:
            start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
                     "stop_sequence": None, "usage": {"input_tokens": len(ids), "output_tokens": 0}}
            yield named_event("message_start", {"type": "message_start", "message": start})
            yield named_event("ping", {"type": "ping"})
            async for c in s:
                if c.text:
                    for name, ev in blocks.feed(rp.feed(c.text)):
                        yield named_event(name, ev)
            r = s.result
            reply, last = rp.finish()
            tail = blocks.feed(last)
            if blocks.index < 0:  # an empty reply still has one (empty) text block
                tail += blocks._open("text", {"type": "text", "text": ""})
            for name, ev in tail + blocks.close():
                yield named_event(name, ev)
            delta = {"stop_reason": A.stop_reason(r, reply), "stop_sequence": r.stopping_word if r.stop_reason == "word" else None}
            yield named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": len(r.tokens)}})
            yield named_event("message_stop", {"type": "message_stop"})
        finally:
            await s.aclose()

    return EventStream(events(), dialect="anthropic")


@post(["/v1/messages/count_tokens", "/messages/count_tokens"], status_code=200, summary="Anthropic token counting")
async def count_tokens(request: Request, data: JSONBody[CountTokensRequest], svc: NamedDependency[Service]) -> dict:
    msgs, tools, choice, parallel = A.to_chat(data)
    plan = svc.plan_chat(msgs, tools=tools, tool_choice=choice, parallel_tool_calls=parallel)
    return {"input_tokens": len(svc.chat_prompt_ids(plan.prompt))}


ROUTES = [messages, count_tokens]
