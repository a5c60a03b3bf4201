"""llama-server's command line (same flags, short forms, defaults and `LLAMA_ARG_*`
environment variables) parsed into a `ServerConfig`; `cli.py` starts the server with it.

Only the flags llamars implements are accepted; anything else is an error that suggests
the nearest known flag. An environment variable applies when its flag is not on the
command line (the command line wins)."""
from __future__ import annotations

import json
import math
import os
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from .cli_argv import _BY_NAME, CLIError, split_argv
from .cli_options import KV_TYPES, OPTIONS, SPEC_TYPES, Opt
from .cli_text import help_text, version_text
from .config import SamplingDefaults, ServerConfig


# Where llama-server's documented default differs from ServerConfig's field default, the CLI
# uses llama-server's (the README is the contract for a drop-in replacement).

_TRUE = ("1", "true", "on", "yes", "enabled")
_FALSE = ("0", "false", "off", "no", "disabled")




def _bad(label: str, raw: object, why: str) -> CLIError:
    return CLIError(f"invalid value for {label}: {raw!r} ({why})")


def _check_range(o: Opt, label: str, v: float) -> None:
    if o.lo is not None and o.hi is not None and not o.lo <= v <= o.hi:
        raise _bad(label, v, f"must be between {o.lo:g} and {o.hi:g}")
    if o.lo is not None and v < o.lo:
        raise _bad(label, v, f"must be >= {o.lo:g}")
    if o.hi is not None and v > o.hi:
        raise _bad(label, v, f"must be <= {o.hi:g}")


