"""Router mode's model instances: one child `llamars-server` process per loaded model, on
a UNIX socket in a private directory (mode 0700), as llama-server runs one child per model
so that one model's crash or hang fails only that model's requests, and unloading a model
gives its memory back to the system (the process ends).

Statuses, as llama-server's `/models`: `unloaded` (with `failed` and `exit_code` when the
last child ended on its own), `loading`, `loaded`. Past `--models-max` loaded models, the
least recently used idle one is unloaded before another loads. Every change is an event
for `GET /models/sse`."""
from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import shutil
import signal
import sys
import tempfile
import time
from typing import Callable, Deque, Dict, List, Optional, Tuple

import httpx

from ..cli_argv import split_argv
from ..cli_opt import Opt
from ..config import ServerConfig
from .catalog import Entry, child_args

_TAIL = 40  # child stderr lines kept for the failure reason


def _die_with_parent() -> None:  # (in the child, before exec)
    """Linux: the child gets SIGTERM when the router's process ends, however it ends."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class RouterError(Exception):
    def __init__(self, status: int, message: str, type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.type = status, message, type_


class Instance:
    def __init__(self, entry: Entry, args: List[str], sock: str) -> None:
        self.entry = entry
        self.name = entry.name
        self.args = args  # the child's flags (the router adds -m, --host and --alias)
        self.sock = sock
        self.status = "unloaded"
        self.failed = False
        self.exit_code: Optional[int] = None
        self.error: Optional[str] = None
        self.proc: Optional[asyncio.subprocess.Process] = None
        self.client: Optional[httpx.AsyncClient] = None
        self.loaded_info: dict = {}
        self.last_used = 0.0
        self.inflight = 0  # requests being answered
        self.waiters = 0  # requests waiting for it to load (or just loaded, not yet passed on)
        self.stopping = False
        self.ended = asyncio.Event()  # set while no child runs
        self.ended.set()
        self.task: Optional[asyncio.Task] = None  # the load in progress
        self.refusal: Optional[RouterError] = None  # why the last load did not start
        self.tail: Deque[str] = collections.deque(maxlen=_TAIL)
        if entry.refused:  # (listed as failed from the start: it cannot be loaded)
            self.failed, self.error = True, entry.refused

    @property
    def running(self) -> bool:
        return self.status in ("loading", "loaded")

    def command(self) -> List[str]:
        """The child's command line, as `/models` shows it."""
        return ["llamars-server", *self.args, "--model", self.entry.path or "", "--host", self.sock, "--alias", self.name]

    def preset_ini(self) -> str:
        """The model's options as a preset section (llama-server's `status.preset`)."""
        lines = [f"[{self.name}]"]
        for o, name, raw in sorted(split_argv(self.args)[0], key=lambda x: x[1].lstrip("-")):
            lines.append(f"{name.lstrip('-')} = {'true' if raw is True else raw}")
        lines.append(f"model = {self.entry.path}")
        return "\n".join(lines) + "\n\n"

    def reason(self) -> str:
        for line in reversed(self.tail):
            for mark in ("failed to load the model: ", "error: "):
                if mark in line:
                    return line.split(mark, 1)[1]
        return self.tail[-1] if self.tail else f"the model's server exited with status {self.exit_code}"


