"""`llamars.Router`: router mode's catalog in this process, for scripts and notebooks.

    from llamars import Router
    with Router("models/", max_loaded=2) as router:
        print(router.names())
        print(router.engine("qwen2.5-1.5b").generate("Hello", max_tokens=8).text)

The same catalog as `llamars-server --models-dir` (GGUF files, split models, LocalAI YAML
configs, `--models-preset` INI); each model's settings (context size, slots, threads,
GPU layers, …) are read with the server's flag parser and become its `Engine`'s
arguments; keyword arguments of `Router` are flags for every model, as the server's
command line (`Router("models/", n_ctx=2048)`: `-c 2048`). An engine is loaded on first
use; past `max_loaded` the least recently used one is closed (its memory freed) first, so
do not keep engines you got from `engine()` past the next one you ask for. A model that
fails to load raises `ModelLoadError` and is marked failed with the reason; the others
are unaffected. Sampling defaults of presets and configs are the server's concern: they
are in `defaults(name)`, not applied to `Engine.generate`."""
from __future__ import annotations

import collections
import os
import threading
from typing import Dict, List, Tuple, Union

from ..cli_argv import split_argv
from ..cli_opt import Opt
from ..errors import InvalidRequestError, ModelLoadError
from .catalog import Entry, catalog, child_args

_FLAGS = {"n_ctx": "--ctx-size", "n_parallel": "--parallel", "n_threads": "--threads", "n_batch": "--batch-size",
          "n_gpu_layers": "--n-gpu-layers", "device": "--device", "cache_ram": "--cache-ram"}


class Router:
    def __init__(self, models_dir: Union[str, os.PathLike, None] = None, *, preset: Union[str, os.PathLike, None] = None,
                 max_loaded: int = 4, **flags: object) -> None:
        if models_dir is None and preset is None:
            raise InvalidRequestError("Router: give models_dir, preset or both")
        if max_loaded < 0:
            raise InvalidRequestError(f"max_loaded must be >= 0 (0 = no limit), got {max_loaded}")
        argv: List[str] = []
        for k, v in flags.items():
            if k not in _FLAGS:
                raise InvalidRequestError(f"Router: unknown setting {k!r} (one of: {', '.join(sorted(_FLAGS))})")
            argv += [_FLAGS[k], str(v)]
        items: List[Tuple[Opt, str, object]] = split_argv(argv)[0]
        entries, self.notes = catalog(os.fspath(models_dir) if models_dir is not None else None,
                                      os.fspath(preset) if preset is not None else None)
        self._entries: Dict[str, Entry] = entries
        self._args = {name: child_args(e, items) for name, e in entries.items()}
        self.max_loaded = max_loaded
        self._loaded: "collections.OrderedDict[str, object]" = collections.OrderedDict()  # oldest first
        self._failed: Dict[str, str] = {n: e.refused for n, e in entries.items() if e.refused}
        self._lock = threading.RLock()

    def names(self) -> List[str]:
        return sorted(self._entries)

    def status(self) -> Dict[str, dict]:
        """name -> {"value": "loaded" | "unloaded", "failed"?: True, "error"?: why}."""
        out = {}
        with self._lock:
            for n in self.names():
                st: dict = {"value": "loaded" if n in self._loaded else "unloaded"}
                if n in self._failed:
                    st.update(failed=True, error=self._failed[n])
                out[n] = st
        return out

    def _config(self, name: str):
        from ..cli_parse import parse_args

        e = self._entries[name]
        return parse_args([*self._args[name], "-m", e.path or ""], env={})

    def defaults(self, name: str) -> dict:
        """The sampling defaults the model's preset or config sets (the server applies them)."""
        import msgspec

        self._need(name)
        return msgspec.structs.asdict(self._config(name).sampling)

    def _need(self, name: str) -> Entry:
        e = self._entries.get(name)
        if e is None:
            raise InvalidRequestError(f"model {name!r} not found (models: {', '.join(self.names()) or 'none'})")
        return e

    def engine(self, name: str):
        """The model's Engine, loaded now if it is not (closing the least recently used
        one first when `max_loaded` are loaded)."""
        from ..engine import Engine

        e = self._need(name)
        with self._lock:
            if name in self._loaded:
                self._loaded.move_to_end(name)
                return self._loaded[name]
            if e.refused:
                raise ModelLoadError(e.refused)
            while self.max_loaded and len(self._loaded) >= self.max_loaded:
                self.unload(next(iter(self._loaded)))
            try:
                eng = Engine(e.path, **self._config(name).engine_kwargs())
            except Exception as exc:
                self._failed[name] = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, ModelLoadError):
                    raise
                raise ModelLoadError(f"{name}: {exc}") from exc
            self._failed.pop(name, None)
            self._loaded[name] = eng
            return eng

    def unload(self, name: str) -> bool:
        """Close the model's engine (True) or do nothing when it is not loaded (False)."""
        with self._lock:
            eng = self._loaded.pop(name, None)
        if eng is None:
            return False
        eng.close()
        return True

    def close(self) -> None:
        for n in list(self._loaded):
            self.unload(n)

    def __enter__(self) -> "Router":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Router({len(self._entries)} models, loaded: {', '.join(self._loaded) or 'none'})"

