"""Go's text/template, the part LocalAI's model templates use: `{{.Field}}` and
`{{.A.B}}`, `$` and variables (`$x := …`, `range $i, $e := …`), `{{- … -}}` trimming,
comments, `if` / `else if` / `else`, `range` (with `else`), `with`, pipelines (`x | f`),
string, number, bool and nil literals, parenthesised calls, and the functions Go
predefines (`and or not eq ne lt le gt ge len index print printf println slice`) plus
the sprig ones LocalAI's templates reach for (`toJson trim upper lower contains
hasPrefix hasSuffix replace join default`).

Data is Python dicts (a map's missing key prints `<no value>`, as Go's), lists and
scalars. Anything else is a TemplateError naming the line, as is a runaway template:
rendering stops past 4 MiB of output or 100,000 loop turns."""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from .gofuncs import FUNCS, MISSING, _text, _truth
from .templates import TemplateError

MAX_OUTPUT = 4 << 20
MAX_STEPS = 100_000
_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
_TOKEN = re.compile(r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*"|`[^`]*`)|(?P<num>-?\d+(?:\.\d+)?)|(?P<var>\$[A-Za-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)*)"""
                    r"""|(?P<field>(?:\.[A-Za-z_][A-Za-z_0-9]*)+|\.)|(?P<op>:=|=|\||\(|\)|,)|(?P<ident>[A-Za-z_][A-Za-z_0-9]*))""")


class _Node:
    __slots__ = ("kind", "arg", "body", "alt", "line")

    def __init__(self, kind: str, arg: Any = None, line: int = 0) -> None:
        self.kind, self.arg, self.line = kind, arg, line
        self.body: List["_Node"] = []
        self.alt: Optional[List["_Node"]] = None


def _tokens(src: str, line: int) -> List[Tuple[str, str]]:
    out, i = [], 0
    while i < len(src):
        if src[i:].strip() == "":
            break
        m = _TOKEN.match(src, i)
        if not m or m.end() == i:
            raise TemplateError(f"line {line}: unexpected {src[i:].strip()[:20]!r} in action")
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        i = m.end()
    return out


