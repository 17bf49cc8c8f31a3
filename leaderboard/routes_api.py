"""The JSON API (documented by OpenAPI at /openapi.json): every table as JSON and CSV, a run's
samples paged as JSON or whole as JSONL, and the authenticated push endpoint."""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError
from sqlalchemy.exc import IntegrityError
from starlette.concurrency import run_in_threadpool

from . import views
from .ingest import PushConflict, PushForbidden, PushIn, PushResult, ingest
from .responses import cached
from .tables import Table, to_csv, to_json
from .tokens import Identity, identify

router = APIRouter(prefix="/api", tags=["leaderboard"])

JSON_TYPE = "application/json"
CSV_TYPE = "text/csv; charset=utf-8"
ID_MAX = 2**63 - 1  # the largest id any engine stores; a longer number is a 422, never an overflow (500)
RowId = Annotated[int, Path(ge=0, le=ID_MAX)]
QueryId = Annotated[int, Query(ge=0, le=ID_MAX)]


def _table_response_builder(make_view, name: str, fmt: str):  # type: ignore[no-untyped-def]
    def build() -> tuple[bytes, str]:
        view: views.View = make_view()
        table: Table = view.tables[name]
        if fmt == "csv":
            return to_csv(table).encode(), CSV_TYPE
        return json.dumps(to_json(table), ensure_ascii=False, default=str).encode(), JSON_TYPE
    return build


async def _table(request: Request, make_view, name: str, fmt: str,  # type: ignore[no-untyped-def]
                 scope: str = "full") -> Response:
    headers = (("content-disposition", f'attachment; filename="{name}.csv"'),) if fmt == "csv" else ()
    return await cached(request, _table_response_builder(make_view, name, fmt), headers, scope)


def _overview(request: Request, sort: str, dir: str, family: str, modality: str, backend: str, q: str,  # type: ignore[no-untyped-def]
              size: str):
    params = views.OverviewParams(sort, dir, family, modality, backend, q.strip(), size)
    return lambda: views.overview_view(request.app.state.sessions, request.app.state.cache, params)


@router.get("/overview", summary="Models x tasks: headline metric, 95% CI, n, rank range (JSON)")
async def overview_json(request: Request, sort: str = "avg", dir: str = "", family: str = "", modality: str = "",
                        backend: str = "", q: str = "", size: str = "") -> Response:
    return await _table(request, _overview(request, sort, dir, family, modality, backend, q, size), "overview", "json",
                        "summary")


@router.get("/overview.csv", summary="Models x tasks (CSV)")
async def overview_csv(request: Request, sort: str = "avg", dir: str = "", family: str = "", modality: str = "",
                       backend: str = "", q: str = "", size: str = "") -> Response:
    return await _table(request, _overview(request, sort, dir, family, modality, backend, q, size), "overview", "csv",
                        "summary")


@router.get("/tasks", summary="Tasks with run and model counts (JSON)")
async def tasks_json(request: Request) -> Response:
    return await _table(request, lambda: views.tasks_view(request.app.state.sessions), "tasks", "json")


@router.get("/tasks.csv", summary="Tasks (CSV)")
async def tasks_csv(request: Request) -> Response:
    return await _table(request, lambda: views.tasks_view(request.app.state.sessions), "tasks", "csv")


@router.get("/tasks/{name}/{table}.{fmt}", summary="A task's runs or metrics table (fmt: json or csv)")
async def task_table(request: Request, name: str, table: str, fmt: str) -> Response:
    if table not in ("runs", "metrics") or fmt not in ("json", "csv"):
        raise HTTPException(404, "tables: runs, metrics; formats: json, csv")
    return await _table(request, lambda: views.task_view(request.app.state.sessions, name), table, fmt)


@router.get("/models", summary="Models with run counts (JSON)")
async def models_json(request: Request) -> Response:
    return await _table(request, lambda: views.models_view(request.app.state.sessions), "models", "json")


@router.get("/models.csv", summary="Models (CSV)")
async def models_csv(request: Request) -> Response:
    return await _table(request, lambda: views.models_view(request.app.state.sessions), "models", "csv")


