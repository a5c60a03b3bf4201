"""Where Responses API objects live between requests: one small interface
(`ResponseStore`) and its embedded SQLite implementation in the server's data directory.

A record holds the response object (JSON), the input items it was made from, the items
of the conversation before them (so a `previous_response_id` chain is one lookup and
survives the deletion of an earlier link), and, for background and streamed responses,
the stream events by sequence number (so `GET ?stream=true&starting_after=N` works after
a restart). Every method is blocking and thread-safe; async callers run them with
`asyncio.to_thread`.

Several server processes may share one database (WAL mode, a busy timeout). Each row
names the process that owns its generation (`host:pid:token`); at startup a store marks
the unfinished (`queued` / `in_progress`) responses of owners that no longer run on this
host as `failed` (their generation died with that process). Rows owned by another host
are left alone: telling a live replica from a dead one there needs leases, which a
shared-database backend would add behind this same interface."""
from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Protocol, Set


UNFINISHED = ("queued", "in_progress")
RESTART_MESSAGE = "the server stopped before this response finished"

_HOST = socket.gethostname()
_LIVE_TOKENS: Set[str] = set()  # stores open in this process (several apps may share one process)


class StoreError(Exception):
    """The store could not be opened, read or written."""


class ResponseStore(Protocol):
    def save(self, response: Dict[str, Any], input_items: Optional[List[dict]] = None, context: Optional[List[dict]] = None) -> None:
        """Insert or replace a response object; `input_items` / `context` are kept when None."""

    def get(self, response_id: str) -> Optional[Dict[str, Any]]: ...

    def get_record(self, response_id: str) -> Optional[Dict[str, Any]]:
        """{"response", "input_items", "context"} or None."""

    def delete(self, response_id: str) -> bool: ...

    def append_events(self, response_id: str, events: List[Dict[str, Any]]) -> None:
        """Events carry their own `sequence_number`; appending one twice keeps the first."""

    def events_after(self, response_id: str, after: int) -> List[Dict[str, Any]]: ...

    def has_events(self, response_id: str) -> bool: ...

    def fail_orphans(self, message: str = RESTART_MESSAGE) -> List[str]:
        """Mark unfinished responses whose generating process is gone as `failed`."""

    def close(self) -> None: ...


def default_data_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "llamars"


def failed(response: Dict[str, Any], message: str) -> Dict[str, Any]:
    """A copy of `response` marked failed with a server error."""
    return {**response, "status": "failed", "error": {"code": "server_error", "message": message}}


_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    id TEXT PRIMARY KEY,
    created_at REAL NOT NULL,
    status TEXT NOT NULL,
    owner TEXT NOT NULL,
    body TEXT NOT NULL,
    input_items TEXT NOT NULL DEFAULT '[]',
    context TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS responses_status ON responses(status);
