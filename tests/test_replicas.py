"""Several llamars-server processes sharing one PostgreSQL response store (a real server,
Debian's package, on 127.0.0.1), with API keys: a response created on one replica is
retrieved, continued, listed and deleted on another; a background response cancelled on a
replica that does not generate it stops on its owner; a stream resume on the wrong replica
is a 409 naming the owner; a replica that dies has its responses failed by another; the
TTL; and another API key sees none of it (404)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest

from pg_util import wait_until
from server_util import wait_healthy

K1, K2 = "key-one", "key-two"
G = {"temperature": 0, "max_output_tokens": 16}
LONG = dict(input="Write a very long story about a lighthouse.", background=True, temperature=0, max_output_tokens=4000,
            extra_body={"ignore_eos": True})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Replica:
    def __init__(self, model_path: str, url: str, log_path, *extra: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_ARG_") and k != "LLAMA_API_KEY"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "llamars.cli", "-m", model_path, "--port", str(self.port), "-c", "2048", "-np", "2",
             "--responses-store", url, "--responses-lease", "2", "--api-key", f"{K1},{K2}", *extra],
            env=env, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)

    def ready(self) -> "Replica":
        wait_healthy(self.proc, self.url, self.log_path)
        return self

    def client(self, key: str = K1) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=key, max_retries=0, timeout=120)

    def http(self, key: str = K1) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {key}"}, timeout=60)

    def busy_slots(self) -> int:
        with self.http() as h:
            return sum(bool(s["is_processing"]) for s in h.get("/slots").json())

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module")
def store_url(pg):
    return pg.new_database()


@pytest.fixture(scope="module")
def pair(model_path, store_url, tmp_path_factory):
    d = tmp_path_factory.mktemp("replicas")
    a = Replica(model_path, store_url, d / "a.log")
    b = Replica(model_path, store_url, d / "b.log")
    try:
        yield a.ready(), b.ready()
    finally:
        a.stop()
        b.stop()


def test_created_on_one_replica_used_on_another(pair):
    a, b = pair
    r = a.client().responses.create(model="any", input="Name a primary color.", **G)
    got = b.client().responses.retrieve(r.id)
    assert got.output_text == r.output_text and got.usage.total_tokens == r.usage.total_tokens
    items = b.client().responses.input_items.list(r.id)
    assert [i.role for i in items.data] == ["user"]
    r2 = b.client().responses.create(model="any", input="And another one?", previous_response_id=r.id, **G)
    assert r2.usage.input_tokens > r.usage.input_tokens
    # another API key: as if none of it existed
    for rep in (a, b):
        with pytest.raises(openai.NotFoundError):
            rep.client(K2).responses.retrieve(r.id)
        with pytest.raises(openai.NotFoundError):
            rep.client(K2).responses.input_items.list(r.id)
        with pytest.raises(openai.NotFoundError):
            rep.client(K2).responses.delete(r.id)
        with pytest.raises(openai.NotFoundError):
            rep.client(K2).responses.cancel(r.id)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        a.client(K2).responses.create(model="any", input="x", previous_response_id=r.id, **G)
    b.client().responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        a.client().responses.retrieve(r.id)
    assert a.client().responses.retrieve(r2.id).id == r2.id


def test_cancel_on_another_replica_stops_the_owner(pair):
    a, b = pair
    r = a.client().responses.create(model="any", **LONG)
    assert wait_until(lambda: b.client().responses.retrieve(r.id).status == "in_progress" and a.busy_slots() == 1, timeout=30)
    with b.http(K2) as h:  # another key cannot cancel it
        assert h.post(f"/v1/responses/{r.id}/cancel").status_code == 404
    assert a.busy_slots() == 1
    t0 = time.monotonic()
    c = b.client().responses.cancel(r.id)
    assert c.status == "cancelled", c.status
    assert wait_until(lambda: a.busy_slots() == 0, timeout=1.0), "the owner's slot is still generating 1 s after the cancel"
    assert time.monotonic() - t0 < 5
    final = a.client().responses.retrieve(r.id)
    assert final.status == "cancelled"


def test_stream_resume_on_another_replica_names_the_owner(pair):
    a, b = pair
    r = a.client().responses.create(model="any", **LONG)
    try:
        assert wait_until(lambda: b.client().responses.retrieve(r.id).status == "in_progress", timeout=30)
        with b.http() as h:
            res = h.get(f"/v1/responses/{r.id}", params={"stream": "true", "starting_after": 0})
        assert res.status_code == 409, res.text
        msg = res.json()["error"]["message"]
        assert f"127.0.0.1:{a.port}" in msg and "another replica" in msg
        # the owner serves it
        with a.http() as h, h.stream("GET", f"/v1/responses/{r.id}", params={"stream": "true", "starting_after": 0}) as s:
            assert s.status_code == 200
            first = next(s.iter_lines())
            assert first.startswith("event: ")
    finally:
        a.client().responses.cancel(r.id)
    # finished: any replica replays the stored events
    assert wait_until(lambda: b.client().responses.retrieve(r.id).status == "cancelled", timeout=10)
    with b.http() as h:
        res = h.get(f"/v1/responses/{r.id}", params={"stream": "true", "starting_after": 0})
    assert res.status_code == 200 and res.text.startswith("event: response.in_progress")


def test_a_dead_replica_is_noticed_and_the_ttl_applies(model_path, store_url, pair, tmp_path):
    a, b = pair
    c = Replica(model_path, store_url, tmp_path / "c.log", "--responses-ttl", "3").ready()
    try:
        # the TTL: c's keeper deletes old responses of the shared store
        old = b.client().responses.create(model="any", input="Hi.", **G)
        assert wait_until(lambda: _gone(b, old.id), timeout=15), "the response outlived --responses-ttl 3"
        r1 = c.client().responses.create(model="any", **LONG)
        r2 = c.client().responses.create(model="any", **LONG)
        assert wait_until(lambda: b.client().responses.retrieve(r1.id).status == "in_progress", timeout=30)
        c.stop(signal.SIGKILL)  # no clean shutdown: its rows stay in_progress
        # the owner is gone: a cancel answers at once
        t0 = time.monotonic()
        x = b.client().responses.cancel(r2.id)
        assert x.status == "cancelled" and time.monotonic() - t0 < 1.5
        # the other one is marked failed by a replica that notices the expired lease
        assert wait_until(lambda: a.client().responses.retrieve(r1.id).status == "failed", timeout=15)
        assert "stopped" in a.client().responses.retrieve(r1.id).error.message
    finally:
        c.stop(signal.SIGKILL)


def _gone(rep: Replica, rid: str) -> bool:
    try:
        rep.client().responses.retrieve(rid)
        return False
    except openai.NotFoundError:
        return True
