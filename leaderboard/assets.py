"""Static files served from memory, gzip-compressed once, with versioned URLs cached for a year.

Every page links ``/static/NAME?v=VERSION`` where VERSION hashes the file's bytes, so a browser may
keep a file forever (``immutable``) and a changed file is a new URL. An unversioned or outdated URL
still answers, with ``no-cache`` (revalidate by ETag). plotly.min.js (4.8 MB raw, 1.4 MB gzipped)
comes from the installed ``plotly`` package, never a CDN.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import mimetypes
import threading
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

YEAR = 365 * 24 * 3600
TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
COMPRESSIBLE = (".js", ".css", ".svg", ".json", ".txt", ".html")


@dataclass(frozen=True, slots=True)
class Asset:
    body: bytes
    gzipped: bytes | None  # None when compressing does not pay (images) or the file is tiny
    media_type: str
    version: str  # the first 12 hex digits of the SHA-256 of the bytes

    @property
    def etag(self) -> str:
        return f'"{self.version}"'


@functools.lru_cache(maxsize=64)
def _load(path: Path, mtime_ns: int, size: int) -> Asset:  # keyed by mtime and size: an edited file reloads
    body = path.read_bytes()
    gz = gzip.compress(body, 6, mtime=0) if path.suffix in COMPRESSIBLE and len(body) > 512 else None
    media_type = TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return Asset(body, gz if gz is not None and len(gz) < len(body) else None, media_type,
                 hashlib.sha256(body).hexdigest()[:12])


class Assets:
    """The files of one static folder plus extra named files (plotly.min.js)."""

    def __init__(self, folder: Path, extra: dict[str, Path] | None = None) -> None:
        self.folder = folder.resolve()
        self.extra = dict(extra or {})
        self._lock = threading.Lock()

    def path_of(self, name: str) -> Path | None:
        if name in self.extra:
            return self.extra[name]
        if not name or "\x00" in name:
            return None
        try:
            path = (self.folder / name).resolve(strict=True)
        except (OSError, RuntimeError):
            return None
        return path if path.is_relative_to(self.folder) and path.is_file() else None

    def get(self, name: str) -> Asset | None:
        path = self.path_of(name)
        if path is None:
            return None
        st = path.stat()
        with self._lock:  # one compression of plotly.js, however many first requests arrive together
            return _load(path, st.st_mtime_ns, st.st_size)

    def url(self, name: str) -> str:
        """``/static/NAME?v=VERSION`` (the unversioned URL when the file is missing)."""
        asset = self.get(name)
        return f"/static/{name}" + (f"?v={asset.version}" if asset else "")

    def response(self, request: Request, name: str) -> Response | None:
        asset = self.get(name)
        if asset is None:
            return None
        versioned = request.query_params.get("v") == asset.version
        headers = {"ETag": asset.etag, "Vary": "Accept-Encoding",
                   "Cache-Control": f"public, max-age={YEAR}, immutable" if versioned else "no-cache"}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        if asset.gzipped is not None and "gzip" in request.headers.get("accept-encoding", ""):
            return Response(asset.gzipped, media_type=asset.media_type, headers={**headers, "Content-Encoding": "gzip"})
        return Response(asset.body, media_type=asset.media_type, headers=headers)
