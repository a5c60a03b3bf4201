"""The Responses API's moving parts: a request turned into a chat plan and a generation,
run inline (plain requests), as a task followed by one SSE stream (`stream: true`), or
as a task owned by the app (`background: true`) that any number of `GET ?stream=true`
readers can follow; the response store behind `previous_response_id`, retrieval,
cancellation and deletion.

Background responses interrupted by a shutdown (or found unfinished after a crash, see
`response_store.py`) end `failed` with a `server_error` saying the server stopped: their
generation is gone and a client should not wait for it."""
from __future__ import annotations

import asyncio
import copy
import time
from typing import AsyncIterator, Dict, List, Optional, Set, Tuple

from ..config import ServerConfig
from . import responses_convert as conv
from . import responses_options as opts
from . import shapes
from .errors import ApiError, classify
from .response_store import RESTART_MESSAGE, UNFINISHED, SQLStore, StoreError, failed
from .response_store_open import open_store
from .responses_stream import Emitter
from .responses_job import Job
from .chat_turn import ChatTurn
from .sse import EventStream, named_event

FLUSH_SECONDS = 0.25  # how often a background response's new events reach the store
SHUTDOWN_MESSAGE = "the server shut down before this response finished"
CANCEL_WAIT = 10.0  # seconds a cancel delegated to another replica waits for its outcome


def _sse(events: AsyncIterator[dict]) -> AsyncIterator[bytes]:
    async def gen():
        async for ev in events:
            yield named_event(ev["type"], ev)

    return gen()


async def _listed(events: List[dict]) -> AsyncIterator[dict]:
    for ev in events:
        yield ev


