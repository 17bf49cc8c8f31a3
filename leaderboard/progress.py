"""A run's progress straight from the store, for the live run page and ``/api/runs/{id}/progress``.

Read from the sample rows and the sample-lease table on every call (never from the page cache), so
a watcher sees each commit of every worker of a run: done, errors, leased (claimed by a live worker,
not yet stored), pending (neither), the recent rate and the time left at that rate, and the running
mean of the headline score with a normal-approximation 95% interval (provisional until the run's
own metrics are written at its end).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from harness.store.progress import run_counts
from harness.store.schema import RunRow, SampleResultRow, TaskRow

from .sample_filter import score_value

Z95 = 1.959963984540054


@dataclass(slots=True)
class Progress:
    run_id: int
    status: str
    n_samples: int
    done: int
    errors: int
    unscored: int
    leased: int
    pending: int
    rate_per_s: float | None
    eta_s: float | None
    metric: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_scored: int
    error_kinds: dict[str, int]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_progress(s: Session, run_id: int) -> Progress | None:
    """The progress of run ``run_id`` (None when there is no such run)."""
    head = s.execute(select(RunRow.status, RunRow.n_samples, TaskRow.primary_metric)
                     .join(TaskRow, RunRow.task_id == TaskRow.id).where(RunRow.id == run_id)).one_or_none()
    if head is None:
        return None
    status, n_samples, metric = head
    c = run_counts(s, run_id, n_samples or 0, running=status == "running")
    mine = SampleResultRow.run_id == run_id
    x = score_value(metric)
    try:
        n, mean, mean_sq = s.execute(select(func.count(x), func.avg(x), func.avg(x * x)).where(
            mine, SampleResultRow.error.is_(None))).one()
    except DBAPIError:  # a row the engine's JSON functions refuse (NaN from an old writer): counts only
        s.rollback()
        n = mean = mean_sq = None
    value = lo = hi = None
    if n:
        value = float(mean)
        if n > 1:
            var = max(float(mean_sq) - value * value, 0.0) * n / (n - 1)
            half = Z95 * math.sqrt(var / n)
            lo, hi = value - half, value + half
    return Progress(run_id, status, n_samples or 0, c.done, c.errors, c.unscored, c.leased, c.pending, c.rate_per_s,
                    c.eta_s, metric, value, lo, hi, int(n or 0), c.error_kinds)
