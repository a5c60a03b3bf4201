"""The engine loop's error paths, with faults injected through a test hook
(`Engine._core._inject_fault`): a failure that belongs to one request fails that request
only, a panic in a step fails that step's requests and the loop goes on, a dead loop
fails every waiting and new request at once, and errors keep their kind (a device
failure is a GpuError in Python and a 500 over HTTP, not a 400)."""
from __future__ import annotations

import threading
import time

import httpx
import pytest

import llamars
from server_util import LiveServer

PROMPTS = ["The capital of France is", "Once upon a time, in a village", "def add(a, b):"]


@pytest.fixture
def fresh(model_path):
    engines = []

    def make(**kw):
        e = llamars.Engine(model_path, n_ctx=1024, **kw)
        engines.append(e)
        return e

    yield make
    for e in engines:
        e.close()


def _text(stream) -> str:
    for _ in stream:
        pass
    return stream.result.text


def test_a_device_failure_of_one_request_fails_only_that_request(fresh, engine):
    want = [engine.generate(p, max_tokens=12, temperature=0.0, cache_prompt=False).text for p in PROMPTS[1:]]
    e = fresh(n_parallel=3)
    bad = e.stream(PROMPTS[0], max_tokens=12, temperature=0.0)
    e._core._inject_fault("device_error", bad.id)
    good = [e.stream(p, max_tokens=12, temperature=0.0, cache_prompt=False) for p in PROMPTS[1:]]
    with pytest.raises(llamars.GpuError, match="injected device failure"):
        _text(bad)
    # the others ran in the same batches, were split from the failing one and finished with
    # the bits they would have had alone
    assert [_text(s) for s in good] == want
    # the engine serves on
    assert e.generate(PROMPTS[1], max_tokens=12, temperature=0.0, cache_prompt=False).text == want[0]


def test_a_panic_in_a_step_fails_that_step_and_the_loop_serves_on(fresh):
    e = fresh(n_parallel=2)
    ref = e.generate(PROMPTS[2], max_tokens=8, temperature=0.0, cache_prompt=False).text
    e._core._inject_fault("panic")
    with pytest.raises(llamars.InternalError, match="injected panic"):
        e.generate(PROMPTS[0], max_tokens=8, temperature=0.0)
    # the loop thread is alive and computes the same bits as before
    assert e.generate(PROMPTS[2], max_tokens=8, temperature=0.0, cache_prompt=False).text == ref
    assert e.slots()[0]["is_processing"] is False and e.metrics()["requests_processing"] == 0


def test_a_killed_loop_fails_every_waiting_request_within_a_second(fresh):
    e = fresh(n_parallel=1)
    streams = [e.stream(p, max_tokens=400, temperature=0.0, ignore_eos=True) for p in PROMPTS]  # one runs, two wait
    next(iter(streams[0]))  # the first is generating
    errors, t0 = [], time.monotonic()
    e._core._inject_fault("kill")

    def drain(s):
        try:
            for _ in s:
                pass
            errors.append(None)
        except llamars.LlamarsError as x:
            errors.append(x)

    threads = [threading.Thread(target=drain, args=(s,)) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=5)
    elapsed = time.monotonic() - t0
    assert len(errors) == 3 and all(isinstance(x, llamars.UnavailableError) for x in errors), errors
    assert elapsed < 1.0, f"waiting requests learned of the dead loop after {elapsed:.2f} s"
    # new requests are refused at once, with the same kind
    t1 = time.monotonic()
    with pytest.raises(llamars.UnavailableError, match="engine loop stopped"):
        e.generate("Hello", max_tokens=2)
    with pytest.raises(llamars.UnavailableError):
        e.slot_erase(0)
    assert time.monotonic() - t1 < 0.5


def test_a_device_error_is_a_500_over_http_and_the_server_serves_on(fresh):
    from llamars.config import ServerConfig
    from llamars.server.app import create_app

    e = fresh(n_parallel=2)
    srv = LiveServer(create_app(ServerConfig(model=e.model_path), engine=e)).start()
    try:
        body = {"prompt": "Hello", "n_predict": 4, "temperature": 0}
        e._core._inject_fault("device_error")
        r = httpx.post(srv.url + "/completion", json=body, timeout=60)
        assert r.status_code == 500, r.text
        err = r.json()["error"]
        assert err["type"] == "server_error" and "injected device failure" in err["message"]
        e._core._inject_fault("device_error")
        r = httpx.post(srv.url + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}, timeout=60)
        assert r.status_code == 500 and "GPU" in r.json()["error"]["message"]
        r = httpx.post(srv.url + "/completion", json=body, timeout=60)
        assert r.status_code == 200 and r.json()["tokens_predicted"] == 4
    finally:
        srv.stop()
