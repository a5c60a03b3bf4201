"""Router mode's HTTP surface, llama-server's: `GET /models` (and `/v1/models`) with each
model's status, `POST /models/load` / `/models/unload`, `GET /models/sse`, `GET /props`
(the router's own without `?model=`), `/health`; every other route is passed to the child
of the model the request names: the body's `model` for POST (or `?model=`), `?model=` for
GET. `?autoload=true|false` overrides `--no-models-autoload` per request. As LocalAI, a
request without `model` goes to the only model when there is just one."""
from __future__ import annotations

import asyncio
import json
import logging
import sys
import time
from typing import AsyncIterator, Dict, List, Optional, Tuple

from litestar import Litestar, Request, get, post, route
from litestar.di import NamedDependency, Provide
from litestar.response import Response, Stream

from .._core import __version__
from ..agent.toolbox import Toolbox
from ..cli_opt import Opt
from ..config import ServerConfig
from ..server.auth import make_guard
from ..server.cors import cors_middleware
from ..server.disconnect import disconnect_middleware
from ..server.errors import HANDLERS, ApiError
from ..server.routes import tools as tools_routes
from ..server.routes import webui
from ..server.sse import pinged
from .catalog import catalog
from .instances import Instance, Models, RouterError
from .proxy import forward

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


def _api(e: RouterError) -> ApiError:
    return ApiError(e.status, e.message, e.type)


def _listing(models: Models) -> dict:
    now = int(time.time())
    data = []
    for inst in models.instances.values():
        status: Dict[str, object] = {"value": inst.status, "args": inst.command(), "preset": inst.preset_ini()}
        if inst.failed:
            status.update(exit_code=inst.exit_code, failed=True, error=inst.error)
        item = {"id": inst.name, "aliases": [], "tags": [], "object": "model", "owned_by": "llamacpp", "created": now,
                "status": status, "path": inst.entry.path,
                "architecture": {"input_modalities": ["text"], "output_modalities": ["text"]},
                "source": inst.entry.source, "can_remove": False}
        if inst.status == "loaded":
            for k, v in inst.loaded_info.items():
                item.setdefault(k, v)
        data.append(item)
    return {"data": data, "object": "list"}


@get(["/models", "/v1/models"])
async def list_models(request: Request, models: NamedDependency[Models], config: NamedDependency[ServerConfig]) -> dict:
    if request.query_params.get("reload"):  # (llama-server: any value) the sources read again
        try:
            entries, notes = await asyncio.to_thread(catalog, config.models_dir, config.models_preset)
        except ValueError as e:  # CatalogError: the sources became unreadable; the list stays as it was
            raise ApiError(500, f"reload: {e}", "server_error") from None
        for line in notes:
            print(f"llamars-server: warning: {line}", file=sys.stderr, flush=True)
        await models.reload(entries)
    return _listing(models)


@get(["/health", "/v1/health"], sync_to_thread=False)
def health() -> dict:
    return {"status": "ok"}


def _named(models: Models, name: Optional[str]) -> Instance:
    inst = models.get(name or "")
    if inst is None:
        raise ApiError(404, "model is not found", "not_found_error")
    return inst


async def _model_field(request: Request) -> Optional[str]:
    raw = await request.body()
    if not raw:
        return None
    try:
        body = json.loads(raw) if len(raw) < 65536 else await asyncio.to_thread(json.loads, raw)
    except (ValueError, RecursionError):
        raise ApiError(400, "request body: invalid JSON") from None
    name = body.get("model") if isinstance(body, dict) else None
    if name is not None and not isinstance(name, str):
        raise ApiError(400, "model: must be a string (the name of a model of GET /models)")
    return name


@post("/models/load", status_code=200)
async def load_model(request: Request, models: NamedDependency[Models]) -> dict:
    inst = _named(models, await _model_field(request))
    if inst.running:
        raise ApiError(400, "model is already running")
    models.load(inst)
    return {"success": True}


@post("/models/unload", status_code=200)
async def unload_model(request: Request, models: NamedDependency[Models]) -> dict:
    name = await _model_field(request)
    inst = models.get(name or "")
    if inst is None:
        raise ApiError(400, "model is not found")
    if not inst.running:
        raise ApiError(400, "model is not running")
    await models.unload(inst)
    return {"success": True}


