"""The response store on a PostgreSQL server that several replicas share
(`--responses-store postgresql://…`): psycopg 3 with a small connection pool; the schema
is created and migrated at start under an advisory lock (replicas may start together);
cancel requests wake the owning replica through `LISTEN/NOTIFY` (and sit in a table, so one
sent while its listener reconnects is not lost)."""
from __future__ import annotations

from typing import Any, Callable, List, Optional

from .response_store import Db, SQLStore, StoreError

CHANNEL = "llamars_cancel"
_MIGRATION_LOCK = 0x6C6C616D  # pg_advisory_xact_lock key of the schema migration


def _psycopg():
    try:
        import psycopg
        import psycopg_pool
    except ImportError:
        raise StoreError("a postgresql:// response store needs psycopg 3 and psycopg-pool: "
                         "pip install 'llamars[postgres]'") from None
    return psycopg, psycopg_pool


class _Db(Db):
    def __init__(self, conn: Any) -> None:
        self.c = conn

    @staticmethod
    def _q(sql: str) -> str:
        return sql.replace("?", "%s")

    def exec(self, sql: str, args: tuple = ()) -> int:
        return self.c.execute(self._q(sql), args).rowcount

    def many(self, sql: str, rows: List[tuple]) -> None:
        with self.c.cursor() as cur:
            cur.executemany(self._q(sql), rows)

    def one(self, sql: str, args: tuple = ()) -> Optional[tuple]:
        return self.c.execute(self._q(sql), args).fetchone()

    def all(self, sql: str, args: tuple = ()) -> List[tuple]:
        return self.c.execute(self._q(sql), args).fetchall()

    def columns(self, table: str) -> List[str]:
        return [r[0] for r in self.all("SELECT column_name FROM information_schema.columns "
                                       "WHERE table_schema = current_schema() AND table_name = ?", (table,))]


class PostgresStore(SQLStore):
    NOW = "CAST(extract(epoch FROM clock_timestamp()) AS DOUBLE PRECISION)"

    def __init__(self, url: str, **kw: Any) -> None:
        super().__init__(**kw)
        psycopg, pool = _psycopg()
        self._psycopg = psycopg
        self.url = url
        self.describe = _redact(url)
        try:
            self._pool = pool.ConnectionPool(url, min_size=1, max_size=4, kwargs={"autocommit": True}, open=False, timeout=10,
                                             name="llamars-responses")
            self._pool.open(wait=True, timeout=10)
        except Exception as e:  # psycopg.Error, pool timeouts
            raise StoreError(f"cannot connect to the response store {self.describe}: {_why(e)}; "
                             "check that PostgreSQL runs and the URL (user, host, database) is right") from None
        try:
            self._start()
        except BaseException:
            self._pool.close()
            raise

    def _tables(self, db: Db) -> List[str]:
        return [r[0] for r in db.all("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]

    def _migrate(self, db: Db) -> None:
        db.one("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))  # replicas starting together take turns
        super()._migrate(db)

    def _run(self, fn: Callable[[Db], Any], tx: bool = False) -> Any:
        try:
            with self._pool.connection() as conn:
                if not tx:
                    return fn(_Db(conn))
                with conn.transaction():
                    return fn(_Db(conn))
        except StoreError:
            raise
        except Exception as e:
            if isinstance(e, self._psycopg.Error) or type(e).__module__.startswith("psycopg_pool"):
                raise StoreError(f"response store {self.describe}: {_why(e)}") from None
            raise

    def _notify(self, db: Db, owner: str, response_id: str) -> None:
        super()._notify(db, owner, response_id)
        db.one("SELECT pg_notify(?, ?)", (CHANNEL, owner))

    def _listen(self) -> None:
        while not self._stop.is_set():
            try:
                with self._psycopg.connect(self.url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._drain()  # requests sent while not listening
                    while not self._stop.is_set():
                        woke = any(n.payload == self.owner for n in conn.notifies(timeout=0.5, stop_after=16))
                        if woke:
                            self._drain()
            except Exception:
                if self._stop.wait(1.0):
                    return

    def _drain(self) -> None:
        try:
            got = self._run(self._take_requests, tx=True)
        except StoreError:
            return
        for rid in got:
            self._deliver(rid)

    def close(self) -> None:
        self._stop_threads()
        try:
            self._pool.close()
        except Exception:
            pass


def _redact(url: str) -> str:
    """The URL without its password, for messages."""
    head, sep, rest = url.partition("://")
    if "@" in rest:
        cred, _, host = rest.rpartition("@")
        rest = cred.split(":", 1)[0] + "@" + host
    return head + sep + rest


def _why(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]
