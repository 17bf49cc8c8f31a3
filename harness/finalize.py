"""Finalising a run: its metrics from the stored rows, its counts and its final status, in one transaction.

Deciding who finalises and finalising are the same transaction. It opens with a write to the run's
row (PostgreSQL: the row lock; SQLite: the database's write lock), so two finalisers of one run take
turns, and a conditional claim (``claim=``, the sweep's "every unit is done") is decided under that
lock. A process killed anywhere in here (SIGKILL included) commits nothing: the run is left as it
was, status "running" with all its rows, and whoever comes next (``harness eval`` rerun, another
sweep worker, a rerun sweep) finalises it. No other process ever sees a run "finalizing" now;
older versions committed that status before finalising, so it counts as unfinished here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from sqlalchemy import CursorResult, update
from sqlalchemy.orm import Session, sessionmaker

from harness.aggregate import aggregate
from harness.store import leases, ops
from harness.store.schema import RunRow
from harness.task import SampleRecord, Task
from harness.types import Metric

UNFINISHED = ("running", "finalizing")  # statuses a run waiting for its finaliser can have


def finalize_run(sessions: sessionmaker[Session], task: Task, run_id: int, status: str, *, seed: int,
                 owner: str, prefetched: dict[int, SampleRecord] | None = None,
                 claim: Callable[[Session], bool] | None = None) -> tuple[str, list[Metric]] | None:
    """Aggregate the run's stored rows and store metrics, counts and status; (status, metrics).

    ``owner`` gives its sample leases back in the same commit. With ``claim`` the run is finalised
    only while it is unfinished and ``claim(session)`` holds under the lock (else None, nothing
    written): of several processes that see a run complete, exactly one finalises it."""
    with sessions() as s:
        lock = update(RunRow).where(RunRow.id == run_id)
        if claim is not None:
            lock = lock.where(RunRow.status.in_(UNFINISHED))
        won = cast(CursorResult[Any], s.execute(lock.values(status="finalizing"))).rowcount == 1
        if not won or (claim is not None and not claim(s)):
            s.rollback()
            return None
        leases.release(s, run_id, owner)
        records = ops.load_records(s, run_id, prefetched)
        if status == "finished" and records and all(r.error is not None for r in records):
            status = "failed"  # nothing was measured: every stored sample is an error
        metrics = aggregate(task, records, seed=seed)
        ops.replace_metrics(s, run_id, metrics)
        ops.refresh_run_counts(s, run_id)
        ops.finish_run(s, run_id, status)
        s.commit()
    return status, metrics
