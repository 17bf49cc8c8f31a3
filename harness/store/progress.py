"""A run's progress counted from the store: done, errors, unscored, leased, pending, rate and ETA.

One definition for every watcher (``harness sweep status``, the leaderboard's live run page and its
``/api/runs/{id}/progress``), read from the sample rows and the sample-lease table, so each commit
of every worker of a run shows. *Leased* counts live leases on samples not stored yet (a worker is
on them now); *pending* is the rest of the run's planned samples; the rate is over the samples
stored in the last two minutes, and the ETA is what is left at that rate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from harness.store.schema import SampleResultRow, utcnow
from harness.store.schema_leases import SampleLeaseRow

RATE_WINDOW_S = 120.0  # recent, not lifetime: a resumed run's old rows do not inflate the rate


@dataclass(slots=True)
class RunCounts:
    done: int
    errors: int
    unscored: int
    leased: int
    pending: int
    rate_per_s: float | None
    eta_s: float | None
    error_kinds: dict[str, int] = field(default_factory=dict)


def run_counts(s: Session, run_id: int, planned: int, running: bool = True) -> RunCounts:
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
    pending = max(0, planned - done - leased)
    recent, first = s.execute(select(func.count(SampleResultRow.id), func.min(SampleResultRow.created_at))
                              .where(mine, SampleResultRow.created_at >= now - timedelta(seconds=RATE_WINDOW_S))
                              ).one()
    rate = eta = None
    if recent and recent > 1 and first is not None:
        rate = recent / max((now - first).total_seconds(), 1.0)
    if rate and running:
        eta = (pending + leased) / rate
    return RunCounts(int(done), int(errors), int(unscored), int(leased), pending, rate, eta,
                     {(k or "error"): int(v) for k, v in kinds.items()})
