"""CORS as llama-server answers it (--cors-origins / -methods / -headers / -credentials):
every response to a request with an Origin carries Access-Control-Allow-Origin (and Vary:
Origin when it echoes it, Access-Control-Allow-Credentials with credentials on, which a
browser needs on the response as well); an OPTIONS request is a preflight,
answered 200 with an empty text/html body before any key check (browsers send no
Authorization header on it).

Origins: `*` with credentials (the default without tools) echoes the request's Origin back; the special
value `localhost` (the default once --tools, --agent or MCP servers are on) echoes it only
when its host is localhost, 127.0.0.1 or ::1; a list
echoes an Origin that is on it (llama-server sends the list verbatim, which a browser
accepts only when it is that one origin: the same outcome in the browser)."""
from __future__ import annotations

from typing import List, Optional
from urllib.parse import urlsplit

from litestar.types import ASGIApp, Message, Receive, Scope, Send

from ..config import ServerConfig


def origin_is_localhost(origin: str) -> bool:
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    return host in ("localhost", "127.0.0.1", "::1")


def allow_origin(config: ServerConfig, origin: Optional[str]) -> Optional[str]:
    """The Access-Control-Allow-Origin value for a request from `origin` (None: no header)."""
    origins: List[str] = config.resolved_cors_origins()
    if origins == ["*"]:
        return (origin or "") if config.cors_credentials else "*"
    if origins == ["localhost"]:
        return origin if origin and origin_is_localhost(origin) else None
    return origin if origin in origins else None


def cors_middleware(config: ServerConfig):
    methods = ", ".join(config.cors_methods).encode()
    headers = ", ".join(config.cors_headers).encode()
    credentials = b"true" if config.cors_credentials else b"false"

    def factory(app: ASGIApp) -> ASGIApp:
        async def mw(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            origin, asked = None, None
            for k, v in scope.get("headers", ()):
                if k == b"origin":
                    origin = v.decode("latin-1")
                elif k == b"access-control-request-headers":
                    asked = v
            allow = allow_origin(config, origin) if origin is not None else None
            cors = [(b"access-control-allow-origin", allow.encode("latin-1"))] if allow else []
            if cors and allow != "*":
                cors.append((b"vary", b"Origin"))
            if cors and config.cors_credentials:  # (a credentialed response needs it as the preflight does)
                cors.append((b"access-control-allow-credentials", b"true"))
            if scope["method"] == "OPTIONS":
                await send({"type": "http.response.start", "status": 200, "headers": [
                    *(h for h in cors if h[0] != b"access-control-allow-credentials"),
                    (b"access-control-allow-credentials", credentials),
                    (b"access-control-allow-methods", methods),
                    # `*` is not honoured for credentialed requests (nor ever for Authorization):
                    # with the default `*`, the headers the browser asks for are allowed by name
                    (b"access-control-allow-headers", asked if asked and headers == b"*" else headers),
                    (b"content-type", b"text/html"),
                    (b"content-length", b"0"),
                ]})
                await send({"type": "http.response.body", "body": b""})
                return

            async def send_with_cors(message: Message) -> None:
                if message["type"] == "http.response.start" and cors:
                    message = {**message, "headers": [*message.get("headers", ()), *cors]}
                await send(message)

            await app(scope, receive, send_with_cors)

        return mw

    return factory
