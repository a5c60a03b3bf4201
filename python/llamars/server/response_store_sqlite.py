"""The response store in an embedded SQLite file (the default: `<data dir>/responses.sqlite3`).
Several server processes on one host may share it (WAL mode, a busy timeout); cancel requests
between them go through a table the owner polls."""
from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, List, Optional

from .response_store import Db, SQLStore, StoreError, default_data_dir


class _Db(Db):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self.c = conn

    def exec(self, sql: str, args: tuple = ()) -> int:
        return self.c.execute(sql, args).rowcount

    def many(self, sql: str, rows: List[tuple]) -> None:
        self.c.executemany(sql, rows)

    def one(self, sql: str, args: tuple = ()) -> Optional[tuple]:
        return self.c.execute(sql, args).fetchone()

    def all(self, sql: str, args: tuple = ()) -> List[tuple]:
        return self.c.execute(sql, args).fetchall()

    def columns(self, table: str) -> List[str]:
        return [r[1] for r in self.c.execute(f"PRAGMA table_info({table})").fetchall()]


class SQLiteStore(SQLStore):
    """`SQLStore` on one SQLite connection behind a lock. `where` is a directory (the file
    `responses.sqlite3` in it) or a file path."""

    FILENAME = "responses.sqlite3"
    NOW = "((julianday('now') - 2440587.5) * 86400.0)"

    def __init__(self, where: "os.PathLike[str] | str | None" = None, **kw: Any) -> None:
        super().__init__(**kw)
        p = Path(where) if where else default_data_dir()
        path = p if (p.suffix and not p.is_dir()) else p / self.FILENAME
        self.path = path
        self.describe = str(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(path), timeout=10, check_same_thread=False, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        except (OSError, sqlite3.Error) as e:
            raise StoreError(f"cannot open the response store {str(path)!r}: {e}") from None
        self._db = _Db(self._conn)
        self._lock = threading.Lock()
        self._start()

    def _tables(self, db: Db) -> List[str]:
        return [r[0] for r in db.all("SELECT name FROM sqlite_master WHERE type = 'table'")]

    def _run(self, fn: Callable[[Db], Any], tx: bool = False) -> Any:
        with self._lock:
            try:
                if not tx:
                    return fn(self._db)
                self._conn.execute("BEGIN IMMEDIATE")
                try:
                    out = fn(self._db)
                except BaseException:
                    self._conn.execute("ROLLBACK")
                    raise
                self._conn.execute("COMMIT")
                return out
            except sqlite3.Error as e:
                raise StoreError(f"response store {self.describe}: {e}") from None

    def close(self) -> None:
        self._stop_threads()
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
