"""llama-server's `--timeout N` (read/write timeout in seconds) as ASGI middleware: a
request body that stalls for N seconds is answered 408, and a response that a client
stops reading for N seconds is abandoned (its generation is cancelled, freeing the slot)."""
from __future__ import annotations

import asyncio

from ..errors import LlamarsError


class RequestTimeoutError(LlamarsError):
    """The client took longer than --timeout to send its request body."""


class WriteTimeoutError(Exception):
    """The client did not read the response for --timeout seconds."""


def timeout_middleware(seconds: float):
    def factory(app):
        async def middleware(scope, receive, send):
            if scope["type"] != "http" or seconds <= 0:
                await app(scope, receive, send)
                return

            body_done = False

            async def timed_receive():
                nonlocal body_done
                if body_done:  # later receives wait for a disconnect: no limit on those
                    return await receive()
                try:
                    message = await asyncio.wait_for(receive(), seconds)
                except asyncio.TimeoutError:
                    raise RequestTimeoutError(f"request body not received within {seconds:g} s (--timeout)") from None
                body_done = message.get("type") != "http.request" or not message.get("more_body", False)
                return message

            async def timed_send(message):
                try:
                    await asyncio.wait_for(send(message), seconds)
                except asyncio.TimeoutError:
                    raise WriteTimeoutError(f"client did not read the response within {seconds:g} s (--timeout)") from None

            await app(scope, timed_receive, timed_send)

        return middleware

    return factory
