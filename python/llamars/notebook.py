"""Jupyter niceties: the `Engine` as an HTML table, and `display_stream` to show a
generation live. IPython is optional and imported only inside a notebook."""
from __future__ import annotations

import html
import inspect
import os
import sys
import time
from typing import Any, Optional, TextIO

from . import _fronts
from .devices import devices_text
from .models import FILE_TYPES
from .progress import in_notebook

# general.file_type → llama.cpp's names (as llama-server's /props `model_ftype`)


def _num(n: Optional[int], units=("", "K", "M", "B", "T"), base: float = 1000.0) -> str:
    if n is None:
        return "?"
    x, i = float(n), 0
    while x >= base and i < len(units) - 1:
        x, i = x / base, i + 1
    return f"{x:.1f}{units[i]}" if i else str(n)


def engine_rows(engine) -> list:
    """(label, value) pairs describing a loaded engine, values as plain text."""
    i = engine.info
    ftype = i.get("file_type")
    quant = FILE_TYPES.get(ftype, f"file type {ftype}" if ftype is not None else "?")
    tensors = ", ".join(f"{t} ×{n}" for t, n in i.get("tensor_types") or [])
    try:
        template = engine.chat_template.name
    except Exception as e:  # a broken template must not break the view
        template = f"unavailable ({type(e).__name__})"
    devices = [ln.strip() for ln in devices_text().splitlines() if ln.startswith(" ")]
    name = i.get("name")
    return [
        ("model", os.path.basename(i["path"]) + (f" ({name})" if name else "")),
        ("architecture", i["arch"]),
        ("quantization", quant + (f" — tensors {tensors}" if tensors else "")),
        ("parameters", f"{_num(i.get('n_params'))}, {_num(i.get('size'), ('B', 'KiB', 'MiB', 'GiB'), 1024.0)}"
                       + (f"; {i['n_expert_used']} of {i['n_expert']} experts per token, {_num(i.get('n_params_active'))} active"
                          if i.get("n_expert") else "")),
        ("shape", f"{i.get('n_layer')} layers, n_embd {i.get('n_embd')}, {i.get('n_head')} heads ({i.get('n_head_kv')} KV)"),
        ("context", f"n_ctx {i['n_ctx']} = {i['n_parallel']} slot(s) × n_ctx_slot {i['n_ctx_slot']}"
                    f" (trained {i.get('n_ctx_train', '?')})"),
        ("KV cache", f"K {i.get('cache_type_k', 'f16')}, V {i.get('cache_type_v', 'f16')}, "
                     f"{_num(i.get('kv_bytes_per_token'), ('B', 'KiB', 'MiB'), 1024.0)} per token"
                     + (", flash attention" if i.get("flash_attn") else "")),
        ("vocabulary", f"{i['n_vocab']:,} tokens"),
        ("chat template", str(template)),
        ("devices", "; ".join(devices) + f"; kernels {i.get('isa', '?')}"),
        ("GPU offload", i.get("gpu_note") or "none"),
        ("threads", f"{i.get('n_threads')} (n_batch {i.get('n_batch')}, n_ubatch {i.get('n_ubatch')})"),
    ]


def engine_html(engine) -> str:
    """A compact HTML table for `Engine._repr_html_`; every value is escaped."""
    rows = "".join(
        f"<tr><th style=\"text-align:left;padding-right:1em\">{html.escape(k)}</th>"
        f"<td style=\"text-align:left\">{html.escape(str(v))}</td></tr>"
        for k, v in engine_rows(engine)
    )
    return f"<table><caption style=\"text-align:left\"><b>llamars.Engine</b></caption>{rows}</table>"


def _bundle(text: str, footer: str = "") -> dict:
    body = f"<pre style=\"white-space:pre-wrap;margin:0\">{html.escape(text)}</pre>"
    if footer:
        body += f"<div style=\"opacity:.6;font-size:smaller\">{html.escape(footer)}</div>"
    return {"text/plain": text + (f"\n[{footer}]" if footer else ""), "text/html": body}


def _footer(result: Any) -> str:
    t = getattr(result, "timings", None)
    if t is None:
        return ""
    return f"{result.n_tokens} tokens, {t.predicted_per_second:.1f} tokens/s, stop: {result.stop_reason}"


class _Shower:
    """Accumulates chunk texts and shows them: a live display in a notebook (updated at
    most every `interval` s), else printed to `file` as they come."""

    def __init__(self, interval: float, file: Optional[TextIO]) -> None:
        self.parts: list = []
        self.interval, self.file = interval, file
        self.handle = None
        self.last = 0.0
        if file is None and in_notebook():
            from IPython.display import display

            self.handle = display(_bundle(""), raw=True, display_id=True)

    def add(self, text: str) -> None:
        if not text:
            return
        self.parts.append(text)
        if self.handle is None:
            out = self.file or sys.stdout
            out.write(text)
            out.flush()
            return
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.handle.update(_bundle("".join(self.parts)), raw=True)

    def finish(self, result: Any) -> Any:
        text = "".join(self.parts)
        if self.handle is None:
            (self.file or sys.stdout).write("\n")
        else:
            self.handle.update(_bundle(text, _footer(result)), raw=True)
        return result if result is not None else text


def display_stream(stream: Any, *, interval: float = 0.05, file: Optional[TextIO] = None) -> Any:
    """Show a generation as it is produced; return its `GenerationResult` (the stream's
    `result`), or the joined text for iterables without one.

    `stream`: `Engine.stream(...)` or any iterable of chunks with `.text`. In a Jupyter
    notebook the text appears in one output that is updated every `interval` seconds;
    elsewhere (or with `file=`) it is printed as it comes. Async streams
    (`Engine.astream(...)`, `AsyncEngine.astream(...)`, an `AsyncStream`) give a coroutine:
    `result = await display_stream(engine.astream(prompt, ...))`.
    Interrupting the display (Ctrl-C, an error) closes the stream, which frees its slot.
    """
    if hasattr(stream, "__aiter__") or inspect.isawaitable(stream):
        return _adisplay(stream, interval, file)
    shower = _Shower(interval, file)
    try:
        for chunk in stream:
            shower.add(chunk.text)
    except BaseException:
        if hasattr(stream, "close"):
            stream.close()
        raise
    return shower.finish(getattr(stream, "result", None))


async def _adisplay(stream: Any, interval: float, file: Optional[TextIO]) -> Any:
    if not hasattr(stream, "__aiter__"):
        stream = await stream  # the coroutine from AsyncEngine.astream(...)
    shower = _Shower(interval, file)
    try:
        async for chunk in stream:
            shower.add(chunk.text)
    except BaseException:
        if hasattr(stream, "aclose"):
            await stream.aclose()
        raise
    return shower.finish(getattr(stream, "result", None))


_fronts.register("html", engine_html)
