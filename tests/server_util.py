"""Run a llamars-server app under a real uvicorn server on a loopback port, in a thread."""
from __future__ import annotations

import socket
import threading
import time
from typing import Optional

import httpx
import uvicorn


class LiveServer:
    """`LiveServer(app).start()` serves `app` on 127.0.0.1:<free port>; `url` is its base URL.

    With `ssl_certfile` (and `ssl_keyfile`) it serves HTTPS; other keyword arguments go to
    `uvicorn.Config` unchanged."""

    def __init__(self, app, *, ssl_certfile: Optional[str] = None, ssl_keyfile: Optional[str] = None, **config) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        scheme = "https" if ssl_certfile else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}"
        if ssl_certfile:
            config.update(ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile)
        config.setdefault("log_level", "warning")
        config.setdefault("lifespan", "on")
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, **config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, wait_healthy: bool = True, path: str = "/health") -> "LiveServer":
        self.thread.start()
        t = time.monotonic()
        while not self.server.started:
            if not self.thread.is_alive():
                raise RuntimeError("uvicorn exited before it started")
            if time.monotonic() - t > 30:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        while wait_healthy:
            # a test certificate is self-signed: the health poll does not verify it
            r = httpx.get(self.url + path, timeout=5, verify=False)
            if r.status_code == 200:
                break
            if time.monotonic() - t > 120:
                raise RuntimeError(f"server not healthy: {r.status_code} {r.text}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


def wait_healthy(proc, url: str, log_path, limit: float = 120.0) -> None:
    """Wait for a server process at `url` to answer /health with 200 (fails with its log
    if it exits first, or after `limit` seconds)."""
    t0 = time.monotonic()
    while True:
        assert proc.poll() is None, "the server exited:\n" + open(log_path, errors="replace").read()[-4000:]
        try:
            if httpx.get(url + "/health", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() - t0 < limit, f"the server did not become healthy within {limit:g} s"
        time.sleep(0.1)
