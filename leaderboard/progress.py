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
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from harness.store.schema import RunRow, SampleResultRow, TaskRow, utcnow
from harness.store.schema_leases import SampleLeaseRow

from .sample_filter import score_value

RATE_WINDOW_S = 120.0  # the rate is over the samples stored in the last two minutes: recent, not lifetime
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
    mine = SampleResultRow.run_id == run_id
    done, errors = s.execute(select(func.count(SampleResultRow.id), func.count(SampleResultRow.error))
                             .where(mine)).one()
    unscored = s.scalar(select(func.count(SampleResultRow.id)).where(
        mine, SampleResultRow.error.is_(None), SampleResultRow.unscored.is_not(None))) or 0
    kinds = dict(s.execute(select(SampleResultRow.error_kind, func.count()).where(
        mine, SampleResultRow.error.is_not(None)).group_by(SampleResultRow.error_kind)).all())
    now = utcnow()
    stored = select(SampleResultRow.id).where(mine, SampleResultRow.sample_id == SampleLeaseRow.sample_id,
                                              SampleResultRow.epoch == SampleLeaseRow.epoch).exists()
    leased = s.scalar(select(func.count()).select_from(SampleLeaseRow).where(
        SampleLeaseRow.run_id == run_id, SampleLeaseRow.expires_at > now, ~stored)) or 0
    pending = max(0, (n_samples or 0) - done - leased)
    since = now - timedelta(seconds=RATE_WINDOW_S)
    recent, first = s.execute(select(func.count(SampleResultRow.id), func.min(SampleResultRow.created_at))
                              .where(mine, SampleResultRow.created_at >= since)).one()
    rate = eta = None
    if recent and first is not None:
        span = max((now - first).total_seconds(), 1.0)
        rate = recent / span if recent > 1 else None
    if rate and status == "running":
        eta = (pending + leased) / rate
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
    return Progress(run_id, status, n_samples or 0, done, errors, unscored, leased, pending, rate, eta, metric,
                    value, lo, hi, int(n or 0), {(k or "error"): v for k, v in kinds.items()})
