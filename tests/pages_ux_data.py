"""Shared by the page tests: hand-made runs whose scores, metadata, errors, latencies and leases
are known exactly, so filters, sorts, badges, the compare page and the live progress can be checked
against numbers written here. No tests here."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from harness.store import ops
from harness.store.schema import RunRow, utcnow
from harness.store.schema_leases import SampleLeaseRow
from harness.types import Metric

# exact_match: higher is better on 0..1; n_floating: lower is better, raw (a count)
METRICS = {"exact_match": {"direction": "higher", "scale": "fraction", "display": "exact match"},
           "n_floating": {"direction": "lower", "scale": "raw", "display": "floating objects"},
           "length": {"direction": None, "scale": "raw", "display": "reply length"}}
N = 12


def sample_row(run_id: int, i: int, *, right: bool, error: str | None = None, kind: str | None = None,
               latency: float = 0.1, floating: float = 0.0, category: str = "a") -> dict[str, Any]:
    return {
        "run_id": run_id, "sample_id": str(i), "epoch": 0, "input_hash": "",
        "input": {"messages": [{"role": "user", "content": [{"type": "text", "text": f"question {i}"}]}],
                  "metadata": {"category": category, "tags": ["x", f"t{i % 3}"]}},
        "target": "1", "output": f"answer {i}", "prediction": None, "answer": str(i),
        "scores": {} if error else {"exact_match": 1.0 if right else 0.0, "n_floating": floating,
                                    "length": float(i)},
        "unscored": None, "explanation": "", "details": {}, "input_tokens": 3, "output_tokens": i, "calls": 1,
        "cost": 0.0, "latency_s": latency, "cached": False, "error": error, "error_kind": kind,
        "created_at": utcnow(),
    }


def make_run(sessions: sessionmaker[Session], name: str, model: str, rows: list[dict[str, Any]] | None = None,
             *, status: str = "finished", n_samples: int = N, right: set[int] | None = None) -> int:
    """A run of task "ux" by ``model``: samples 0..N-1, those in ``right`` correct; sample 5 has a
    timeout error; latency grows with the id; n_floating is 0 on even ids, 3 on odd; the category is
    "b" on ids divisible by 4."""
    right = set(range(0, N, 2)) if right is None else right
    with sessions.begin() as s:
        task = ops.get_or_create_task(s, name="ux", version="1", content_hash="ux", family="text",
                                      description="hand-made", modalities=["text"], primary_metric="exact_match",
                                      metrics=METRICS)
        m = ops.get_or_create_model(s, model, backend="builtin", display_name=model)
        run = RunRow(name=name, task_id=task.id, model_id=m.id, config={"task": "ux", "model": model},
                     config_hash=name.ljust(64, "0")[:64], harness_version="0.1.0", status=status,
                     n_samples=n_samples, started_at=utcnow(), finished_at=utcnow() if status == "finished" else None)
        s.add(run)
        s.flush()
        if rows is None:
            rows = [sample_row(run.id, i, right=i in right, latency=0.1 * (i + 1), floating=float(i % 2) * 3,
                               category="b" if i % 4 == 0 else "a",
                               error="timed out" if i == 5 else None, kind="timeout" if i == 5 else None)
                    for i in range(N)]
        else:
            rows = [{**r, "run_id": run.id} for r in rows]
        if rows:
            ops.write_samples(s, rows)
        if status == "finished":
            n_right = len([i for i in right if i != 5])
            ops.replace_metrics(s, run.id, [Metric("exact_match", n_right / (N - 1), 0.0, 1.0, N - 1),
                                            Metric("exact_match", 0.5, 0.0, 1.0, 3, "category", "b")])
        ops.refresh_run_counts(s, run.id)
        return run.id


def add_samples(sessions: sessionmaker[Session], run_id: int, ids: range, *, right: bool = True) -> None:
    """More stored samples for a running run (what a worker's commit does), counters refreshed."""
    with sessions.begin() as s:
        ops.write_samples(s, [sample_row(run_id, i, right=right) for i in ids])
        ops.refresh_run_counts(s, run_id)


def lease(sessions: sessionmaker[Session], run_id: int, ids: range, seconds: float = 60.0) -> None:
    with sessions.begin() as s:
        for i in ids:
            s.add(SampleLeaseRow(run_id=run_id, sample_id=str(i), epoch=0, owner="host:1:tag",
                                 expires_at=utcnow() + timedelta(seconds=seconds)))
