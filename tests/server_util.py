"""Run a llamars-server app under a real uvicorn server on a loopback port, in a thread."""
from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn


class LiveServer:
    def __init__(self, app) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self, wait_healthy: bool = True, path: str = "/health") -> "LiveServer":
        self.thread.start()
        t = time.monotonic()
        while not self.server.started:
            if time.monotonic() - t > 30:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        while wait_healthy:
            r = httpx.get(self.url + path, timeout=5)
            if r.status_code == 200:
                break
            if time.monotonic() - t > 120:
                raise RuntimeError(f"server not healthy: {r.status_code} {r.text}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