class Models:
    """The catalog's instances and their lifecycle (all on the router's event loop)."""

    def __init__(self, config: ServerConfig, entries: Dict[str, Entry], router_items: List[Tuple[Opt, str, object]],
                 parse: Optional[Callable[..., ServerConfig]] = None) -> None:
        self.config = config
        self.parse = parse  # the server's command-line parser (cli.parse_args), for what a child will take
        self.dir = tempfile.mkdtemp(prefix="llamars-router-")  # (mkdtemp: mode 0700)
        self.instances: Dict[str, Instance] = {}
        self.router_items = router_items
        self._n = 0  # sockets made
        for name, e in sorted(entries.items()):
            self.instances[name] = self._instance(e)
        self.subscribers: List[asyncio.Queue] = []
        self.lock = asyncio.Lock()  # loads and evictions, one at a time

    def _instance(self, e: Entry) -> Instance:
        self._n += 1
        return Instance(e, child_args(e, self.router_items), os.path.join(self.dir, f"m{self._n}.sock"))

    async def reload(self, entries: Dict[str, Entry]) -> None:
        """`GET /models?reload=1`, as llama-server: models new in the sources are added, and
        one removed or changed is dropped or replaced; one of those that is running is
        unloaded first."""
        for name in list(self.instances):
            inst = self.instances[name]
            e = entries.get(name)
            same = e is not None and (e.path, child_args(e, self.router_items), e.refused) == (inst.entry.path, inst.args, inst.entry.refused)
            if same:
                continue
            if inst.running:
                await self.unload(inst)
            del self.instances[name]
            self.emit(inst)
        for name, e in sorted(entries.items()):
            if name not in self.instances:
                self.instances[name] = self._instance(e)
        self.instances = dict(sorted(self.instances.items()))

    # ------------------------------------------------------------------ queries
    def get(self, name: str) -> Optional[Instance]:
        return self.instances.get(name)

    def only(self) -> Optional[str]:
        """The one model, when there is exactly one (LocalAI: requests without `model` use it)."""
        return next(iter(self.instances)) if len(self.instances) == 1 else None

    def emit(self, inst: Instance, **data) -> None:
        ev = {"model": inst.name, "event": "model_status", "data": {"status": inst.status, **data}}
        for q in list(self.subscribers):
            with contextlib.suppress(asyncio.QueueFull):
                q.put_nowait(ev)

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        for inst in self.instances.values():
            if inst.entry.load_on_startup:
                self.load(inst)

    def load(self, inst: Instance) -> asyncio.Task:
        """Start loading (or return the load in progress)."""
        if inst.task is None or inst.task.done():
            inst.task = asyncio.get_running_loop().create_task(self._load(inst))
        return inst.task

    async def ensure_ready(self, inst: Instance) -> None:
        """Load `inst` if needed and wait; RouterError when it cannot be served."""
        if inst.stopping and inst.proc is not None:
            # being unloaded (to make room for another model, or POST /models/unload): its
            # server no longer answers; wait for it to end, then load it again
            await inst.ended.wait()
        if inst.status != "loaded":
            await asyncio.shield(self.load(inst))
        if inst.status != "loaded" and inst.refusal is not None:
            raise inst.refusal
        if inst.status != "loaded":
            raise RouterError(500, f"model name={inst.name} failed to load: {inst.error or 'its server stopped'}", "server_error")

    async def _evict_for(self, inst: Instance) -> None:
        cap = self.config.models_max
        if cap <= 0:
            return
        while sum(1 for x in self.instances.values() if x.running and x is not inst) >= cap:
            idle = [x for x in self.instances.values() if x.status == "loaded" and x is not inst and x.inflight == 0 and x.waiters == 0]
            if not idle:
                raise RouterError(503, f"--models-max {cap}: every loaded model is busy; retry when one is idle", "unavailable_error")
            await self.unload(min(idle, key=lambda x: x.last_used))

    def _need(self, inst: Instance):
        """(what the child will take, the margin to keep) with its own settings, as its
        --fit will choose them; None when it cannot be told (the child reports the error)."""
        from ..fit import FIT_CTX, fit_ctx, need, target_bytes

        if self.parse is None:
            return None
        try:
            c = self.parse(inst.command()[1:], env={})
            margin = target_bytes(c.fit_target)
            n_parallel, n_ctx = c.resolved_parallel(), c.resolved_ctx()
            path = inst.entry.path or ""
            if n_ctx == 0 and c.fit != "off":
                return fit_ctx(path, n_parallel, c.n_ubatch, c.swa_full, margin, c.fit_ctx or FIT_CTX)[1], margin
            return need(path, n_ctx, n_parallel, c.n_ubatch, c.swa_full), margin
        except Exception:  # (a bad flag or file: the child says what is wrong)
            return None

    async def _make_room(self, inst: Instance) -> None:
        """Unload idle models (least recently used first) until `inst` fits in the memory
        available, or refuse: never overcommit the machine."""
        from ..fit import MiB, available

        got = await asyncio.to_thread(self._need, inst)
        if got is None:
            return
        want, margin = got
        while True:
            free = await asyncio.to_thread(available)
            if free is None or want.total <= free - margin:
                return
            idle = [x for x in self.instances.values() if x.status == "loaded" and x is not inst and x.inflight == 0 and x.waiters == 0]
            if not idle:
                raise RouterError(503, f"model '{inst.name}' needs {want.describe()} and {free // MiB} MiB are available "
                                       f"with a {margin // MiB} MiB margin (--fit-target); unload a model "
                                       "(POST /models/unload) or give it a smaller context (-c)", "unavailable_error")
            await self.unload(min(idle, key=lambda x: x.last_used))
            await asyncio.sleep(0.2)  # (the system takes back the ended process's memory)

    async def _load(self, inst: Instance) -> None:
        async with self.lock:
            if inst.status == "loaded":
                return
            inst.refusal = None
            if inst.entry.refused:  # (before making room: nothing is unloaded for a model that cannot load)
                inst.status, inst.failed, inst.exit_code, inst.error = "unloaded", True, None, inst.entry.refused
                self.emit(inst, failed=True, error=inst.error)
                return
            try:
                await self._evict_for(inst)
                await self._make_room(inst)
            except RouterError as e:
                inst.refusal = e  # (not the model's failure: nothing was started)
                return
            inst.status, inst.failed, inst.exit_code, inst.error = "loading", False, None, None
            inst.tail.clear()
            inst.stopping = False
            self.emit(inst)
            argv = [sys.executable, "-m", "llamars.cli", *inst.command()[1:]]
            env = {k: v for k, v in os.environ.items() if k not in ("LLAMA_API_KEY", "LLAMA_ARG_API_KEY", "LLAMA_ARG_API_KEY_FILE",
                                                                     "LLAMA_ARG_MODELS_DIR", "LLAMA_ARG_MODELS_PRESET")}
            env["LLAMARS_ROUTER_CHILD"] = "1"  # (the router reported the config's notes once already)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(inst.sock)
            try:
                inst.proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                                                                 stderr=asyncio.subprocess.STDOUT, env=env, start_new_session=True,
                                                                 preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
            except OSError as e:
                inst.status, inst.failed, inst.error = "unloaded", True, f"cannot start the model's server: {e}"
                self.emit(inst, failed=True)
                return
            proc = inst.proc
            inst.ended.clear()
            asyncio.get_running_loop().create_task(self._pump(inst, proc))
            waiter = asyncio.get_running_loop().create_task(proc.wait())
            inst.client = httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=inst.sock), base_url="http://model",
                                            timeout=httpx.Timeout(None, connect=10.0))
            try:
                while not waiter.done():
                    with contextlib.suppress(httpx.TransportError):
                        r = await inst.client.get("/health", timeout=5.0)
                        if r.status_code == 200:
                            break
                    await asyncio.wait([waiter], timeout=0.1)
                if waiter.done():
                    await self._ended(inst, proc)
                    return
                with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
                    info = (await inst.client.get("/v1/models", timeout=10.0)).json()["data"][0]
                    inst.loaded_info = info if isinstance(info, dict) else {}
                inst.status = "loaded"
                inst.last_used = time.monotonic()
                self.emit(inst, info=inst.loaded_info)
            finally:
                waiter.cancel()
            asyncio.get_running_loop().create_task(self._watch(inst, proc))

    async def _pump(self, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        """The child's output, to the router's stderr with the model's name in front."""
        assert proc.stdout is not None
        pending = b""
        while True:
            chunk = await proc.stdout.read(1 << 16)  # (not readline: a line of any length must not stop the pump)
            if not chunk:
                lines = [pending] if pending else []
            else:
                *lines, pending = (pending + chunk).split(b"\n")
                if len(pending) > 1 << 16:  # a very long line: passed on in pieces
                    lines.append(pending)
                    pending = b""
            for line in lines:
                text = line.decode("utf-8", "replace")
                inst.tail.append(text[:2000])
                with contextlib.suppress(OSError, ValueError):
                    print(f"[{inst.name}] {text}", file=sys.stderr, flush=True)
            if not chunk:
                return

    async def _watch(self, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        await self._ended(inst, proc)

    async def _ended(self, inst: Instance, proc: asyncio.subprocess.Process) -> None:
        if inst.proc is not proc:  # (already handled: the watcher and unload both see the exit)
            return
        inst.proc = None
        inst.ended.set()
        client, inst.client = inst.client, None
        inst.loaded_info = {}
        inst.status = "unloaded"
        code = proc.returncode
        if inst.stopping:
            inst.failed, inst.exit_code = False, None
            self.emit(inst)
        else:
            inst.failed, inst.exit_code = True, code
            await asyncio.sleep(0.1)  # (the child's last lines of output: its reason)
            inst.error = inst.reason()
            self.emit(inst, failed=True, exit_code=code, error=inst.error)
        if client is not None:
            await client.aclose()

    async def unload(self, inst: Instance) -> None:
        """Stop the child (SIGTERM, then SIGKILL after the preset's stop-timeout) and wait."""
        proc = inst.proc
        if proc is None:
            return
        inst.stopping = True
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), inst.entry.stop_timeout)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        await self._ended(inst, proc)

    async def close(self) -> None:
        for inst in self.instances.values():
            if inst.task is not None and not inst.task.done():
                inst.task.cancel()
        await asyncio.gather(*(self.unload(i) for i in self.instances.values() if i.proc is not None), return_exceptions=True)
        shutil.rmtree(self.dir, ignore_errors=True)