CREATE TABLE IF NOT EXISTS response_events (
    response_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (response_id, seq)
);
"""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # exists, owned by someone else
    return True


class SQLiteStore:
    """`ResponseStore` in `<data_dir>/responses.sqlite3`: one connection behind a lock."""

    FILENAME = "responses.sqlite3"

    def __init__(self, data_dir: "os.PathLike[str] | str | None" = None) -> None:
        d = Path(data_dir) if data_dir else default_data_dir()
        try:
            d.mkdir(parents=True, exist_ok=True)
            self.path = d / self.FILENAME
            self._db = sqlite3.connect(str(self.path), timeout=10, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the response store in {str(d)!r}: {e}") from None
        self._lock = threading.Lock()
        self.token = uuid.uuid4().hex[:12]
        self.owner = f"{_HOST}:{os.getpid()}:{self.token}"
        _LIVE_TOKENS.add(self.token)

    # ------------------------------------------------------------------ helpers
    def _run(self, fn, tx: bool = False):
        """fn(connection) under the lock (in one transaction with `tx`)."""
        with self._lock:
            try:
                if not tx:
                    return fn(self._db)
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(self._db)
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
                return out
            except sqlite3.Error as e:
                raise StoreError(f"response store: {e}") from None

    # ------------------------------------------------------------------ records
    def save(self, response: Dict[str, Any], input_items: Optional[List[dict]] = None, context: Optional[List[dict]] = None) -> None:
        body = json.dumps(response, ensure_ascii=False)
        rid, status, created = response["id"], response.get("status") or "completed", float(response.get("created_at") or time.time())

        def go(db):
            db.execute(
                "INSERT INTO responses (id, created_at, status, owner, body, input_items, context) VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET status = excluded.status, owner = excluded.owner, body = excluded.body",
                (rid, created, status, self.owner, body, json.dumps(input_items or [], ensure_ascii=False), json.dumps(context or [], ensure_ascii=False)),
            )
            if input_items is not None or context is not None:
                sets, args = [], []
                if input_items is not None:
                    sets.append("input_items = ?")
                    args.append(json.dumps(input_items, ensure_ascii=False))
                if context is not None:
                    sets.append("context = ?")
                    args.append(json.dumps(context, ensure_ascii=False))
                db.execute(f"UPDATE responses SET {', '.join(sets)} WHERE id = ?", (*args, rid))

        self._run(go, tx=True)

    def get(self, response_id: str) -> Optional[Dict[str, Any]]:
        row = self._run(lambda db: db.execute("SELECT body FROM responses WHERE id = ?", (response_id,)).fetchone())
        return json.loads(row[0]) if row else None

    def get_record(self, response_id: str) -> Optional[Dict[str, Any]]:
        row = self._run(lambda db: db.execute("SELECT body, input_items, context FROM responses WHERE id = ?", (response_id,)).fetchone())
        if row is None:
            return None
        return {"response": json.loads(row[0]), "input_items": json.loads(row[1]), "context": json.loads(row[2])}

    def delete(self, response_id: str) -> bool:
        def go(db):
            n = db.execute("DELETE FROM responses WHERE id = ?", (response_id,)).rowcount
            db.execute("DELETE FROM response_events WHERE response_id = ?", (response_id,))
            return n > 0

        return self._run(go, tx=True)

    # ------------------------------------------------------------------ events
    def append_events(self, response_id: str, events: List[Dict[str, Any]]) -> None:
        if not events:
            return
        rows = [(response_id, int(e["sequence_number"]), json.dumps(e, ensure_ascii=False)) for e in events]

        self._run(lambda db: db.executemany("INSERT OR IGNORE INTO response_events (response_id, seq, body) VALUES (?, ?, ?)", rows), tx=True)

    def events_after(self, response_id: str, after: int) -> List[Dict[str, Any]]:
        rows = self._run(lambda db: db.execute(
            "SELECT body FROM response_events WHERE response_id = ? AND seq > ? ORDER BY seq", (response_id, after)).fetchall())
        return [json.loads(r[0]) for r in rows]

    def has_events(self, response_id: str) -> bool:
        return self._run(lambda db: db.execute("SELECT 1 FROM response_events WHERE response_id = ? LIMIT 1", (response_id,)).fetchone()) is not None

    # ------------------------------------------------------------------ recovery
    def _orphaned(self, owner: str) -> bool:
        host, _, rest = owner.partition(":")
        pid_s, _, token = rest.partition(":")
        if host != _HOST or not pid_s.isdigit():
            return False
        pid = int(pid_s)
        if pid == os.getpid():
            return token not in _LIVE_TOKENS
        return not _pid_alive(pid)

    def fail_orphans(self, message: str = RESTART_MESSAGE) -> List[str]:
        marks = ",".join("?" * len(UNFINISHED))
        rows = self._run(lambda db: db.execute(f"SELECT id, owner, body FROM responses WHERE status IN ({marks})", UNFINISHED).fetchall())
        done = []
        for rid, owner, body in rows:
            if self._orphaned(owner):
                r = failed(json.loads(body), message)
                self._run(lambda db: db.execute(
                    f"UPDATE responses SET status = 'failed', body = ? WHERE id = ? AND status IN ({marks})",
                    (json.dumps(r, ensure_ascii=False), rid, *UNFINISHED)))
                done.append(rid)
        return done

    def close(self) -> None:
        _LIVE_TOKENS.discard(self.token)
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
