"""`--responses-store URL` to a response store backend."""
from __future__ import annotations

from typing import Optional

from .response_store import SQLStore, StoreError
from .response_store_pg import PostgresStore
from .response_store_sqlite import SQLiteStore


def open_store(url: Optional[str], data_dir: Optional[str] = None, *, lease: float = 15.0, ttl: Optional[float] = None,
               address: str = "") -> SQLStore:
    """The store `--responses-store` names: `sqlite:///PATH` (a file, or a directory for
    responses.sqlite3 in it), `postgresql://…` / `postgres://…`, or None for SQLite in
    `data_dir`."""
    kw = dict(lease=lease, ttl=ttl, address=address)
    if not url:
        return SQLiteStore(data_dir, **kw)
    if url.startswith("sqlite://"):
        path = url[len("sqlite://"):]
        if not path:
            raise StoreError("--responses-store: sqlite:// needs a path, e.g. sqlite:///var/lib/llamars/responses.sqlite3")
        return SQLiteStore(path, **kw)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url, **kw)
    raise StoreError(f"--responses-store: unknown store {url.split(':', 1)[0]!r}; use sqlite:///PATH or postgresql://USER@HOST/DB")
