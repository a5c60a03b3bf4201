"""llama-server's built-in server tools against a temporary directory (reads, globs,
greps, writes, edits, shell commands with timeout and output cap, get_info), the escapes
they refuse (`../`, absolute paths, a symlink pointing out), the flags (--tools,
--agent, --tools-root, --tools-runtime refused clearly where no container engine runs),
GET/POST /tools on a real server, CORS narrowed to localhost, the API key on tool
routes, a client that leaves stopping its command, and the agent loop in-process."""
from __future__ import annotations

import json
import os
import re
import shutil
import sys
import threading
import time

import httpx
import pytest
from server_util import LiveServer

from llamars.agent import Toolbox
from llamars.agent.paths import ToolError, glob_matcher
from llamars.cli import CLIError, parse_args
from llamars.config import ServerConfig
from llamars.server.app import create_app


@pytest.fixture()
def root(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.c").write_text("int main(void) {\n    return 42;\n}\n")
    (tmp_path / "src" / "util.h").write_text("#define ANSWER 42\n")
    (tmp_path / "notes.txt").write_text("alpha\nbeta\ngamma\ndelta\n")
    (tmp_path / "node_modules").mkdir()
    (tmp_path / "node_modules" / "dep.c").write_text("int dep;\n")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("do not read\n")
    (tmp_path / "escape").symlink_to(outside / "secret.txt")
    (tmp_path / "escape-dir").symlink_to(outside)
    return tmp_path


@pytest.fixture()
def box(root):
    b = Toolbox(["all"], root=str(root))
    yield b
    b.close()


def test_read_file_ranges_limits_and_line_numbers(box, root):
    assert box.call("read_file", {"path": "notes.txt"}) == {"plain_text_response": "alpha\nbeta\ngamma\ndelta\n"}
    r = box.call("read_file", {"path": "notes.txt", "start_line": 2, "end_line": 3, "append_loc": True})
    assert r == {"plain_text_response": "2\u2192beta\n3\u2192gamma\n"}
    (root / "big.txt").write_text("x" * 100 + "\n" * 0 + ("line\n" * 5000))
    assert "file too large" in box.call("read_file", {"path": "big.txt"})["error"]
    part = box.call("read_file", {"path": "big.txt", "start_line": 1, "end_line": 100000})["plain_text_response"]
    assert part.endswith("[output truncated]") and len(part.encode()) <= 16 * 1024 + 20
    assert "cannot stat" in box.call("read_file", {"path": "missing.txt"})["error"]


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "escape", "escape-dir/secret.txt", "src/../../x", "~/x"])
def test_paths_leaving_the_root_are_refused(box, path):
    for tool, params in (("read_file", {"path": path}), ("write_file", {"path": path, "content": "x"}),
                         ("grep_search", {"path": path, "pattern": "x"}), ("file_glob_search", {"path": path}),
                         ("edit_file", {"path": path, "edits": [{"old_text": "a", "new_text": "b"}]})):
        r = box.call(tool, params)
        assert "outside the tools root" in r["error"], (tool, path, r)


def test_glob_search(box):
    r = box.call("file_glob_search", {"path": ".", "include": "*.c"})
    assert [e["path"] for e in r["entries"]] == ["src/main.c"]  # node_modules is not walked
    assert "Total matches: 1" in r["plain_text_response"] and r["base"] == box.root.path
    r = box.call("file_glob_search", {"path": ".", "type": "dir"})
    names = [e["path"] for e in r["entries"]]
    assert "src" in names and "escape-dir" not in names  # a link out of the root is left out
    r = box.call("file_glob_search", {"path": ".", "include": "**", "limit": 2})
    assert len(r["entries"]) == 2 and "results limit reached" in r["plain_text_response"]
    assert "invalid type" in box.call("file_glob_search", {"path": ".", "type": "socket"})["error"]
    m = glob_matcher("src/*.c")
    assert m("src/main.c") and m("a/src/main.c") and not m("src/x/main.c")
    assert glob_matcher("**/*.h")("src/util.h") and glob_matcher("/src/*.h")("src/util.h")


def test_glob_search_uses_git_ignore_in_a_repository(box, root):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    os.system(f"git -C {root} init -q")
    (root / ".gitignore").write_text("*.h\n")
    paths = [e["path"] for e in box.call("file_glob_search", {"path": "."})["entries"]]
    assert "src/main.c" in paths and "src/util.h" not in paths and ".gitignore" in paths


