"""The HTTP entry of a llamars application on Ray Serve: reads each request, computes its
conversation's affinity key (routing.py) and relays it through the replicas' deployment
handle, streaming the answer back; the replica that served it is named in
`x-llamars-replica`."""
from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse

from .replica import HOP
from .routing import affinity_key


class LlamarsIngress:
    def __init__(self, replicas: Any, affinity: bool = True) -> None:
        self.replicas = replicas.options(stream=True)
        self.affinity = affinity

    async def __call__(self, request: Request):
        body = await request.body()
        key = affinity_key(body) if self.affinity else ""
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in HOP]
        gen = self.replicas.forward.remote(key, request.method, path, headers, body)
        try:
            head = await gen.__anext__()
        except StopAsyncIteration:
            return _bad_gateway("the replica closed the response without a status")
        except Exception as e:  # the replica's call failed (it died, or its server is unreachable)
            return _bad_gateway(f"the replica failed: {str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__}")

        async def rest():
            async for chunk in gen:
                yield chunk

        h = dict(head["headers"])
        h["x-llamars-replica"] = head["replica"]
        return StreamingResponse(rest(), status_code=head["status"], headers=h)


def _bad_gateway(message: str) -> JSONResponse:
    return JSONResponse({"error": {"code": 502, "message": message + "; retry the request", "type": "server_error"}}, status_code=502)
