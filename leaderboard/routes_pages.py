"""HTML pages (server-rendered, readable without JavaScript)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import Response

from . import views
from .responses import cached, render

router = APIRouter(include_in_schema=False)

HTML = "text/html; charset=utf-8"
ID_MAX = 2**63 - 1  # a longer number is the styled 422 page, never an overflow (500)
RowId = Annotated[int, Path(ge=0, le=ID_MAX)]


def _clamp(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, v))


@router.get("/")
async def overview(request: Request, sort: str = "avg", dir: str = "", family: str = "", modality: str = "",
                   backend: str = "", q: str = "", size: str = "") -> Response:
    params = views.OverviewParams(sort, dir, family, modality, backend, q.strip(), size)
    app = request.app

    def build() -> tuple[bytes, str]:
        return render(request, views.overview_view(app.state.sessions, app.state.cache, params)), HTML

    return await cached(request, build, scope="summary")  # progress counters do not show here


@router.get("/tasks")
async def tasks(request: Request) -> Response:
    return await cached(request, lambda: (render(request, views.tasks_view(request.app.state.sessions)), HTML))


@router.get("/tasks/{name}")
async def task(request: Request, name: str) -> Response:
    return await cached(request, lambda: (render(request, views.task_view(request.app.state.sessions, name)), HTML))


@router.get("/models")
async def models(request: Request) -> Response:
    return await cached(request, lambda: (render(request, views.models_view(request.app.state.sessions)), HTML))


@router.get("/models/{model_id}")
async def model(request: Request, model_id: RowId) -> Response:
    sessions = request.app.state.sessions
    return await cached(request, lambda: (render(request, views.model_view(sessions, model_id)), HTML))


@router.get("/runs")
async def runs(request: Request, page: int = 1, per_page: int = 50, task: str = "") -> Response:
    page, per_page = _clamp(page, 1, 10**6), _clamp(per_page, 1, 500)
    return await cached(request, lambda: (
        render(request, views.runs_view(request.app.state.sessions, page, per_page, task)), HTML))


@router.get("/runs/{run_id}")
async def run(request: Request, run_id: RowId, page: int = 1, per_page: int = 20, q: str = "",
              status: str = "all", sort: str = "") -> Response:
    page, per_page = _clamp(page, 1, 10**6), _clamp(per_page, 1, 200)
    status = status if status in views.queries.SAMPLE_FILTERS else "all"
    app = request.app
    return await cached(request, lambda: (render(request, views.run_view(
        app.state.sessions, run_id, app.state.media_roots, page=page, per_page=per_page, q=q.strip(),
        status=status, sort=sort.strip()[:200])), HTML))


@router.get("/compare")
async def compare(request: Request, a: Annotated[int | None, Query(ge=0, le=ID_MAX)] = None,
                  b: Annotated[int | None, Query(ge=0, le=ID_MAX)] = None) -> Response:
    sessions = request.app.state.sessions
    return await cached(request, lambda: (render(request, views.compare_view(sessions, a, b)), HTML))


@router.get("/api")
async def api_index(request: Request) -> Response:
    """A readable list of the JSON API (the OpenAPI spec itself is at /openapi.json)."""
    spec = request.app.openapi()
    endpoints = [(method.upper(), path, op.get("summary", ""), (op.get("description") or "").strip())
                 for path, ops in spec["paths"].items() for method, op in ops.items()]
    body = request.app.state.env.get_template("api.html").render(
        page_title="API", nav="api", endpoints=endpoints, request_path=request.url.path)
    from fastapi.responses import HTMLResponse

    return HTMLResponse(body)
