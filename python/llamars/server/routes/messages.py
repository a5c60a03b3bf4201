"""POST /v1/messages (and /messages), POST /v1/messages/count_tokens: the Anthropic
Messages API over the chat pipeline. Errors answer in Anthropic's shape (errors.py picks
the dialect by path); `x-api-key` and `anthropic-version` headers are accepted."""
from __future__ import annotations

import asyncio

from litestar import Request, post
from litestar.di import NamedDependency
from litestar.params import JSONBody

from ...schemas.anthropic import CountTokensRequest, MessagesRequest
from .. import anthropic as A
from ..chat_turn import ChatTurn
from ..service import Service
from ..sse import EventStream, named_event


@post(["/v1/messages", "/messages"], status_code=200, summary="Anthropic Messages API")
async def messages(request: Request, data: JSONBody[MessagesRequest], svc: NamedDependency[Service]) -> object:
    A.check(data)
    msgs, tools, choice, parallel = await asyncio.to_thread(A.to_chat, data)  # (grows with the input)
    turn = await ChatTurn.prepare(
        svc, msgs, data, tools=tools, tool_choice=choice, parallel_tool_calls=parallel, schema=A.output_schema(data),
        conflict="output_config.format: structured output cannot be combined with tool use",
        n_predict=data.max_tokens, stop=data.stop_sequences or [], names={"stop": "stop_sequences"},
    )
    ids = turn.ids
    mid, model = A.message_id(), data.model

    if not data.stream:
        [(r, reply)] = await turn.complete()
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

    await turn.start()  # refused requests fail here, before the 200
    blocks = A.BlockStream()

    async def events():
        try:
            start = {"id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
                     "stop_sequence": None, "usage": {"input_tokens": len(ids), "output_tokens": 0}}
            yield named_event("message_start", {"type": "message_start", "message": start})
            yield named_event("ping", {"type": "ping"})
            async for _c, delta in turn.deltas():
                if delta is not None:
                    for name, ev in blocks.feed(delta):
                        yield named_event(name, ev)
            r, reply = turn.result, turn.reply
            tail = blocks.feed(turn.last)
            if blocks.index < 0:  # an empty reply still has one (empty) text block
                tail += blocks._open("text", {"type": "text", "text": ""})
            for name, ev in tail + blocks.close():
                yield named_event(name, ev)
            delta = {"stop_reason": A.stop_reason(r, reply), "stop_sequence": r.stopping_word if r.stop_reason == "word" else None}
            yield named_event("message_delta", {"type": "message_delta", "delta": delta, "usage": {"output_tokens": len(r.tokens)}})
            yield named_event("message_stop", {"type": "message_stop"})
        finally:
            await turn.aclose()

    return EventStream(events(), dialect="anthropic", ping=svc.config.sse_ping_interval)


@post(["/v1/messages/count_tokens", "/messages/count_tokens"], status_code=200, summary="Anthropic token counting")
async def count_tokens(request: Request, data: JSONBody[CountTokensRequest], svc: NamedDependency[Service]) -> dict:
    msgs, tools, choice, parallel = await asyncio.to_thread(A.to_chat, data)
    plan = await asyncio.to_thread(svc.plan_chat, msgs, tools=tools, tool_choice=choice, parallel_tool_calls=parallel)
    return {"input_tokens": len(await asyncio.to_thread(svc.chat_prompt_ids, plan.prompt))}


ROUTES = [messages, count_tokens]