def _to_int(label: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise _bad(label, raw, "expected an integer") from None


def _to_bool(label: str, raw: str) -> bool:
    v = raw.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise _bad(label, raw, "expected a boolean: 1/0, true/false, on/off, yes/no, enabled/disabled")


def _read_key_file(label: str, path: str) -> List[str]:
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise CLIError(f"{label}: cannot read {path!r}: {e.strerror or e}") from None
    return [s for s in (ln.strip() for ln in lines) if s and not s.startswith("#")]


def _duration(raw: str) -> float:
    """`--responses-ttl`: seconds, or a number with s / m / h / d; 0 keeps responses forever."""
    s = raw.strip().lower()
    scale = {"s": 1, "m": 60, "h": 3600, "d": 86400}.get(s[-1:], None)
    num = s[:-1] if scale else s
    try:
        v = float(num) * (scale or 1)
    except ValueError:
        raise ValueError("expected seconds or a duration such as 90s, 30m, 12h, 7d") from None
    if not v >= 0 or v == float("inf"):
        raise ValueError("expected a duration >= 0")
    return v


def _convert(o: Opt, label: str, raw: str) -> object:
    """One value of option `o` (given as `label`: the flag or the environment variable)."""
    k = o.kind
    if k == "bool":
        return _to_bool(label, raw)
    if k in ("int", "threads"):
        v = _to_int(label, raw)
        if k == "threads":  # llama-server: -1 (and 0) = auto
            if v < -1:
                raise _bad(label, v, "must be a positive number of threads, or -1 for auto")
            return None if v <= 0 else v
        _check_range(o, label, v)
        return v
    if k == "float":
        try:
            f = float(raw.strip())
        except ValueError:
            raise _bad(label, raw, "expected a number") from None
        if not math.isfinite(f):
            raise _bad(label, raw, "expected a finite number")
        _check_range(o, label, f)
        return f
    if k == "choice":
        if raw not in o.choices:
            raise _bad(label, raw, "expected one of: " + ", ".join(o.choices))
        return raw
    if k == "list":
        return [s.strip() for s in raw.split(",") if s.strip()]
    if k == "keys":
        return [s.strip() for s in raw.split(",") if s.strip()]
    if k == "keyfile":
        return _read_key_file(label, raw)
    if k == "duration":
        try:
            return _duration(raw)
        except ValueError as e:
            raise _bad(label, raw, str(e)) from None
    if k == "prefix":
        return raw.rstrip("/")
    if k == "json":
        try:
            d = json.loads(raw)
        except ValueError as e:
            raise _bad(label, raw, f"invalid JSON: {e}") from None
        if not isinstance(d, dict):
            raise _bad(label, raw, "must be a JSON object")
        return d
    if k == "textfile":
        try:
            with open(raw, encoding="utf-8") as f:
                return f.read()
        except OSError as e:
            raise _bad(label, raw, f"cannot read the file: {e.strerror}") from None
    if k == "tristate":  # llama.cpp's is_truthy / is_falsey / is_autoy
        v = raw.strip()
        if v in ("on", "enabled", "true", "1"):
            return "on"
        if v in ("off", "disabled", "false", "0"):
            return "off"
        if v in ("auto", "-1"):
            return "auto"
        raise _bad(label, raw, "expected on, off or auto")
    if k == "kvtype":
        if raw not in KV_TYPES:
            raise _bad(label, raw, "expected one of: " + ", ".join(KV_TYPES))
        return raw
    if k == "spectype":
        v = [s.strip() for s in raw.split(",") if s.strip()]
        bad = [x for x in v if x not in SPEC_TYPES]
        if bad:
            raise _bad(label, raw, "expected a comma-separated list of: " + ", ".join(SPEC_TYPES))
        later = [x for x in v if x.startswith("draft-") and x != "draft-simple"]
        if later:
            raise CLIError(f"{label}: speculative decoding type '{later[0]}' needs a draft head (EAGLE-3, MTP, DFlash) "
                           "that llamars does not run yet; use draft-simple with -md, or ngram-simple, ngram-map-k, "
                           "ngram-map-k4v, ngram-mod or ngram-cache")
        return v
    if k == "append":
        return raw
    if k == "files":  # FNAME[,FNAME...]: scale 1
        files = [f.strip() for f in raw.split(",") if f.strip()]
        if not files:
            raise _bad(label, raw, "expected a file path (comma-separated for several)")
        return [[f, 1.0] for f in files]
    if k == "filescales":  # FNAME:SCALE[,FNAME:SCALE...]
        out = []
        for part in raw.split(","):
            f, sep, s = part.strip().rpartition(":")
            try:
                if not (sep and f):
                    raise ValueError
                scale = float(s)
                if scale != scale or scale in (float("inf"), float("-inf")):
                    raise ValueError
            except ValueError:
                raise _bad(label, raw, "expected FNAME:SCALE pairs, comma-separated, e.g. adapter.gguf:0.5") from None
            out.append([f, scale])
        return out
    if k == "bias":  # TOKEN_ID(+/-)BIAS, as llama.cpp reads it
        m = re.fullmatch(r"\s*(-?\d+)\s*([+-])\s*(\S+)\s*", raw)
        try:
            if not m:
                raise ValueError
            bias = float(m.group(3)) * (-1.0 if m.group(2) == "-" else 1.0)
        except ValueError:
            raise _bad(label, raw, "invalid input format: expected TOKEN_ID+BIAS or TOKEN_ID-BIAS, e.g. 15043+1") from None
        return [int(m.group(1)), bias]
    if k == "pair":  # START END: two integers
        try:
            a, b = (int(x) for x in raw.split())
        except ValueError:
            raise _bad(label, raw, "expected two integers, START END") from None
        return [a, b]
    if k == "mibs":  # MiB per device, comma-separated
        for part in raw.split(","):
            if not part.strip().isdigit():
                raise _bad(label, raw, "expected MiB as non-negative integers, comma-separated")
        return raw
    if k == "jsonfile":
        try:
            with open(raw, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise _bad(label, raw, f"cannot read the file: {e.strerror}") from None
        try:
            return json.loads(text)
        except ValueError as e:
            raise _bad(label, raw, f"invalid JSON: {e}") from None
    if k == "ngl":
        s = raw.strip().lower()
        if s in ("auto", "all"):
            return s
        v = _to_int(label, raw)
        if v < -1:
            raise _bad(label, v, "expected a number of layers >= 0, 'auto' or 'all'")
        return str(v)
    return raw  # str


def _with_model_config(items: list, env: Mapping[str, str]) -> Tuple[list, List[str]]:
    """--model-config FILE (or LLAMARS_MODEL_CONFIG): the LocalAI config's settings after the
    command line's (so they win, as LocalAI's do) and its model when -m is not given."""
    path = next((raw for o, _, raw in reversed(items) if o.dest == "model_config"), None) or env.get("LLAMARS_MODEL_CONFIG")
    if not path:
        return items, []
    from .router.catalog import CatalogError
    from .router.localai import load_yaml

    try:
        entry, notes = load_yaml(str(path), os.path.dirname(os.path.abspath(str(path))))
    except CatalogError as e:
        raise CLIError(f"--model-config: {e}") from None
    if entry is None:
        raise CLIError(f"--model-config: {notes[0] if notes else path}")
    if entry.refused:
        raise CLIError(f"--model-config: {entry.refused}")
    out = list(items) + entry.options
    if not any(o.dest == "model" for o, _, _ in items):
        out.append((_BY_NAME["-m"][0], "-m", entry.path))
    if not any(o.dest == "alias" for o, _, _ in items):
        out.append((_BY_NAME["--alias"][0], "--alias", entry.name))
    return out, notes


def _parse(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> Tuple[ServerConfig, Optional[str]]:
    """(config, action): action is "help", "version", "list_devices" or None."""
    env = os.environ if env is None else env
    items_, action = split_argv(argv)
    if action in ("help", "version"):
        return ServerConfig(), action
    items_, notes = _with_model_config(items_, env)
    given: Dict[Opt, List[Tuple[str, object]]] = {}  # option -> [(flag as typed, raw value or bool)]
    for o, name, raw in items_:
        given.setdefault(o, []).append((name, raw))

    values: Dict[str, object] = {}
    keys: List[str] = []
    warnings: List[str] = []
    for o in OPTIONS:
        if o.kind == "action":
            continue
        if o in given:
            items = given[o]
        elif o.env and env.get(o.env, "").strip():
            items = [(o.env, env[o.env])]
        else:
            continue
        for label, raw in items:
            if o.removed:  # set through its environment variable
                raise CLIError(f'error while handling argument "{label}": the argument has been removed. {o.removed}')
            v = raw if isinstance(raw, bool) else _convert(o, label, raw)  # type: ignore[arg-type]
            if o.owner:
                if _owner_default(o, v):
                    continue
                raise CLIError(f"{label}: {o.owner} is not available in llamars yet; start without {label}")
            if o.inert:
                if o.off_ok and v is False:
                    continue
                warnings.append(f"warning: {label} has no effect in llamars: {o.inert}")
                continue
            if o.kind in ("keys", "keyfile"):
                keys.extend(v)  # type: ignore[arg-type]
            elif o.kind in ("files", "filescales"):
                values.setdefault(o.dest, []).extend(v)  # type: ignore[union-attr,arg-type]
            elif o.kind == "append":
                values.setdefault(o.dest, []).append(v)  # type: ignore[union-attr]
            elif o.kind == "bias":
                values.setdefault(o.dest, []).append(v)  # type: ignore[union-attr]
            else:
                values[o.dest] = v
    if keys:
        values["api_keys"] = list(dict.fromkeys(keys))
    breakers = values.get("sampling.dry_sequence_breakers")
    if breakers is not None:  # the first one clears llama.cpp's defaults; "none" clears all
        out: List[str] = []
        for b in breakers:  # type: ignore[union-attr]
            out = [] if b == "none" else out + [b]
        values["sampling.dry_sequence_breakers"] = out
    budget = values.get("reasoning_budget")
    if isinstance(budget, int) and budget > 0:
        warnings.append(f"warning: --reasoning-budget {budget} is not enforced in llamars: thinking is not cut "
                        "(use 0 to turn thinking off)")
    if values.get("agent") and not values.get("tools"):
        values["tools"] = ["all"]
    if values.get("tools"):
        from .agent.toolbox import builtin_names

        try:
            builtin_names(values["tools"])  # type: ignore[arg-type]
        except ValueError as e:
            raise CLIError(f"--tools: {e}") from None
    sampling = {k.split(".", 1)[1]: v for k, v in values.items() if k.startswith("sampling.")}
    top = {k: v for k, v in values.items() if not k.startswith("sampling.")}
    config = ServerConfig(**top, sampling=SamplingDefaults(**sampling))
    config.warnings = warnings + ([] if env.get("LLAMARS_ROUTER_CHILD") else [f"warning: {n}" for n in notes])
    return config, action


def _owner_default(o: Opt, v: object) -> bool:
    """True when a flag of a feature llamars has not built only asks for what llamars does
    anyway (the feature off, an f16 KV cache, no speculative decoding)."""
    if o.kind == "bool":
        return v is False
    if o.kind == "kvtype":
        return v == "f16"
    if o.kind == "spectype":
        return v == ["none"] or v == []
    return False


def parse_args(argv: Sequence[str], env: Optional[Mapping[str, str]] = None) -> ServerConfig:
    """llama-server's flags and `LLAMA_ARG_*` variables (`env`, default os.environ) -> ServerConfig.

    Raises CLIError for a bad argument or value. `--help` and `--version` print their
    text and raise SystemExit(0); `--list-devices` is acted on by `main` only."""
    config, action = _parse(argv, env)
    if action == "help":
        print(help_text())
        raise SystemExit(0)
    if action == "version":
        print(version_text())
        raise SystemExit(0)
    return config
