"""The command line as a list of llama-server options, before any value is converted:
what `cli.py` parses and what router mode passes on to each model's child server."""
from __future__ import annotations

import difflib
from typing import Dict, List, Optional, Sequence, Tuple

from .cli_opt import Opt, split_names
from .cli_options import OPTIONS


class CLIError(ValueError):
    """A bad command line or environment value; `main` prints it as `error: ...` and returns 1."""


_BY_NAME: Dict[str, Tuple[Opt, bool]] = {}
for _o in OPTIONS:
    for _n in split_names(_o.names):
        _BY_NAME[_n] = (_o, True)
    for _n in split_names(_o.neg):
        _BY_NAME[_n] = (_o, False)


def _unknown(name: str) -> CLIError:
    close = difflib.get_close_matches(name, list(_BY_NAME), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return CLIError(f"unknown argument: {name}{hint}")


def split_argv(argv: Sequence[str]) -> Tuple[List[Tuple[Opt, str, object]], Optional[str]]:
    """The command line as (option, flag as typed, raw value or the bool a flag sets), in
    order, and the action asked for ("help", "version", "list_devices" or None). Raises
    CLIError for an unknown flag, a removed one or a missing value."""
    out: List[Tuple[Opt, str, object]] = []
    action: Optional[str] = None
    args = list(argv)
    i = 0
    while i < len(args):
        tok = args[i]
        i += 1
        if not tok.startswith("-") or tok in ("-", "--"):
            raise CLIError(f"unknown argument: {tok} (llama-server takes no positional arguments; use -m FNAME)")
        name, inline = tok, None
        if tok.startswith("--"):
            if "=" in tok:
                name, inline = tok.split("=", 1)
            name = name.replace("_", "-")  # as llama.cpp does for long flags
        hit = _BY_NAME.get(name)
        if hit is None:
            raise _unknown(tok.split("=", 1)[0])
        o, positive = hit
        if o.removed:
            raise CLIError(f'error while handling argument "{name}": the argument has been removed. {o.removed}')
        if o.kind == "action":
            if o.dest in ("@help", "@version"):  # llama-server acts on these as soon as it sees them
                return out, o.dest[1:]
            action = o.dest[1:]
            continue
        if o.kind == "bool":
            if inline is not None:
                raise CLIError(f"argument {name} takes no value")
            out.append((o, name, positive))
            continue
        if inline is None:
            if i >= len(args):
                raise CLIError(f"argument {name} expects a value ({o.hint})")
            inline = args[i]
            i += 1
        if o.kind == "pair":  # START END: two values
            if i >= len(args):
                raise CLIError(f"argument {name} expects two values ({o.hint})")
            inline = f"{inline} {args[i]}"
            i += 1
        out.append((o, name, inline))
    return out, action


def option_tokens(o: Opt, name: str, raw: object) -> List[str]:
    """One item of `split_argv` written back as command-line tokens."""
    if o.kind == "bool":
        return [name]
    if o.kind == "pair":
        return [name, *str(raw).split(" ", 1)]
    return [name, str(raw)]


