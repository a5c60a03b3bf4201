"""Work that grows with the input, off the event loop: run it on a worker thread and
encode its JSON reply there too, so a reply of millions of values (a 30 MB prompt's
token ids, per-token embeddings) never stalls other clients while it is serialised."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

import msgspec
from litestar import Response

_ENCODER = msgspec.json.Encoder()


async def json_reply(fn: Callable[..., Any], *args: Any, status_code: int = 200) -> Response:
    """`fn(*args)` and its JSON encoding on a worker thread; the bytes as the response."""

    def run() -> bytes:
        return _ENCODER.encode(fn(*args))

    body = await asyncio.to_thread(run)
    return Response(content=body, status_code=status_code, media_type="application/json")
