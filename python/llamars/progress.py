"""Progress bars for slow steps (model loading, default-model assembly): tqdm when it is
installed, a plain text bar otherwise. The bar lives on a helper thread that polls how far
the work got, so the work itself runs untouched in the calling thread."""
from __future__ import annotations

import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional, TextIO

_SPIN = "|/-\\"


def in_notebook() -> bool:
    """True inside a Jupyter (ipykernel) kernel; never imports IPython itself."""
    ipy = sys.modules.get("IPython")
    if ipy is None:
        return False
    try:
        shell = ipy.get_ipython()
    except Exception:
        return False
    return shell is not None and hasattr(shell, "kernel")


def interactive(file: Optional[TextIO] = None) -> bool:
    """Would a bar help here: a notebook, or a terminal on `file` (default stderr)?"""
    if in_notebook():
        return True
    try:
        return bool((file or sys.stderr).isatty())
    except (AttributeError, ValueError):
        return False


def _size(n: float) -> str:
    return f"{n / (1 << 20):.1f}"


class _TextBar:
    """`desc: 42% |########            | 100.0/241.4 MiB 0.8s`, or a spinner without a total.
    Redrawn in place on a terminal or in a notebook; elsewhere only the last line is written."""

    def __init__(self, desc: str, total: Optional[int], file: Optional[TextIO]) -> None:
        self.desc, self.total, self.file = desc, total, file or sys.stderr
        self.n, self.t0, self.ticks = 0, time.monotonic(), 0
        self.live = interactive(self.file)

    def _line(self, end: str = "") -> str:
        dt = time.monotonic() - self.t0
        if self.total:
            frac = min(1.0, self.n / self.total)
            bar = "#" * int(frac * 20)
            return f"{self.desc}: {frac:4.0%} |{bar:<20}| {_size(self.n)}/{_size(self.total)} MiB {dt:.1f}s{end}"
        return f"{self.desc}: {dt:.1f}s{end}" if end else f"{self.desc}: {_SPIN[self.ticks % 4]} {dt:.1f}s"

    def update_to(self, n: int) -> None:
        self.n, self.ticks = n, self.ticks + 1
        if self.live:
            self.file.write("\r" + self._line())
            self.file.flush()

    def close(self, ok: bool) -> None:
        self.file.write(("\r" if self.live else "") + self._line(" done" if ok else " failed") + "\n")
        self.file.flush()


class _TqdmBar:
    def __init__(self, desc: str, total: Optional[int], file: Optional[TextIO]) -> None:
        tqdm = None
        if file is None and in_notebook():
            import importlib.util

            if importlib.util.find_spec("ipywidgets") is not None:
                from tqdm.notebook import tqdm
        if tqdm is None:
            from tqdm.std import tqdm
        fmt = None if total else "{desc}: {elapsed}{postfix}"
        self.bar = tqdm(total=total, desc=desc, file=file, unit="B", unit_scale=True, unit_divisor=1024,
                        bar_format=fmt, leave=True)

    def update_to(self, n: int) -> None:
        if self.bar.total:
            self.bar.update(n - self.bar.n)
        else:
            self.bar.refresh()

    def close(self, ok: bool) -> None:
        if not self.bar.total:
            self.bar.set_postfix_str("done" if ok else "failed", refresh=False)
        self.bar.close()


def _has_tqdm() -> bool:
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def progress_bar(
    desc: str,
    *,
    enabled: Optional[bool] = None,
    total: Optional[int] = None,
    poll: Optional[Callable[[], int]] = None,
    interval: float = 0.1,
    delay: Optional[float] = None,
    file: Optional[TextIO] = None,
    use_tqdm: Optional[bool] = None,
) -> Iterator[None]:
    """Show a bar while the `with` body runs.

    enabled: True / False, or None = only where it helps (`interactive()`).
    total, poll: the work's size and a function returning how far it got (polled every
    `interval` s on a helper thread); without them, a spinner with the elapsed time.
    delay: draw nothing if the body ends sooner (default 0.3 s when enabled is None,
    else 0). On success the bar ends at 100%; on an exception it ends where it was.
    use_tqdm: None = tqdm when installed. No output at all when enabled is False.
    """
    if enabled is False or (enabled is None and not interactive(file)):
        yield
        return
    if delay is None:
        delay = 0.3 if enabled is None else 0.0
    if use_tqdm is None:
        use_tqdm = _has_tqdm()
    stop = threading.Event()
    outcome = {"ok": False}

    def run() -> None:
        if stop.wait(delay):
            return  # finished before it was worth showing
        bar = (_TqdmBar if use_tqdm else _TextBar)(desc, total, file)
        try:
            while True:
                bar.update_to(_safe(poll))
                if stop.wait(interval):
                    break
            if outcome["ok"] and total:
                bar.update_to(total)
        finally:
            bar.close(outcome["ok"])

    t = threading.Thread(target=run, name="llamars-progress", daemon=True)
    t.start()
    try:
        yield
        outcome["ok"] = True
    finally:
        stop.set()
        t.join()


def _safe(poll: Optional[Callable[[], int]]) -> int:
    if poll is None:
        return 0
    try:
        return int(poll())
    except (OSError, ValueError):
        return 0
