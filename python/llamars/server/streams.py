"""Resumable streams, as llama-server's (2026): a streamed generation whose request
carries `X-Conversation-Id` keeps running when its client disconnects, its SSE bytes kept
in a per-conversation buffer (the last 4 MiB); `GET /v1/stream?conv_id=ID&from=N` replays
from byte N and follows live bytes until the generation ends, `DELETE /v1/stream?conv_id=ID`
stops it, `POST /v1/streams/lookup` reports the sessions of conversation ids the caller
names. One live session per conversation (a new request replaces and stops the old one);
finished sessions are forgotten 300 s after they end.

Everything here runs on the event loop: the producer is a task that drains the route's
event generator into the buffer; readers wait on a condition for more bytes."""
from __future__ import annotations

import asyncio
import contextlib
import time
from typing import AsyncIterator, Dict, List, Optional

TTL_SECONDS = 300
MAX_BYTES = 4 * 1024 * 1024
# at most this many sessions are kept: past it the oldest finished ones are forgotten first
# (live ones are bounded by the engine's slots and queue), so distinct conversation ids
# cannot grow the memory without bound
MAX_SESSIONS = 256
MAX_LOOKUP_IDS = 4096  # conversation ids one lookup may name


class OffsetLost(Exception):
    """The requested offset fell out of the buffer (more than MAX_BYTES were sent since)."""


class StreamSession:
    def __init__(self, conversation_id: str, cap: int = MAX_BYTES) -> None:
        self.conversation_id = conversation_id
        self.cap = cap
        self.buf = bytearray()
        self.dropped = 0  # bytes evicted from the front
        self.done = False
        self.started_at = int(time.time())
        self.completed_at: Optional[int] = None
        self.cond = asyncio.Condition()
        self.task: Optional[asyncio.Task] = None

    @property
    def total(self) -> int:
        return self.dropped + len(self.buf)

    async def write(self, data: bytes) -> None:
        async with self.cond:
            self.buf += data
            if len(self.buf) > self.cap + self.cap // 4:  # trim in steps: amortised, not per event
                cut = len(self.buf) - self.cap
                del self.buf[:cut]
                self.dropped += cut
            self.cond.notify_all()

    async def finish(self) -> None:
        async with self.cond:
            if not self.done:
                self.done = True
                self.completed_at = int(time.time())
            self.cond.notify_all()

    async def read_from(self, offset: int) -> AsyncIterator[bytes]:
        """The bytes from `offset` on, as they come, until the session is done."""
        while True:
            async with self.cond:
                while offset >= self.total and not self.done:
                    await self.cond.wait()
                if offset < self.dropped:
                    raise OffsetLost()
                chunk = bytes(self.buf[offset - self.dropped:])
                finished = self.done
            if chunk:
                offset += len(chunk)
                yield chunk
            elif finished:
                return

    def as_json(self) -> dict:
        return {"conversation_id": self.conversation_id, "is_done": self.done, "total_bytes": self.total,
                "started_at": self.started_at, "completed_at": self.completed_at or 0}


class StreamSessions:
    def __init__(self, ttl: int = TTL_SECONDS, cap: int = MAX_BYTES, max_sessions: int = MAX_SESSIONS) -> None:
        self.ttl, self.cap, self.max_sessions = ttl, cap, max_sessions
        self.sessions: Dict[str, StreamSession] = {}

    def _gc(self) -> None:
        cutoff = time.time() - self.ttl
        for k in [k for k, s in self.sessions.items() if s.done and (s.completed_at or 0) < cutoff]:
            del self.sessions[k]
        over = len(self.sessions) - self.max_sessions + 1  # room for one more
        if over > 0:
            done = sorted((s.completed_at or 0, k) for k, s in self.sessions.items() if s.done)
            for _, k in done[:over]:
                del self.sessions[k]

    def start(self, conversation_id: str, events: AsyncIterator[bytes]) -> StreamSession:
        """A new session for `conversation_id` fed by `events` (an older one is stopped)."""
        self._gc()
        old = self.sessions.pop(conversation_id, None)
        if old is not None and old.task is not None:
            old.task.cancel()
        s = StreamSession(conversation_id, self.cap)

        async def produce() -> None:
            try:
                async for c in events:
                    await s.write(c)
            finally:
                aclose = getattr(events, "aclose", None)
                if aclose is not None:
                    with contextlib.suppress(BaseException):
                        await aclose()  # cancels the generation when the session is stopped
                await s.finish()

        s.task = asyncio.ensure_future(produce())
        self.sessions[conversation_id] = s
        return s

    def get(self, conversation_id: str) -> Optional[StreamSession]:
        self._gc()
        return self.sessions.get(conversation_id)

    def stop(self, conversation_id: str) -> None:
        """Stop the generation and forget its bytes (idempotent)."""
        s = self.sessions.pop(conversation_id, None)
        if s is not None and s.task is not None:
            s.task.cancel()

    def lookup(self, ids: List[str]) -> List[dict]:
        """Sessions of the given conversation ids (an id also matches `<id>::<model>` keys)."""
        self._gc()
        out = []
        for rid in ids:
            for k, s in self.sessions.items():
                if k == rid or k.startswith(rid + "::"):
                    out.append(s.as_json())
        return out

    async def close(self) -> None:
        tasks = [s.task for s in self.sessions.values() if s.task is not None]
        self.sessions.clear()
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t
