"""API keys: `Authorization: Bearer <key>` or `x-api-key: <key>`, compared in constant
time; /health and /v1/health stay public, and so do handlers marked `opt={"public": True}`
(the Web UI's page and static files: the API calls the page makes carry the key)."""
from __future__ import annotations

import hmac
from typing import List

from litestar.connection import ASGIConnection
from litestar.exceptions import NotAuthorizedException
from litestar.handlers.base import BaseRouteHandler

PUBLIC = {"/health", "/v1/health"}


def make_guard(keys: List[str], prefix: str = ""):
    encoded = [k.encode() for k in keys if k]
    public = {prefix + p for p in PUBLIC}

    def guard(conn: ASGIConnection, handler: BaseRouteHandler) -> None:
        if not encoded or conn.url.path in public or handler.opt.get("public"):
            return
        given = conn.headers.get("x-api-key", "")
        auth = conn.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            given = auth[7:].strip()
        g = given.encode()
        ok = False
        for k in encoded:  # no early exit: the time taken does not depend on which key matched
            ok |= hmac.compare_digest(g, k)
        if not ok:
            raise NotAuthorizedException("Invalid API Key")

    return guard
