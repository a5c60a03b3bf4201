"""Where Responses API objects live between requests: one interface (`SQLStore`, the SQL
both backends share) over an embedded SQLite file (`response_store_sqlite.py`, the default,
in the server's data directory) or a PostgreSQL server (`response_store_pg.py`) that several
replicas share; `response_store_open.open_store(url)` picks one from `--responses-store`.

A record holds the response object (JSON), the input items it was made from, the items
of the conversation before them (so a `previous_response_id` chain is one lookup and
survives the deletion of an earlier link), the tenant that created it (a hash of the API
key, "" without keys: another key sees nothing), and, for background and streamed
responses, the stream events by sequence number (so `GET ?stream=true&starting_after=N`
works after a restart or from another replica). Every method is blocking and thread-safe;
async callers run them with `asyncio.to_thread`.

Replicas: each store registers its process (`owner` = `host:pid:token`, the address it
serves on, a lease) and renews the lease from a keeper thread. A response being generated
names its owner. A replica whose lease ran out (or, on this host, whose process is gone) is
dead: whoever notices marks its unfinished responses `failed`. Cancelling a response that
another live replica generates is delegated to it (PostgreSQL `LISTEN/NOTIFY`; a polled
table on SQLite), which stops the generation. Old responses are deleted after
`--responses-ttl`."""
from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional

UNFINISHED = ("queued", "in_progress")
RESTART_MESSAGE = "the server stopped before this response finished"
GONE_MESSAGE = "the replica generating this response stopped before it finished"
SCHEMA_VERSION = 2

_HOST = socket.gethostname()


class StoreError(Exception):
    """The store could not be opened, read or written."""


class Owner(NamedTuple):
    owner: str  # host:pid:token
    address: str  # where it serves (host:port)
    alive: bool


def default_data_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llamars"


def failed(response: Dict[str, Any], message: str) -> Dict[str, Any]:
    """A copy of `response` marked failed with a server error."""
    return {**response, "status": "failed", "error": {"code": "server_error", "message": message}}


# One schema for both backends (SQLite takes these type names as they are).
_TABLES = [
    """CREATE TABLE IF NOT EXISTS responses (
        id TEXT PRIMARY KEY,
        created_at DOUBLE PRECISION NOT NULL,
        status TEXT NOT NULL,
        owner TEXT NOT NULL,
        body TEXT NOT NULL,
        input_items TEXT NOT NULL DEFAULT '[]',
        context TEXT NOT NULL DEFAULT '[]',
        tenant TEXT NOT NULL DEFAULT ''
    )""",
    "CREATE INDEX IF NOT EXISTS responses_status ON responses(status)",
    "CREATE INDEX IF NOT EXISTS responses_created ON responses(created_at)",
    """CREATE TABLE IF NOT EXISTS response_events (
        response_id TEXT NOT NULL,
        seq BIGINT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (response_id, seq)
    )""",
    """CREATE TABLE IF NOT EXISTS replicas (
        owner TEXT PRIMARY KEY,
        address TEXT NOT NULL,
        heartbeat DOUBLE PRECISION NOT NULL,
        lease DOUBLE PRECISION NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS cancel_requests (
        owner TEXT NOT NULL,
        response_id TEXT NOT NULL,
        PRIMARY KEY (owner, response_id)
    )""",
    "CREATE TABLE IF NOT EXISTS store_meta (k TEXT PRIMARY KEY, v TEXT NOT NULL)",
]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


