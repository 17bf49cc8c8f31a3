"""Serving views: cached, gzip-aware, ETag-checked responses, and HTML rendering of a view."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from .cache import Page, make_page
from .views import View


def render(request: Request, view: View) -> bytes:
    env = request.app.state.env
    return env.get_template(view.template).render(**view.context, request_path=request.url.path).encode()


def page_response(request: Request, page: Page, *, status: int = 200) -> Response:
    headers = {"ETag": page.etag, "Vary": "Accept-Encoding", "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == page.etag:
        return Response(status_code=304, headers=headers)
    if "gzip" in request.headers.get("accept-encoding", ""):
        headers["Content-Encoding"] = "gzip"
        return Response(page.gzipped, status_code=status, media_type=page.media_type, headers=headers)
    return Response(page.body, status_code=status, media_type=page.media_type, headers=headers)


async def cached(request: Request, key: Any, build: Callable[[], tuple[bytes, str]]) -> Response:
    """The response for ``key`` from the view cache, building it in a worker thread on a miss.
    The hot path (a recently validated hit) touches neither the database nor a thread."""
    cache = request.app.state.cache
    page = cache.peek(key)
    if page is None:
        def compute() -> Page:
            body, media_type = build()
            return make_page(body, media_type)

        page = await run_in_threadpool(cache.get, key, compute)
    return page_response(request, page)


def html_key(request: Request) -> tuple[str, str, str]:
    return ("html", request.url.path, str(sorted(request.query_params.multi_items())))
