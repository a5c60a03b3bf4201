"""What router mode can serve: the GGUF models of `--models-dir` and the sections of
`--models-preset` (llama-server's INI format), each with the command line its child
server starts with.

Directory rules, as llama-server's: a top-level `NAME.gguf` is the model `NAME`; a
subdirectory is one model named after it (its `-00001-of-` shard, else its GGUF; files
with `mmproj` in the name are projectors, `mtp-` / `dspark-` / `dflash-` ones drafts, not
models). Here LoRA adapters (`general.type = adapter`) are left out as well.

LocalAI model configs (`*.yaml`) are models too (localai.py).

Preset rules: each `[section]` is a model (or the options of the directory model of that
name), `[*]` holds options for every model, keys are flag names without dashes, short
flags, or `LLAMA_ARG_*` names; `load-on-startup` and `stop-timeout` are the preset's own.
Precedence: the router's command line, then the model's section, then `[*]`."""
from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Tuple

from ..cli_argv import option_tokens
from ..cli_opt import Opt, split_names
from .entry import _KEYS, PRESET_ONLY, RESERVED, CatalogError, Entry
from .localai import scan_yaml

_DRAFT_PREFIXES = ("mtp-", "dspark-", "dflash-")  # draft-model sidecars, not models

def _is_adapter(path: str) -> bool:
    from .. import _core

    try:
        meta = _core.inspect(path)["metadata"]
    except Exception:  # a file that cannot be read is still listed: it fails when loaded, with the reason
        return False
    return any(k == "general.type" and v == "adapter" for k, _, v in meta)


def scan_dir(models_dir: str) -> Dict[str, Entry]:
    if not os.path.isdir(models_dir):
        raise CatalogError(f"--models-dir: {models_dir!r} does not exist or is not a directory")
    out: Dict[str, Entry] = {}
    for name in sorted(os.listdir(models_dir)):
        full = os.path.join(models_dir, name)
        if os.path.isdir(full):
            model = shard = None
            for f in sorted(os.listdir(full)):
                if not f.endswith(".gguf") or "mmproj" in f or f.startswith(_DRAFT_PREFIXES):
                    continue
                if "-00001-of-" in f:
                    shard = os.path.join(full, f)
                elif not re.search(r"-\d{5}-of-\d{5}\.gguf$", f):
                    model = os.path.join(full, f)
            path = shard or model
            if path and not _is_adapter(path):
                out[name] = Entry(name, path, "models_dir")
        elif name.endswith(".gguf") and "mmproj" not in name and not name.startswith(_DRAFT_PREFIXES):
            if re.search(r"-\d{5}-of-\d{5}\.gguf$", name) and "-00001-of-" not in name:
                continue  # (a later shard of a split model at the top level)
            if not _is_adapter(full):
                out[name[: -len(".gguf")]] = Entry(name[: -len(".gguf")], full, "models_dir")
    return out


def parse_ini(text: str, where: str) -> Dict[str, Dict[str, str]]:
    """llama-server's preset INI: `[section]` headers, `key = value` lines, `;` / `#`
    comments (also after a value); keys before any header belong to the default section."""
    out: Dict[str, Dict[str, str]] = {}
    section = ""
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s[0] in ";#":
            continue
        m = re.fullmatch(r"\[\s*([^\]]+?)\s*\]\s*(?:[;#].*)?", s)
        if m:
            section = m.group(1)
            out.setdefault(section, {})
            continue
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*(?:[;#].*)?", s)
        if not m:
            raise CatalogError(f"{where}:{n}: expected [section] or key = value, got {s[:80]!r}")
        out.setdefault(section, {})[m.group(1)] = m.group(2)
    return out


def _truthy(v: str) -> bool:
    return v.strip().lower() in ("1", "true", "on", "yes", "enabled")


def _options(section: str, kv: Dict[str, str], where: str) -> Tuple[List[Tuple[Opt, str, object]], Dict[str, str]]:
    opts: List[Tuple[Opt, str, object]] = []
    own: Dict[str, str] = {}
    for key, value in kv.items():
        if key in PRESET_ONLY:
            own[key] = value
            continue
        hit = _KEYS.get(key)
        if hit is None:
            raise CatalogError(f"{where}: option {key!r} not recognized in preset {section!r}")
        o, positive = hit
        first = split_names(o.names)[-1]
        if o.kind == "bool":
            on = _truthy(value) == positive
            if not on and not o.neg:
                continue
            opts.append((o, first if on else split_names(o.neg)[0], on))
        else:
            opts.append((o, first, value))
    return opts, own


def load_preset(path: str, local: Dict[str, Entry]) -> Dict[str, Entry]:
    """The preset file's models merged into `local` (the directory's): a section named as a
    directory model sets its options; any other needs `model`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise CatalogError(f"--models-preset: cannot read {path!r}: {e.strerror or e}") from None
    sections = parse_ini(text, path)
    glob_opts, glob_own = _options("*", sections.pop("*", {}), path)
    sections.pop("", None)  # (only `version` and the like live outside a section)
    out = dict(local)
    for name, kv in sections.items():
        opts, own = _options(name, kv, path)
        own = {**glob_own, **own}
        model = next((raw for o, _, raw in opts if o.dest == "model"), None)
        opts = [x for x in opts if x[0].dest != "model"]
        base = out.get(name)
        if base is None and model is None:
            raise CatalogError(f"{path}: preset {name!r} names no model file and no model of --models-dir is called so; "
                               "add model = /path/to/file.gguf")
        e = Entry(name, str(model) if model is not None else base.path, "preset" if base is None else base.source)
        mine = {o.dest for o, _, _ in opts}
        e.options = [x for x in glob_opts if x[0].dest not in mine] + opts  # (the section's own win over [*])
        e.load_on_startup = _truthy(own.get("load-on-startup", "false"))
        try:
            e.stop_timeout = float(own.get("stop-timeout", "10"))
        except ValueError:
            raise CatalogError(f"{path}: preset {name!r}: stop-timeout must be a number of seconds") from None
        out[name] = e
    for name, e in out.items():
        if name not in sections and glob_opts:
            e.options = glob_opts + e.options
    return out


def catalog(models_dir: Optional[str], preset: Optional[str]) -> Tuple[Dict[str, Entry], List[str]]:
    """(models by name, notes on what was read but is not acted on)."""
    local = scan_dir(models_dir) if models_dir else {}
    notes: List[str] = []
    if models_dir:
        configs, notes = scan_yaml(models_dir)
        local.update(configs)  # (a config named as a GGUF file is that model, configured)
    return (load_preset(preset, local) if preset else local), notes


def child_args(entry: Entry, router_items: List[Tuple[Opt, str, object]]) -> List[str]:
    """The child's flags, without the ones the router sets: the preset's (`[*]`, then the
    model's section), overridden by the router's command line, as llama-server; a LocalAI
    config's settings override the command line instead, as LocalAI's always win."""
    by_dest: Dict[str, List[Tuple[Opt, str, object]]] = {}
    own = [(_KEYS["model-config"][0], "--model-config", entry.config_path)] if entry.config_path else entry.options
    layers = (router_items, own) if entry.source == "localai" else (own, router_items)
    for layer in layers:
        seen: Dict[str, List[Tuple[Opt, str, object]]] = {}
        for o, name, raw in layer:
            if o.dest in RESERVED or o.kind == "action":
                continue
            seen.setdefault(o.dest, []).append((o, name, raw))
        by_dest.update(seen)  # a later layer replaces the whole option (lists included)
    out: List[str] = []
    for items in by_dest.values():
        for o, name, raw in items:
            out += option_tokens(o, name, raw)
    return out