def _same_host_dead(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_s = rest.partition(":")[0]
    return host == _HOST and pid_s.isdigit() and int(pid_s) != os.getpid() and not _pid_alive(int(pid_s))


class Db:
    """What a backend hands the shared SQL: statements written with `?` placeholders."""

    def exec(self, sql: str, args: tuple = ()) -> int: ...  # rows changed

    def many(self, sql: str, rows: List[tuple]) -> None: ...

    def one(self, sql: str, args: tuple = ()) -> Optional[tuple]: ...

    def all(self, sql: str, args: tuple = ()) -> List[tuple]: ...

    def columns(self, table: str) -> List[str]: ...


class SQLStore:
    """The response store's logic over a backend's `_run(fn, tx)` (fn(Db) in one
    transaction with `tx`). Subclasses set `NOW` (the database's clock, epoch seconds),
    open the connection(s), and deliver cancel requests (`_notify`, `_listen`)."""

    NOW = ""
    describe = ""  # for messages: where the store is

    def __init__(self, *, lease: float = 15.0, ttl: Optional[float] = None, address: str = "") -> None:
        self.token = uuid.uuid4().hex[:12]
        self.owner = f"{_HOST}:{os.getpid()}:{self.token}"
        self.address = address
        self.lease = max(float(lease), 1.0)
        self.ttl = ttl if ttl and ttl > 0 else None
        self._on_cancel: Optional[Callable[[str], None]] = None
        self._stop = threading.Event()
        self._threads: List[threading.Thread] = []

    # ------------------------------------------------------------------ backend hooks
    def _run(self, fn: Callable[[Db], Any], tx: bool = False) -> Any:
        raise NotImplementedError

    def _notify(self, db: Db, owner: str, response_id: str) -> None:
        """Tell `owner` (inside the transaction of `db`) to cancel `response_id`."""
        db.exec("INSERT INTO cancel_requests (owner, response_id) VALUES (?, ?) ON CONFLICT (owner, response_id) DO NOTHING", (owner, response_id))

    def _listen(self) -> None:
        """Deliver this replica's cancel requests to `_on_cancel` until `_stop` (a thread)."""
        while not self._stop.wait(0.1):
            try:
                got = self._run(lambda db: self._take_requests(db), tx=True)
            except StoreError:
                continue
            for rid in got:
                self._deliver(rid)

    def _take_requests(self, db: Db) -> List[str]:
        rows = db.all("SELECT response_id FROM cancel_requests WHERE owner = ?", (self.owner,))
        if rows:
            db.exec("DELETE FROM cancel_requests WHERE owner = ?", (self.owner,))
        return [r[0] for r in rows]

    def _deliver(self, rid: str) -> None:
        cb = self._on_cancel
        if cb is not None:
            try:
                cb(rid)
            except Exception:  # the app is shutting down
                pass

    # ------------------------------------------------------------------ schema and replica
    def _migrate(self, db: Db) -> None:
        if "store_meta" in self._tables(db):
            row = db.one("SELECT v FROM store_meta WHERE k = 'schema_version'")
            if row is not None and int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"the response store {self.describe} has schema version {row[0]}, newer than this llamars "
                                 f"({SCHEMA_VERSION}); upgrade llamars or use another store")
        db.exec(_TABLES[0])
        if "tenant" not in db.columns("responses"):  # a version 1 database (before API-key tenants)
            db.exec("ALTER TABLE responses ADD COLUMN tenant TEXT NOT NULL DEFAULT ''")
        for sql in _TABLES[1:]:
            db.exec(sql)
        db.exec("INSERT INTO store_meta (k, v) VALUES ('schema_version', ?) ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                (str(SCHEMA_VERSION),))

    def _start(self) -> None:
        """After the backend opened: schema, this replica's lease, the keeper and listener."""
        self._run(self._migrate, tx=True)
        self._beat()
        for target, name in ((self._keep, "llamars-store-keeper"), (self._listen, "llamars-store-listener")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def _tables(self, db: Db) -> List[str]:
        raise NotImplementedError

    def _beat(self) -> None:
        self._run(lambda db: db.exec(
            f"INSERT INTO replicas (owner, address, heartbeat, lease) VALUES (?, ?, {self.NOW}, ?) "
            f"ON CONFLICT (owner) DO UPDATE SET heartbeat = excluded.heartbeat, address = excluded.address",
            (self.owner, self.address, self.lease)))

    def _keep(self) -> None:
        """Renew the lease; fail the responses of dead replicas; apply the TTL."""
        beat = min(self.lease / 3, 5.0)
        last_sweep = last_purge = 0.0
        while not self._stop.wait(beat):
            try:
                self._beat()
                now = time.monotonic()
                if now - last_sweep >= self.lease:
                    self.fail_orphans(GONE_MESSAGE)
                    last_sweep = now
                if self.ttl is not None and now - last_purge >= min(self.ttl, 60.0):
                    self.purge()
                    last_purge = now
            except StoreError:
                pass  # the database is away for a moment: try again at the next beat

    def watch_cancels(self, callback: Callable[[str], None]) -> None:
        """`callback(response_id)` (from a store thread) when another replica asks this one
        to cancel a response it generates."""
        self._on_cancel = callback

    # ------------------------------------------------------------------ records
    def save(self, response: Dict[str, Any], input_items: Optional[List[dict]] = None, context: Optional[List[dict]] = None,
             tenant: str = "") -> None:
        """Insert or replace a response object; `input_items` / `context` (and the tenant of
        an existing record) are kept when None."""
        body = json.dumps(response, ensure_ascii=False)
        rid, status, created = response["id"], response.get("status") or "completed", float(response.get("created_at") or time.time())

        def go(db: Db) -> None:
            db.exec(
                "INSERT INTO responses (id, created_at, status, owner, body, input_items, context, tenant) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET status = excluded.status, owner = excluded.owner, body = excluded.body",
                (rid, created, status, self.owner, body, json.dumps(input_items or [], ensure_ascii=False),
                 json.dumps(context or [], ensure_ascii=False), tenant),
            )
            sets, args = [], []
            if input_items is not None:
                sets.append("input_items = ?")
                args.append(json.dumps(input_items, ensure_ascii=False))
            if context is not None:
                sets.append("context = ?")
                args.append(json.dumps(context, ensure_ascii=False))
            if sets:
                db.exec(f"UPDATE responses SET {', '.join(sets)} WHERE id = ?", (*args, rid))

        self._run(go, tx=True)

    def get(self, response_id: str, tenant: str = "") -> Optional[Dict[str, Any]]:
        row = self._run(lambda db: db.one("SELECT body FROM responses WHERE id = ? AND tenant = ?", (response_id, tenant)))
        return json.loads(row[0]) if row else None

    def get_record(self, response_id: str, tenant: str = "") -> Optional[Dict[str, Any]]:
        """{"response", "input_items", "context"} or None."""
        row = self._run(lambda db: db.one("SELECT body, input_items, context FROM responses WHERE id = ? AND tenant = ?",
                                          (response_id, tenant)))
        if row is None:
            return None
        return {"response": json.loads(row[0]), "input_items": json.loads(row[1]), "context": json.loads(row[2])}

    def delete(self, response_id: str, tenant: str = "") -> bool:
        def go(db: Db) -> bool:
            if db.exec("DELETE FROM responses WHERE id = ? AND tenant = ?", (response_id, tenant)) == 0:
                return False
            db.exec("DELETE FROM response_events WHERE response_id = ?", (response_id,))
            return True

        return self._run(go, tx=True)

    # ------------------------------------------------------------------ events
    def append_events(self, response_id: str, events: List[Dict[str, Any]]) -> None:
        """Events carry their own `sequence_number`; appending one twice keeps the first."""
        if not events:
            return
        rows = [(response_id, int(e["sequence_number"]), json.dumps(e, ensure_ascii=False)) for e in events]
        self._run(lambda db: db.many("INSERT INTO response_events (response_id, seq, body) VALUES (?, ?, ?) ON CONFLICT (response_id, seq) DO NOTHING", rows), tx=True)

    def events_after(self, response_id: str, after: int) -> List[Dict[str, Any]]:
        rows = self._run(lambda db: db.all("SELECT body FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq", (response_id, after)))
        return [json.loads(r[0]) for r in rows]

    def has_events(self, response_id: str) -> bool:
        return self._run(lambda db: db.one("SELECT 1 FROM response_events WHERE response_id = ? LIMIT 1", (response_id,))) is not None

    # ------------------------------------------------------------------ replicas
    def owner_of(self, response_id: str) -> Optional[Owner]:
        """The replica that owns (generates, or last wrote) a response, and whether it lives."""
        row = self._run(lambda db: db.one(
            f"SELECT r.owner, p.address, CASE WHEN p.heartbeat + p.lease >= {self.NOW} THEN 1 ELSE 0 END "
            "FROM responses r LEFT JOIN replicas p ON p.owner = r.owner WHERE r.id = ?", (response_id,)))
        if row is None:
            return None
        owner, address, fresh = row
        alive = owner == self.owner or (bool(fresh) and not _same_host_dead(owner))
        return Owner(owner, address or "", alive)

    def request_cancel(self, response_id: str, tenant: str = "") -> Optional[Dict[str, Any]]:
        """Cancel an unfinished response generated elsewhere: delegated to its live owner
        (returns None: poll `get` for the outcome), or, when the owner is gone, marked
        `cancelled` at once (returns the record)."""
        who = self.owner_of(response_id)
        if who is not None and who.alive and who.owner != self.owner:
            self._run(lambda db: self._notify(db, who.owner, response_id), tx=True)
            return None

        def go(db: Db) -> Optional[Dict[str, Any]]:
            row = db.one("SELECT body FROM responses WHERE id = ? AND tenant = ?", (response_id, tenant))
            if row is None:
                return None
            r = json.loads(row[0])
            if r.get("status") in UNFINISHED:
                r = {**r, "status": "cancelled"}
                db.exec("UPDATE responses SET status = 'cancelled', body = ? WHERE id = ?", (json.dumps(r, ensure_ascii=False), response_id))
            return r

        return self._run(go, tx=True)

    def fail_orphans(self, message: str = RESTART_MESSAGE) -> List[str]:
        """Mark unfinished responses whose generating replica is gone as `failed`."""
        marks = ",".join("?" * len(UNFINISHED))
        rows = self._run(lambda db: db.all(
            f"SELECT r.id, r.owner, r.body, CASE WHEN p.heartbeat + p.lease >= {self.NOW} THEN 1 ELSE 0 END "
            f"FROM responses r LEFT JOIN replicas p ON p.owner = r.owner WHERE r.status IN ({marks}) AND r.owner <> ?",
            (*UNFINISHED, self.owner)))
        done = []
        for rid, owner, body, fresh in rows:
            if fresh and not _same_host_dead(owner):
                continue
            r = json.dumps(failed(json.loads(body), message), ensure_ascii=False)
            n = self._run(lambda db: db.exec(f"UPDATE responses SET status = 'failed', body = ? WHERE id = ? AND status IN ({marks})",
                                             (r, rid, *UNFINISHED)), tx=True)
            if n:
                done.append(rid)
        return done

    def purge(self) -> int:
        """Delete finished responses older than the TTL (and their events)."""
        if self.ttl is None:
            return 0
        cutoff = time.time() - self.ttl
        marks = ",".join("?" * len(UNFINISHED))

        def go(db: Db) -> int:
            db.exec(f"DELETE FROM response_events WHERE response_id IN (SELECT id FROM responses WHERE created_at < ? AND status NOT IN ({marks}))",
                    (cutoff, *UNFINISHED))
            return db.exec(f"DELETE FROM responses WHERE created_at < ? AND status NOT IN ({marks})", (cutoff, *UNFINISHED))

        return self._run(go, tx=True)

    # ------------------------------------------------------------------ close
    def _stop_threads(self) -> None:
        self._stop.set()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=5)
        self._threads.clear()
        try:  # a clean exit ends the lease at once
            self._run(lambda db: db.exec("DELETE FROM replicas WHERE owner = ?", (self.owner,)), tx=True)
        except StoreError:
            pass

    def close(self) -> None:
        raise NotImplementedError
