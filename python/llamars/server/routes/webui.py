"""GET / — the chat Web UI: the static files in `llamars/webui` (index.html at the prefix
root, assets under `webui/`), or with `--path DIR` that directory's index.html and files
at the root, as llama-server serves them. `--no-webui` registers nothing (`/` is a 404).

The built-in page is sent with a strict Content-Security-Policy (only same-origin
scripts, styles and requests; no inline script or style), `no-cache` + ETag so a new
version is picked up at once, and gzip when the browser takes it. These handlers are
public (`opt={"public": True}`, see auth.py): the API calls the page makes carry the key."""
from __future__ import annotations

import gzip
import hashlib
import mimetypes
from pathlib import Path
from typing import Dict, List, NamedTuple, Optional, Tuple

from litestar import Request, get
from litestar.params import FromPath
from litestar.exceptions import NotFoundException
from litestar.response import Redirect, Response

from ...config import ServerConfig

BUILTIN = Path(__file__).resolve().parent.parent.parent / "webui"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
_TYPES = {  # Litestar adds `; charset=utf-8` to the text/* ones
    ".html": "text/html", ".css": "text/css", ".js": "text/javascript", ".mjs": "text/javascript",
    ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml", ".txt": "text/plain",
    ".wasm": "application/wasm",
}
_COMPRESSIBLE = {".html", ".css", ".js", ".mjs", ".json", ".map", ".svg", ".txt"}
_PUBLIC = {"public": True}


class _File(NamedTuple):
    body: bytes
    gz: Optional[bytes]  # gzip of body, when that is smaller
    etag: str
    media_type: str


def _load(path: Path) -> _File:
    body = path.read_bytes()
    ext = path.suffix.lower()
    gz = gzip.compress(body, 9, mtime=0) if ext in _COMPRESSIBLE and len(body) > 256 else None
    media = _TYPES.get(ext) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return _File(body, gz if gz is not None and len(gz) < len(body) else None, f'"{hashlib.sha1(body).hexdigest()[:20]}"', media)


class StaticDir:
    """Files under `root`; nothing outside it (no `..`, no symlinks out) and no hidden
    names. Each file is read (and compressed) once; with `watch` (a --path directory,
    which may change while the server runs) it is read again when its size or mtime
    changes. Only files that exist are kept, so 404s add nothing."""

    def __init__(self, root: Path, watch: bool) -> None:
        self.root = root.resolve()
        self.watch = watch
        self._cache: Dict[str, Tuple[Tuple[int, int], _File]] = {}

    def get(self, rel: str) -> Optional[_File]:
        hit = self._cache.get(rel)
        if hit is not None and not self.watch:
            return hit[1]
        parts = [p for p in rel.split("/") if p]
        if not parts or any(p.startswith(".") or "\\" in p or "\0" in p for p in parts):
            return None
        try:
            real = self.root.joinpath(*parts).resolve()
            if not real.is_relative_to(self.root) or not real.is_file():
                return None
            st = real.stat()
            stamp = (st.st_size, st.st_mtime_ns)
            if hit is None or hit[0] != stamp:
                hit = (stamp, _load(real))
                self._cache[rel] = hit
            return hit[1]
        except (OSError, ValueError):
            return None


def _reply(request: Request, f: Optional[_File], csp: bool) -> Response:
    if f is None:
        raise NotFoundException(f"File Not Found: {request.url.path}")
    headers = {"Cache-Control": "no-cache", "ETag": f.etag, "X-Content-Type-Options": "nosniff", "Vary": "Accept-Encoding"}
    if csp:
        headers.update({"Content-Security-Policy": CSP, "Referrer-Policy": "no-referrer"})
    if f.etag in request.headers.get("if-none-match", ""):
        return Response(b"", status_code=304, headers=headers)
    body = f.body
    if f.gz is not None and "gzip" in request.headers.get("accept-encoding", ""):
        body = f.gz
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=f.media_type, headers=headers)


def _index(files: StaticDir, csp: bool):
    @get("/", opt=_PUBLIC, include_in_schema=False, sync_to_thread=False)
    def index(request: Request) -> Response:
        # under --api-prefix the page is `<prefix>/`: with the slash, its relative asset
        # and API URLs resolve inside the prefix
        raw = request.scope.get("raw_path") or request.url.path.encode()  # the path as sent (Litestar strips the slash)
        if not raw.split(b"?")[0].endswith(b"/"):
            q = f"?{request.url.query}" if request.url.query else ""
            return Redirect(path=request.url.path.rstrip("/") + "/" + q, status_code=308)
        return _reply(request, files.get("index.html"), csp)

    return index


def routes(config: ServerConfig) -> List[object]:
    """The Web UI's handlers for `config` (none with --no-webui)."""
    if not config.webui:
        return []
    if config.static_path:
        files = StaticDir(Path(config.static_path), watch=True)

        @get("/{file_path:path}", opt=_PUBLIC, include_in_schema=False, sync_to_thread=False)
        def static_file(request: Request, file_path: FromPath[str]) -> Response:
            return _reply(request, files.get(file_path), csp=False)

        # a --path directory is the user's own page: its policy is its own business
        return [_index(files, csp=False), static_file]
    builtin = StaticDir(BUILTIN, watch=False)

    @get("/webui/{name:str}", opt=_PUBLIC, include_in_schema=False, sync_to_thread=False)
    def asset(request: Request, name: FromPath[str]) -> Response:
        return _reply(request, builtin.get(name), csp=True)

    @get("/favicon.ico", opt=_PUBLIC, include_in_schema=False, sync_to_thread=False)
    def favicon(request: Request) -> Response:
        # browsers ask for /favicon.ico now and then despite the page's <link rel=icon>
        return _reply(request, builtin.get("favicon.svg"), csp=True)

    return [_index(builtin, csp=True), asset, favicon]
