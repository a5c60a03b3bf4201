"""API keys: `Authorization: Bearer <key>` or `x-api-key: <key>`, compared in constant
time; /health and /v1/health stay public, and so do handlers marked `opt={"public": True}`
(the Web UI's page and static files: the API calls the page makes carry the key)."""
from __future__ import annotations

import hashlib
import hmac
from typing import List, Mapping

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
        g = given_key(conn.headers).encode()
        ok = False
        for k in encoded:  # no early exit: the time taken does not depend on which key matched
            ok |= hmac.compare_digest(g, k)
        if not ok:
            raise NotAuthorizedException("Invalid API Key")

    return guard


def given_key(headers: Mapping[str, str]) -> str:
    """The key a request carries (`Authorization: Bearer` wins over `x-api-key`)."""
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key", "")


def tenant(headers: Mapping[str, str], keys: List[str]) -> str:
    """Who owns what a request stores: a hash of its API key (the guard already checked it),
    or "" when the server has no keys. Stored responses are visible to their tenant only."""
    if not any(keys):
        return ""
    return hashlib.sha256(given_key(headers).encode()).hexdigest()[:32]
