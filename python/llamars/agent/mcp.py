"""MCP servers over stdio (--mcp-servers-config / --mcp-servers-json, Cursor's
`{"mcpServers": {name: {command, args, env, cwd, timeout_ms}}}`): JSON-RPC 2.0, one
message per line. Each server is spawned at start to list its tools (`initialize`,
`notifications/initialized`, `tools/list`) and stopped; a call respawns it when it is
not running (`tools/call`). A server that hangs past timeout_ms is killed, one that
crashes, exits mid-call or prints garbage fails that call only (lines that are not
JSON-RPC replies are skipped), and the next call starts it again; one that cannot be
spawned is not retried for a few seconds."""
from __future__ import annotations

import json
import logging
import os
import queue
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

log = logging.getLogger("llamars.server")

PROTOCOL_VERSION = "2024-11-05"
MAX_LINE = 8 * 1024 * 1024  # a longer line from a server is dropped
WARMUP_S = 10  # listing one server's tools at start
COOLDOWN_S = 5  # after a failed spawn
_EOF = object()


@dataclass
class ServerConfig:
    name: str
    command: str
    args: List[str] = field(default_factory=list)
    env: Dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None
    timeout_ms: int = 30000


def parse_config(text: str, source: str) -> List[ServerConfig]:
    """The servers of one Cursor-format JSON text; ValueError names what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"{source}: not valid JSON ({e})") from None
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f'{source}: expected an object with "mcpServers": {{name: {{"command": ...}}}}')
    out = []
    for name, cfg in servers.items():
        where = f"{source}: mcpServers.{name}"
        if not isinstance(cfg, dict) or not isinstance(cfg.get("command"), str) or not cfg["command"]:
            log.warning("MCP server %r has no command, skipping", name)
            continue
        args, env, cwd, t = cfg.get("args", []), cfg.get("env", {}), cfg.get("cwd"), cfg.get("timeout_ms", 30000)
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise ValueError(f"{where}.args: must be an array of strings")
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise ValueError(f"{where}.env: must be an object of strings")
        if cwd is not None and not isinstance(cwd, str):
            raise ValueError(f"{where}.cwd: must be a string")
        if not isinstance(t, int) or isinstance(t, bool) or t <= 0:
            raise ValueError(f"{where}.timeout_ms: must be a positive integer")
        out.append(ServerConfig(name, cfg["command"], args, env, cwd, t))
    return out


class RpcError(Exception):
    def __init__(self, message: str, fatal: bool = True) -> None:
        super().__init__(message)
        self.fatal = fatal  # the transport is unusable (timed out, closed): stop the server


class Transport:
    """One running server process."""

    def __init__(self, cfg: ServerConfig) -> None:
        self.cfg = cfg
        self.replies: "queue.Queue[Any]" = queue.Queue(maxsize=65536)
        self.err_tail = ""
        self.next_id = 1
        self.initialized = False
        env = {**os.environ, **cfg.env}
        self.proc = subprocess.Popen([cfg.command, *cfg.args], cwd=cfg.cwd or None, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        threading.Thread(target=self._read, daemon=True, name=f"mcp-{cfg.name}-out").start()
        self.err_reader = threading.Thread(target=self._errors, daemon=True, name=f"mcp-{cfg.name}-err")
        self.err_reader.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def _read(self) -> None:
        try:
            self._pump()
        except (OSError, ValueError):  # the pipe was closed under it (close())
            pass
        self.replies.put(_EOF)

    def _pump(self) -> None:
        out = self.proc.stdout
        while True:
            line = out.readline(MAX_LINE + 1)
            if not line:
                break
            if len(line) > MAX_LINE:  # drop the rest of an over-long line
                while line and not line.endswith(b"\n"):
                    line = out.readline(MAX_LINE)
                log.warning("MCP %r: dropped a line over %d bytes", self.cfg.name, MAX_LINE)
                continue
            try:
                self.replies.put_nowait(line)
            except queue.Full:
                pass

    def _errors(self) -> None:
        try:
            for line in iter(lambda: self.proc.stderr.readline(65536), b""):
                text = line.decode("utf-8", "replace").rstrip()
                log.debug("MCP %r stderr: %s", self.cfg.name, text)
                self.err_tail = (self.err_tail + text + "\n")[-4096:]
        except (OSError, ValueError):  # the pipe was closed under it (close())
            pass

    def _send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            raise RpcError(self._closed("transport closed")) from None

    def _closed(self, what: str) -> str:
        try:  # stdout closes a moment before the exit is reaped and the last stderr lines are read
            self.proc.wait(timeout=2)
            self.err_reader.join(timeout=1)
        except subprocess.TimeoutExpired:
            pass
        code = self.proc.poll()
        tail = self.err_tail.strip().splitlines()[-3:]
        return (f"{what}" + (f" (the server exited with status {code})" if code is not None else "")
                + (f"; last stderr: {' | '.join(tail)}" if tail else ""))

    def rpc(self, method: str, params: Optional[dict], deadline: float, cancel: Optional[threading.Event]) -> Any:
        rid = self.next_id
        self.next_id += 1
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, **({"params": params} if params is not None else {})})
        while True:
            if cancel is not None and cancel.is_set():
                raise RpcError("cancelled")
            left = deadline - time.monotonic()
            if left <= 0:
                raise RpcError(f"request timed out after {self.cfg.timeout_ms} ms")
            try:
                line = self.replies.get(timeout=min(left, 0.1))
            except queue.Empty:
                continue
            if line is _EOF:
                self.replies.put(_EOF)
                raise RpcError(self._closed("transport closed"))
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # not JSON: skipped
            if not isinstance(reply, dict) or reply.get("id") != rid:
                continue  # a notification, or a stale reply
            if "error" in reply:
                e = reply["error"]
                raise RpcError(str(e.get("message", "unknown error")) if isinstance(e, dict) else str(e), fatal=False)
            if "result" not in reply:
                raise RpcError("invalid response")
            return reply["result"]

    def ensure_init(self, deadline: float, cancel=None) -> None:
        if self.initialized:
            return
        self.rpc("initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                "clientInfo": {"name": "llamars", "version": "1.0"}}, deadline, cancel)
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        self.initialized = True

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                self.proc.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                f.close()
            except (OSError, ValueError):
                pass


class Manager:
    """Every configured server: the tools they listed at start, calls on demand."""

    def __init__(self, configs: List[ServerConfig]) -> None:
        self.configs = {c.name: c for c in configs}
        self.tools: List[dict] = []  # {"server", "name", "description", "inputSchema"}
        self.running: Dict[str, Transport] = {}
        self.dead_until: Dict[str, float] = {}
        self.locks = {c.name: threading.Lock() for c in configs}
        self.lock = threading.Lock()

    def start(self) -> None:
        for cfg in self.configs.values():
            try:
                t = Transport(cfg)
            except OSError as e:
                log.warning("MCP warmup: failed to spawn %r (%s): %s", cfg.name, cfg.command, e)
                continue
            try:
                deadline = time.monotonic() + WARMUP_S  # (as llama-server: not the per-call timeout)
                t.ensure_init(deadline)
                listed = t.rpc("tools/list", None, deadline, None)
                tools = listed.get("tools", []) if isinstance(listed, dict) else []
                for d in tools if isinstance(tools, list) else []:
                    if isinstance(d, dict) and isinstance(d.get("name"), str) and d["name"]:
                        self.tools.append({"server": cfg.name, "name": d["name"], "description": str(d.get("description") or ""),
                                           "inputSchema": d.get("inputSchema") if isinstance(d.get("inputSchema"), dict) else {}})
                log.info("MCP warmup: %r discovered %d tools", cfg.name, sum(1 for x in self.tools if x["server"] == cfg.name))
            except RpcError as e:
                log.warning("MCP warmup: %r: %s", cfg.name, e)
            finally:
                t.close()

    def _transport(self, name: str) -> Transport:
        with self.lock:
            t = self.running.get(name)
            if t is not None and t.alive():
                return t
            if t is not None:
                log.warning("MCP %r is no longer running: %s; starting it again", name, t._closed("stopped"))
                t.close()
                del self.running[name]
            if time.monotonic() < self.dead_until.get(name, 0):
                raise RpcError(f"MCP server unavailable: {name}")
            try:
                t = Transport(self.configs[name])
            except OSError as e:
                self.dead_until[name] = time.monotonic() + COOLDOWN_S
                raise RpcError(f"MCP server {name} could not be started: {e}") from None
            self.running[name] = t
            return t

    def call(self, server: str, tool: str, arguments: dict, cancel: Optional[threading.Event] = None) -> dict:
        """The server's `tools/call` result, or {"error": {"code", "message"}} for this call."""
        cfg = self.configs[server]
        with self.locks[server]:  # one call at a time per server (stdio is one stream)
            try:
                t = self._transport(server)
                t.ensure_init(time.monotonic() + cfg.timeout_ms / 1000, cancel)  # each request has its own timeout
                return t.rpc("tools/call", {"name": tool, "arguments": arguments}, time.monotonic() + cfg.timeout_ms / 1000,
                             cancel)
            except RpcError as e:
                if e.fatal:  # a server that timed out or was cancelled mid-call may still be busy: stop it
                    t = self.running.pop(server, None)
                    if t is not None:
                        t.close()
                return {"error": {"code": -32603, "message": str(e)}}

    def close(self) -> None:
        with self.lock:
            for t in self.running.values():
                t.close()
            self.running.clear()