@router.get("/models/{model_id}/runs.{fmt}", summary="All runs of a model (fmt: json or csv)")
async def model_runs(request: Request, model_id: RowId, fmt: str) -> Response:
    if fmt not in ("json", "csv"):
        raise HTTPException(404, "formats: json, csv")
    return await _table(request, lambda: views.model_view(request.app.state.sessions, model_id), "runs", fmt)


@router.get("/runs", summary="All runs with their headline metric (JSON)")
async def runs_json(request: Request, task: str = "") -> Response:
    return await _table(request, lambda: views.runs_view(request.app.state.sessions, 1, 50, task), "runs", "json")


@router.get("/runs.csv", summary="All runs (CSV)")
async def runs_csv(request: Request, task: str = "") -> Response:
    return await _table(request, lambda: views.runs_view(request.app.state.sessions, 1, 50, task), "runs", "csv")


@router.get("/runs/{run_id}", summary="A run: configuration, versions and metrics")
async def run_json(request: Request, run_id: RowId) -> dict[str, Any]:
    def build() -> dict[str, Any]:
        view = views.run_view(request.app.state.sessions, run_id, [], per_page=1)
        run = view.context["run"]
        return {"id": run.id, "name": run.name, "status": run.status, "task": view.context["info"].task,
                "model": view.context["info"].model_spec, "judge_spec": run.judge_spec, "config": run.config,
                "config_hash": run.config_hash, "harness_version": run.harness_version,
                "git_revision": run.git_revision, "n_samples": run.n_samples, "n_done": run.n_done,
                "n_errors": run.n_errors, "total_cost": run.total_cost,
                "created_at": views._jsonable(run.created_at), "finished_at": views._jsonable(run.finished_at),
                "metrics": view.tables["metrics"].records()}
    return await run_in_threadpool(build)


@router.get("/runs/{run_id}/metrics.{fmt}", summary="A run's metric rows incl. breakdowns (fmt: json or csv)")
async def run_metrics(request: Request, run_id: RowId, fmt: str) -> Response:
    if fmt not in ("json", "csv"):
        raise HTTPException(404, "formats: json, csv")
    return await _table(request, lambda: views.run_view(request.app.state.sessions, run_id, [], per_page=1),
                        "metrics", fmt)


@router.get("/runs/{run_id}/samples", summary="A page of a run's sample rows (searchable, filterable, sortable)")
async def run_samples(request: Request, run_id: RowId, page: Annotated[int, Query(ge=1, le=10**9)] = 1,
                      per_page: Annotated[int, Query(ge=1, le=500)] = 50, q: str = "",
                      status: Annotated[str, Query(pattern="^(all|errors|unscored|scored)$")] = "all",
                      sort: Annotated[str, Query(max_length=200)] = "") -> dict[str, Any]:
    """``q``: text, ``score:NAME<0.5``, ``meta:KEY=VALUE``, ``error:KIND``; ``sort``: ``id``, ``latency``,
    ``cost``, ``tokens``, ``input_tokens``, ``created`` or ``score:NAME``, ``-`` first for descending. A page
    past the end answers the last page (its number in ``page``)."""
    total, page, rows = await run_in_threadpool(views.sample_dicts, request.app.state.sessions, run_id, page=page,
                                                per_page=per_page, q=q.strip(), status=status, sort=sort.strip())
    return {"run_id": run_id, "total": total, "page": page, "per_page": per_page, "samples": rows}


@router.get("/runs/{run_id}/progress", summary="A run's live progress: done, leased, pending, errors, rate, ETA")
async def run_progress(request: Request, run_id: RowId) -> Response:
    """Read from the store on every call (never cached): sample counts, live leases, the rate over the
    last two minutes, the time left at that rate and the running mean of the headline score."""
    import time

    from .progress import run_progress as progress_of

    # many people watching one run cost one read per cache interval (cache_seconds), not one each
    # (a read takes ~0.1 s at 20k samples)
    memo: dict[int, tuple[float, dict[str, Any] | None]] = request.app.state.progress_memo
    fresh_for = request.app.state.cache.check_every

    def build() -> dict[str, Any] | None:
        hit = memo.get(run_id)
        if hit is not None and time.monotonic() - hit[0] < fresh_for:
            return hit[1]
        with request.app.state.sessions() as s:
            p = progress_of(s, run_id)
        body = None if p is None else p.as_dict()
        if len(memo) > 1000:
            memo.clear()
        memo[run_id] = (time.monotonic(), body)
        return body

    body = await run_in_threadpool(build)
    if body is None:
        raise HTTPException(404, f"no run with id {run_id}")
    return Response(json.dumps(body), media_type=JSON_TYPE, headers={"Cache-Control": "no-store"})


