"""Serving views: cached, gzip-aware, ETag-checked responses, and HTML rendering of a view.

Cached pages are keyed by the raw path and query string, so :class:`CachedPagesASGI` can answer a
repeated GET before FastAPI routes or validates anything (the overview under load is mostly this).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from .cache import Page, ViewCache, make_page
from .views import View


def render(request: Request, view: View) -> bytes:
    env = request.app.state.env
    return env.get_template(view.template).render(**view.context, request_path=request.url.path).encode()


def page_key(path: str, query_string: bytes) -> tuple[str, str, bytes]:
    return ("page", path, query_string)


def _headers(page: Page, gzipped: bool) -> list[tuple[str, str]]:
    out = [("content-type", page.media_type), ("etag", page.etag), ("vary", "Accept-Encoding"),
           ("cache-control", "no-cache"), *page.headers]
    if gzipped:
        out.append(("content-encoding", "gzip"))
    return out


def page_response(request: Request, page: Page) -> Response:
    if request.headers.get("if-none-match") == page.etag:
        return Response(status_code=304, headers=dict(_headers(page, False)[1:]))
    gz = "gzip" in request.headers.get("accept-encoding", "")
    return Response(page.gzipped if gz else page.body, headers=dict(_headers(page, gz)))


async def cached(request: Request, build: Callable[[], tuple[bytes, str]],
                 headers: tuple[tuple[str, str], ...] = (), scope: str = "full") -> Response:
    """The response for this GET from the view cache (re-checked against the database when due),
    building it in a worker thread on a miss. Fresh hits never get here: CachedPagesASGI answers them."""
    cache: ViewCache = request.app.state.cache
    key = page_key(request.url.path, request.scope.get("query_string", b""))

    def compute() -> Page:
        body, media_type = build()
        return make_page(body, media_type, headers)

    page = await run_in_threadpool(lambda: cache.get(key, compute, scope=scope))
    return page_response(request, page)


class CachedPagesASGI:
    """Answers GETs whose page is in the view cache (and was validated within ``check_every``)
    straight from the ASGI scope; everything else goes on to the app."""

    def __init__(self, app: Any, cache_of: Callable[[], ViewCache | None]) -> None:
        self.app = app
        self.cache_of = cache_of

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        cache = self.cache_of() if scope["type"] == "http" and scope["method"] == "GET" else None
        page = cache.peek(page_key(scope["path"], scope.get("query_string", b""))) if cache else None
        if page is None:
            await self.app(scope, receive, send)
            return
        accept = b""
        match = b""
        for name, value in scope["headers"]:
            if name == b"accept-encoding":
                accept = value
            elif name == b"if-none-match":
                match = value
        if match and match.decode("latin-1") == page.etag:
            await send({"type": "http.response.start", "status": 304,
                        "headers": [(b"etag", page.etag.encode()), (b"vary", b"Accept-Encoding")]})
            await send({"type": "http.response.body", "body": b""})
            return
        gz = b"gzip" in accept
        body = page.gzipped if gz else page.body
        headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in _headers(page, gz)]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


# ---- errors: one look everywhere ------------------------------------------------------------------

PROBLEM_TYPE = "application/problem+json"


def wants_json(path: str) -> bool:
    """JSON problems for the API (``/api/...``, ``/openapi.json``), styled HTML pages for the rest."""
    return path.startswith("/api/") or path.endswith(".json")


def error_response(request: Request, status: int, detail: str, *, errors: list[dict[str, Any]] | None = None,
                   headers: dict[str, str] | None = None) -> Response:
    """An RFC 9457 problem document for API routes, the styled error page for HTML routes."""
    import json
    from http import HTTPStatus

    from fastapi.responses import HTMLResponse

    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    if wants_json(request.url.path):
        body: dict[str, Any] = {"type": "about:blank", "title": title, "status": status, "detail": detail}
        if errors:
            body["errors"] = errors
        return Response(json.dumps(body, ensure_ascii=False), status_code=status, media_type=PROBLEM_TYPE,
                        headers=headers)
    env = request.app.state.env
    html = env.get_template("error.html").render(page_title=title, message=detail, nav="", status=status,
                                                 request_path=request.url.path)
    return HTMLResponse(html, status_code=status, headers=headers)


def validation_detail(errors: list[dict[str, Any]], limit: int = 5) -> tuple[str, list[dict[str, Any]]]:
    """A one-line summary naming the offending fields, plus a JSON-safe list of them."""
    items = []
    for e in errors[:50]:
        loc = [str(p) for p in e.get("loc", ()) if p != "body"]
        items.append({"field": ".".join(loc), "message": str(e.get("msg", "invalid"))[:200]})
    summary = "; ".join(f"{i['field'] or 'body'}: {i['message']}" for i in items[:limit])
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return f"invalid request: {summary}{more}", items
