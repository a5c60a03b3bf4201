"""GET /tools and POST /tools, llama-server's server-tool routes: the list of tools (as
the model sees them, with their display names and permissions), and one call
(`{"tool", "params", "stream"}`) answered with the tool's result JSON, or with
`stream: true` (exec_shell_command) as SSE `{"chunk"}` events and a final
`{"done": true}`. A call runs on a worker thread and stops when the client leaves; an
unknown tool is a 404, arguments that do not fit the tool's schema a 400 naming the
field, a tool that fails answers 200 with its `{"error": ...}` as llama-server's do.
With --api-key both routes need the key like every other API route."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Optional

import msgspec
from litestar import Request, Response, get, post
from litestar.di import NamedDependency
from litestar.response import Stream

from ...agent.paths import ToolError
from ...agent.toolbox import Toolbox, UnknownTool
from ..errors import ApiError
from ..sse import event

_dec = msgspec.json.Decoder()


@get("/tools")
async def list_tools(toolbox: NamedDependency[Optional[Toolbox]]) -> Response:
    return Response(content=toolbox.listing() if toolbox is not None else [], media_type="application/json")


def _parse(raw: bytes) -> tuple:
    try:
        body = _dec.decode(raw)
    except msgspec.DecodeError as e:
        raise ApiError(400, f"request body: not valid JSON ({e})") from None
    if not isinstance(body, dict):
        raise ApiError(400, 'request body: expected an object {"tool": NAME, "params": {...}}')
    tool, params, stream = body.get("tool"), body.get("params", {}), body.get("stream", False)
    if not isinstance(tool, str) or not tool:
        raise ApiError(400, "tool: a tool name (string) is required; GET /tools lists them")
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise ApiError(400, "params: must be an object")
    if not isinstance(stream, bool):
        raise ApiError(400, "stream: must be a boolean")
    return tool, params, stream


@post("/tools", status_code=200)
async def call_tool(request: Request, toolbox: NamedDependency[Optional[Toolbox]]) -> Any:
    tool, params, stream = _parse(await request.body())
    if toolbox is None:
        raise ApiError(404, f'unknown tool "{tool}": no tools are enabled (start with --tools, --agent or '
                            "--mcp-servers-config)", "not_found_error")
    try:
        spec = toolbox.get(tool)
        spec.check(params)
    except UnknownTool as e:
        raise ApiError(404, str(e), "not_found_error") from None
    except ToolError as e:
        raise ApiError(400, str(e)) from None
    cancel = threading.Event()
    if not stream:
        try:
            result = await asyncio.to_thread(toolbox.call, tool, params, cancel=cancel)
        except asyncio.CancelledError:  # the client left: the tool stops
            cancel.set()
            raise
        return Response(content=result, media_type="application/json")
    if not spec.streams:
        raise ApiError(404, f'tool "{tool}" does not support stream = true', "not_found_error")
    return Stream(_streamed(toolbox, tool, params, cancel), media_type="text/event-stream",
                  headers={"Cache-Control": "no-cache"})


async def _streamed(toolbox: Toolbox, tool: str, params: dict, cancel: threading.Event):
    loop = asyncio.get_running_loop()
    q: "asyncio.Queue[Any]" = asyncio.Queue()
    end = object()

    def run() -> None:
        try:
            out = toolbox.call(tool, params, cancel=cancel, on_chunk=lambda c: loop.call_soon_threadsafe(q.put_nowait, c))
            err = out.get("error") if isinstance(out, dict) else None
            final = {"done": True, **({"error": str(err)} if err else {})}
        except Exception as e:  # (a tool's failure is reported in-band: the status is already sent)
            final = {"done": True, "error": str(e)}
        loop.call_soon_threadsafe(q.put_nowait, (end, final))

    worker = loop.run_in_executor(None, run)
    try:
        while True:
            item = await q.get()
            if isinstance(item, tuple) and item and item[0] is end:
                yield event(item[1])
                break
            yield event({"chunk": item})
    finally:
        cancel.set()  # a client that left stops the command
        await asyncio.shield(worker)


def with_server_tools(tools: Any, toolbox: Optional[Toolbox]) -> Any:
    """A request's `tools` with each reference to a server tool (an OpenAI function tool
    that gives only its `name`, e.g. {"type": "function", "function": {"name":
    "read_file"}}) replaced by that tool's definition, so the chat template sees its
    description and parameters; every other entry is left as it is."""
    if toolbox is None or not isinstance(tools, list):
        return tools
    out = []
    for t in tools:
        f = t.get("function") if isinstance(t, dict) and t.get("type") == "function" else None
        if isinstance(f, dict) and set(f) == {"name"} and f["name"] in toolbox:
            out.append(toolbox.get(f["name"]).definition())
        else:
            out.append(t)
    return out


ROUTES = [list_tools, call_tool]
