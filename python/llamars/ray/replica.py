"""One llamars replica on Ray Serve: a `llamars-server` child process on a private
loopback port, started with the application's server flags, health-checked by Serve through
its `/health`, and stopped gracefully (SIGTERM: in-flight streams finish) when Serve drains
the replica; `forward` relays one HTTP request to it and streams the answer back (first the
status and headers, then the body as it comes)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import AsyncIterator, List, Tuple, Union

import httpx

HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade", "te", "trailer",
       "proxy-authorization", "proxy-authenticate"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamarsReplica:
    def __init__(self, server_args: List[str], start_timeout: float = 900.0) -> None:
        try:
            from ray import serve
            self.name = serve.get_replica_context().replica_id.unique_id
        except Exception:  # outside Serve (tests of the class itself)
            self.name = f"local-{os.getpid()}"
        self.port = _free_port()
        self.log = tempfile.NamedTemporaryFile(prefix=f"llamars-replica-{self.name}-", suffix=".log", delete=False)
        cmd = [sys.executable, "-m", "llamars.cli", *server_args, "--host", "127.0.0.1", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait_healthy(start_timeout)
        self.client = httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(None, connect=10))

    def _tail(self) -> str:
        try:
            with open(self.log.name, errors="replace") as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def _wait_healthy(self, limit: float) -> None:
        t0 = time.monotonic()
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llamars replica {self.name}: llamars-server exited ({self.proc.returncode}):\n{self._tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() - t0 > limit:
                self._stop()
                raise RuntimeError(f"llamars replica {self.name}: llamars-server not healthy after {limit:g} s:\n{self._tail()}")
            time.sleep(0.2)

    async def forward(self, key: str, method: str, path: str, headers: List[Tuple[str, str]],
                      body: bytes) -> AsyncIterator[Union[dict, bytes]]:
        """`key` is for the router (routing.AffinityRouter); the rest is the request."""
        req = self.client.build_request(method, path, headers=[(k, v) for k, v in headers if k.lower() not in HOP], content=body)
        resp = await self.client.send(req, stream=True)
        try:
            yield {"status": resp.status_code, "replica": self.name,
                   "headers": [(k, v) for k, v in resp.headers.items() if k.lower() not in HOP]}
            async for chunk in resp.aiter_raw():
                yield chunk
        finally:
            await resp.aclose()  # a client that left: the child sees the disconnect and frees the slot

    async def check_health(self) -> None:
        if self.proc.poll() is not None:
            raise RuntimeError(f"llamars-server exited ({self.proc.returncode}):\n{self._tail()}")
        r = await self.client.get("/health", timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"llamars-server /health answered {r.status_code}: {r.text[:200]}")

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # graceful: running generations finish or end cleanly
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __del__(self) -> None:
        # Serve calls this after draining the replica (no requests in flight any more)
        self._stop()
        try:
            os.unlink(self.log.name)
        except OSError:
            pass