class Responses:
    """Owned by the app: opened at startup, closed (running jobs stopped) at shutdown."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.store: Optional[SQLStore] = None
        self.store_error: Optional[str] = None
        self.jobs: Dict[str, Job] = {}  # stored responses generating in this process
        self.tasks: Set[asyncio.Task] = set()

    # ------------------------------------------------------------------ lifecycle
    async def startup(self) -> None:
        c = self.config
        loop = asyncio.get_running_loop()
        try:
            self.store = await asyncio.to_thread(open_store, c.responses_store, c.data_dir, lease=c.responses_lease,
                                                 ttl=c.responses_ttl or None, address=f"{c.host}:{c.port}")
            await asyncio.to_thread(self.store.fail_orphans, RESTART_MESSAGE)
            self.store.watch_cancels(lambda rid: loop.call_soon_threadsafe(self._remote_cancel, rid))
        except StoreError as e:
            self.store_error = str(e)
            if not c.log_disable:
                print(f"llamars-server: warning: {e}; stored responses are unavailable", flush=True)

    def _remote_cancel(self, rid: str) -> None:
        """Another replica was asked to cancel a background response this one generates."""
        job = self.jobs.get(rid)
        if job is not None and job.background:
            job.cancel("cancel")

    async def shutdown(self) -> None:
        for job in list(self.jobs.values()):
            job.cancel("shutdown")
        for t in list(self.tasks):
            t.cancel()
        if self.tasks:
            await asyncio.wait(list(self.tasks), timeout=10)
        if self.store is not None:
            await asyncio.to_thread(self.store.close)
            self.store = None

    def _need_store(self) -> None:
        if self.store is None:
            raise ApiError(503, self.store_error or "the response store is not open", "unavailable_error")

    async def _io(self, method: str, *args):
        """A store call off the event loop; store trouble is a 503, never a 500."""
        self._need_store()
        try:
            return await asyncio.to_thread(getattr(self.store, method), *args)
        except StoreError as e:
            raise ApiError(503, str(e), "unavailable_error") from None

    # ------------------------------------------------------------------ create
    async def create(self, svc, data, tenant: str = "") -> object:
        svc.need()
        if data.background and not data.store:
            raise ApiError(400, "background: a background response must be stored; drop store=false")
        if data.store:
            self._need_store()
        items = conv.parse_input(data.input)
        context: List[dict] = []
        if data.previous_response_id is not None:
            context = await self._history(data.previous_response_id, tenant)
        turn, resp, context = await self.plan(svc, data, items, context)

        if not data.stream and not data.background:
            [(r, reply)] = await turn.complete()
            lp = None
            if opts.n_probs(data):
                lp = opts.content_logprobs(self._piece(turn), r.text, reply.content, r.probs or [], data.top_logprobs or 0)
            output = opts.shape_output(conv.output_from_reply(reply, r.stop_reason == "limit"), data, lp)
            final = conv.finished(resp, r, len(turn.ids), output)
            if data.store:
                await self._io("save", final, items, context, tenant)
            return final

        await turn.start()  # refused requests fail here, before the 200
        job = Job(resp, bool(data.background), bool(data.store), items, context, tenant)
        job.timings_per_token = bool(data.timings_per_token)
        job.data = data
        if job.background:
            try:
                await self._io("save", resp, items, context, tenant)
            except BaseException:
                await turn.aclose()
                raise
        self.launch(job, turn)
        if not data.stream:
            return copy.deepcopy(resp)
        return EventStream(self._follow(job, -1, cancel_on_exit=not job.background), ping=self.config.sse_ping_interval)

    async def plan(self, svc, data, items: List[dict], context: List[dict]) -> Tuple[ChatTurn, dict, List[dict]]:
        """The chat turn of a create request over `context + items`, its response object,
        and the context it kept (`truncation: "auto"` may drop the oldest turns)."""
        if data.max_output_tokens is not None and data.max_output_tokens < 1:
            raise ApiError(400, f"max_output_tokens: must be >= 1, got {data.max_output_tokens}")
        opts.check(data)
        tools, parallel, choice = opts.tool_settings(data)
        n_probs = opts.n_probs(data)

        async def prepare(ctx: List[dict], its: List[dict]) -> ChatTurn:
            return await ChatTurn.prepare(
                svc, conv.to_messages(data.instructions, ctx + its), data, tools=tools, tool_choice=choice,
                parallel_tool_calls=parallel,  # off unless asked, as in chat completions
                reasoning_format=data.reasoning_format, template_kwargs=opts.template_kwargs(data), schema=conv.text_schema(data.text),
                conflict="text.format: structured output cannot be combined with tool calls; drop tools or text.format",
                n_predict=data.max_output_tokens, stop=None, names={"max_tokens": "max_output_tokens"}, cache_prompt=data.cache_prompt,
                **({"n_probs": n_probs} if n_probs else {}),
            )

        turn, context = await opts.fit(prepare, data, items, context, svc.need().n_ctx_slot)
        resp = conv.base_response(data, rid=conv.new_id("resp"), model=data.model or svc.model_id,
                                  status="queued" if data.background else "in_progress",
                                  tools=conv.tools_echo(data.tools, turn.plan.tools), defaults=svc.config.sampling)
        return turn, resp, context

    @staticmethod
    def _piece(turn: ChatTurn):
        e = turn.svc.need()
        return lambda tok: shapes.piece(e, tok)

    def launch(self, job: Job, turn: ChatTurn) -> None:
        """Run a started turn as `job`'s generation task (stored jobs are listed in `jobs`)."""
        if job.store:
            self.jobs[job.id] = job
        job.task = asyncio.create_task(self._run(job, turn))
        self.tasks.add(job.task)
        job.task.add_done_callback(lambda t: self._reap(t, job, turn))

    async def _history(self, pid: str, tenant: str) -> List[dict]:
        job = self._job(pid, tenant)
        if job is not None and not job.finished:
            raise ApiError(400, f"previous_response_id: response {pid!r} is still {job.response['status']}; wait for it to finish")
        rec = await self._io("get_record", pid, tenant)
        if rec is None:
            raise ApiError(400, f"previous_response_id: no stored response {pid!r} (never created, deleted, or created with store=false)")
        if rec["response"].get("status") in UNFINISHED:
            raise ApiError(400, f"previous_response_id: response {pid!r} is still {rec['response']['status']}; wait for it to finish")
        return conv.history_of(rec)

    async def _follow(self, job: Job, after: int, cancel_on_exit: bool) -> AsyncIterator[bytes]:
        try:
            async for chunk in _sse(job.follow(after)):
                yield chunk
        finally:
            if cancel_on_exit and not job.finished:
                job.cancel("disconnect")  # the one reader of a non-background stream left

    # ------------------------------------------------------------------ the generation task
    async def _run(self, job: Job, turn: ChatTurn) -> None:
        d = job.data
        em = Emitter(job.emit, summary=d is not None and opts.wants_summary(d), max_calls=d.max_tool_calls if d is not None else None)
        n_top = (d.top_logprobs or 0) if d is not None and opts.n_probs(d) else None
        piece = self._piece(turn)
        final: Optional[dict] = None
        try:
            em.start(job.response)
            job.response["status"] = "in_progress"
            last_flush = t0 = time.monotonic()
            n_out = 0
            async for c, delta in turn.deltas():
                n_out += c.token is not None
                if n_top is not None and c.token is not None:
                    em.add_token(opts.token_logprob(piece, c.token, c.logprob, list(c.top_logprobs or []), n_top))
                if delta is not None:
                    before = em.last
                    em.feed(delta)
                    progress = turn.stream.prompt_progress if turn.stream is not None else None
                    if job.timings_per_token and em.last is not before and progress is not None:
                        # (set before the loop next yields: the event is not sent yet)
                        em.last["timings"] = shapes.running_timings(progress, n_out, (time.monotonic() - t0) * 1e3)
                if job.background and time.monotonic() - last_flush >= FLUSH_SECONDS:
                    await self._flush(job)
                    last_flush = time.monotonic()
            r = turn.result
            em.feed(turn.last)
            incomplete = r.stop_reason == "limit"
            final = conv.finished(job.response, r, len(turn.ids), em.finish(turn.reply, "incomplete" if incomplete else "completed"))
        except asyncio.CancelledError:
            out = {**job.response, "output": em.finish(None, "incomplete")}
            if job.cancel_reason in ("cancel", "disconnect"):
                final = {**out, "status": "cancelled"}
            else:
                final = failed(out, SHUTDOWN_MESSAGE)
        except Exception as exc:  # the engine refused or failed mid-way: the response fails
            final = failed({**job.response, "output": em.finish(None, "incomplete")}, classify(exc)[1])
        finally:
            await turn.aclose()
            if final is None:
                final = failed(job.response, SHUTDOWN_MESSAGE)
            job.response = final
            em.terminal(final, shapes.timings(turn.result) if turn.result is not None else None)
            try:
                if job.store:
                    await self._io("save", final, job.items, job.context, job.tenant)
                    await self._flush(job)
            except (ApiError, asyncio.CancelledError):
                pass  # the store is gone (shutdown): the next start marks the record failed
            finally:
                job.close()
                if self.jobs.get(job.id) is job:
                    del self.jobs[job.id]

    def _reap(self, task: asyncio.Task, job: Job, turn: ChatTurn) -> None:
        """A task cancelled before it ever ran skipped `_run`'s cleanup: do it here."""
        self.tasks.discard(task)
        if job.finished:
            return
        try:
            asyncio.ensure_future(turn.aclose())  # frees the slot
        except RuntimeError:
            pass  # no loop left: the stream's finalizer cancels it
        job.response = {**job.response, "status": "cancelled"} if job.cancel_reason in ("cancel", "disconnect") else failed(job.response, SHUTDOWN_MESSAGE)
        job.close()
        if self.jobs.get(job.id) is job:
            del self.jobs[job.id]
        if job.store and self.store is not None:
            try:  # a rare path: one blocking write is fine
                self.store.save(job.response, job.items, job.context, job.tenant)
            except StoreError:
                pass

    async def _flush(self, job: Job) -> None:
        if not job.store:
            return
        new, job.flushed = job.events[job.flushed:], len(job.events)
        if job.background:
            await self._io("save", job.response)
        await self._io("append_events", job.id, new)

    # ------------------------------------------------------------------ the other routes
    def _job(self, rid: str, tenant: str) -> Optional[Job]:
        """The job generating `rid` in this process, if the caller's key created it."""
        job = self.jobs.get(rid)
        return job if job is not None and job.tenant == tenant else None

    async def retrieve(self, rid: str, tenant: str = "") -> dict:
        job = self._job(rid, tenant)
        if job is not None:
            return copy.deepcopy(job.response)
        r = await self._io("get", rid, tenant)
        if r is None:
            raise _not_found(rid)
        return r

    async def stream(self, rid: str, after: int, tenant: str = "") -> EventStream:
        job = self._job(rid, tenant)
        if job is not None:
            return EventStream(self._follow(job, after, cancel_on_exit=False), ping=self.config.sse_ping_interval)
        r = await self._io("get", rid, tenant)
        if r is None:
            raise _not_found(rid)
        if r.get("status") in UNFINISHED:  # generated elsewhere: only its owner has the live events
            who = await self._io("owner_of", rid)
            if who is not None and who.alive:
                raise ApiError(409, f"response {rid!r} is being generated by another replica ({who.owner}"
                                    f"{', serving on ' + who.address if who.address else ''}); resume its stream there, "
                                    "or retrieve it without stream=true", "conflict_error")
            await self._io("fail_orphans", RESTART_MESSAGE)
        events = await self._io("events_after", rid, after)
        if not events and not await self._io("has_events", rid):
            raise ApiError(400, f"stream: response {rid!r} was neither streamed nor run in the background; there are no events to replay")
        return EventStream(_sse(_listed(events)))

    async def cancel(self, rid: str, tenant: str = "") -> dict:
        job = self._job(rid, tenant)
        if job is not None:
            if not job.background:
                raise ApiError(400, f"response {rid!r} was not created with background=true; only background responses can be cancelled")
            job.cancel("cancel")
            if job.task is not None:
                await asyncio.wait([job.task])
            return copy.deepcopy(job.response)
        r = await self._io("get", rid, tenant)
        if r is None:
            raise _not_found(rid)
        if not r.get("background"):
            raise ApiError(400, f"response {rid!r} was not created with background=true; only background responses can be cancelled")
        if r.get("status") in UNFINISHED:  # generated by another replica, or by one that is gone
            done = await self._io("request_cancel", rid, tenant)
            if done is not None:
                return done  # its owner is gone: marked cancelled at once
            return await self._await_end(rid, tenant, r)  # delegated to the live owner
        return r  # cancelling a finished response changes nothing

    async def _await_end(self, rid: str, tenant: str, r: dict) -> dict:
        """Poll the store until the owner ended a delegated cancel (at most CANCEL_WAIT s)."""
        end = time.monotonic() + CANCEL_WAIT
        while r.get("status") in UNFINISHED and time.monotonic() < end:
            await asyncio.sleep(0.05)
            r = await self._io("get", rid, tenant) or r
        return r

    async def delete(self, rid: str, tenant: str = "") -> dict:
        job = self._job(rid, tenant)
        if job is not None:
            job.cancel("cancel")
            if job.task is not None:
                await asyncio.wait([job.task])
        else:
            r = await self._io("get", rid, tenant)
            if r is not None and r.get("status") in UNFINISHED and await self._io("request_cancel", rid, tenant) is None:
                await self._await_end(rid, tenant, r)  # stop the owner's generation before the record goes
        if not await self._io("delete", rid, tenant):
            raise _not_found(rid)
        return {"id": rid, "object": "response", "deleted": True}

    async def input_items(self, rid: str, *, after: Optional[str], limit: int, order: str, tenant: str = "") -> dict:
        job = self._job(rid, tenant)
        rec = {"input_items": job.items} if job is not None else await self._io("get_record", rid, tenant)
        if rec is None:
            raise _not_found(rid)
        return conv.input_items_page(rec["input_items"], after=after, limit=limit, order=order)


def _not_found(rid: str) -> ApiError:
    return ApiError(404, f"response {rid!r} not found", "not_found_error")
