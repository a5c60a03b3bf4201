"""Connection and request timeouts. llama-server's `--timeout N` (read/write timeout in
seconds) as ASGI middleware: a request body that stalls for N seconds is answered 408,
and a response that a client stops reading for N seconds is abandoned (its generation is
cancelled, freeing the slot). Below ASGI, `--header-timeout`: a connection that has not
sent a whole request head within that time (a new connection that sends nothing, a
kept-alive one gone quiet, or a client trickling its headers) is closed."""
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


def header_timeout_protocol(seconds: float):
    """uvicorn's h11 protocol with a deadline on each request's head, counted from the
    connection's start or the end of the previous response (so a client trickling bytes
    cannot hold it open); `seconds <= 0`: uvicorn's protocol unchanged."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    if seconds <= 0:
        return H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        _head_timer = None

        def _awaiting_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _expire(self) -> None:
            self._head_timer = None
            if self._awaiting_head() and not self.transport.is_closing():
                self.transport.close()

        def connection_made(self, transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._awaiting_head():
                self._arm()  # keeps a running deadline: more bytes do not extend it
            else:
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._awaiting_head() and not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderTimeoutProtocol
