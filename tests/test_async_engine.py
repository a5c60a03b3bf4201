"""AsyncEngine: asyncio without a thread per request and without blocking the loop."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from llamars import AsyncEngine, Engine


@pytest.fixture(scope="module")
def aeng(model_path):
    e = AsyncEngine(model_path, n_ctx=4 * 256, n_parallel=4)
    yield e
    e.close()


PROMPTS = ["The capital of France is", "Once upon a time", "The three primary colors are", "def add(a, b):"]


def test_concurrent_agenerate_matches_sync(aeng):
    sync = [aeng.engine.generate(p, max_tokens=12, temperature=0.0, ignore_eos=True).tokens for p in PROMPTS]
    ticks = 0

    async def ticker(stop: asyncio.Event):
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.005)

    async def main():
        stop = asyncio.Event()
        t = asyncio.create_task(ticker(stop))
        threads_before = threading.active_count()
        res = await asyncio.gather(*(aeng.agenerate(p, max_tokens=12, temperature=0.0, ignore_eos=True) for p in PROMPTS))
        threads_after = threading.active_count()
        stop.set()
        await t
        return res, threads_before, threads_after

    t0 = time.monotonic()
    res, before, after = asyncio.run(main())
    elapsed = time.monotonic() - t0
    assert [r.tokens for r in res] == sync
    # the event loop kept running while tokens were generated
    assert ticks >= elapsed / 0.005 * 0.3
    # no thread per request: at most the one dispatcher thread appeared
    assert after - before <= 1


def test_astream_chunks_and_result(aeng):
    async def main():
        s = await aeng.astream(PROMPTS[0], max_tokens=8, temperature=0.0)
        text = "".join([c.text async for c in s])
        return text, s.result

    text, result = asyncio.run(main())
    assert text == result.text and len(result.tokens) == 8


def test_cancelling_the_task_frees_the_slot(aeng):
    async def main():
        task = asyncio.create_task(aeng.agenerate(PROMPTS[1], max_tokens=3000, temperature=0.0, ignore_eos=True))
        await asyncio.sleep(0.5)
        assert any(s["is_processing"] for s in aeng.slots())
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    t = time.monotonic()
    while any(s["is_processing"] for s in aeng.slots()):
        assert time.monotonic() - t < 5
        time.sleep(0.01)


def test_shared_engine(model_path):
    e = Engine(model_path, n_ctx=512)
    a = AsyncEngine(engine=e)
    r = asyncio.run(a.agenerate("Hello", max_tokens=3, temperature=0.0))
    assert r.tokens == e.generate("Hello", max_tokens=3, temperature=0.0).tokens
    a.close()
    # the shared engine keeps working for sync callers
    assert len(e.generate("Hello", max_tokens=2, temperature=0.0).tokens) == 2
    e.close()