def test_grep_search(box):
    r = box.call("grep_search", {"path": ".", "pattern": "42", "return_line_numbers": True})
    text = r["plain_text_response"]
    assert "src/main.c:2:    return 42;" in text and "src/util.h:1:#define ANSWER 42" in text and "Total matches: 2" in text
    r = box.call("grep_search", {"path": "notes.txt", "pattern": "GAMMA", "ignore_case": True, "context_lines": 1})
    assert r["plain_text_response"].startswith("notes.txt-2-beta\nnotes.txt:3:gamma\nnotes.txt-4-delta\n--\n")
    assert "Total matches: 1" in box.call("grep_search", {"path": ".", "pattern": "main(", "literal": True})["plain_text_response"]
    assert box.call("grep_search", {"path": ".", "pattern": "main("})["error"].startswith("invalid regex")


def test_grep_with_a_pathological_pattern_is_ended(box, root, monkeypatch):
    from llamars.agent import files

    monkeypatch.setattr(files, "GREP_TIMEOUT_S", 2)
    (root / "aaa.txt").write_text("a" * 40 + "!\n")
    t = time.monotonic()
    r = box.call("grep_search", {"path": "aaa.txt", "pattern": "(a+)+$"})
    assert "took longer than 2 s" in r["error"] and time.monotonic() - t < 10


def test_cancelled_reads_and_greps_stop(box, root):
    from llamars.agent import files
    from llamars.agent.tool import Context

    (root / "long.txt").write_text("x\n" * 20000)
    (root / "aaa.txt").write_text("a" * 40 + "!\n")
    gone = threading.Event()
    gone.set()
    ctx = Context(box.root, cancel=gone)
    assert files.read_file({"path": "long.txt", "start_line": 19999, "end_line": 20000}, ctx) == {"error": "cancelled"}
    t = time.monotonic()
    assert files.grep_search({"path": "aaa.txt", "pattern": "(a+)+$"}, ctx) == {"error": "cancelled"}
    assert time.monotonic() - t < 5


def test_write_and_edit(box, root):
    r = box.call("write_file", {"path": "new/dir/out.txt", "content": "one\ntwo\nthree\n"})
    assert r == {"result": "file written successfully", "path": "new/dir/out.txt", "bytes": 14}
    assert (root / "new" / "dir" / "out.txt").read_text() == "one\ntwo\nthree\n"
    r = box.call("edit_file", {"path": "new/dir/out.txt", "edits": [{"old_text": "one", "new_text": "1"},
                                                                   {"old_text": "three", "new_text": "3"}]})
    assert r["edits_applied"] == 2 and (root / "new" / "dir" / "out.txt").read_text() == "1\ntwo\n3\n"
    (root / "q.txt").write_text("say \u201chello\u201d   \nkeep  \n")  # typographic quotes, trailing spaces
    r = box.call("edit_file", {"path": "q.txt", "edits": [{"old_text": 'say "hello"', "new_text": "say hi"}]})
    assert r["result"] == "file edited successfully" and (root / "q.txt").read_text() == "say hi\nkeep  \n"
    (root / "dup.txt").write_text("x\nx\n")
    assert "2 occurrences" in box.call("edit_file", {"path": "dup.txt", "edits": [{"old_text": "x", "new_text": "y"}]})["error"]
    assert "could not find" in box.call("edit_file", {"path": "dup.txt", "edits": [{"old_text": "zz", "new_text": "y"}]})["error"]
    e = box.call("edit_file", {"path": "new/dir/out.txt", "edits": [{"old_text": "1\ntwo", "new_text": "a"}, {"old_text": "two\n3", "new_text": "b"}]})
    assert "overlap" in e["error"]


def test_shell_command_output_exit_timeout_and_cap(box, root):
    r = box.call("exec_shell_command", {"command": "pwd; echo err >&2; exit 3"})
    assert r["plain_text_response"] == f"{root.resolve()}\nerr\n\n[exit code: 3]"
    t = time.monotonic()
    r = box.call("exec_shell_command", {"command": "sleep 30 & sleep 30; echo never", "timeout": 1})
    assert r["plain_text_response"].endswith("[exit due to timed out]") and time.monotonic() - t < 5
    r = box.call("exec_shell_command", {"command": "head -c 1000000 /dev/zero | tr '\\0' y", "max_output_size": 100})
    assert r["plain_text_response"].startswith("y" * 100 + "\n[output truncated]")
    r = box.call("exec_shell_command", {"command": "cat; echo done"})  # no stdin: cat ends at once
    assert r["plain_text_response"] == "done\n\n[exit code: 0]"
    info = box.call("get_info", {})
    assert info["cwd"] == str(root.resolve()) and os.uname().sysname in info["os"]


