"""create_app(config) → Litestar: the one place where routes, the engine service,
errors, auth and CORS are wired. serve(config) runs it under uvicorn."""
from __future__ import annotations

from typing import Optional

from litestar import Litestar, Router
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from .._core import __version__
from ..config import ServerConfig
from ..engine import Engine
from .auth import make_guard
from .errors import HANDLERS
from .routes import chat, completion, embeddings, infill, messages, slots, status, tokenize
from .routes import webui
from .routes import responses as responses_routes
from .responses_jobs import Responses
from .service import Service
from .timeouts import header_timeout_protocol, timeout_middleware
from .disconnect import disconnect_middleware


def create_app(config: ServerConfig, engine: Optional[Engine] = None) -> Litestar:
    svc = Service(config, engine)
    responses = Responses(config)  # the Responses API's store and background generations
    handlers = [*status.ROUTES, *completion.ROUTES, *chat.ROUTES, *tokenize.ROUTES, *slots.ROUTES, *embeddings.ROUTES, *infill.ROUTES, *messages.ROUTES]
    handlers += responses_routes.ROUTES
    handlers += webui.routes(config)  # GET / and its static files (none with --no-webui)
    prefix = config.api_prefix.rstrip("/")
    routes = [Router(path=prefix, route_handlers=handlers)] if prefix else handlers
    origins, origin_regex = list(config.cors_origins), None
    if config.cors_credentials and "*" in origins:
        # browsers reject `Access-Control-Allow-Origin: *` together with credentials; as
        # llama-server does, allow any origin by echoing the request's Origin back instead
        origins, origin_regex = [], ".*"
    cors = CORSConfig(
        allow_origins=origins,
        allow_origin_regex=origin_regex,
        allow_methods=config.cors_methods,
        allow_headers=config.cors_headers,
        allow_credentials=config.cors_credentials,
    )
    app = Litestar(
        route_handlers=routes,
        dependencies={"svc": Provide(lambda: svc, use_cache=True, sync_to_thread=False),
                      "responses": Provide(lambda: responses, use_cache=True, sync_to_thread=False)},
        exception_handlers=HANDLERS,
        guards=[make_guard(config.api_keys, prefix)],
        cors_config=cors,
        middleware=[disconnect_middleware, timeout_middleware(config.timeout)],
        on_startup=[svc.start_loading, responses.startup],
        on_shutdown=[responses.shutdown, svc.close],  # closes the engine only when the service loaded it
        openapi_config=OpenAPIConfig(title="llamars", version=__version__, path="/openapi"),
        request_max_body_size=32 * 1024 * 1024,
        debug=False,
    )
    app.state.service = svc
    app.state.responses = responses
    return app


def serve(config: ServerConfig) -> int:
    import os
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

    app = create_app(config)
    level = "critical" if config.log_disable else ("info" if config.verbose else "warning")
    kw = dict(log_level=level, access_log=config.verbose and not config.log_disable, timeout_keep_alive=5,
              timeout_graceful_shutdown=1, http=header_timeout_protocol(config.header_timeout))
    if config.ssl_key_file or config.ssl_cert_file:
        kw.update(ssl_keyfile=config.ssl_key_file, ssl_certfile=config.ssl_cert_file)
    scheme = "https" if config.ssl_cert_file else "http"
    say = (lambda *_: None) if config.log_disable else (lambda m: print(m, flush=True))
    if config.host.endswith(".sock"):
        say(f"llamars-server: listening on unix:{config.host}")
        kw.update(uds=config.host)
    else:
        say(f"llamars-server: listening on {scheme}://{config.host}:{config.port}")
        kw.update(host=config.host, port=config.port)
    server = Server(uvicorn.Config(app, **kw))
    failed: list = []

    def load_failed(error: str) -> None:
        # as llama-server: a model that cannot be loaded ends the process, non-zero, so a
        # supervisor (systemd, Kubernetes) sees it
        print(f"llamars-server: failed to load the model: {error}", file=sys.stderr, flush=True)
        failed.append(error)
        server.should_exit = True

    app.state.service.on_load_failed = load_failed
    server.run()
    return 1 if failed else 0