@get("/models/sse")
async def models_sse(models: NamedDependency[Models], config: NamedDependency[ServerConfig]) -> Stream:
    q: asyncio.Queue = asyncio.Queue(maxsize=1024)
    models.subscribers.append(q)

    async def events() -> AsyncIterator[bytes]:
        try:
            while True:
                ev = await q.get()
                yield b"data: " + json.dumps(ev, ensure_ascii=False).encode() + b"\n\n"
        finally:
            models.subscribers.remove(q)

    interval = float(config.sse_ping_interval) if config.sse_ping_interval > 0 else 0.0
    return Stream(pinged(events(), interval), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})


def _autoload(request: Request, config: ServerConfig) -> bool:
    v = request.query_params.get("autoload")
    return config.models_autoload if v is None else v in ("true", "1")


async def _pass(request: Request, models: Models, config: ServerConfig, name: Optional[str], body: bytes) -> Stream:
    name = name or models.only()
    if not name:
        raise ApiError(400, "model name is missing from the request")
    inst = models.get(name)
    if inst is None:
        raise ApiError(400, f"model '{name}' not found")
    if inst.status != "loaded" and not _autoload(request, config):
        raise ApiError(400, "model is not loaded")
    inst.waiters += 1  # (a model a request waits for is not unloaded to make room for another)
    try:
        await models.ensure_ready(inst)
        inst.last_used = time.monotonic()
        target = request.url.path + (("?" + request.url.query) if request.url.query else "")
        return await forward(inst, request.method, target, request.scope["headers"], body)
    except RouterError as e:
        raise _api(e) from None
    finally:
        inst.waiters -= 1


@get("/props")
async def router_props(request: Request, models: NamedDependency[Models], config: NamedDependency[ServerConfig]) -> Response:
    name = request.query_params.get("model")
    if name:
        return await _pass(request, models, config, name, b"")
    return Response({
        "role": "router", "max_instances": config.models_max, "models_autoload": config.models_autoload,
        "model_alias": "llamars-server", "model_path": "none",
        "default_generation_settings": {"params": None, "n_ctx": 0},
        "ui_settings": config.ui_config, "build_info": f"llamars {__version__}", "cors_proxy_enabled": False,
    })


@route("/{path:path}", http_method=_METHODS)
async def passthrough(request: Request, models: NamedDependency[Models], config: NamedDependency[ServerConfig]) -> Stream:
    body = await request.body()
    name = request.query_params.get("model")
    if request.method != "GET" and not name:
        name = await _model_field(request)
    return await _pass(request, models, config, name, body)


def create_router_app(config: ServerConfig, router_items: List[Tuple[Opt, str, object]], parse=None) -> Litestar:
    """`parse`: the command-line parser (cli.parse_args), to reckon what each child will
    take before it starts. Raises CatalogError (a ValueError) for a models directory or
    preset that cannot be read."""
    logging.getLogger("httpx").setLevel(logging.WARNING)  # (not a line per request passed on)
    entries, notes = catalog(config.models_dir, config.models_preset)
    for line in notes:  # (reported once, here)
        print(f"llamars-server: warning: {line}", file=sys.stderr, flush=True)
    models = Models(config, entries, router_items, parse)
    toolbox = Toolbox.from_config(config)  # the router serves the tools itself; its children get none
    handlers = [list_models, health, load_model, unload_model, models_sse, router_props, *tools_routes.ROUTES, passthrough]
    if not config.static_path:  # (a --path directory would take every GET)
        handlers += webui.routes(config)
    app = Litestar(
        route_handlers=handlers,
        dependencies={"models": Provide(lambda: models, use_cache=True, sync_to_thread=False),
                      "config": Provide(lambda: config, use_cache=True, sync_to_thread=False),
                      "toolbox": Provide(lambda: toolbox, use_cache=True, sync_to_thread=False)},
        exception_handlers=HANDLERS,
        guards=[make_guard(config.api_keys)],
        middleware=[disconnect_middleware],  # (a client that leaves closes the child's connection)
        on_startup=[models.startup],
        on_shutdown=[models.close, *([toolbox.close] if toolbox else [])],
        request_max_body_size=32 * 1024 * 1024,
        debug=False,
    )
    app.asgi_handler = cors_middleware(config)(app.asgi_handler)
    app.state.models = models
    return app
