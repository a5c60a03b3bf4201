"""The response store's interface on both backends: embedded SQLite and a real PostgreSQL
server (Debian's package, started here on 127.0.0.1): records and events, tenants (API keys),
replica leases, cancel requests delegated between replicas, the TTL, schema migration."""
from __future__ import annotations

import json
import sqlite3
import time

import pytest

from llamars.server.response_store import StoreError
from llamars.server.response_store_open import open_store
from llamars.server.response_store_sqlite import SQLiteStore

from pg_util import wait_until


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite://{tmp_path}/store.sqlite3"
    return request.getfixturevalue("pg").new_database()


def _resp(rid, status="completed", created=None, background=False):
    return {"id": rid, "object": "response", "status": status, "background": background,
            "created_at": created if created is not None else time.time(), "output": []}


@pytest.fixture
def stores(url):
    made = []

    def make(**kw):
        s = open_store(url, **{"lease": 2, **kw})
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()


def test_records_events_and_tenants(stores):
    a, b = stores(address="a:1"), stores(address="b:2")
    a.save(_resp("r1"), [{"type": "message"}], [{"role": "user"}], tenant="k1")
    assert b.get("r1", "k1")["id"] == "r1"
    assert b.get("r1", "k2") is None and b.get("r1") is None  # another key (or none) sees nothing
    rec = b.get_record("r1", "k1")
    assert rec["input_items"] == [{"type": "message"}] and rec["context"] == [{"role": "user"}]
    # an update without items keeps them, and keeps the tenant
    a.save({**_resp("r1"), "status": "incomplete"})
    rec = b.get_record("r1", "k1")
    assert rec["response"]["status"] == "incomplete" and rec["input_items"] == [{"type": "message"}]
    a.append_events("r1", [{"sequence_number": i, "type": "x"} for i in range(3)])
    a.append_events("r1", [{"sequence_number": 2, "type": "dup"}, {"sequence_number": 3, "type": "y"}])
    assert [e["type"] for e in b.events_after("r1", 0)] == ["x", "x", "y"]
    assert b.has_events("r1") and not b.has_events("nope")
    assert not b.delete("r1", "k2")
    assert b.delete("r1", "k1") and a.get("r1", "k1") is None and not a.has_events("r1")


def test_owner_lease_and_orphans(stores):
    a, b = stores(address="a:1"), stores(address="b:2")
    a.save(_resp("gen", "in_progress", background=True), tenant="k")
    who = b.owner_of("gen")
    assert who.owner == a.owner and who.address == "a:1" and who.alive
    assert b.fail_orphans() == []  # a is alive
    a._stop.set()  # a stops renewing its lease (a process that hangs or lost the network)
    assert wait_until(lambda: not b.owner_of("gen").alive, timeout=8)
    assert b.fail_orphans("gone") == ["gen"]
    r = b.get("gen", "k")
    assert r["status"] == "failed" and r["error"]["message"] == "gone"
    assert b.fail_orphans() == []  # once


def test_a_clean_close_ends_the_lease_at_once(stores):
    a, b = stores(), stores()
    a.save(_resp("gen", "queued", background=True))
    a.close()
    assert not b.owner_of("gen").alive
    assert b.fail_orphans() == ["gen"]


def test_cancel_is_delegated_to_the_live_owner(stores):
    a, b = stores(address="a:1"), stores(address="b:2")
    got = []
    a.watch_cancels(got.append)
    a.save(_resp("gen", "in_progress", background=True), tenant="k")
    assert b.request_cancel("gen", "k") is None  # delegated: a decides the outcome
    assert wait_until(lambda: got, timeout=3) == ["gen"]
    assert b.get("gen", "k")["status"] == "in_progress"
    # the owner gone: cancelled at once, without waiting for anyone
    a.close()
    t0 = time.monotonic()
    r = b.request_cancel("gen", "k")
    assert r["status"] == "cancelled" and time.monotonic() - t0 < 1.0
    assert b.get("gen", "k")["status"] == "cancelled"
    assert b.request_cancel("gen", "other") is None and b.get("gen", "other") is None


def test_ttl_deletes_old_finished_responses(stores):
    a = stores(ttl=3600)
    a.save(_resp("old", created=time.time() - 7200))
    a.append_events("old", [{"sequence_number": 0, "type": "x"}])
    a.save(_resp("old_running", "in_progress", created=time.time() - 7200, background=True))
    a.save(_resp("new"))
    assert a.purge() == 1
    assert a.get("old") is None and not a.has_events("old")
    assert a.get("old_running") is not None and a.get("new") is not None


def test_keeper_applies_the_ttl(stores):
    a = stores(ttl=1, lease=1)
    a.save(_resp("old", created=time.time() - 10))
    assert wait_until(lambda: a.get("old") is None, timeout=8)


def test_version_1_sqlite_database_is_migrated(tmp_path):
    # the schema before tenants and replicas
    db = sqlite3.connect(str(tmp_path / "responses.sqlite3"))
    db.executescript("""
        CREATE TABLE responses (id TEXT PRIMARY KEY, created_at REAL NOT NULL, status TEXT NOT NULL, owner TEXT NOT NULL,
            body TEXT NOT NULL, input_items TEXT NOT NULL DEFAULT '[]', context TEXT NOT NULL DEFAULT '[]');
        CREATE TABLE response_events (response_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY (response_id, seq));
    """)
    db.execute("INSERT INTO responses VALUES ('old', 1, 'completed', 'h:1:t', ?, '[]', '[]')", (json.dumps(_resp("old", created=1)),))
    db.commit()
    db.close()
    s = SQLiteStore(tmp_path)
    try:
        assert s.get("old")["id"] == "old"  # kept, and readable without a key (it had none)
        s.save(_resp("new"), tenant="k")
        assert s.get("new", "k") is not None and s.get("new") is None
    finally:
        s.close()


def test_newer_schema_is_refused(tmp_path):
    s = SQLiteStore(tmp_path)
    s._run(lambda db: db.exec("UPDATE store_meta SET v = '99' WHERE k = 'schema_version'"), tx=True)
    s.close()
    with pytest.raises(StoreError, match="schema version 99.*upgrade llamars"):
        SQLiteStore(tmp_path)


def test_bad_urls_say_what_to_do(pg):
    with pytest.raises(StoreError, match="unknown store 'mysql'"):
        open_store("mysql://x/y")
    with pytest.raises(StoreError, match="sqlite:// needs a path"):
        open_store("sqlite://")
    t0 = time.monotonic()
    with pytest.raises(StoreError, match="cannot connect to the response store postgresql://llamars@127.0.0.1.*check that PostgreSQL runs"):
        open_store(f"postgresql://llamars:secret@127.0.0.1:{pg.port}/no_such_db")
    assert time.monotonic() - t0 < 15


def test_password_is_not_in_messages(pg):
    with pytest.raises(StoreError) as e:
        open_store(f"postgresql://llamars:hunter2@127.0.0.1:{pg.port}/no_such_db")
    assert "hunter2" not in str(e.value)


def test_replicas_start_together_on_one_new_database(pg):
    import threading
    url = pg.new_database()
    out, errs = [], []

    def go():
        try:
            out.append(open_store(url))
        except Exception as e:  # pragma: no cover - the failure being tested for
            errs.append(e)

    ts = [threading.Thread(target=go) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    try:
        assert not errs and len(out) == 4
    finally:
        for s in out:
            s.close()
