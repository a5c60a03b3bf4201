"""Scanning JSON that may still be arriving: where a value ends (or that it has not
ended yet), the fields of an object, and the text decoded so far from a string. Used
to turn streamed model output into tool-call deltas as it grows."""
from __future__ import annotations

import json
import re
from typing import Dict, Optional, Tuple

_WS = " \t\r\n"
_LITERAL = re.compile(r"-?(?:\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|true|false|null")


def skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def string_end(s: str, i: int) -> Optional[int]:
    """`s[i]` is an opening quote: the index after the closing quote, or None."""
    j = i + 1
    while j < len(s):
        c = s[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return j + 1
        j += 1
    return None


def value_end(s: str, i: int) -> Optional[int]:
    """The index just after the JSON value starting at `s[i]`, or None while it is
    incomplete (or, for a malformed value, never complete)."""
    if i >= len(s):
        return None
    c = s[i]
    if c == '"':
        return string_end(s, i)
    if c in "{[":
        depth, j = 0, i
        while j < len(s):
            c = s[j]
            if c == '"':
                e = string_end(s, j)
                if e is None:
                    return None
                j = e
                continue
            if c in "{[":
                depth += 1
            elif c in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return None
    m = _LITERAL.match(s, i)
    if not m or m.end() == len(s):  # a number at the end may still grow
        return None
    return m.end()


def object_fields(s: str, i: int) -> Tuple[Dict[str, Tuple[int, Optional[int]]], Optional[int]]:
    """Fields of the object starting at `s[i]` (`{`): key → (value start, value end or
    None while incomplete), and the index after the object (None while incomplete)."""
    fields: Dict[str, Tuple[int, Optional[int]]] = {}
    j = skip_ws(s, i + 1)
    while j < len(s):
        if s[j] == "}":
            return fields, j + 1
        if s[j] == ",":
            j = skip_ws(s, j + 1)
            continue
        if s[j] != '"':
            return fields, None
        ke = string_end(s, j)
        if ke is None:
            return fields, None
        key = json.loads(s[j:ke])
        j = skip_ws(s, ke)
        if j >= len(s) or s[j] != ":":
            return fields, None
        j = skip_ws(s, j + 1)
        if j >= len(s):
            return fields, None
        ve = value_end(s, j)
        fields[key] = (j, ve)
        if ve is None:
            return fields, None
        j = skip_ws(s, ve)
    return fields, None


_ESC = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def partial_string(s: str, i: int) -> str:
    """The text of the JSON string starting at `s[i]` decoded as far as it has arrived
    (an escape cut in half is left out until it is complete)."""
    out, j = [], i + 1
    while j < len(s):
        c = s[j]
        if c == '"':
            break
        if c == "\\":
            if j + 1 >= len(s):
                break
            e = s[j + 1]
            if e == "u":
                if j + 6 > len(s):
                    break
                code = int(s[j + 2 : j + 6], 16) if re.fullmatch(r"[0-9a-fA-F]{4}", s[j + 2 : j + 6]) else 0xFFFD
                if 0xD800 <= code < 0xDC00:  # a surrogate pair needs its second half
                    if j + 12 > len(s):
                        break
                    try:
                        out.append(json.loads('"' + s[j : j + 12] + '"'))
                    except ValueError:
                        out.append("\ufffd")
                    j += 12
                    continue
                out.append(chr(code))
                j += 6
                continue
            out.append(_ESC.get(e, e))
            j += 2
            continue
        out.append(c)
        j += 1
    return "".join(out)
