"""GET /v1/stream (resume a stream from a byte offset), DELETE /v1/stream (stop it),
POST /v1/streams/lookup: llama-server's resumable streams (server/streams.py). The
conversation id travels in the query (`conv_id`), so ids holding slashes (model names)
need no path escaping."""
from __future__ import annotations

from typing import Annotated, Optional

from litestar import delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody, QueryParameter
from litestar.response import Response

from ..errors import ApiError, error_response
from ..service import Service
from ..sse import EventStream
from ..streams import MAX_LOOKUP_IDS, OffsetLost


@get("/v1/stream", sync_to_thread=False)
def stream_resume(svc: NamedDependency[Service], conv_id: FromQuery[Optional[str]] = None,
                  from_: Annotated[Optional[str], QueryParameter(name="from")] = None) -> Response:
    if not conv_id:
        return error_response(400, "Missing conversation id in path", "invalid_request_error")
    s = svc.streams.get(conv_id)
    if s is None:
        return error_response(404, "Stream not found or expired", "not_found_error")
    try:
        offset = int(from_) if from_ else 0
        if offset < 0:
            raise ValueError
    except ValueError:
        return error_response(400, "Invalid 'from' offset", "invalid_request_error")
    if offset < s.dropped:
        return error_response(400, "Stream offset lost, please restart", "invalid_request_error")

    async def replay():
        try:
            async for c in s.read_from(offset):
                yield c
        except OffsetLost:  # (the reader fell more than the buffer behind)
            return

    return EventStream(replay(), ping=svc.config.sse_ping_interval)


@delete("/v1/stream", status_code=200, sync_to_thread=False)  # (204 below: Litestar refuses it here)
def stream_stop(svc: NamedDependency[Service], conv_id: FromQuery[Optional[str]] = None) -> Response:
    if not conv_id:
        return error_response(400, "Missing conversation id in path", "invalid_request_error")
    svc.streams.stop(conv_id)
    return Response(None, status_code=204)


@post("/v1/streams/lookup", status_code=200)
async def streams_lookup(svc: NamedDependency[Service], data: JSONBody[dict]) -> list:
    ids = data.get("conversation_ids") if isinstance(data, dict) else None
    if isinstance(ids, list) and len(ids) > MAX_LOOKUP_IDS:
        raise ApiError(400, f"conversation_ids: at most {MAX_LOOKUP_IDS} ids per lookup, got {len(ids)}")
    wanted = [i for i in ids if isinstance(i, str) and i] if isinstance(ids, list) else []
    return svc.streams.lookup(wanted)


ROUTES = [stream_resume, stream_stop, streams_lookup]
