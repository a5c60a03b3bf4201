"""`AsyncEngine`: the same engine for asyncio, without a thread per request.

Every request's events land in one hub in the Rust core; a single dispatcher thread
waits on it (GIL released) and hands each batch of events to the owning event loop
with `call_soon_threadsafe`. Awaiting a token never blocks the event loop.
"""
from __future__ import annotations

import asyncio
import os
import threading
from typing import Dict, List, Optional, Tuple, Union

from . import _core, _fronts
from .engine import Engine, Prompt
from .results import Chunk, GenerationResult, _result


class AsyncStream:
    """Async iterator over `Chunk`s; `result` is set once the generation is done.

    `await stream.aclose()` (or leaving an `async with` block, or garbage collection)
    cancels the generation and frees its slot.
    """

    def __init__(self, owner: "AsyncEngine", rid: int, queue: "asyncio.Queue", progress: bool = False) -> None:
        self._owner = owner
        self._progress = progress
        self.prompt_progress: Optional[dict] = None
        self.id = rid
        self._queue = queue
        self._done = False
        self.result: Optional[GenerationResult] = None

    def __aiter__(self) -> "AsyncStream":
        return self

    async def __anext__(self) -> Chunk:
        if self._done:
            raise StopAsyncIteration
        kind, payload = await self._queue.get()
        while kind == "progress":
            self.prompt_progress = payload
            if self._progress:
                return Chunk(text="", token=None, progress=payload)
            kind, payload = await self._queue.get()
        if kind == "token":
            token, text, logprob, top = payload
            return Chunk(text=text, token=token, logprob=logprob, top_logprobs=top)
        self._done = True
        self._owner._forget(self.id)
        if kind == "done":
            self.result = _result(payload)
            raise StopAsyncIteration
        raise payload  # "error": the exception instance from the core

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._owner._forget(self.id)
            self._owner.engine.cancel(self.id)

    async def __aenter__(self) -> "AsyncStream":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    def __del__(self) -> None:
        if not self._done:
            try:
                self._owner._forget(self.id)
                self._owner.engine.cancel(self.id)
            except Exception:
                pass


class LazyAsyncStream:
    """What `Engine.astream` returns: both async-iterable and awaitable.

    `async for c in eng.astream(...)` starts the request on the first iteration;
    `s = await eng.astream(...)` gives the `AsyncStream` itself. `result` is set once done.
    """

    def __init__(self, aengine: "AsyncEngine", prompt: Prompt, kwargs: dict) -> None:
        self._start_args: Optional[tuple] = (aengine, prompt, kwargs)
        self._stream: Optional[AsyncStream] = None

    async def _started(self) -> AsyncStream:
        if self._stream is None:
            if self._start_args is None:
                raise RuntimeError("this stream was closed before it started")
            aengine, prompt, kwargs = self._start_args
            self._start_args = None
            self._stream = await aengine.astream(prompt, **kwargs)
        return self._stream

    def __await__(self):
        return self._started().__await__()

    def __aiter__(self) -> "LazyAsyncStream":
        return self

    async def __anext__(self) -> Chunk:
        return await (await self._started()).__anext__()

    @property
    def result(self) -> Optional[GenerationResult]:
        return self._stream.result if self._stream is not None else None

    @property
    def id(self) -> Optional[int]:
        return self._stream.id if self._stream is not None else None

    async def aclose(self) -> None:
        self._start_args = None
        if self._stream is not None:
            await self._stream.aclose()

    async def __aenter__(self) -> "LazyAsyncStream":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()


