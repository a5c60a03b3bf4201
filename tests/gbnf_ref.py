"""A small reference recognizer for llama.cpp's GBNF, written for the tests: parses a
grammar (rules, alternation, grouping, `* + ?`, `{m}`, `{m,}`, `{m,n}`, literals and
character classes with ranges, negation and escapes incl. `\\x`, `\\u`, `\\U`, comments)
and decides by backtracking whether a string is in the language of `root`. Independent
of the engine's GBNF → Lark conversion, so the two check each other."""
from __future__ import annotations

import sys
from typing import Dict, Iterator, List, Tuple

_ESC = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "[": "[", "]": "]", "-": "-", "/": "/"}


class Grammar:
    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0
        self.rules: Dict[str, list] = {}
        self._parse()

    # ---------------------------------------------------------------- parsing
    def _ws(self, newlines: bool = True) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                while self.i < len(self.s) and self.s[self.i] != "\n":
                    self.i += 1
            elif c in " \t" or (newlines and c in "\r\n"):
                self.i += 1
            else:
                break

    def _name(self) -> str:
        j = self.i
        while self.i < len(self.s) and (self.s[self.i].isalnum() or self.s[self.i] in "-_"):
            self.i += 1
        if j == self.i:
            raise ValueError(f"expected a name at {self.i}: {self.s[self.i:self.i + 20]!r}")
        return self.s[j:self.i]

    def _char(self) -> str:
        c = self.s[self.i]
        if c != "\\":
            self.i += 1
            return c
        e = self.s[self.i + 1]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            code = self.s[self.i + 2:self.i + 2 + width]
            self.i += 2 + width
            return chr(int(code, 16))
        self.i += 2
        return _ESC[e]

    def _parse(self) -> None:
        self._ws()
        while self.i < len(self.s):
            name = self._name()
            self._ws()
            if not self.s.startswith("::=", self.i):
                raise ValueError(f"expected ::= after {name}")
            self.i += 3
            self.rules[name] = self._alternatives()
            self._ws()

    def _alternatives(self) -> list:
        alts = [self._sequence()]
        while True:
            self._ws()
            if self.i < len(self.s) and self.s[self.i] == "|":
                self.i += 1
                alts.append(self._sequence())
            else:
                return alts

    def _at_rule_start(self) -> bool:
        # a new rule starts with `name ::=` on a fresh line
        j = self.i
        while j < len(self.s) and (self.s[j].isalnum() or self.s[j] in "-_"):
            j += 1
        k = j
        while k < len(self.s) and self.s[k] in " \t":
            k += 1
        return j > self.i and self.s.startswith("::=", k)

    def _sequence(self) -> list:
        items = []
        while True:
            self._ws()
            if self.i >= len(self.s) or self.s[self.i] in "|)" or self._at_rule_start():
                return items
            items.append(self._repeat(self._atom()))

    def _atom(self) -> tuple:
        c = self.s[self.i]
        if c == '"':
            self.i += 1
            out = []
            while self.s[self.i] != '"':
                out.append(self._char())
            self.i += 1
            return ("lit", "".join(out))
        if c == "[":
            self.i += 1
            neg = self.s[self.i] == "^"
            if neg:
                self.i += 1
            ranges = []
            while self.s[self.i] != "]":
                a = self._char()
                b = a
                if self.s[self.i] == "-" and self.s[self.i + 1] != "]":
                    self.i += 1
                    b = self._char()
                ranges.append((a, b))
            self.i += 1
            return ("cls", neg, ranges)
        if c == "(":
            self.i += 1
            alts = self._alternatives()
            self._ws()
            assert self.s[self.i] == ")", self.s[self.i:self.i + 10]
            self.i += 1
            return ("alt", alts)
        if c == ".":
            self.i += 1
            return ("cls", True, [])
        return ("ref", self._name())

    def _repeat(self, atom: tuple) -> tuple:
        if self.i >= len(self.s):
            return atom
        c = self.s[self.i]
        if c in "*+?":
            self.i += 1
            return ("rep", atom, {"*": 0, "+": 1, "?": 0}[c], {"?": 1}.get(c))
        if c == "{":
            j = self.s.index("}", self.i)
            body = self.s[self.i + 1:j].replace(" ", "")
            self.i = j + 1
            if "," not in body:
                return ("rep", atom, int(body), int(body))
            lo, hi = body.split(",")
            return ("rep", atom, int(lo or 0), int(hi) if hi else None)
        return atom

    # ---------------------------------------------------------------- matching
    def _match(self, node: tuple, s: str, i: int) -> Iterator[int]:
        kind = node[0]
        if kind == "lit":
            if s.startswith(node[1], i):
                yield i + len(node[1])
        elif kind == "cls":
            if i < len(s):
                inside = any(a <= s[i] <= b for a, b in node[2])
                if inside != node[1]:
                    yield i + 1
        elif kind == "ref":
            yield from self._alts(self.rules[node[1]], s, i)
        elif kind == "alt":
            yield from self._alts(node[1], s, i)
        elif kind == "rep":
            yield from self._rep(node[1], node[2], node[3], s, i, 0)

    def _rep(self, atom: tuple, lo: int, hi, s: str, i: int, n: int) -> Iterator[int]:
        if hi is None or n < hi:
            for j in self._match(atom, s, i):
                if j > i or n < lo:  # no infinite loops on empty matches
                    yield from self._rep(atom, lo, hi, s, j, n + 1)
        if n >= lo:
            yield i

    def _seq(self, items: list, k: int, s: str, i: int) -> Iterator[int]:
        if k == len(items):
            yield i
            return
        for j in self._match(items[k], s, i):
            yield from self._seq(items, k + 1, s, j)

    def _alts(self, alts: list, s: str, i: int) -> Iterator[int]:
        for seq in alts:
            yield from self._seq(seq, 0, s, i)

    def accepts(self, text: str, root: str = "root") -> bool:
        old = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old, 20000))
        try:
            return any(j == len(text) for j in self._alts(self.rules[root], text, 0))
        finally:
            sys.setrecursionlimit(old)


def accepts(grammar: str, text: str) -> bool:
    return Grammar(grammar).accepts(text)


__all__ = ["Grammar", "accepts"]