def test_arguments_are_checked_against_the_schema(box):
    with pytest.raises(ToolError, match=r"params.path: required by read_file"):
        box.call("read_file", {})
    with pytest.raises(ToolError, match=r"params.start_line: must be of type integer"):
        box.call("read_file", {"path": "notes.txt", "start_line": "2"})
    with pytest.raises(KeyError, match="unknown tool"):
        box.call("rm_rf", {})


def test_flags():
    assert parse_args(["--tools", "read_file,grep_search"]).tools == ["read_file", "grep_search"]
    c = parse_args(["--agent"])
    assert c.tools == ["all"] and c.resolved_cors_origins() == ["localhost"]
    assert parse_args([]).resolved_cors_origins() == ["*"]
    assert parse_args(["--tools", "all", "--cors-origins", "*"]).resolved_cors_origins() == ["*"]
    assert parse_args(["--mcp-servers-json", "{}"]).resolved_cors_origins() == ["localhost"]
    assert parse_args(["--tools-root", "/srv"]).tools_root == "/srv"
    assert parse_args([], env={"LLAMA_ARG_TOOLS": "all"}).tools == ["all"]
    with pytest.raises(CLIError, match='unknown tool "rm". available tools: read_file, file_glob_search'):
        parse_args(["--tools", "rm"])
    with pytest.raises(CLIError, match="CORS proxy to remote MCP servers"):
        parse_args(["--ui-mcp-proxy"])


def test_tools_runtime_refused_clearly_without_a_container_engine(root):
    from llamars.agent.shell import make_runtime

    with pytest.raises(ValueError, match="expected docker:<image>"):
        make_runtime("ssh:host", str(root))
    for engine in ("docker", "podman"):
        try:
            rt = make_runtime(f"{engine}:alpine", str(root))
        except ValueError as e:  # this machine: docker's client without a daemon, no podman
            assert re.match(rf"--tools-runtime {engine}:alpine: {engine} is (not installed|installed but cannot run)", str(e))
            assert "leave --tools-runtime unset" in str(e)
        else:
            rt.close()
            pytest.skip(f"{engine} runs containers on this machine: the refusal cannot be checked")


@pytest.fixture()
def served(root):
    app = create_app(ServerConfig(model="unused", tools=["all"], tools_root=str(root)), engine=None)
    s = LiveServer(app).start(path="/tools")
    yield s
    s.stop()


