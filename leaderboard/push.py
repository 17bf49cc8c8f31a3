"""Client side of ``harness push``: read a run from a local database and upload it in chunks."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from harness.store import ops
from harness.store.schema import JudgementRow, MetricRow, ModelRow, RunRow, SampleResultRow, TaskRow

from .ingest import FORMAT

CHUNK = 500
SAMPLE_FIELDS = ["sample_id", "epoch", "input_hash", "input", "target", "output", "prediction", "answer", "scores",
                 "unscored", "explanation", "details", "input_tokens", "output_tokens", "calls", "cost", "latency_s",
                 "cached", "error", "error_kind", "created_at"]


class PushError(RuntimeError):
    """The upload failed; the message says why in one line."""


def _json_safe(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return v


def _row(obj: Any, fields: list[str]) -> dict[str, Any]:
    return {f: _json_safe(getattr(obj, f)) for f in fields}


def run_header(s: Session, run: RunRow) -> dict[str, Any]:
    task = s.get(TaskRow, run.task_id)
    model = s.get(ModelRow, run.model_id)
    assert task is not None and model is not None
    metrics = s.scalars(select(MetricRow).where(MetricRow.run_id == run.id)).all()
    return {
        "format": FORMAT,
        "task": _row(task, ["name", "version", "content_hash", "family", "description", "modalities",
                            "primary_metric", "metrics"]),
        "model": _row(model, ["spec", "backend", "display_name", "info"]),
        "run": _row(run, ["name", "judge_spec", "config", "config_hash", "harness_version", "git_revision", "status",
                          "n_samples", "created_at", "started_at", "finished_at"]),
        "metrics": [_row(m, ["name", "value", "ci_low", "ci_high", "n", "breakdown_key", "breakdown_value"])
                    for m in metrics if m.value is not None and math.isfinite(m.value)],
    }


def payloads(sessions: sessionmaker[Session], run_name: str, chunk: int = CHUNK) -> Iterator[dict[str, Any]]:
    """The POST bodies for one run: header + a chunk of samples, then chunks of judgements."""
    with sessions() as s:
        run = ops.find_run(s, run_name)
        if run is None:
            raise PushError(f"no run named {run_name!r} in the local database (see `harness runs`)")
        header = run_header(s, run)
        cols = [getattr(SampleResultRow, f) for f in SAMPLE_FIELDS]
        sent = False
        last: tuple[str, int] = ("", -1)
        while True:  # keyset paging: constant memory for big runs
            q = (select(*cols).where(SampleResultRow.run_id == run.id)
                 .where((SampleResultRow.sample_id > last[0])
                        | ((SampleResultRow.sample_id == last[0]) & (SampleResultRow.epoch > last[1])))
                 .order_by(SampleResultRow.sample_id, SampleResultRow.epoch).limit(chunk))
            rows = s.execute(q).all()
            if not rows:
                break
            samples = [{f: _json_safe(v) for f, v in zip(SAMPLE_FIELDS, r, strict=True)} for r in rows]
            for smp in samples:
                smp["scores"] = {k: _json_safe(v) for k, v in (smp["scores"] or {}).items()}
            last = (rows[-1][0], rows[-1][1])
            sent = True
            yield {**header, "samples": samples}
        jfields = ["sample_id", "epoch", "judge_spec", "prompt_hash", "raw", "verdict", "created_at"]
        jrows = s.scalars(select(JudgementRow).where(JudgementRow.run_id == run.id).order_by(JudgementRow.id)).all()
        for i in range(0, len(jrows), chunk):
            sent = True
            yield {**header, "judgements": [_row(j, jfields) for j in jrows[i:i + chunk]]}
        if not sent:  # a run without samples still registers its row and metrics
            yield header


def push_run(sessions: sessionmaker[Session], run_name: str, url: str, token: str, *, client: Any = None,
             timeout: float = 120.0, on_chunk: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Upload one run to the leaderboard at ``url``; returns totals. ``client``: an ``httpx.Client``
    (tests pass FastAPI's TestClient); by default a new one is made."""
    import httpx

    own = client is None
    http = client or httpx.Client(timeout=timeout)
    endpoint = url.rstrip("/") + "/api/runs"
    totals: dict[str, Any] = {"run_id": None, "run_name": run_name, "samples_inserted": 0, "judgements_inserted": 0,
                              "requests": 0}
    try:
        for body in payloads(sessions, run_name):
            try:
                resp = http.post(endpoint, json=body, headers={"Authorization": f"Bearer {token}"})
            except httpx.HTTPError as exc:
                raise PushError(f"cannot reach {endpoint}: {exc}") from None
            if resp.status_code != 200:
                raise PushError(f"{endpoint} answered {resp.status_code}: {_detail(resp)}")
            result = resp.json()
            totals["run_id"] = result["run_id"]
            totals["samples_inserted"] += result["samples_inserted"]
            totals["judgements_inserted"] += result["judgements_inserted"]
            totals["n_done"] = result["n_done"]
            # the server stores only the metrics it recomputes from the samples; the last answer is final
            totals["metrics_refused"] = result.get("metrics_refused", [])
            totals["requests"] += 1
            if on_chunk:
                on_chunk(result)
    finally:
        if own:
            http.close()
    return totals


def _detail(resp: Any) -> str:
    try:
        detail = resp.json().get("detail", resp.text)
    except ValueError:
        detail = resp.text
    return str(detail)[:300]
