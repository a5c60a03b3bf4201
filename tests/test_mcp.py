"""MCP servers over stdio with a small real server written for the tests
(fixtures/mcp_server.py): tools listed as `<server>_<tool>`, calls succeed, the slow one
times out, a crash or garbage is an error for that call only, the next call respawns the
server, a collision is skipped, a server that cannot start leaves the others working,
and the tools are listed and called through GET/POST /tools of a real server."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import httpx
import pytest
from server_util import LiveServer

from llamars.agent import Toolbox
from llamars.agent.mcp import parse_config
from llamars.cli import parse_args
from llamars.config import ServerConfig
from llamars.server.app import create_app

SERVER = str(Path(__file__).parent / "fixtures" / "mcp_server.py")


def _cfg(spawns: Path, **more) -> dict:
    entry = {"command": sys.executable, "args": [SERVER], "env": {"MCP_SPAWN_LOG": str(spawns)}, "timeout_ms": 1500, **more}
    return {"mcpServers": {"t": entry}}


def _spawns(path: Path) -> int:
    return len(path.read_text().split()) if path.exists() else 0


@pytest.fixture()
def box(tmp_path):
    spawns = tmp_path / "spawns"
    b = Toolbox(root=str(tmp_path), mcp_servers=_cfg(spawns))
    b.spawns = spawns
    yield b
    b.close()


def test_listed_then_stopped_then_respawned_on_demand(box):
    assert list(box.tools) == ["t_echo", "t_add", "t_slow", "t_crash", "t_noisy"]
    assert _spawns(box.spawns) == 1  # spawned once at start to list its tools
    assert not box.mcp.running  # and stopped
    entry = box.listing()[0]
    assert entry["type"] == "mcp" and entry["tool"] == "t_echo" and entry["definition"]["function"]["parameters"]["required"] == ["text"]
    r = box.call("t_echo", {"text": "hi"})
    assert r == {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert box.call("t_add", {"a": 2, "b": 3})["content"][0]["text"] == "5"
    assert _spawns(box.spawns) == 2  # one process for both calls


def test_timeout_crash_and_garbage_fail_that_call_only(box):
    t = time.monotonic()
    r = box.call("t_slow", {"seconds": 30})
    assert r["error"]["message"] == "request timed out after 1500 ms" and time.monotonic() - t < 4
    assert box.call("t_echo", {"text": "after timeout"})["content"][0]["text"] == "after timeout"
    n = _spawns(box.spawns)
    r = box.call("t_crash", {})
    msg = r["error"]["message"]
    assert "transport closed" in msg and "exited with status 3" in msg and "crashing on purpose" in msg
    assert box.call("t_echo", {"text": "again"})["content"][0]["text"] == "again"
    assert _spawns(box.spawns) == n + 1  # the next call started it again
    assert box.call("t_noisy", {})["content"][0]["text"] == "clean answer"  # garbage and a stale reply skipped
    n = _spawns(box.spawns)
    err = box.mcp.call("t", "nosuch", {})  # the server's own JSON-RPC error: it keeps running
    assert err == {"error": {"code": -32603, "message": "unknown tool nosuch"}}
    assert box.call("t_echo", {"text": "still"})["content"][0]["text"] == "still" and _spawns(box.spawns) == n


def test_collision_is_skipped_and_a_broken_server_leaves_the_others(tmp_path, caplog):
    cfg = _cfg(tmp_path / "s", env={"MCP_EXTRA_TOOL": "x"})
    cfg["mcpServers"]["a"] = {"command": sys.executable, "args": [SERVER], "env": {"MCP_EXTRA_TOOL": "echo"}}
    cfg["mcpServers"]["t_read"] = {"command": "/nonexistent/mcp-server"}
    cfg["mcpServers"]["nocmd"] = {"args": []}
    with caplog.at_level("INFO", logger="llamars.server"):
        b = Toolbox(["read_file"], root=str(tmp_path), mcp_servers=cfg)
    try:
        assert "t_x" in b and "a_echo" in b and "read_file" in b
        assert list(b.tools).count("a_echo") == 1
        text = caplog.text
        assert 'MCP tool "a_echo" from server "a" collides with an existing tool, skipping' in text
        assert "failed to spawn 't_read'" in text and "'nocmd' has no command, skipping" in text
    finally:
        b.close()


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match="not valid JSON"):
        parse_config("{", "--mcp-servers-json")
    with pytest.raises(ValueError, match='expected an object with "mcpServers"'):
        parse_config("[]", "--mcp-servers-json")
    with pytest.raises(ValueError, match=r"mcpServers.s.args: must be an array of strings"):
        parse_config('{"mcpServers": {"s": {"command": "x", "args": "y"}}}', "--mcp-servers-json")
    with pytest.raises(ValueError, match=r"mcpServers.s.timeout_ms: must be a positive integer"):
        parse_config('{"mcpServers": {"s": {"command": "x", "timeout_ms": 0}}}', "--mcp-servers-json")


def test_served_from_config_file(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(_cfg(tmp_path / "spawns")))
    config = parse_args(["--mcp-servers-config", str(path), "--tools-root", str(tmp_path)])
    assert config.resolved_cors_origins() == ["localhost"]
    s = LiveServer(create_app(ServerConfig(**{**_fields(config), "model": "unused"}), engine=None)).start(path="/tools")
    try:
        assert [t["tool"] for t in httpx.get(s.url + "/tools").json()] == ["t_echo", "t_add", "t_slow", "t_crash", "t_noisy"]
        r = httpx.post(s.url + "/tools", json={"tool": "t_echo", "params": {"text": "over http"}})
        assert r.status_code == 200 and r.json()["content"][0]["text"] == "over http"
        r = httpx.post(s.url + "/tools", json={"tool": "t_crash", "params": {}})
        assert r.status_code == 200 and "transport closed" in r.json()["error"]["message"]
    finally:
        s.stop()


def test_unreadable_config_stops_the_start(tmp_path, capsys):
    from llamars.cli import main

    assert main(["--mcp-servers-config", str(tmp_path / "missing.json"), "-m", "unused.gguf"]) == 1
    assert f"error: --mcp-servers-config {tmp_path / 'missing.json'}: cannot read it" in capsys.readouterr().err


def _fields(config) -> dict:
    import msgspec

    return {k: v for k, v in msgspec.structs.asdict(config).items() if k in ("mcp_servers_config", "tools_root")}