def test_routes(served, root):
    listing = httpx.get(served.url + "/tools").json()
    assert [t["tool"] for t in listing] == ["read_file", "file_glob_search", "grep_search", "exec_shell_command",
                                            "write_file", "edit_file", "get_info"]
    rf = listing[0]
    assert rf["display_name"] == "Read file" and rf["type"] == "builtin" and rf["permissions"] == {"write": False}
    assert rf["definition"]["function"]["parameters"]["required"] == ["path"]
    r = httpx.post(served.url + "/tools", json={"tool": "read_file", "params": {"path": "notes.txt"}})
    assert r.status_code == 200 and r.json() == {"plain_text_response": "alpha\nbeta\ngamma\ndelta\n"}
    r = httpx.post(served.url + "/tools", json={"tool": "read_file", "params": {"path": "../x"}})
    assert r.status_code == 200 and "outside the tools root" in r.json()["error"]
    cases = [({"tool": "nope"}, 404, 'unknown tool "nope"'), ({"params": {}}, 400, "tool:"),
             ({"tool": "read_file", "params": []}, 400, "params: must be an object"),
             ({"tool": "read_file", "params": {}}, 400, "params.path: required"),
             ({"tool": "read_file", "params": {"path": "x"}, "stream": True}, 404, "does not support stream")]
    for body, status, msg in cases:
        r = httpx.post(served.url + "/tools", json=body)
        assert r.status_code == status and msg in r.json()["error"]["message"], (body, r.text)
    assert httpx.post(served.url + "/tools", content=b"{nope").status_code == 400
    with httpx.stream("POST", served.url + "/tools", json={"tool": "exec_shell_command", "stream": True,
                                                           "params": {"command": "echo a; sleep 0.2; echo b"}}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert "".join(e.get("chunk", "") for e in events) == "a\nb\n\n[exit code: 0]" and events[-1] == {"done": True}


def test_cors_is_narrowed_to_localhost(served):
    evil = httpx.get(served.url + "/tools", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in evil.headers
    pre = httpx.options(served.url + "/tools", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in pre.headers
    ok = httpx.get(served.url + "/tools", headers={"Origin": "http://localhost:3000"})
    assert ok.headers["access-control-allow-origin"] == "http://localhost:3000"


def test_api_key_guards_tool_routes(root):
    app = create_app(ServerConfig(model="unused", tools=["read_file"], tools_root=str(root), api_keys=["k1"]), engine=None)
    s = LiveServer(app).start(wait_healthy=False)
    try:
        assert httpx.get(s.url + "/tools").status_code == 401
        assert httpx.post(s.url + "/tools", json={"tool": "read_file", "params": {"path": "notes.txt"}}).status_code == 401
        h = {"Authorization": "Bearer k1"}
        assert [t["tool"] for t in httpx.get(s.url + "/tools", headers=h).json()] == ["read_file"]
        assert httpx.post(s.url + "/tools", headers=h, json={"tool": "get_info", "params": {}}).status_code == 404
    finally:
        s.stop()


def test_no_tools_unless_asked(root):
    s = LiveServer(create_app(ServerConfig(model="unused"), engine=None)).start(wait_healthy=False)
    try:
        assert httpx.get(s.url + "/tools").json() == []
        r = httpx.post(s.url + "/tools", json={"tool": "read_file", "params": {"path": "x"}})
        assert r.status_code == 404 and "no tools are enabled" in r.json()["error"]["message"]
        assert httpx.get(s.url + "/tools", headers={"Origin": "http://evil.example"}).headers["access-control-allow-origin"]
    finally:
        s.stop()


def test_a_client_that_leaves_stops_its_command(served, root):
    marker = root / "still-running"
    cmd = f"sleep 3; touch {marker}"

    def call():
        try:
            httpx.post(served.url + "/tools", json={"tool": "exec_shell_command", "params": {"command": cmd}}, timeout=0.5)
        except httpx.TimeoutException:
            pass

    t = threading.Thread(target=call)
    t.start()
    t.join()
    time.sleep(4)
    assert not marker.exists()


def test_every_call_is_logged(box, caplog):
    with caplog.at_level("INFO", logger="llamars.server"):
        box.call("read_file", {"path": "notes.txt"})
        box.call("read_file", {"path": "../x"})
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("tool call:")]
    assert lines[0].startswith('tool call: read_file {"path": "notes.txt"} -> ok')
    assert "-> error: path '../x' is outside the tools root" in lines[1]


def test_agent_loop_in_process(root):
    from llamars import Engine
    from llamars.models import default_model

    (root / "secret.txt").write_text("The secret word is PINEAPPLE.\n")
    box = Toolbox(["read_file", "write_file"], root=str(root))
    seen, asked = [], []
    with Engine(str(default_model()), n_ctx=4096, n_parallel=1) as eng:
        r = eng.chat([{"role": "user", "content": "Read the file secret.txt and tell me the secret word."}], tools=box,
                     execute=True, temperature=0, max_tokens=200, on_step=seen.append,
                     approve=lambda name, args: asked.append((name, args)) or True)
        assert asked and asked[0][0] == "read_file" and asked[0][1]["path"] == "secret.txt"
        assert [m["role"] for m in r.messages] == ["assistant", "tool", "assistant"] and seen == r.messages
        assert "PINEAPPLE" in r.messages[1]["content"] and "PINEAPPLE" in r.content and r.finish_reason == "stop"
        denied = eng.chat([{"role": "user", "content": "Read the file secret.txt and tell me the secret word."}], tools=box,
                          execute=True, temperature=0, max_tokens=200, approve=lambda name, args: False)
        assert denied.messages[1]["content"] == "The user denied this tool call." and "PINEAPPLE" not in denied.content
        with pytest.raises(Exception, match="execute=True needs a llamars.agent.Toolbox"):
            eng.chat([{"role": "user", "content": "hi"}], tools=box.definitions(), execute=True)
