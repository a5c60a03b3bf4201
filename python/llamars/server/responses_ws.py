"""The Responses API over one WebSocket (`ws://HOST/v1/responses`, `wss://` with TLS), as
OpenAI's and LocalAI's WebSocket mode: the client sends `response.create` messages (the POST
body, plus `generate`), the server answers each with the same events the SSE stream carries,
one JSON text frame per event.

- One response in progress per connection: another `response.create` meanwhile gets an
  `error` event (`response_already_in_flight`) and the running one goes on.
- `generate: false` prepares a response without inference: `response.created`, then
  `response.completed` with no output; a later turn can continue from it.
- `store: false` responses live on the connection only (removed when it closes), so a chain
  of them is continued from memory; a `store: true` request continuing one is refused
  (`invalid_store_transition`). At most `MAX_LOCAL` such responses and `MAX_LOCAL_BYTES` of
  their history per connection, else `connection_store_limit_reached`.
- `store: true` responses go to the shared store as POSTed ones do (the caller's API key
  owns them). A client that leaves cancels its response and frees the slot."""
from __future__ import annotations

import asyncio
import json
import re
from typing import Any, Dict, Optional

import msgspec
from litestar import WebSocket
from litestar.exceptions import WebSocketDisconnect

from ..schemas.responses import ResponsesRequest
from . import responses_convert as conv
from .errors import ApiError, classify
from .responses_jobs import Job, Responses
from .responses_stream import TERMINAL_EVENT

MAX_LOCAL = 128  # connection-local (store: false) responses per connection
MAX_LOCAL_BYTES = 64 << 20  # their requests and responses, JSON bytes
_PATH = re.compile(r"at `\$\.?([^`]*)`")


