"""create_app(config) → Litestar: the one place where routes, the engine service,
errors, auth and CORS are wired. serve(config) runs it under uvicorn."""
from __future__ import annotations

import contextlib
import os
import socket
import stat
from typing import List, Optional

from litestar import Litestar, Router
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from .._core import __version__
from ..config import ServerConfig
from ..agent.toolbox import Toolbox
from ..engine import Engine
from .auth import make_guard
from .errors import HANDLERS
from .routes import chat, completion, edits, embeddings, infill, messages, rerank, slots, status, tokenize
from .routes import webui
from .routes import tools as tools_routes
from .routes import streams as streams_routes
from .routes import responses as responses_routes
from .responses_jobs import Responses
from .service import Service
from .timeouts import header_timeout_protocol, timeout_middleware
from .disconnect import disconnect_middleware
from .logline import uvicorn_level
from .cors import cors_middleware


def create_app(config: ServerConfig, engine: Optional[Engine] = None) -> Litestar:
    toolbox = Toolbox.from_config(config)  # (MCP servers list their tools now; ToolsConfigError stops the start)
    svc = Service(config, engine)
    responses = Responses(config)  # the Responses API's store and background generations
    handlers = [*status.ROUTES, *completion.ROUTES, *chat.ROUTES, *tokenize.ROUTES, *slots.ROUTES, *embeddings.ROUTES, *infill.ROUTES, *messages.ROUTES, *edits.ROUTES, *rerank.ROUTES]
    handlers += responses_routes.ROUTES + streams_routes.ROUTES + tools_routes.ROUTES
    handlers += webui.routes(config)  # GET / and its static files (none with --no-webui)
    prefix = config.api_prefix.rstrip("/")
    routes = [Router(path=prefix, route_handlers=handlers)] if prefix else handlers
    app = Litestar(
        route_handlers=routes,
        dependencies={"svc": Provide(lambda: svc, use_cache=True, sync_to_thread=False),
                      "responses": Provide(lambda: responses, use_cache=True, sync_to_thread=False),
                      "toolbox": Provide(lambda: toolbox, use_cache=True, sync_to_thread=False)},
        exception_handlers=HANDLERS,
        guards=[make_guard(config.api_keys, prefix)],
        middleware=[disconnect_middleware, timeout_middleware(config.timeout)],
        on_startup=[svc.start_loading, responses.startup],
        on_shutdown=[svc.streams.close, responses.shutdown, svc.close, *([toolbox.close] if toolbox else [])],  # closes the engine only when the service loaded it
        openapi_config=OpenAPIConfig(title="llamars", version=__version__, path="/openapi"),
        request_max_body_size=32 * 1024 * 1024,
        debug=False,
    )
    # CORS outermost, as Litestar's own CORS middleware sits: 404s and errors carry it too
    app.asgi_handler = cors_middleware(config)(app.asgi_handler)
    app.state.service = svc
    app.state.responses = responses
    app.state.toolbox = toolbox
    return app


def serve(config: ServerConfig, app: Optional[Litestar] = None) -> int:
    """Run `app` (default: create_app(config)) under uvicorn on config's addresses."""
    import signal
    import sys

    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            if self.should_exit:  # a second SIGTERM / SIGINT: stop now
                os.write(2, b"llamars-server: second signal, exiting now\n")
                os._exit(128 + int(sig))
            super().handle_exit(sig, frame)

    # uvicorn shuts down gracefully on SIGTERM (work still running after a second is
    # cancelled, which cancels its generations), then re-raises it under the previous
    # handler: make that a clean exit (status 0), as llama-server's
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    app = create_app(config) if app is None else app
    svc = getattr(app.state, "service", None)
    say = svc.logline if svc is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    kw = dict(log_level=uvicorn_level(config), access_log=(config.verbose or config.log_verbosity >= 4) and not config.log_disable,
              timeout_keep_alive=5, timeout_graceful_shutdown=1, http=header_timeout_protocol(config.header_timeout))
    if config.ssl_key_file or config.ssl_cert_file:
        kw.update(ssl_keyfile=config.ssl_key_file, ssl_certfile=config.ssl_cert_file)
    scheme = "https" if config.ssl_cert_file else "http"
    try:
        sockets = listen_sockets(config.hosts, config.port, config.reuse_port)
    except (OSError, ValueError) as e:
        print(f"llamars-server: cannot listen on {config.host}:{config.port}: {e}", file=sys.stderr, flush=True)
        return 1
    for sock in sockets:
        addr = sock.getsockname()
        say(f"llamars-server: listening on unix:{addr}" if sock.family == getattr(socket, "AF_UNIX", None)
            else f"llamars-server: listening on {scheme}://{_hostport(addr)}")
    if svc is not None:
        prefix = config.api_prefix.rstrip("/") if getattr(config, "api_prefix", "") else ""
        svc.open_urls = [f"{scheme}://{_hostport(_local(sock.getsockname()))}{prefix}" for sock in sockets
                         if sock.family != getattr(socket, "AF_UNIX", None)]
    server = Server(uvicorn.Config(app, **kw))
    failed: list = []

    def load_failed(error: str) -> None:
        # as llama-server: a model that cannot be loaded ends the process, non-zero, so a
        # supervisor (systemd, Kubernetes) sees it
        print(f"llamars-server: failed to load the model: {error}", file=sys.stderr, flush=True)
        failed.append(error)
        server.should_exit = True

    if svc is not None:
        svc.on_load_failed = load_failed
    unix_paths = [sock.getsockname() for sock in sockets if sock.family == getattr(socket, "AF_UNIX", None)]
    try:
        server.run(sockets=sockets)
    finally:
        for path in unix_paths:  # (the sockets are closed by now)
            with contextlib.suppress(OSError):
                os.unlink(path)
    return 1 if failed else 0


def _local(addr):
    """A wildcard bind address as the address a browser on this machine opens."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(addr[0], addr[0])
    return (host,) + tuple(addr[1:])


def _hostport(addr) -> str:
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def listen_sockets(hosts: List[str], port: int, reuse_port: bool = False) -> List[socket.socket]:
    """One bound socket per --host entry (llama-server: comma-separated addresses, `.sock`
    paths for UNIX sockets; with several TCP addresses `::` binds IPv6 only, and port 0 is
    refused). --reuse-port sets SO_REUSEPORT."""
    n_tcp = sum(1 for h in hosts if not h.endswith(".sock"))
    if port == 0 and n_tcp > 1:
        raise ValueError("--port 0 is not supported with multiple TCP addresses")
    out: List[socket.socket] = []
    try:
        for h in hosts:
            if h.endswith(".sock"):
                if not hasattr(socket, "AF_UNIX"):
                    raise ValueError(f"{h}: UNIX sockets are not supported on this platform")
                with contextlib.suppress(FileNotFoundError):
                    if os.path.exists(h) and stat.S_ISSOCK(os.stat(h).st_mode):
                        os.unlink(h)  # a stale socket of an earlier run
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                out.append(sock)
                sock.bind(h)
            else:
                host = h[1:-1] if h.startswith("[") and h.endswith("]") else h
                infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
                family, _, _, _, addr = infos[0]
                sock = socket.socket(family, socket.SOCK_STREAM)
                out.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if reuse_port:
                    if not hasattr(socket, "SO_REUSEPORT"):
                        raise ValueError("--reuse-port is not supported on this platform")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6 and n_tcp > 1:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind(addr)
            sock.listen(2048)
            sock.setblocking(False)
    except BaseException:
        for sock in out:
            sock.close()
        raise
    return out
