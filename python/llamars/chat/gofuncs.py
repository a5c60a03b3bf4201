"""The values and functions of Go templates (gotemplate.py): how a value prints, what is
true, and the functions Go predefines plus the sprig ones LocalAI's templates use."""
from __future__ import annotations

import json
import re
from typing import Any, Tuple

from .templates import TemplateError

NO_VALUE = "<no value>"


class _Missing:
    def __str__(self) -> str:
        return NO_VALUE


MISSING = _Missing()


def _truth(v: Any) -> bool:
    return not (v is None or v is MISSING or v is False or v == 0 and not isinstance(v, bool) or
                (isinstance(v, (str, list, tuple, dict)) and len(v) == 0))


def _text(v: Any) -> str:
    if v is None:
        return "<nil>"
    if v is True or v is False:
        return "true" if v else "false"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    if isinstance(v, (list, tuple)):
        return "[" + " ".join(_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{_text(x)}" for k, x in sorted(v.items())) + "]"
    return str(v)


def _printf(fmt: str, *args: Any) -> str:
    out, ai = [], 0
    i = 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%" or i + 1 >= len(fmt):
            out.append(c)
            i += 1
            continue
        m = re.match(r"%([-+ 0#]*)(\d*)(?:\.(\d+))?([vsdqfgtxX%])", fmt[i:])
        if not m:
            out.append(c)
            i += 1
            continue
        verb = m.group(4)
        i += m.end()
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            out.append(f"%!{verb}(MISSING)")
            continue
        a = args[ai]
        ai += 1
        if verb in "vs":
            s = _text(a)
        elif verb == "q":
            s = json.dumps(_text(a), ensure_ascii=False)
        elif verb == "d":
            s = str(int(a)) if isinstance(a, (int, float)) and not isinstance(a, bool) else f"%!d({_text(a)})"
        elif verb in "fg":
            prec = int(m.group(3)) if m.group(3) else 6
            s = f"{float(a):.{prec}f}" if verb == "f" else f"{float(a):g}"
        elif verb == "t":
            s = _text(bool(a))
        else:
            s = format(int(a), "x" if verb == "x" else "X")
        width = int(m.group(2)) if m.group(2) else 0
        s = s.ljust(width) if "-" in m.group(1) else s.rjust(width)
        out.append(s)
    return "".join(out)


def _cmp(a: Any, b: Any) -> Tuple[Any, Any]:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a, b
    return _text(a), _text(b)


def _len(v: Any) -> int:
    if v is None or v is MISSING:
        raise TemplateError("len of nil")
    return len(v)


def _index(v: Any, *keys: Any) -> Any:
    for k in keys:
        if isinstance(v, dict):
            v = v.get(k, MISSING)
        elif isinstance(v, (list, tuple, str)) and isinstance(k, int):
            if not 0 <= k < len(v):
                raise TemplateError(f"index out of range: {k}")
            v = v[k]
        else:
            raise TemplateError(f"cannot index {type(v).__name__} with {k!r}")
    return v


FUNCS = {
    "and": lambda *a: next((x for x in a if not _truth(x)), a[-1] if a else None),
    "or": lambda *a: next((x for x in a if _truth(x)), a[-1] if a else None),
    "not": lambda a: not _truth(a),
    "eq": lambda a, *bs: any(_cmp(a, b)[0] == _cmp(a, b)[1] for b in bs),
    "ne": lambda a, b: _cmp(a, b)[0] != _cmp(a, b)[1],
    "lt": lambda a, b: _cmp(a, b)[0] < _cmp(a, b)[1],
    "le": lambda a, b: _cmp(a, b)[0] <= _cmp(a, b)[1],
    "gt": lambda a, b: _cmp(a, b)[0] > _cmp(a, b)[1],
    "ge": lambda a, b: _cmp(a, b)[0] >= _cmp(a, b)[1],
    "len": _len,
    "index": _index,
    "slice": lambda v, *ij: v[ij[0]:ij[1]] if len(ij) == 2 else v[ij[0]:] if ij else v,
    "print": lambda *a: "".join(_text(x) for x in a),
    "println": lambda *a: " ".join(_text(x) for x in a) + "\n",
    "printf": _printf,
    "toJson": lambda v: json.dumps(None if v is MISSING else v, ensure_ascii=False, separators=(",", ":")),
    "trim": lambda s: _text(s).strip(),
    "upper": lambda s: _text(s).upper(),
    "lower": lambda s: _text(s).lower(),
    "contains": lambda sub, s: _text(sub) in _text(s),
    "hasPrefix": lambda s, p: _text(s).startswith(_text(p)),
    "hasSuffix": lambda s, p: _text(s).endswith(_text(p)),
    "replace": lambda old, new, s: _text(s).replace(_text(old), _text(new)),
    "join": lambda sep, items: _text(sep).join(_text(x) for x in (items or [])),
    "default": lambda d, v=None: v if _truth(v) else d,
}
