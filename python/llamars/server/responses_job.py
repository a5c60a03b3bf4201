"""One Responses generation in flight (`Job`): the live response object and its events,
fanned out to any number of followers (SSE readers, a WebSocket)."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, List, Optional


class Job:
    """One generation in flight: the live response object and its events (sequence
    number = index), fanned out to followers."""

    def __init__(self, response: dict, background: bool, store: bool, items: List[dict], context: List[dict], tenant: str = "") -> None:
        self.id = response["id"]
        self.tenant = tenant  # hash of the API key that created it ("" without keys)
        self.response = response
        self.background, self.store = background, store
        self.items, self.context = items, context
        self.events: List[dict] = []
        self.flushed = 0
        self.finished = False
        self.cancel_reason: Optional[str] = None
        self.timings_per_token = False  # llama.cpp's telemetry on the delta events
        self.data = None  # the create request (its output options: responses_options.py)
        self.task: Optional[asyncio.Task] = None
        self._subs: List[asyncio.Queue] = []

    def emit(self, ev: dict) -> None:
        ev["sequence_number"] = len(self.events)
        self.events.append(ev)
        for q in self._subs:
            q.put_nowait(ev)

    def close(self) -> None:
        self.finished = True
        for q in self._subs:
            q.put_nowait(None)

    def cancel(self, reason: str) -> None:
        if not self.finished and self.task is not None and not self.task.done():
            self.cancel_reason = self.cancel_reason or reason
            self.task.cancel()

    async def follow(self, after: int = -1) -> AsyncIterator[dict]:
        """The events after sequence number `after`, then the live ones until the end."""
        backlog, done = self.events[max(after, -1) + 1:], self.finished
        q: asyncio.Queue = asyncio.Queue()
        if not done:
            self._subs.append(q)  # no await since the snapshot: nothing is missed or repeated
        try:
            for ev in backlog:
                yield ev
            while not done:
                ev = await q.get()
                if ev is None:
                    return
                yield ev
        finally:
            if q in self._subs:
                self._subs.remove(q)
