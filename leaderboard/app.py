"""The leaderboard web app: server-rendered pages, a JSON/CSV API with OpenAPI, authenticated push.

``create_app(db_url)`` opens the results database (``harness.store.db.open_db``) and keeps the
sessionmaker on ``app.state.sessions``. Pages work without JavaScript; plotly.js (served from the
installed ``plotly`` package, never a CDN) only draws charts. Static files are served gzipped from
memory under versioned URLs (leaderboard.assets); other responses over 1 kB are gzipped on the fly.
A Content-Security-Policy allows scripts from this origin only, a second line of defence behind
Jinja's autoescaping of model outputs.
"""

from __future__ import annotations

import os
import struct
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.gzip import GZipMiddleware

from harness.store.db import open_db

from .assets import Assets
from .cache import ViewCache
from .media import allowed_path, kind_of, media_roots_from_env
from .responses import CachedPagesASGI, error_response, validation_detail
from .templating import STATIC_DIR, make_env
from .views import NotFound

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "media-src 'self'; font-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
       "form-action 'self'; frame-ancestors 'none'")


class SecurityHeaders:
    """Pure ASGI middleware (cheaper than BaseHTTPMiddleware) adding CSP and friends."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers += [(b"content-security-policy", CSP.encode()), (b"x-content-type-options", b"nosniff"),
                            (b"referrer-policy", b"same-origin"), (b"x-frame-options", b"DENY")]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class GZipExceptMedia:
    """Starlette's gzip for everything but /media: images and video are compressed already, and a
    gzipped video would lose the byte ranges a player seeks with."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=1024, compresslevel=5)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/media"):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def plotly_js_path() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the plotly package is not installed (pip install plotly)")
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"


DEFAULT_MAX_PUSH_MB = 64


def body_limit(scope: MutableMapping[str, Any]) -> int | None:
    """The most body bytes a request may send (413 past it, before anything parses it): the push is
    authenticated before its body is read and then capped at ``max_push_bytes``; the arena's
    endpoints allow what a prompt and an image need; everything else takes no body to speak of."""
    from .arena.bodylimit import DEFAULT_MAX_BODY_BYTES, arena_limit

    path = scope.get("path", "")
    if path == "/api/runs" and scope.get("method") == "POST":
        return None
    if path.startswith(("/arena/", "/api/arena/")) or path == "/arena":
        return arena_limit(scope)
    return DEFAULT_MAX_BODY_BYTES


def create_app(db_url: str | None = None, *, write_token: str | None = None,
               media_roots: list[str | Path] | None = None, cache_seconds: float = 1.0,
               cache_entries: int = 512, max_push_bytes: int | None = None) -> FastAPI:
    """The leaderboard app on ``db_url`` (default ``$HARNESS_DB_URL`` or ``sqlite:///harness.db``).

    ``write_token``: a token accepted for pushes besides those in ``api_tokens``; ``media_roots``:
    folders whose files the run page may show (default ``$HARNESS_MEDIA_ROOT``); ``cache_seconds``:
    how stale a cached page may get before the database fingerprint is checked again;
    ``cache_entries``: how many rendered pages to keep (0 turns the cache off: the benchmark baseline);
    ``max_push_bytes``: the largest push body accepted (default ``$HARNESS_MAX_PUSH_MB`` or 64 MB; 413 past it).
    """
    import harness

    app = FastAPI(title="harness leaderboard", version=harness.__version__, docs_url=None, redoc_url=None,
                  description="Results of the evaluation harness: read freely, write with a bearer token.")
    app.state.sessions = open_db(db_url)
    app.state.cache = ViewCache(app.state.sessions, check_every=cache_seconds, max_entries=cache_entries)
    app.state.write_token = write_token
    app.state.progress_memo = {}  # run id -> (read at, progress): /api/runs/{id}/progress
    app.state.max_push_bytes = max_push_bytes or int(
        float(os.environ.get("HARNESS_MAX_PUSH_MB") or DEFAULT_MAX_PUSH_MB) * 1024 * 1024)
    app.state.media_roots = [Path(p) for p in media_roots] if media_roots is not None else media_roots_from_env()
    assets = app.state.assets = Assets(Path(STATIC_DIR), {"plotly.min.js": plotly_js_path()})
    app.state.env = make_env()
    app.state.env.globals["asset"] = assets.url  # templates link /static/NAME?v=HASH (base.html, static_url)
    # innermost: pages from the view cache are gzipped already (content-encoding set: passed through)
    app.add_middleware(GZipExceptMedia)
    app.add_middleware(CachedPagesASGI, cache_of=lambda: app.state.cache)
    from .arena.bodylimit import BodyLimit

    app.add_middleware(BodyLimit, limit_for=body_limit)  # before anything reads a body
    app.add_middleware(SecurityHeaders)  # added last: outermost, so cached answers get the headers too

    def static_file(request: Request, name: str) -> Response:
        answer = assets.response(request, name)
        return answer if answer is not None else error_response(request, 404, "no such static file")

    # its own route (the arena looks for this path to reuse our copy of plotly.js)
    @app.get("/static/plotly.min.js", include_in_schema=False)
    def plotly_min_js(request: Request) -> Response:
        return static_file(request, "plotly.min.js")

    @app.get("/static/{name:path}", include_in_schema=False)
    def static(request: Request, name: str) -> Response:
        return static_file(request, name)

    @app.get("/media/mesh", include_in_schema=False)
    def media_mesh(request: Request, path: str) -> Response:
        """A mesh file under a media root as the arena viewer's figure (vertices and faces only)."""
        from .arena.mesh import MeshError, mesh_figure, read_mesh

        real = allowed_path(path, app.state.media_roots)
        if real is None or kind_of(str(real)) != "mesh":
            return error_response(request, 404, "no such mesh file")
        try:
            figure = mesh_figure(*read_mesh(real))
        except (MeshError, OSError, ValueError, KeyError, IndexError, struct.error) as exc:
            return JSONResponse({"error": f"mesh cannot be shown: {str(exc)[:200]}"}, status_code=422)
        return JSONResponse(figure, headers={"Cache-Control": "no-cache"})

    @app.get("/media", include_in_schema=False)
    def media(request: Request, path: str) -> FileResponse:
        real = allowed_path(path, app.state.media_roots)
        if real is None:  # same answer for "missing" and "not allowed": no probing of the file system
            return error_response(request, 404, "no such media file")  # type: ignore[return-value]
        if kind_of(str(real)) == "file":  # never render other files (HTML, ...) in our origin
            return FileResponse(real, media_type="application/octet-stream", filename=real.name)
        return FileResponse(real)

    # every error has one look: a JSON problem under /api/, the styled page elsewhere (never the
    # framework's raw default), and nothing internal (no traceback, no SQL) in either
    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound) -> Response:
        return error_response(request, 404, str(exc))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        return error_response(request, exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        detail, errors = validation_detail(list(exc.errors()))
        return error_response(request, 422, detail, errors=errors)

    @app.exception_handler(OverflowError)
    async def overflow(request: Request, exc: OverflowError) -> Response:  # a number no column can hold
        return error_response(request, 422, "a number in the request is out of range")

    @app.exception_handler(Exception)
    async def internal(request: Request, exc: Exception) -> Response:
        return error_response(request, 500, "internal error (logged on the server)")

    from .routes_api import router as api_router
    from .routes_pages import router as pages_router

    app.include_router(pages_router)
    app.include_router(api_router)
    try:
        from harness.leaderboard.arena import router as arena_router

        app.include_router(arena_router)
    except ImportError:
        pass
    return app
