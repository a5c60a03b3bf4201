"""The tools a server (or an in-process agent) offers: the built-in ones asked for
(`--tools all` or a list), confined to the tools root and run in the tools runtime,
then every MCP server's tools as `<server>_<tool>` (a name already taken is skipped
with a log line). `call` runs one tool and logs it; a failure is the call's
`{"error": ...}`, never an exception, except for an unknown tool or bad arguments."""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional

from . import files, shell
from .mcp import Manager, ServerConfig, parse_config
from .paths import Root, ToolError
from .tool import Context, ServerTool

log = logging.getLogger("llamars.server")

BUILTIN: Dict[str, ServerTool] = {t.name: t for t in [*files.TOOLS[:3], shell.TOOLS[0], *files.TOOLS[3:], shell.TOOLS[1]]}


class ToolsConfigError(ValueError):
    """--tools, --tools-root, --tools-runtime or an MCP configuration that cannot be used;
    the server does not start."""


class UnknownTool(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def builtin_names(names: Iterable[str]) -> List[str]:
    """The built-in tools `--tools` names (`all` for every one); ValueError for a name
    that is not one of them, listing the ones there are."""
    names = [n.strip() for n in names if n and n.strip()]
    for n in names:
        if n != "all" and n not in BUILTIN:
            raise ValueError(f'unknown tool "{n}". available tools: {", ".join(BUILTIN)}')
    return list(BUILTIN) if "all" in names else [n for n in BUILTIN if n in names]


class Toolbox:
    def __init__(self, tools: Iterable[str] = (), *, root: Optional[str] = None, runtime: Optional[str] = None,
                 mcp_servers: Any = None) -> None:
        """`tools`: built-in tool names or ["all"]; `root`: the directory file tools are
        confined to (default: the working directory); `runtime`: --tools-runtime's spec;
        `mcp_servers`: a Cursor-format dict or JSON text, or a list of `ServerConfig`."""
        self.root = Root(root or os.getcwd())
        self.tools: Dict[str, ServerTool] = {n: BUILTIN[n] for n in builtin_names(tools)}
        configs = _configs(mcp_servers)
        self.mcp = Manager(configs) if configs else None
        self.runtime = shell.make_runtime(runtime, self.root.path) if self.tools else shell.Runtime()
        if self.mcp is not None:
            self.mcp.start()
            added = 0
            for d in self.mcp.tools:
                name = f"{d['server']}_{d['name']}"
                if name in self.tools:
                    log.warning('MCP tool "%s" from server "%s" collides with an existing tool, skipping', name, d["server"])
                    continue
                self.tools[name] = _mcp_tool(self.mcp, d, name)
                added += 1
            if added:
                log.info("Added %d MCP tools", added)

    @classmethod
    def from_config(cls, config) -> Optional["Toolbox"]:
        """The server's toolbox (None when no tools and no MCP servers are configured);
        ToolsConfigError says what cannot be used."""
        try:
            return cls._from_config(config)
        except ToolsConfigError:
            raise
        except ValueError as e:
            raise ToolsConfigError(str(e)) from None

    @classmethod
    def _from_config(cls, config) -> Optional["Toolbox"]:
        mcp: List[ServerConfig] = []
        if config.mcp_servers_config:
            try:
                with open(config.mcp_servers_config, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ValueError(f"--mcp-servers-config {config.mcp_servers_config}: cannot read it ({e.strerror})") from None
            mcp += parse_config(text, f"--mcp-servers-config {config.mcp_servers_config}")
        if config.mcp_servers_json:
            for c in parse_config(config.mcp_servers_json, "--mcp-servers-json"):
                if any(m.name == c.name for m in mcp):
                    log.warning("MCP config: duplicate server name %r, skipping", c.name)
                else:
                    mcp.append(c)
        if not config.tools and not mcp:
            return None
        return cls(config.tools, root=config.tools_root, runtime=config.tools_runtime, mcp_servers=mcp)

    def __len__(self) -> int:
        return len(self.tools)

    def __contains__(self, name: object) -> bool:
        return name in self.tools

    def listing(self) -> List[dict]:
        """GET /tools: each tool as llama-server lists it."""
        return [t.to_json() for t in self.tools.values()]

    def definitions(self, names: Optional[Iterable[str]] = None) -> List[dict]:
        """The OpenAI function tools the model sees (all, or those named)."""
        pick = list(self.tools) if names is None else list(names)
        return [self.tools[n].definition() for n in pick if n in self.tools]

    def get(self, name: str) -> ServerTool:
        try:
            return self.tools[name]
        except KeyError:
            raise UnknownTool(f'unknown tool "{name}"') from None

    def call(self, name: str, params: Any, *, cancel=None, on_chunk: Optional[Callable[[str], None]] = None) -> Dict[str, Any]:
        """Run one tool. UnknownTool for a name not offered, ToolError for arguments that
        do not fit its schema; what goes wrong while it runs is its `{"error": ...}`."""
        tool = self.get(name)
        params = tool.check(params)
        ctx = Context(self.root, self.runtime, on_chunk=on_chunk)
        if cancel is not None:
            ctx.cancel = cancel
        t0 = time.monotonic()
        try:
            out = tool.run(params, ctx)
        except ToolError as e:
            out = {"error": str(e)}
        except Exception as e:  # a tool's own failure is that call's error, never the server's
            log.exception("tool %s failed", name)
            out = {"error": f"{name} failed: {e}"}
        err = out.get("error") if isinstance(out, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err
        log.info("tool call: %s %s -> %s (%.0f ms)", name, _short(params), f"error: {msg}" if msg else "ok",
                 (time.monotonic() - t0) * 1000)
        return out

    def close(self) -> None:
        if self.mcp is not None:
            self.mcp.close()
        self.runtime.close()


def result_text(result: Any) -> str:
    """What the model reads back from a tool result (llama-server's shapes and MCP's)."""
    if isinstance(result, dict):
        if isinstance(result.get("plain_text_response"), str):
            return result["plain_text_response"]
        err = result.get("error")
        if err is not None:
            return "Error: " + (str(err.get("message", err)) if isinstance(err, dict) else str(err))
        content = result.get("content")
        if isinstance(content, list):
            text = "\n".join(c.get("text", "") if isinstance(c, dict) and c.get("type") == "text" else json.dumps(c)
                             for c in content)
            return ("Error: " + text) if result.get("isError") else text
    return json.dumps(result, ensure_ascii=False)


def _short(params: Any) -> str:
    s = json.dumps(params, ensure_ascii=False)
    return s if len(s) <= 200 else s[:200] + "…"


def _configs(mcp_servers: Any) -> List[ServerConfig]:
    if not mcp_servers:
        return []
    if isinstance(mcp_servers, str):
        return parse_config(mcp_servers, "mcp_servers")
    if isinstance(mcp_servers, dict):
        return parse_config(json.dumps(mcp_servers), "mcp_servers")
    return list(mcp_servers)


def _mcp_tool(mgr: Manager, d: dict, name: str) -> ServerTool:
    server, tool = d["server"], d["name"]
    return ServerTool(name, name, d["description"], d["inputSchema"] or {"type": "object", "properties": {}},
                      lambda p, ctx: mgr.call(server, tool, p, ctx.cancel), kind="mcp", uses_cwd=False)