class GoTemplate:
    def __init__(self, source: str, name: str = "template") -> None:
        self.source, self.name = source, name
        self.root = self._parse(source)

    # ------------------------------------------------------------------ parsing
    def _parse(self, src: str) -> List[_Node]:
        pieces: List[Tuple[str, Any, int]] = []  # ("text", s) | ("action", tokens)
        pos, line = 0, 1
        trim_next = False
        for m in _ACTION.finditer(src):
            text = src[pos:m.start()]
            if trim_next:
                text = text.lstrip()
            if m.group(1):
                text = text.rstrip()
            if text:
                pieces.append(("text", text, line))
            line += src[pos:m.start()].count("\n")
            body = m.group(2).strip()
            if not (body.startswith("/*") and body.endswith("*/")):
                pieces.append(("action", _tokens(body, line), line))
            line += m.group(0).count("\n")
            trim_next = bool(m.group(3))
            pos = m.end()
        tail = src[pos:]
        if trim_next:
            tail = tail.lstrip()
        if "{{" in tail:
            raise TemplateError(f"{self.name}: line {line}: unclosed action")
        if tail:
            pieces.append(("text", tail, line))
        nodes, i, end = self._block(pieces, 0, ())
        if end is not None:
            raise TemplateError(f"{self.name}: line {pieces[i - 1][2]}: unexpected {{{{{end}}}}}")
        return nodes

    def _block(self, pieces, i: int, stops: Tuple[str, ...]):
        nodes: List[_Node] = []
        while i < len(pieces):
            kind, val, line = pieces[i]
            i += 1
            if kind == "text":
                nodes.append(_Node("text", val, line))
                continue
            if not val:
                raise TemplateError(f"{self.name}: line {line}: empty action")
            head = val[0][1] if val[0][0] == "ident" else None
            if head in ("end", "else") and head in stops:
                return nodes, i, (head, val[1:], line)
            if head in ("end", "else"):
                raise TemplateError(f"{self.name}: line {line}: unexpected {{{{{head}}}}}")
            if head in ("if", "range", "with"):
                node = _Node(head, val[1:], line)
                node.body, i, stop = self._block(pieces, i, ("end", "else"))
                if stop is None:
                    raise TemplateError(f"{self.name}: line {line}: {{{{{head}}}}} without {{{{end}}}}")
                cur = node
                while stop[0] == "else":
                    rest = stop[1]
                    if rest and rest[0] == ("ident", "if") and head == "if":  # else if: a nested if in the else branch
                        inner = _Node("if", rest[1:], stop[2])
                        inner.body, i, stop = self._block(pieces, i, ("end", "else"))
                        if stop is None:
                            raise TemplateError(f"{self.name}: line {line}: {{{{if}}}} without {{{{end}}}}")
                        cur.alt = [inner]
                        cur = inner
                        continue
                    cur.alt, i, stop = self._block(pieces, i, ("end",))
                    if stop is None:
                        raise TemplateError(f"{self.name}: line {line}: {{{{else}}}} without {{{{end}}}}")
                nodes.append(node)
                continue
            if head in ("define", "template", "block"):
                raise TemplateError(f"{self.name}: line {line}: {{{{{head}}}}} is not supported")
            nodes.append(_Node("action", val, line))
        return nodes, i, None

    # ------------------------------------------------------------------ evaluation
    def render(self, data: Any) -> str:
        out: List[str] = []
        state = {"size": 0, "steps": 0}
        self._run(self.root, data, [{"$": data}], out, state)
        return "".join(out)

    def _emit(self, out: List[str], s: str, state) -> None:
        state["size"] += len(s)
        if state["size"] > MAX_OUTPUT:
            raise TemplateError(f"{self.name}: the output passed {MAX_OUTPUT >> 20} MiB")
        out.append(s)

    def _run(self, nodes: List[_Node], dot: Any, scopes: List[Dict[str, Any]], out: List[str], state) -> None:
        for n in nodes:
            try:
                if n.kind == "text":
                    self._emit(out, n.arg, state)
                elif n.kind == "action":
                    v = self._pipeline(n.arg, dot, scopes)
                    if not (len(n.arg) >= 2 and n.arg[0][0] == "var" and n.arg[1][1] in (":=", "=")):
                        self._emit(out, _text(v), state)
                elif n.kind == "if":
                    v = self._pipeline(n.arg, dot, scopes)
                    branch = n.body if _truth(v) else (n.alt or [])
                    self._run(branch, dot, scopes + [{}], out, state)
                elif n.kind == "with":
                    v = self._pipeline(n.arg, dot, scopes)
                    if _truth(v):
                        self._run(n.body, v, scopes + [{}], out, state)
                    elif n.alt:
                        self._run(n.alt, dot, scopes + [{}], out, state)
                elif n.kind == "range":
                    self._range(n, dot, scopes, out, state)
            except TemplateError as e:
                if f"{self.name}: " in str(e):
                    raise
                raise TemplateError(f"{self.name}: line {n.line}: {e}") from None
            except (TypeError, ValueError, KeyError, IndexError, AttributeError, RecursionError) as e:
                raise TemplateError(f"{self.name}: line {n.line}: {e}") from None

    def _range(self, n: _Node, dot: Any, scopes, out, state) -> None:
        toks = n.arg
        names: List[str] = []
        if ":=" in [t[1] for t in toks]:
            j = [t[1] for t in toks].index(":=")
            names = [t[1] for t in toks[:j] if t[0] == "var"]
            toks = toks[j + 1:]
        v = self._pipeline(toks, dot, scopes)
        items = list(v.items()) if isinstance(v, dict) else list(enumerate(v)) if isinstance(v, (list, tuple)) else \
            list(enumerate(range(v))) if isinstance(v, int) and not isinstance(v, bool) else \
            [] if v is None or v is MISSING else None
        if items is None:
            raise TemplateError(f"{self.name}: line {n.line}: range can't iterate over {_text(v)}")
        if isinstance(v, dict):
            items.sort(key=lambda kv: str(kv[0]))
        if not items and n.alt:
            self._run(n.alt, dot, scopes + [{}], out, state)
        for k, x in items:
            state["steps"] += 1
            if state["steps"] > MAX_STEPS:
                raise TemplateError(f"{self.name}: more than {MAX_STEPS} loop turns")
            scope: Dict[str, Any] = {}
            if len(names) == 1:
                scope[names[0]] = x
            elif len(names) >= 2:
                scope[names[0]], scope[names[1]] = k, x
            self._run(n.body, x, scopes + [scope], out, state)

    def _var(self, name: str, scopes) -> Any:
        for s in reversed(scopes):
            if name in s:
                return s[name]
        raise TemplateError(f"undefined variable {name}")

    def _field(self, base: Any, path: str) -> Any:
        for part in path.split(".")[1:]:
            if not part:
                continue
            if isinstance(base, dict):
                base = base.get(part, MISSING)
            elif base is MISSING or base is None:
                return MISSING
            else:
                raise TemplateError(f"can't evaluate field {part} in type {type(base).__name__}")
        return base

    def _operand(self, tok: Tuple[str, str], dot: Any, scopes) -> Any:
        kind, v = tok
        if kind == "str":
            return v[1:-1] if v[0] == "`" else json.loads(v)
        if kind == "num":
            return float(v) if "." in v else int(v)
        if kind == "field":
            return dot if v == "." else self._field(dot, v)
        if kind == "var":
            name, _, rest = v.partition(".")
            base = self._var(name, scopes)
            return self._field(base, "." + rest) if rest else base
        if kind == "ident":
            if v in ("true", "false"):
                return v == "true"
            if v == "nil":
                return None
            if v in FUNCS:
                return FUNCS[v]()
        raise TemplateError(f"unexpected {v!r}")

    def _command(self, toks: List[Tuple[str, str]], dot: Any, scopes, piped: Any = MISSING, has_pipe: bool = False) -> Any:
        args: List[Any] = []
        i = 0
        fn = None
        if toks and toks[0][0] == "ident" and toks[0][1] in FUNCS:
            fn = FUNCS[toks[0][1]]
            i = 1
        elif toks and toks[0][0] == "ident" and toks[0][1] not in ("true", "false", "nil"):
            raise TemplateError(f'function "{toks[0][1]}" not defined')
        while i < len(toks):
            t = toks[i]
            if t == ("op", "("):
                depth, j = 1, i + 1
                while j < len(toks) and depth:
                    depth += {"(": 1, ")": -1}.get(toks[j][1], 0) if toks[j][0] == "op" else 0
                    j += 1
                if depth:
                    raise TemplateError("unclosed (")
                args.append(self._pipeline(toks[i + 1:j - 1], dot, scopes))
                i = j
                continue
            args.append(self._operand(t, dot, scopes))
            i += 1
        if has_pipe:
            args.append(piped)
        if fn is not None:
            return fn(*args)
        if len(args) != 1:
            raise TemplateError("can't give arguments to a non-function")
        return args[0]

    def _pipeline(self, toks: List[Tuple[str, str]], dot: Any, scopes) -> Any:
        if len(toks) >= 2 and toks[0][0] == "var" and toks[1][1] in (":=", "="):
            v = self._pipeline(toks[2:], dot, scopes)
            if toks[1][1] == ":=":
                scopes[-1][toks[0][1]] = v
            else:
                for s in reversed(scopes):
                    if toks[0][1] in s:
                        s[toks[0][1]] = v
                        break
                else:
                    raise TemplateError(f"undefined variable {toks[0][1]}")
            return v
        cmds: List[List[Tuple[str, str]]] = [[]]
        depth = 0
        for t in toks:
            if t[0] == "op" and t[1] == "(":
                depth += 1
            elif t[0] == "op" and t[1] == ")":
                depth -= 1
            if t == ("op", "|") and depth == 0:
                cmds.append([])
            else:
                cmds[-1].append(t)
        if any(not c for c in cmds):
            raise TemplateError("missing command in pipeline")
        v = self._command(cmds[0], dot, scopes)
        for c in cmds[1:]:
            v = self._command(c, dot, scopes, v, True)
        return v
