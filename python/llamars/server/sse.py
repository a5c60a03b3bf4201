"""Server-sent events: `data: <json>\n\n` per chunk, `data: [DONE]` for OpenAI streams,
errors in-band as an `error` event (the status line is already sent)."""
from __future__ import annotations

import asyncio
import contextlib
from typing import AsyncIterator, Optional

import msgspec
from litestar.response import Stream

from .errors import body, classify, extra_fields

_enc = msgspec.json.Encoder()


def event(obj) -> bytes:
    return b"data: " + _enc.encode(obj) + b"\n\n"


def named_event(name: str, obj) -> bytes:
    """An SSE event with an `event:` line (Anthropic Messages, OpenAI Responses)."""
    return b"event: " + name.encode() + b"\ndata: " + _enc.encode(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"


PING = b":\n\n"  # llama-server's SSE comment ping


async def pinged(chunks: AsyncIterator[bytes], interval: float) -> AsyncIterator[bytes]:
    """`chunks`, with a comment ping after every `interval` seconds without one (as
    llama-server's --sse-ping-interval: clients that time out on silence, such as undici,
    stay connected through a long prompt). interval <= 0: no pings."""
    if interval <= 0:
        async for c in chunks:
            yield c
        return
    it = chunks.__aiter__()
    nxt: Optional[asyncio.Future] = None
    try:
        while True:
            if nxt is None:
                nxt = asyncio.ensure_future(it.__anext__())
            done, _ = await asyncio.wait({nxt}, timeout=interval)
            if not done:
                yield PING
                continue
            try:
                c = nxt.result()
            except StopAsyncIteration:
                return
            finally:
                nxt = None
            yield c
    finally:
        if nxt is not None:  # the consumer left mid-wait: stop the pending step first
            nxt.cancel()
            with contextlib.suppress(BaseException):
                await nxt
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            await aclose()


async def guarded(chunks: AsyncIterator[bytes], dialect: str = "openai", ping: float = 0) -> AsyncIterator[bytes]:
    """Pass chunks through (pinged); an exception mid-stream becomes one error event."""
    try:
        async for c in pinged(chunks, ping):
            yield c
    except Exception as exc:  # the response has started: report in-band
        status, message, type_ = classify(exc)
        if dialect == "anthropic":
            yield named_event("error", body(status, message, type_, dialect))
        else:
            yield b"error: " + _enc.encode(body(status, message, type_, extra=extra_fields(exc))) + b"\n\n"


class EventStream(Stream):
    """A `text/event-stream` response. (A plain `Stream` takes the handler's media type,
    JSON for routes that answer either way.)"""

    def __init__(self, chunks: AsyncIterator[bytes], dialect: str = "openai", ping: float = 0) -> None:
        super().__init__(guarded(chunks, dialect, ping), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def to_asgi_response(self, *args, **kwargs):
        kwargs["media_type"] = "text/event-stream"
        return super().to_asgi_response(*args, **kwargs)


def event_stream(request, svc, chunks: AsyncIterator[bytes], dialect: str = "openai") -> EventStream:
    """The route's SSE response; with an `X-Conversation-Id` header the generation is a
    resumable stream (server/streams.py): it runs on when the client leaves, and this
    response is its first reader."""
    conv = request.headers.get("x-conversation-id") if request is not None else None
    if conv:
        session = svc.streams.start(conv, guarded(chunks, dialect))
        chunks = session.read_from(0)
    return EventStream(chunks, dialect, ping=svc.config.sse_ping_interval)
