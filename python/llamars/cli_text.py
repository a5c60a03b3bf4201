"""What `llamars-server` prints instead of serving: --help (llama-server's layout),
--version, -cl (the model cache), --completion-bash, --list-devices."""
from __future__ import annotations

import platform
import sys
import textwrap
from typing import List

from .cli_options import OPTIONS, C, Opt, S, X
from .cli_opt import split_names as _split
from .devices import devices_text

PROG = "llamars-server"


_LEAD = 40  # llama.cpp's common_arg::to_string layout: 40-column flag column, help wrapped at 70
_WRAP = 70


def _flag_column(o: Opt) -> str:
    names = _split(o.names) + _split(o.neg)
    if len(names) == 1:
        s = names[0]
    else:  # first spelling (usually the short one) padded to 7 columns, as llama-server does
        first = names[0] + ", "
        s = first + " " * max(0, 7 - len(first)) + ", ".join(names[1:])
    return s + (" " + o.hint if o.hint else "")


def _format_opt(o: Opt) -> str:
    lead = " " * _LEAD
    left = _flag_column(o)
    out = left + ("\n" + lead if len(left) > _LEAD - 3 else " " * (_LEAD - len(left)))
    lines: List[str] = []
    note = (f"llamars: accepted, no effect ({o.inert})" if o.inert else
            f"llamars: {o.owner} is not available yet" if o.owner else "")
    for para in o.help.split("\n") + ([note] if note else []):
        lines.extend(textwrap.wrap(para, _WRAP) or [""])
    out += ("\n" + lead).join(lines) + "\n"
    if o.env:
        out += f"{lead}(env: {o.env})\n"
    return out


def help_text() -> str:
    parts = [f"usage: {PROG} [options]\n"]
    for section in (C, S, X):
        parts.append(f"\n----- {section} params -----\n\n")
        parts.extend(_format_opt(o) for o in OPTIONS if o.section == section)
    parts.append(
        "\nIf a flag and its environment variable are both set, the flag wins. Boolean variables accept\n"
        "1/0, true/false, on/off, yes/no, enabled/disabled.\n"
        f"\nexample usage: {PROG} -m model.gguf -c 4096 --host 0.0.0.0 --port 8080\n"
    )
    return "".join(parts)


def version_text() -> str:
    from ._core import __version__

    return (
        f"version: {__version__} (llamars)\n"
        f"built with llamars (Rust core, Python {platform.python_version()}) for {platform.machine()}-{sys.platform}"
    )


def cache_list_text() -> str:
    """-cl: the GGUF files in llamars's cache (where the Gemma reference model is assembled)."""
    from .models import cache_dir

    d = cache_dir()
    files = sorted(p for p in d.glob("*.gguf") if p.is_file()) if d.is_dir() else []
    if not files:
        return f"no models in the cache ({d})"
    lines = [f"models in the cache ({d}):"]
    lines += [f"  {i + 1:>3}. {p.name}  ({p.stat().st_size / 2**20:.1f} MiB)" for i, p in enumerate(files)]
    return "\n".join(lines)


_FILE_KINDS = ("textfile", "keyfile", "jsonfile")


def completion_bash_text() -> str:
    """--completion-bash: a bash completion script for llamars-server's flags (file
    names after the flags that take a path)."""
    names = sorted({n for o in OPTIONS for n in _split(o.names) + _split(o.neg)})
    files = sorted({n for o in OPTIONS if o.kind in _FILE_KINDS or o.hint in ("FNAME", "FILE", "PATH", "DIR")
                    for n in _split(o.names)})
    fn = "_llamars_server_completions"
    return (
        f"{fn}() {{\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}"\n'
        '    local prev="${COMP_WORDS[COMP_CWORD-1]}"\n'
        f'    case "$prev" in\n        {"|".join(files)})\n'
        '            COMPREPLY=( $(compgen -f -- "$cur") )\n            return 0\n            ;;\n    esac\n'
        f'    COMPREPLY=( $(compgen -W "{" ".join(names)}" -- "$cur") )\n'
        "}\n"
        f"complete -F {fn} {PROG}\n"
    )


_ACTIONS = {"help": help_text, "version": version_text, "list_devices": devices_text, "cache_list": cache_list_text,
            "completion_bash": completion_bash_text}


