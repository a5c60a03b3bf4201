"""edit_file's replacements, as llama-server applies them: every old_text must occur once
in the original (not incrementally), edits must not overlap, and when an old_text is not
found verbatim the match is retried on text normalised line by line (trailing whitespace
dropped, typographic quotes, dashes and spaces made ASCII); then only the lines an edit
touches come from the normalised text and every other line stays byte for byte."""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

_FOLD = {**{c: "'" for c in "\u2018\u2019\u201a\u201b"}, **{c: '"' for c in "\u201c\u201d\u201e\u201f"},
         **{chr(c): "-" for c in range(0x2010, 0x2016)}, "\u2212": "-", "\u00a0": " ",
         **{chr(c): " " for c in range(0x2002, 0x200b)}, "\u202f": " ", "\u205f": " ", "\u3000": " "}
_FOLD_RX = re.compile("|".join(map(re.escape, _FOLD)))


def _norm_line(line: str) -> str:
    return _FOLD_RX.sub(lambda m: _FOLD[m.group(0)], line.rstrip(" \t\r"))


def normalize(text: str) -> str:
    return "\n".join(_norm_line(x) for x in text.split("\n"))


def _count(hay: str, needle: str) -> int:
    n = pos = 0
    while needle:
        pos = hay.find(needle, pos)
        if pos < 0:
            break
        n, pos = n + 1, pos + len(needle)
    return n


def _replace(text: str, reps: List[Tuple[int, int, int, str]], offset: int = 0) -> str:
    for _i, at, length, new in reversed(reps):
        at -= offset
        text = text[:at] + new + text[at + length:]
    return text


def apply_edits(original: str, edits: List[Tuple[str, str]], path: str) -> Tuple[str, Optional[str]]:
    """(new content, None) or (original, error message)."""
    norm = normalize(original)
    fuzzy = False
    for i, (old, _new) in enumerate(edits):
        if old in original:
            continue
        if normalize(old) not in norm:
            return original, f"could not find edits[{i}].old_text in {path}, it must match the file's current content exactly"
        fuzzy = True
    base = norm if fuzzy else original
    reps = []
    for i, (old, new) in enumerate(edits):
        n = _count(norm, normalize(old))
        if n > 1:
            return original, f"found {n} occurrences of edits[{i}].old_text in {path}, it must be unique"
        needle = normalize(old) if fuzzy else old
        reps.append((i, base.find(needle), len(needle), new))
    reps.sort(key=lambda r: r[1])
    for a, b in zip(reps, reps[1:]):
        if a[1] + a[2] > b[1]:
            return original, (f"edits[{a[0]}] and edits[{b[0]}] overlap in {path}; merge them into one edit or target "
                              "disjoint regions")
    if not fuzzy:
        return _replace(base, reps), None
    # line spans of the normalised text; line k of it is line k of the original
    orig_lines = original.split("\n")
    starts, pos = [], 0
    for line in base.split("\n"):
        starts.append(pos)
        pos += len(line) + 1
    line_of = lambda off: max(k for k, s in enumerate(starts) if s <= off)  # noqa: E731
    groups: List[List] = []  # [first line, last line, reps]
    for r in reps:
        lo, hi = line_of(r[1]), line_of(max(r[1], r[1] + r[2] - 1))
        if groups and lo <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], hi)
            groups[-1][2].append(r)
        else:
            groups.append([lo, hi, [r]])
    out, k = [], 0
    base_lines = base.split("\n")
    for lo, hi, grp in groups:
        out.extend(orig_lines[k:lo])
        out.append(_replace("\n".join(base_lines[lo:hi + 1]), grp, starts[lo]))
        k = hi + 1
    out.extend(orig_lines[k:])
    return "\n".join(out), None
