"""llama-server's file tools, confined to the tools root: read_file, file_glob_search,
grep_search, write_file, edit_file, with its argument schemas, limits and result shapes
(`plain_text_response` for what the model reads, `error` for a call that failed)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

from .edits import apply_edits
from .paths import LIST_TIMEOUT_S, ToolError, glob_matcher, list_entries
from .tool import Context, ServerTool, obj, prop

READ_MAX = 16 * 1024  # bytes of text one read_file returns
SEARCH_MAX = 100  # results of one glob or grep
GREP_TIMEOUT_S = 15
GREP_MAX_FILE = 8 * 1024 * 1024  # files larger than this are not searched
GREP_MAX_LINE = 1000  # characters of one shown line


def read_file(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    path = ctx.root.resolve(p["path"])
    start, end, loc = p.get("start_line") or 1, p.get("end_line"), bool(p.get("append_loc"))
    end = -1 if end is None else end
    try:
        size = os.path.getsize(path)
    except OSError:
        return {"error": f"cannot stat file: {p['path']}"}
    if os.path.isdir(path):
        return {"error": f"{p['path']} is a directory (use file_glob_search to list it)"}
    if size > READ_MAX and end == -1:
        return {"error": f"file too large ({size} bytes, max {READ_MAX}). Use start_line/end_line to read a portion."}
    out: List[str] = []
    used = 0
    try:
        with open(path, "r", encoding="utf-8", errors="replace", newline="") as f:
            for n, line in enumerate(f, 1):
                if n % 4096 == 0 and ctx.cancel.is_set():  # a client that left: a long skip stops too
                    return {"error": "cancelled"}
                if n < start:
                    continue
                if end != -1 and n > end:
                    break
                line = line.rstrip("\n")
                piece = (f"{n}\u2192{line}\n" if loc else line + "\n")
                if used + len(piece.encode()) > READ_MAX:
                    out.append("[output truncated]")
                    break
                out.append(piece)
                used += len(piece.encode())
    except OSError:
        return {"error": f"failed to open file: {p['path']}"}
    return {"plain_text_response": "".join(out)}


def file_glob_search(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    base = ctx.root.resolve(p["path"])
    kind = p.get("type") or "file"
    if kind not in ("file", "dir", "all"):
        return {"error": f'invalid type: {kind} (expected "file", "dir" or "all")'}
    limit = p.get("limit", SEARCH_MAX)
    if limit < 1:
        return {"error": f"invalid limit: {limit} (expected 1 or more)"}
    limit = min(limit, SEARCH_MAX)
    if not os.path.isdir(base):
        return {"error": f"path does not exist or is not a directory: {p['path']}"}
    inc, exc = glob_matcher(p.get("include") or "**"), p.get("exclude")
    exc_m = glob_matcher(exc) if exc else None
    entries, truncated = list_entries(ctx.root, base, max(0, p.get("max_depth") or 0), kind, time.monotonic() + LIST_TIMEOUT_S)
    matches = [(rel, d) for rel, d in entries if inc(rel) and not (exc_m and exc_m(rel))]
    shown = matches[:limit]
    text = "".join(f"{rel}{'/' if d else ''}\n" for rel, d in shown) + f"\n---\nTotal matches: {len(matches)}\n"
    if len(matches) > limit:
        text += (f"[{limit} results limit reached ({len(matches)} total matches). "
                 "Refine the glob pattern to narrow the search.]\n")
    if truncated:
        text += "[results truncated: time budget or unreadable directory]\n"
    return {"plain_text_response": text, "entries": [{"path": r, "type": "dir" if d else "file"} for r, d in shown],
            "base": base}


def grep_search(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    target = ctx.root.resolve(p["path"])
    files: List[List[str]] = []
    if os.path.isfile(target):
        files.append([target, p["path"]])
    elif os.path.isdir(target):
        inc, exc = glob_matcher(p.get("include") or "**"), p.get("exclude")
        exc_m = glob_matcher(exc) if exc else None
        entries, _ = list_entries(ctx.root, target, 0, "file", time.monotonic() + LIST_TIMEOUT_S)
        for rel, _d in entries:
            full = os.path.join(target, rel)
            if inc(rel) and not (exc_m and exc_m(rel)):
                try:
                    if os.path.getsize(full) <= GREP_MAX_FILE:
                        files.append([full, rel])
                except OSError:
                    pass
    else:
        return {"error": f"path does not exist: {p['path']}"}
    ctx_lines = max(0, p.get("context_lines") or 0)
    job = {"files": files, "pattern": p["pattern"], "literal": bool(p.get("literal")),
           "ignore_case": bool(p.get("ignore_case")), "context_lines": ctx_lines,
           "show_num": bool(p.get("return_line_numbers")) or ctx_lines > 0, "max_results": SEARCH_MAX,
           "max_line": GREP_MAX_LINE}
    worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grep_worker.py")
    proc = subprocess.Popen([sys.executable, "-I", worker], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + GREP_TIMEOUT_S
    data: "bytes | None" = json.dumps(job).encode()
    while True:  # in slices, so a client that leaves stops the search
        try:
            out, _ = proc.communicate(data, timeout=0.2)
            break
        except subprocess.TimeoutExpired:
            data = None
            if ctx.cancel.is_set() or time.monotonic() >= deadline:
                proc.kill()
                proc.communicate()
                if ctx.cancel.is_set():
                    return {"error": "cancelled"}
                return {"error": f"grep_search took longer than {GREP_TIMEOUT_S} s (simplify the pattern or narrow the path)"}
    try:
        return json.loads(out)
    except ValueError:
        return {"error": "grep_search failed"}


def write_file(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    path = ctx.root.resolve(p["path"])
    data = p["content"].encode("utf-8")
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if os.path.isdir(path):
            return {"error": f"failed to write file: {p['path']} is a directory"}
        with open(path, "wb") as f:
            f.write(data)
    except OSError as e:
        return {"error": f"failed to write file: {p['path']} ({e.strerror or e})"}
    return {"result": "file written successfully", "path": p["path"], "bytes": len(data)}


def edit_file(p: Dict[str, Any], ctx: Context) -> Dict[str, Any]:
    path = ctx.root.resolve(p["path"])
    edits = p["edits"]
    if not edits:
        return {"error": '"edits" must be a non-empty array'}
    for i, e in enumerate(edits):
        if not isinstance(e, dict) or not isinstance(e.get("old_text"), str) or not isinstance(e.get("new_text"), str):
            raise ToolError(f"params.edits[{i}]: an object with string old_text and new_text is required")
        if not e["old_text"]:
            return {"error": f"edits[{i}].old_text must not be empty"}
    try:
        with open(path, "r", encoding="utf-8", newline="") as f:
            original = f.read()
    except (OSError, UnicodeDecodeError):
        return {"error": f"failed to open file: {p['path']}"}
    new, err = apply_edits(original, [(e["old_text"], e["new_text"]) for e in edits], p["path"])
    if err:
        return {"error": err}
    if new == original:
        return {"error": "no changes made: the replacement(s) produced identical content"}
    try:
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(new)
    except OSError:
        return {"error": f"failed to write file: {p['path']}"}
    return {"result": "file edited successfully", "path": p["path"], "edits_applied": len(edits)}


_GLOB_RULES = ("A pattern with no '/' (e.g. \"*.cpp\") matches the file's basename at any depth. A pattern containing '/' "
               "matches the full relative path; unless already anchored with \"**/\" or a leading '/', it is "
               "automatically prefixed with \"**/\". ")

TOOLS = [
    ServerTool("read_file", "Read file",
               "Read the contents of a file. Optionally specify a 1-based line range. If append_loc is true, each line "
               "is prefixed with its line number (e.g. \"1\u2192...\").",
               obj({"path": prop("string", "Path to the file"),
                    "start_line": prop("integer", "First line to read, 1-based (default: 1)"),
                    "end_line": prop("integer", "Last line to read, 1-based inclusive (default: end of file)"),
                    "append_loc": prop("boolean", "Prefix each line with its line number")}, ["path"]), read_file),
    ServerTool("file_glob_search", "File search",
               "Recursively search for files matching a glob pattern under a directory. Automatically skips files "
               "ignored by .gitignore (when the directory is inside a git repo) and common junk directories (.git, "
               "node_modules, build, dist, etc.) otherwise. " + _GLOB_RULES + "Use type=\"dir\" or \"all\" to also "
               "list directories; directory entries are suffixed with '/' in the output.",
               obj({"path": prop("string", "Base directory to search in"),
                    "include": prop("string", "Glob pattern for files to include (e.g. \"*.cpp\" or \"src/**/*.cpp\"). Default: **"),
                    "exclude": prop("string", "Glob pattern for files to exclude"),
                    "type": prop("string", "Entry type to return: \"file\" (default), \"dir\" or \"all\""),
                    "max_depth": prop("integer", "Maximum depth to descend into subdirectories (default: 0 = unlimited; 1 = direct children only)"),
                    "limit": prop("integer", f"Maximum number of results to return, capped at {SEARCH_MAX} (default {SEARCH_MAX})")},
                   ["path"]), file_glob_search),
    ServerTool("grep_search", "Grep search",
               "Search for a pattern in files under a path. Returns matching lines with file paths (and, unless "
               "searching a single file, paths relative to the given directory). Skips .gitignore'd files and junk "
               "directories as file_glob_search does. include/exclude: " + _GLOB_RULES,
               obj({"path": prop("string", "File or directory to search in"),
                    "pattern": prop("string", "Pattern to search for (regular expression unless literal is true)"),
                    "include": prop("string", "Glob pattern to filter files (default: **)"),
                    "exclude": prop("string", "Glob pattern to exclude files"),
                    "return_line_numbers": prop("boolean", "If true, include line numbers in results"),
                    "literal": prop("boolean", "Treat pattern as a literal string instead of a regular expression (default: false)"),
                    "ignore_case": prop("boolean", "Case-insensitive search (default: false)"),
                    "context_lines": prop("integer", "Number of lines of context to show before and after each match (default: 0)")},
                   ["path", "pattern"]), grep_search),
    ServerTool("write_file", "Write file",
               "Write content to a file, creating it (including parent directories) if it does not exist. May use with "
               "edit_file for more complex edits.",
               obj({"path": prop("string", "Path of the file to write"), "content": prop("string", "Content to write")},
                   ["path", "content"]), write_file, write=True),
    ServerTool("edit_file", "Edit file",
               "Edit a file using exact text replacement. Each edits[].old_text must be unique in the file and is "
               "matched against the original content, not incrementally. Merge nearby changes into one edit instead "
               "of overlapping edits. Use write_file to replace the whole file.",
               obj({"path": prop("string", "Path to the file to edit"),
                    "edits": prop("array", "One or more exact text replacements to apply", items=obj({
                        "old_text": prop("string", "Exact text to find; must be unique in the file and must not overlap with other edits"),
                        "new_text": prop("string", "Text to replace old_text with")}, ["old_text", "new_text"]))},
                   ["path", "edits"]), edit_file, write=True),
]