class _Refused(Exception):
    def __init__(self, message: str, code: Optional[str] = None, param: Optional[str] = None, status: int = 400,
                 type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.message, self.code, self.param, self.status, self.type = message, code, param, status, type_


def _error_event(e: _Refused) -> dict:
    return {"type": "error", "status": e.status,
            "error": {"type": e.type, "code": e.code, "message": e.message, "param": e.param}}


def _from_api(e: ApiError) -> _Refused:
    m = re.match(r"([A-Za-z_][\w.\[\]]*): ", e.message)  # llamars' messages start with the field
    return _Refused(e.message, param=m.group(1) if m else None, status=e.status, type_=e.type)


class Session:
    """One WebSocket connection: its connection-local responses and its running turn."""

    def __init__(self, responses: Responses, svc, socket: WebSocket, tenant: str) -> None:
        self.responses, self.svc, self.socket, self.tenant = responses, svc, socket, tenant
        self.local: Dict[str, dict] = {}  # id -> {"response", "input_items", "context"}
        self.local_bytes = 0
        self.turn_task: Optional[asyncio.Task] = None
        self.job: Optional[Job] = None
        self._send_lock = asyncio.Lock()

    async def send(self, ev: dict) -> None:
        async with self._send_lock:
            await self.socket.send_data(msgspec.json.encode(ev).decode(), mode="text")

    async def run(self) -> None:
        await self.socket.accept()
        try:
            while True:
                raw = await self.socket.receive_data(mode="text")
                try:
                    await self._accept(raw)
                except _Refused as e:
                    await self.send(_error_event(e))
        except (WebSocketDisconnect, RuntimeError):
            pass  # the client left
        finally:
            await self._stop()
            self.local.clear()

    async def _stop(self) -> None:
        if self.job is not None:
            self.job.cancel("disconnect")
        t = self.turn_task
        if t is not None and not t.done():
            t.cancel()
            await asyncio.gather(t, return_exceptions=True)

    # ------------------------------------------------------------------ one message
    async def _accept(self, raw: Any) -> None:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", "replace")
        try:
            body = await asyncio.to_thread(json.loads, raw)
        except ValueError as e:
            raise _Refused(f"the message is not valid JSON: {e}") from None
        if not isinstance(body, dict):
            raise _Refused("a message must be a JSON object with a type")
        if body.get("type") != "response.create":
            raise _Refused(f"unsupported message type {body.get('type')!r}; send response.create", param="type")
        if self.turn_task is not None and not self.turn_task.done():
            raise _Refused("a response is already in progress on this connection; send the next response.create after its "
                           "terminal event", code="response_already_in_flight")
        generate = body.pop("generate", True)
        if not isinstance(generate, bool):
            raise _Refused(f"generate: must be a boolean, got {generate!r}", param="generate")
        if body.pop("background", False):
            raise _Refused("background: background responses are not supported over WebSocket; POST /v1/responses "
                           "with background=true instead", param="background")
        body.pop("type")
        body.pop("stream", None)  # implicit
        try:
            data = msgspec.convert(body, ResponsesRequest)
        except msgspec.ValidationError as e:
            m = _PATH.search(str(e))
            raise _Refused(f"{m.group(1) + ': ' if m else ''}{e}", param=m.group(1) if m else None) from None
        if not data.store and (len(self.local) >= MAX_LOCAL or self.local_bytes + len(raw) > MAX_LOCAL_BYTES):
            raise _Refused(f"this connection holds {len(self.local)} store=false responses ({self.local_bytes} bytes); "
                           f"at most {MAX_LOCAL} and {MAX_LOCAL_BYTES >> 20} MiB: reconnect to start a new local history, "
                           "or use store=true", code="connection_store_limit_reached", param="store")
        self.turn_task = asyncio.create_task(self._turn(data, generate, len(raw)))

    async def _turn(self, data: ResponsesRequest, generate: bool, size: int) -> None:
        try:
            await self._respond(data, generate, size)
        except _Refused as e:
            await self._send_quietly(_error_event(e))
        except ApiError as e:
            await self._send_quietly(_error_event(_from_api(e)))
        except (WebSocketDisconnect, RuntimeError, asyncio.CancelledError):
            raise
        except Exception as exc:  # the engine refused the request
            status, message, type_ = classify(exc)
            await self._send_quietly(_error_event(_Refused(message, status=status, type_=type_)))
        finally:
            self.job = None

    async def _send_quietly(self, ev: dict) -> None:
        try:
            await self.send(ev)
        except (WebSocketDisconnect, RuntimeError):
            pass

    async def _context(self, data: ResponsesRequest) -> list:
        pid = data.previous_response_id
        if pid is None:
            return []
        rec = self.local.get(pid)
        if rec is not None:
            if data.store:
                raise _Refused(f"store: response {pid!r} lives on this connection only (store=false); a stored response "
                               "cannot continue it: send store=false, or start a new stored chain",
                               code="invalid_store_transition", param="store")
            return conv.history_of(rec)
        try:
            return await self.responses._history(pid, self.tenant)
        except ApiError as e:
            if e.status == 400 and "no stored response" in e.message:
                raise _Refused(f"previous_response_id: no response {pid!r} on this connection or in the store",
                               code="previous_response_not_found", param="previous_response_id") from None
            raise

    async def _respond(self, data: ResponsesRequest, generate: bool, size: int) -> None:
        self.svc.need()
        if data.store:
            self.responses._need_store()
        items = conv.parse_input(data.input)
        context = await self._context(data)
        if not generate:
            resp = conv.base_response(data, rid=conv.new_id("resp"), model=data.model or self.svc.model_id, status="in_progress",
                                      tools=conv.tools_echo(data.tools, []), defaults=self.svc.config.sampling)
            await self.send({"type": "response.created", "sequence_number": 0, "response": resp})
            final = {**resp, "status": "completed", "usage": None}
            await self._keep(data, final, items, context, size, save=True)
            await self.send({"type": "response.completed", "sequence_number": 1, "response": final})
            return
        turn, resp, context = await self.responses.plan(self.svc, data, items, context)
        await turn.start()
        job = Job(resp, False, bool(data.store), items, context, self.tenant)
        job.timings_per_token = bool(data.timings_per_token)
        job.data = data
        self.job = job
        self.responses.launch(job, turn)
        try:
            async for ev in job.follow(-1):
                if ev["type"] in TERMINAL_EVENT.values():
                    if job.task is not None:
                        await asyncio.gather(job.task, return_exceptions=True)  # stored (or failed to) first
                    await self._keep(data, job.response, items, context, size, save=False)  # (the job saved it)
                await self.send(ev)
        finally:
            if not job.finished:
                job.cancel("disconnect")

    async def _keep(self, data: ResponsesRequest, final: dict, items: list, context: list, size: int, save: bool) -> None:
        """A finished response: connection-local (store: false) or in the store (`save`)."""
        if data.store:
            if save:
                await self.responses._io("save", final, items, context, self.tenant)
            return
        rec = {"response": final, "input_items": items, "context": context}
        self.local[final["id"]] = rec
        self.local_bytes += size + len(msgspec.json.encode(final.get("output") or []))