class AsyncEngine:
    """asyncio front of an `Engine`: `await agenerate(...)`, `async for c in astream(...)`.

    >>> eng = AsyncEngine("model.gguf", n_parallel=4)
    >>> r = await eng.agenerate("Hello", max_tokens=8, temperature=0)

    Pass `engine=` to share an existing `Engine` (its slots and cache) with sync callers.
    """

    def __init__(self, model: Union[str, os.PathLike, None] = None, *, engine: Optional[Engine] = None, **config) -> None:
        if engine is None:
            if model is None:
                raise TypeError("AsyncEngine needs a model path or engine=")
            engine = Engine(model, **config)
        elif model is not None or config:
            raise TypeError("pass either a model path (and options) or engine=, not both")
        self._owns_engine = model is not None
        self.engine = engine
        self._hub = _core.Hub()
        self._lock = threading.Lock()
        self._routes: Dict[int, Tuple[asyncio.AbstractEventLoop, asyncio.Queue]] = {}
        self._early: Dict[int, List[tuple]] = {}
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    # the engine's synchronous facts and tools stay reachable
    def __getattr__(self, name):
        return getattr(self.engine, name)

    def _dispatch(self) -> None:
        while not self._closed:
            batch = self._hub.wait(0.5)
            if not batch:
                continue
            per_loop: Dict[asyncio.AbstractEventLoop, list] = {}
            with self._lock:
                for rid, kind, payload in batch:
                    route = self._routes.get(rid)
                    if route is None:
                        self._early.setdefault(rid, []).append((kind, payload))
                        continue
                    per_loop.setdefault(route[0], []).append((route[1], (kind, payload)))
            for loop, items in per_loop.items():
                try:
                    loop.call_soon_threadsafe(_deliver, items)
                except RuntimeError:
                    pass  # that event loop is closed; its requests are gone

    def _ensure_dispatcher(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._dispatch, name="llamars-async-dispatch", daemon=True)
            self._thread.start()

    def _forget(self, rid: int) -> None:
        with self._lock:
            self._routes.pop(rid, None)
            self._early.pop(rid, None)

    async def astream(self, prompt: Prompt, _quiet: bool = False, **kwargs) -> AsyncStream:
        """Start a generation; same parameters as `Engine.stream`."""
        return self.submit(self.engine.request(prompt, **kwargs), quiet=_quiet)

    def submit(self, req: "_core.GenerationRequest", *, quiet: bool = False) -> AsyncStream:
        """Start a generation from a `GenerationRequest` (`Engine.request`); must be called
        on the event loop the stream will be read on."""
        loop = asyncio.get_running_loop()
        self._ensure_dispatcher()
        queue: asyncio.Queue = asyncio.Queue()
        rid = self.engine._core.submit_to(self._hub, req, quiet)
        return self._route(loop, rid, queue, req)

    async def start(self, req: "_core.GenerationRequest", *, quiet: bool = False) -> AsyncStream:
        """`submit`, with a grammar's compilation (which grows with the grammar) on a worker
        thread, so the event loop never waits on it."""
        if not req.constrained:
            return self.submit(req, quiet=quiet)
        loop = asyncio.get_running_loop()
        self._ensure_dispatcher()
        queue: asyncio.Queue = asyncio.Queue()
        rid = await asyncio.to_thread(self.engine._core.submit_to, self._hub, req, quiet)
        return self._route(loop, rid, queue, req)

    def _route(self, loop, rid: int, queue: asyncio.Queue, req) -> AsyncStream:
        with self._lock:
            self._routes[rid] = (loop, queue)
            for ev in self._early.pop(rid, []):
                queue.put_nowait(ev)
        return AsyncStream(self, rid, queue, progress=req.return_progress)

    async def agenerate(self, prompt: Prompt, **kwargs) -> GenerationResult:
        """Generate to completion; cancelling the awaiting task cancels the generation."""
        return await self.collect(self.engine.request(prompt, **kwargs))

    async def collect(self, req: "_core.GenerationRequest") -> GenerationResult:
        """Run a `GenerationRequest` to completion (only the final event crosses over);
        cancelling the awaiting task cancels the generation."""
        s = await self.start(req, quiet=True)
        try:
            async for _ in s:
                pass
        finally:
            await s.aclose()
        assert s.result is not None
        return s.result

    async def aembed(self, inputs, **kwargs) -> list:
        """`Engine.embed` on a worker thread."""
        return await asyncio.to_thread(self.engine.embed, inputs, **kwargs)

    async def arerank(self, query: str, documents, *, top_n=None) -> list:
        """`Engine.rerank` on a worker thread."""
        return await asyncio.to_thread(self.engine.rerank, query, documents, top_n=top_n)

    def close(self) -> None:
        """Stop the dispatcher (and the engine loop, when this object created the engine)."""
        self._closed = True
        self._hub.close()
        if self._owns_engine:
            self.engine.close()


def _deliver(items: list) -> None:
    for queue, ev in items:
        queue.put_nowait(ev)


_fronts.register("async", AsyncEngine)
_fronts.register("lazy_astream", LazyAsyncStream)
