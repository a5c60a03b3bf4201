"""The tools root (--tools-root): every path a file tool touches is resolved against it
and refused when it leaves it. Resolution follows symlinks (os.path.realpath), so a link
inside the root that points outside is refused like `../` or an absolute path elsewhere;
a path that does not exist yet (write_file) is checked through its nearest existing
parent. Listings (glob, grep) never walk into links and skip the usual junk directories."""
from __future__ import annotations

import os
import re
import subprocess
import time
from typing import Iterator, List, Optional, Tuple

# directories a listing never descends into: they can be enormous (llama-server's list)
JUNK_DIRS = frozenset({".git", ".svn", ".hg", "node_modules", "__pycache__", ".venv", "venv", "dist", "build",
                       "target", ".cache", ".idea", ".vscode"})
LIST_TIMEOUT_S = 15  # budget for one listing, git and walker alike
MAX_ENTRIES = 200_000  # entries one listing may collect


class ToolError(Exception):
    """A tool call that cannot be done; the caller gets `{"error": message}`."""


class Root:
    def __init__(self, root: str) -> None:
        self.path = os.path.realpath(os.path.expanduser(root))
        if not os.path.isdir(self.path):
            raise ValueError(f"--tools-root {root}: not a directory")

    def inside(self, real: str) -> bool:
        return real == self.path or real.startswith(self.path.rstrip(os.sep) + os.sep)

    def resolve(self, path: str) -> str:
        """The real absolute path of `path` (relative paths start at the root), refused
        with a ToolError when it is outside the root."""
        if not isinstance(path, str) or not path:
            raise ToolError("path: a non-empty string is required")
        if "\x00" in path:
            raise ToolError("path: must not contain NUL")
        p = os.path.expanduser(path)
        full = p if os.path.isabs(p) else os.path.join(self.path, p)
        real = os.path.realpath(full)
        if not self.inside(real):
            raise ToolError(f"path {path!r} is outside the tools root {self.path} (set --tools-root to widen it)")
        return real

    def relative(self, real: str) -> str:
        rel = os.path.relpath(real, self.path)
        return "." if rel == "." else rel.replace(os.sep, "/")


def glob_regex(pattern: str) -> "re.Pattern[str]":
    """A glob as a regular expression over '/'-separated paths: `**` crosses directories
    (`**/` also matches none), `*` and `?` stay inside one, `[...]` is a class."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1:i + 2] in ("!", "]") else i + 1)
            if j < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1:j]
                neg = body.startswith("!")
                body = body[1:] if neg else body
                out.append("[" + ("^" if neg else "") + body.replace("\\", "\\\\") + "]")
                i = j + 1
                continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("(?s:" + "".join(out) + r")\Z")


def glob_matcher(pattern: str):
    """llama-server's rule: a pattern without '/' matches the basename at any depth; one
    with '/' matches the whole relative path, anchored with `**/` unless it starts with
    `**/` or '/'."""
    if "/" not in pattern:
        rx = glob_regex(pattern)
        return lambda rel: rx.match(rel.rsplit("/", 1)[-1]) is not None
    if pattern.startswith("/"):
        pattern = pattern.lstrip("/")
    elif pattern != "**" and not pattern.startswith("**/"):
        pattern = "**/" + pattern
    rx = glob_regex(pattern)
    return lambda rel: rx.match(rel) is not None


def _git_files(base: str, deadline_s: float) -> Optional[List[str]]:
    """Files under `base` as git sees them (tracked and untracked, .gitignore applied),
    or None when `base` is not in a git work tree or git is missing."""
    try:
        r = subprocess.run(["git", "-C", base, "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=deadline_s)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if r.returncode != 0:
        return None
    return [p for p in r.stdout.decode("utf-8", "replace").split("\0") if p][:MAX_ENTRIES]


def list_entries(root: Root, base: str, max_depth: int, kind: str, deadline: float) -> Tuple[List[Tuple[str, bool]], bool]:
    """(entries, truncated): (relative path, is_dir) under the real directory `base`;
    max_depth 0 is unlimited, 1 direct children only. Files come from git when `base` is
    in a repository (so .gitignore applies), else from a walk; links are never followed
    and an entry resolving outside the root is left out."""
    if kind == "file":
        files = _git_files(base, max(1.0, deadline - time.monotonic()))
        if files is not None:
            out = []
            for rel in files:
                if max_depth and rel.count("/") + 1 > max_depth:
                    continue
                full = os.path.join(base, rel)
                if os.path.isfile(full) and root.inside(os.path.realpath(full)):
                    out.append((rel, False))
            return out, False
    return _walk(root, base, max_depth, kind, deadline)


def _walk(root: Root, base: str, max_depth: int, kind: str, deadline: float) -> Tuple[List[Tuple[str, bool]], bool]:
    out: List[Tuple[str, bool]] = []
    truncated = False
    stack: List[Tuple[str, str, int]] = [(base, "", 0)]
    while stack:
        d, rel_dir, depth = stack.pop()
        try:
            it: Iterator[os.DirEntry] = os.scandir(d)
            entries = sorted(it, key=lambda e: e.name)
        except OSError:
            truncated = True
            continue
        for e in entries:
            if time.monotonic() > deadline or len(out) >= MAX_ENTRIES:
                return out, True
            rel = f"{rel_dir}{e.name}"
            try:
                link = e.is_symlink()
                is_dir = e.is_dir()
                is_file = e.is_file()
            except OSError:
                continue
            if link and not root.inside(os.path.realpath(e.path)):
                continue
            if is_dir:
                if kind in ("dir", "all"):
                    out.append((rel, True))
                if e.name.lower() not in JUNK_DIRS and not link and (max_depth == 0 or depth + 1 < max_depth):
                    stack.append((e.path, rel + "/", depth + 1))
            elif is_file and kind in ("file", "all"):
                out.append((rel, False))
    return out, truncated
