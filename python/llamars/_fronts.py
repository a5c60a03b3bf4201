"""Late binding between the core `Engine` and the fronts built on it.

`Engine` imports nothing above it; the modules that build on it (the chat turn, the
asyncio front, the notebook view) register their entry points here when they are
imported, and the package's `__init__` imports them all, so `Engine.chat`,
`Engine.astream` and the Jupyter view work for every user of `llamars`."""
from __future__ import annotations

from typing import Any, Callable, Dict

_FRONTS: Dict[str, Callable[..., Any]] = {}


def register(name: str, fn: Callable[..., Any]) -> None:
    _FRONTS[name] = fn


def get(name: str) -> Callable[..., Any]:
    try:
        return _FRONTS[name]
    except KeyError:
        raise RuntimeError(f"llamars: the {name!r} front is not loaded; import llamars (not llamars.engine alone)") from None
