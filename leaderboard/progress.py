"""A run's progress straight from the store, for the live run page and ``/api/runs/{id}/progress``.

Read from the sample rows and the sample-lease table on every call (never from the page cache), so
a watcher sees each commit of every worker of a run: done, errors, leased (claimed by a live worker,
not yet stored), pending (neither), the recent rate and the time left at that rate, and the running
mean of the headline score with a provisional 95% interval inside the metric's declared range
(``running_interval``; the run's own bootstrap metrics replace it at its end).
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


BOUNDS = {"fraction": (0.0, 1.0), "percent": (0.0, 100.0)}


def running_interval(mean: float, mean_sq: float, n: int, scale: str | None) -> tuple[float, float]:
    """A provisional 95% interval for a running mean, inside the metric's declared range: the Wilson
    score interval when every value is 0 or 1 on a fraction scale (mean of squares = mean; it never
    leaves [0, 1] and holds its coverage at small n and near 0 or 1, where the normal one reads
    "0.024 [-0.023, 0.070]"), else the normal approximation clipped to the scale's bounds."""
    if scale == "fraction" and abs(mean_sq - mean) <= 1e-9 and 0.0 <= mean <= 1.0:
        z2 = Z95 * Z95
        centre = (mean + z2 / (2 * n)) / (1 + z2 / n)
        half = Z95 * math.sqrt(mean * (1 - mean) / n + z2 / (4 * n * n)) / (1 + z2 / n)
        # at a mean of exactly 0 or 1 the interval's end is that value (float rounding can miss it by 1 ulp)
        low = 0.0 if mean == 0.0 else max(centre - half, 0.0)
        high = 1.0 if mean == 1.0 else min(centre + half, 1.0)
        return low, high
    var = max(mean_sq - mean * mean, 0.0) * n / (n - 1)
    half = Z95 * math.sqrt(var / n)
    low, high = BOUNDS.get(scale or "", (-math.inf, math.inf))
    return max(mean - half, low), min(mean + half, high)


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
    head = s.execute(select(RunRow.status, RunRow.n_samples, TaskRow.primary_metric, TaskRow.metrics)
                     .join(TaskRow, RunRow.task_id == TaskRow.id).where(RunRow.id == run_id)).one_or_none()
    if head is None:
        return None
    status, n_samples, metric, declared = head
    declaration = (declared or {}).get(metric) if isinstance(declared, dict) else None
    scale = declaration.get("scale") if isinstance(declaration, dict) else None
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
            lo, hi = running_interval(value, float(mean_sq), int(n), scale)
    return Progress(run_id, status, n_samples or 0, c.done, c.errors, c.unscored, c.leased, c.pending, c.rate_per_s,
                    c.eta_s, metric, value, lo, hi, int(n or 0), c.error_kinds)