@router.get("/runs/{run_id}/samples.jsonl", summary="All of a run's sample rows as JSON lines")
async def run_samples_jsonl(request: Request, run_id: RowId) -> StreamingResponse:
    sessions = request.app.state.sessions
    await run_in_threadpool(views.sample_dicts, sessions, run_id, page=1, per_page=1, q="", status="all")  # 404
    return StreamingResponse(views.iter_sample_jsonl(sessions, run_id), media_type="application/x-ndjson",
                             headers={"Content-Disposition": f'attachment; filename="run-{run_id}-samples.jsonl"'})


@router.get("/compare", summary="Paired comparison of two runs on shared samples (JSON)")
async def compare_json(request: Request, a: QueryId, b: QueryId) -> Response:
    return await _table(request, lambda: views.compare_view(request.app.state.sessions, a, b), "compare", "json")


@router.get("/compare.csv", summary="Paired comparison of two runs (CSV)")
async def compare_csv(request: Request, a: QueryId, b: QueryId) -> Response:
    return await _table(request, lambda: views.compare_view(request.app.state.sessions, a, b), "compare", "csv")


# ---- writes --------------------------------------------------------------------------------------


def require_token(request: Request) -> Identity:
    """Bearer token check for writes; 401 for a missing, unknown or revoked token. Runs before the
    body is read, so an unauthenticated client cannot make the server parse anything."""
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "writes need 'Authorization: Bearer <token>' (harness tokens create NAME)",
                            headers={"WWW-Authenticate": "Bearer"})
    who = identify(request.app.state.sessions, token.strip(), request.app.state.write_token)
    if who is None:
        raise HTTPException(401, "invalid or revoked token", headers={"WWW-Authenticate": "Bearer"})
    return who


async def read_capped(request: Request, limit: int) -> bytes:
    """The request body, streamed, refused with 413 as soon as it is longer than ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise HTTPException(413, f"push body larger than the server's limit of {limit} bytes; push in smaller chunks")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"push body larger than the server's limit of {limit} bytes; push in smaller "
                                "chunks")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_push(raw: bytes) -> PushIn:
    """The body as a PushIn; 422 (naming the fields) for anything else, NaN and 40-digit numbers included."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise HTTPException(422, f"push body is not JSON: {str(exc)[:200]}") from None
    try:
        return PushIn.model_validate(data)
    except ValidationError as exc:
        raise RequestValidationError(exc.errors(include_url=False, include_context=False)) from None


@router.post("/runs", summary="Upload (a chunk of) a run; idempotent", response_model=PushResult,
             openapi_extra={"requestBody": {"required": True, "content": {"application/json": {
                 "schema": {"type": "object", "description": "task, model, run, metrics, samples, judgements "
                            "(see harness.leaderboard.ingest.PushIn)"}}}}})
async def push(request: Request) -> PushResult:
    """Upsert the task, model and run rows, insert the sample and judgement rows not already
    present, replace the run's metrics with those the server recomputes from the stored samples.
    Sending the same body again changes nothing. The token is checked before the body is read; a
    body over the server's size limit is refused with 413; a run another token pushed answers 403."""
    who = await run_in_threadpool(require_token, request)
    body = parse_push(await read_capped(request, request.app.state.max_push_bytes))

    def write() -> PushResult:
        with request.app.state.sessions.begin() as s:
            return ingest(s, body, who)

    try:
        result = await run_in_threadpool(write)
    except PushForbidden as exc:
        raise HTTPException(403, str(exc)) from None
    except PushConflict as exc:
        raise HTTPException(409, str(exc)) from None
    except IntegrityError as exc:  # e.g. two pushes of a new run racing: the loser may retry
        raise HTTPException(409, f"conflicting concurrent write, retry: {str(exc.orig)[:200]}") from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    request.app.state.cache.bump()
    return result
