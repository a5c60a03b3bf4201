"""The server's own log lines (start, listening, model loaded, load failures): printed
under llama-server's log flags: --log-disable, -lv/--log-verbosity (1 errors, 2
warnings, 3 info, 4+ debug), --log-prefix (a level letter), --log-timestamps (time
since start, as llama.cpp's `0.00.000.000`), --log-file (also appended to a file)."""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable, Optional, TextIO

from ..config import ServerConfig

LEVELS = {"E": 1, "W": 2, "I": 3, "D": 4}
_T0 = time.monotonic()


def _stamp() -> str:
    us = int((time.monotonic() - _T0) * 1e6)
    return f"{us // 60_000_000}.{us // 1_000_000 % 60:02d}.{us // 1000 % 1000:03d}.{us % 1000:03d}"


class LogLine:
    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self._file: Optional[TextIO] = None
        self._lock = threading.Lock()
        if config.log_file:
            try:
                self._file = open(config.log_file, "a", encoding="utf-8", buffering=1)
            except OSError as e:
                print(f"warning: --log-file {config.log_file}: {e.strerror or e}; logging to the console only",
                      file=sys.stderr)

    def __call__(self, message: str, level: str = "I") -> None:
        c = self.config
        if c.log_disable or LEVELS[level] > c.log_verbosity and not (c.verbose and level == "D"):
            return
        parts = []
        if c.log_timestamps:
            parts.append(_stamp())
        if c.log_prefix:
            parts.append(level)
        line = " ".join(parts + [message])
        stream = sys.stderr if level in ("E", "W") else sys.stdout
        with self._lock:
            print(line, file=stream, flush=True)
            if self._file is not None:
                self._file.write(line + "\n")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def uvicorn_level(config: ServerConfig) -> str:
    """uvicorn's own log level under the same flags."""
    if config.log_disable:
        return "critical"
    if config.verbose or config.log_verbosity >= 4:
        return "info"  # with the access log
    return {0: "critical", 1: "error"}.get(config.log_verbosity, "warning")


Logger = Callable[..., None]
