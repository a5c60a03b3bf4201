"""exec_shell_command and get_info, and where they run (--tools-runtime): on the host in
the tools root (the default), or in a container started at launch from `docker:<image>`
/ `podman:<image>` with the tools root mounted at the same path (so the file tools and
the shell see the same files), or in a running one (`docker-container:<id>`,
`podman-container:<id>`). A command gets no stdin, a timeout (its process group is
killed), an output cap (the rest is drained, not kept) and stops when the caller leaves."""
from __future__ import annotations

import codecs
import os
import re
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from .tool import Context, ServerTool, obj, prop

MAX_OUTPUT = 16 * 1024
MAX_TIMEOUT_S = 60
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class Runtime:
    """The host: commands run as they are, in the tools root."""

    spec = ""

    def argv(self, args: List[str], root: str) -> Tuple[List[str], Optional[str]]:
        return args, root

    def close(self) -> None:
        pass


class Attached(Runtime):
    def __init__(self, bin_: str, cid: str, spec: str) -> None:
        self.bin, self.cid, self.spec = bin_, cid, spec

    def argv(self, args, root):
        return [self.bin, "exec", self.cid, *args], None


class Owned(Attached):
    """A container started for the tools (`<engine> run --rm -i … sh`, kept alive by its
    open stdin) and removed when the server stops."""

    def __init__(self, bin_: str, image: str, root: str, spec: str) -> None:
        cidfile = os.path.join(tempfile.mkdtemp(prefix="llamars-tools-"), "cid")
        self.proc = subprocess.Popen([bin_, "run", "--rm", "-i", "--cidfile", cidfile, "-v", f"{root}:{root}", "-w", root,
                                      image, "sh"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        cid, deadline = "", time.monotonic() + 120  # the image may have to be pulled
        while not cid and time.monotonic() < deadline and self.proc.poll() is None:
            try:
                with open(cidfile) as f:
                    cid = f.read().strip()
            except OSError:
                time.sleep(0.1)
        if not cid:
            err = b"" if self.proc.poll() is None else self.proc.stderr.read()
            self.proc.kill()
            raise ValueError(f"--tools-runtime {spec}: the container did not start ({err.decode(errors='replace').strip()[:300]})")
        super().__init__(bin_, cid, spec)

    def argv(self, args, root):
        return [self.bin, "exec", "-w", root, self.cid, *args], None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()  # the shell (pid 1) exits; --rm removes the container
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def make_runtime(spec: Optional[str], root: str) -> Runtime:
    """--tools-runtime SPEC, checked now: ValueError says what is wrong and what to do."""
    if not spec:
        return Runtime()
    kind, _, arg = spec.partition(":")
    engines = {"docker": "docker", "podman": "podman", "docker-container": "docker", "podman-container": "podman"}
    if kind not in engines or not arg:
        raise ValueError(f"--tools-runtime {spec}: expected docker:<image>, podman:<image>, docker-container:<id> or "
                         "podman-container:<id> (ssh: and apptainer are not available in llamars)")
    bin_ = engines[kind]
    if shutil.which(bin_) is None:
        raise ValueError(f"--tools-runtime {spec}: {bin_} is not installed on this machine; install it, or leave "
                         "--tools-runtime unset to run the tools on the host")
    try:
        r = subprocess.run([bin_, "info"], stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
        ok, why = r.returncode == 0, (r.stderr or r.stdout).decode(errors="replace").strip().splitlines()
    except (OSError, subprocess.TimeoutExpired) as e:
        ok, why = False, [str(e)]
    if not ok:
        raise ValueError(f"--tools-runtime {spec}: {bin_} is installed but cannot run containers "
                         f"({why[-1] if why else 'no reason given'}); start its daemon, or leave --tools-runtime unset")
    if kind.endswith("-container"):
        if not _ID.match(arg):
            raise ValueError(f"--tools-runtime {spec}: invalid container id {arg!r}")
        return Attached(bin_, arg, spec)
    if arg.startswith("-"):
        raise ValueError(f"--tools-runtime {spec}: invalid image {arg!r}")
    return Owned(bin_, arg, root, spec)


def run(ctx: Context, args: List[str], max_output: int, timeout_s: float) -> Dict[str, Any]:
    """{"output", "exit_code", "timed_out", "cancelled"} of one command."""
    rt = ctx.runtime or Runtime()
    if type(rt) is not Runtime:
        args = ["timeout", f"{int(timeout_s)}s", *args]  # killing the exec client leaves the command running inside
    argv, cwd = rt.argv(args, ctx.root.path)
    try:
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                start_new_session=True)
    except OSError as e:
        return {"output": f"failed to spawn process: {e}", "exit_code": -1, "timed_out": False, "cancelled": False}
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    kept, size, truncated, timed_out = [], 0, False, False
    deadline = time.monotonic() + timeout_s
    fd = proc.stdout.fileno()
    while True:
        if ctx.cancel.is_set() or time.monotonic() >= deadline:
            timed_out = not ctx.cancel.is_set()
            _kill(proc)
            break
        ready, _, _ = select.select([fd], [], [], 0.1)
        if not ready:
            continue
        data = os.read(fd, 65536)
        if not data:
            break
        if truncated:
            continue
        room = max_output - size
        piece = dec.decode(data[:room])
        size += min(len(data), room)
        truncated = len(data) > room
        kept.append(piece)
        if ctx.on_chunk and piece:
            ctx.on_chunk(piece)
    try:
        code = proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        _kill(proc)
        code = proc.wait()
    proc.stdout.close()
    out = "".join(kept) + dec.decode(b"", final=True) + ("\n[output truncated]" if truncated else "")
    return {"output": out, "exit_code": code, "timed_out": timed_out, "cancelled": ctx.cancel.is_set()}


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        proc.kill()


def exec_shell_command(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    timeout = min(max(1, p.get("timeout") or 10), MAX_TIMEOUT_S)
    cap = min(max(1, p.get("max_output_size") or MAX_OUTPUT), MAX_OUTPUT)
    res = run(ctx, ["sh", "-c", p["command"]], cap, timeout)
    tail = f"\n[exit code: {res['exit_code']}]" + (" [exit due to timed out]" if res["timed_out"] else "")
    if ctx.on_chunk:
        ctx.on_chunk(tail)
    return {"plain_text_response": res["output"] + tail}


def get_info(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    res = run(ctx, ["uname", "-a"], 4096, 5)
    os_info = res["output"].strip() if res["exit_code"] == 0 and not res["timed_out"] else "unknown"
    return {"os": os_info, "cwd": ctx.root.path}


TOOLS = [
    ServerTool("exec_shell_command", "Execute shell command",
               "Execute a shell command and return its output (stdout and stderr combined).",
               obj({"command": prop("string", "Shell command to execute"),
                    "timeout": prop("integer", f"Timeout in seconds (default 10, max {MAX_TIMEOUT_S})"),
                    "max_output_size": prop("integer", f"Maximum output size in bytes (default {MAX_OUTPUT})")},
                   ["command"]), exec_shell_command, write=True, streams=True),
    ServerTool("get_info", "Get Runtime Info", "Returns runtime info: the OS name/version and the current working directory",
               obj({}), get_info),
]
