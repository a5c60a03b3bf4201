"""Server-sent events: `data: <json>\n\n` per chunk, `data: [DONE]` for OpenAI streams,
errors in-band as an `error` event (the status line is already sent)."""
from __future__ import annotations

from typing import AsyncIterator

import msgspec
from litestar.response import Stream

from .errors import body, classify

_enc = msgspec.json.Encoder()


def event(obj) -> bytes:
    return b"data: " + _enc.encode(obj) + b"\n\n"


def named_event(name: str, obj) -> bytes:
    """An SSE event with an `event:` line (Anthropic Messages, OpenAI Responses)."""
    return b"event: " + name.encode() + b"\ndata: " + _enc.encode(obj) + b"\n\n"


DONE = b"data: [DONE]\n\n"


async def guarded(chunks: AsyncIterator[bytes], dialect: str = "openai") -> AsyncIterator[bytes]:
    """Pass chunks through; an exception mid-stream becomes one error event."""
    try:
        async for c in chunks:
            yield c
    except Exception as exc:  # the response has started: report in-band
        status, message, type_ = classify(exc)
        if dialect == "anthropic":
            yield named_event("error", body(status, message, type_, dialect))
        else:
            yield b"error: " + _enc.encode(body(status, message, type_)) + b"\n\n"


class EventStream(Stream):
    """A `text/event-stream` response. (A plain `Stream` takes the handler's media type,
    JSON for routes that answer either way.)"""

    def __init__(self, chunks: AsyncIterator[bytes], dialect: str = "openai") -> None:
        super().__init__(guarded(chunks, dialect), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    def to_asgi_response(self, *args, **kwargs):
        kwargs["media_type"] = "text/event-stream"
        return super().to_asgi_response(*args, **kwargs)
