"""A real PostgreSQL server for the tests: Debian's `postgresql` package, `initdb` in a temp
dir, listening on 127.0.0.1 (a free port) and a unix socket in that dir, trust auth, stopped
at the end. Run as the `postgres` system user when the tests run as root (PostgreSQL refuses
root)."""
from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from typing import List, Optional


def pg_bin() -> Optional[str]:
    """The directory of initdb / pg_ctl (newest installed version), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    if found:
        return os.path.dirname(found[-1])
    w = shutil.which("initdb")
    return os.path.dirname(w) if w else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Postgres:
    """`Postgres().start()`; `url(db)` for a database; `new_database()` makes a fresh one."""

    def __init__(self) -> None:
        b = pg_bin()
        if b is None:
            raise RuntimeError("PostgreSQL is not installed (apt-get install postgresql); ./scripts/setup --tests installs it")
        self.bin = b
        self.dir = tempfile.mkdtemp(prefix="llamars-pg-")
        self.port = _free_port()
        self.user = "llamars"
        self._as: List[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.dir, "postgres", "postgres")

    def _cmd(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self._as, *args], capture_output=True, text=True, timeout=120)

    def start(self) -> "Postgres":
        data = os.path.join(self.dir, "data")
        r = self._cmd(os.path.join(self.bin, "initdb"), "-D", data, "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync")
        if r.returncode != 0:
            raise RuntimeError(f"initdb failed: {r.stderr[-2000:]}")
        opts = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories={self.dir} -c fsync=off -c max_connections=200"
        r = self._cmd(os.path.join(self.bin, "pg_ctl"), "-D", data, "-o", opts, "-l", os.path.join(self.dir, "log"), "-w", "-t", "60", "start")
        if r.returncode != 0:
            log = open(os.path.join(self.dir, "log")).read()[-2000:] if os.path.exists(os.path.join(self.dir, "log")) else ""
            raise RuntimeError(f"pg_ctl start failed: {r.stderr[-2000:]} {log}")
        self._data = data
        return self

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{db}"

    def new_database(self) -> str:
        import psycopg
        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return self.url(name)

    def stop(self) -> None:
        try:
            self._cmd(os.path.join(self.bin, "pg_ctl"), "-D", self._data, "-m", "immediate", "-w", "stop")
        except Exception:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Postgres":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_until(pred, timeout: float = 10.0, step: float = 0.05):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)
