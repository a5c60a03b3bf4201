"""The package's import graph has no cycles (module level and inside functions), and the
Rust engine's modules neither import each other nor circle."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "python" / "llamars"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(current: str, is_pkg: bool, node: ast.ImportFrom) -> list:
    if node.level:
        base = current.split(".")
        if not is_pkg:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        mod = ".".join(base + ([node.module] if node.module else []))
    else:
        mod = node.module or ""
    # `from . import x` / `from .pkg import sub`: a name may be a submodule, else it is
    # an attribute of `mod`
    return [mod] + [f"{mod}.{a.name}" for a in node.names]


def import_graph() -> dict:
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {m: set() for m in modules}
    leaves = {"llamars._core"}  # the extension module
    for m, p in modules.items():
        tree = ast.parse(p.read_text(), str(p))
        is_pkg = p.name == "__init__.py"
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = _resolve(m, is_pkg, node)
            else:
                continue
            if isinstance(node, ast.ImportFrom):
                # `from M import a, b`: the submodules M.a, M.b where they are modules, else M
                mod, subs = names[0], names[1:]
                hits = [s for s in subs if s in modules or s in leaves]
                deps = hits + ([mod] if len(hits) < len(subs) else [])
            else:
                deps = names
            # (a package's __init__ always runs before its submodules; that implicit import
            # is not an edge, or every submodule would form a circle with its package)
            for dep in deps:
                if dep in modules and dep != m:
                    graph[m].add(dep)
    return graph


def find_cycle(graph: dict):
    WHITE, GREY, BLACK = 0, 1, 2
    color = {m: WHITE for m in graph}
    stack: list = []

    def visit(m):
        color[m] = GREY
        stack.append(m)
        for d in sorted(graph[m]):
            if color[d] == GREY:
                return stack[stack.index(d):] + [d]
            if color[d] == WHITE:
                c = visit(d)
                if c:
                    return c
        stack.pop()
        color[m] = BLACK
        return None

    for m in sorted(graph):
        if color[m] == WHITE:
            c = visit(m)
            if c:
                return c
    return None


def test_python_imports_have_no_cycle():
    g = import_graph()
    assert "llamars.engine" in g and g["llamars.engine"], "the import graph was not read"
    cycle = find_cycle(g)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_engine_imports_nothing_above_it():
    g = import_graph()
    above = {"llamars.notebook", "llamars.cli", "llamars.server", "llamars.async_engine", "llamars.chat.session"}
    seen, todo = set(), ["llamars.engine"]
    while todo:
        m = todo.pop()
        for d in g[m]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    assert not (seen & above), f"llamars.engine reaches {sorted(seen & above)}"


def _rust_uses(text: str) -> set:
    """The sibling modules a Rust file names: `super::x`, `super::{x, y::z}`, `crate::engine::x`."""
    names = set(re.findall(r"\bsuper::(\w+)", text)) | set(re.findall(r"\bcrate::engine::(\w+)", text))
    for group in re.findall(r"\bsuper::\{([^}]*)\}", text):
        names |= {part.strip().split("::")[0] for part in group.split(",") if part.strip()}
    return names


def test_rust_engine_modules_do_not_import_each_other():
    d = ROOT / "rust" / "engine"
    mods = {p.stem for p in d.glob("*.rs") if p.stem != "mod"}
    uses = {p.stem: _rust_uses(p.read_text()) & mods for p in d.glob("*.rs") if p.stem != "mod"}
    assert len(mods) >= 10 and uses["batch_loop"], "the engine's modules were not read"
    pairs = sorted({tuple(sorted((a, b))) for a in uses for b in uses[a] if a in uses.get(b, set())})
    assert not pairs, f"rust/engine modules importing each other: {pairs}"
    # and no longer circle either
    cycle = find_cycle({m: uses[m] for m in mods})
    assert cycle is None, "rust/engine import cycle: " + " -> ".join(cycle)
