"""A request passed to a model's child server and its answer streamed back: status,
headers (less hop-by-hop ones and CORS, which the router sets) and the body as it comes
(SSE included). A client that leaves closes the child's connection, and the child
cancels the work, as for a direct client."""
from __future__ import annotations

from typing import AsyncIterator, Iterable, List, Tuple

import httpx
from litestar.response import Stream

from .instances import Instance, RouterError

_HOP = {b"host", b"content-length", b"connection", b"keep-alive", b"transfer-encoding", b"te", b"trailer", b"upgrade",
        b"proxy-authorization", b"authorization", b"x-api-key"}
_DROP_BACK = {"content-type", "content-length", "connection", "keep-alive", "transfer-encoding", "date", "server"}


async def forward(inst: Instance, method: str, target: str, headers: Iterable[Tuple[bytes, bytes]], body: bytes) -> Stream:
    client = inst.client
    if client is None:
        raise RouterError(503, f"model '{inst.name}' is not loaded (its server stopped: {inst.error or 'unloaded'}); retry",
                          "unavailable_error")
    sent: List[Tuple[bytes, bytes]] = [(k, v) for k, v in headers if k.lower() not in _HOP]
    inst.inflight += 1
    try:
        req = client.build_request(method, target, headers=sent, content=body if method not in ("GET", "HEAD") else None)
        resp = await client.send(req, stream=True)
    except httpx.HTTPError as e:
        inst.inflight -= 1
        raise RouterError(502, f"model '{inst.name}': its server did not answer ({type(e).__name__}); "
                               "it may have stopped: see GET /models", "server_error") from None
    except BaseException:
        inst.inflight -= 1
        raise

    async def body_iter() -> AsyncIterator[bytes]:
        try:
            async for chunk in resp.aiter_raw():
                yield chunk
        except httpx.HTTPError:
            return  # the child went away mid-answer: the answer ends there
        finally:
            inst.inflight -= 1
            await resp.aclose()

    back = {k: v for k, v in resp.headers.items() if k.lower() not in _DROP_BACK and not k.lower().startswith("access-control-")}
    return Stream(body_iter(), status_code=resp.status_code, headers=back, media_type=resp.headers.get("content-type"))
