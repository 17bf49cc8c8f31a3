"""Where a sweep stands, per run, from the database alone: done / leased / pending / errors, rate, ETA.

The counts are :func:`harness.store.progress.run_counts` (the same as the leaderboard's live run
page), per run of the sweep, with the sweep's work units done / total beside them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.store.progress import run_counts
from harness.store.schema import OPERATOR, RunRow
from harness.store.schema_sweeps import SweepRow, WorkUnitRow


@dataclass
class RunProgressRow:
    run: str
    status: str
    planned: int
    done: int
    errors: int
    leased: int
    pending: int
    units_done: int
    units_total: int
    rate: float  # samples per second, recent
    eta_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sweep_progress(sessions: sessionmaker[Session], sweep_id: int) -> list[RunProgressRow]:
    with sessions() as s:
        sweep = s.get(SweepRow, sweep_id)
        if sweep is None:
            return []
        unit_counts: dict[str, tuple[int, int]] = {}
        for name, status, n in s.execute(select(WorkUnitRow.run_name, WorkUnitRow.status, func.count())
                                         .where(WorkUnitRow.sweep_id == sweep_id)
                                         .group_by(WorkUnitRow.run_name, WorkUnitRow.status)).all():
            d, t = unit_counts.get(name, (0, 0))
            unit_counts[name] = (d + (n if status == "done" else 0), t + n)
        rows = []
        for entry in sweep.config.get("runs", []):
            name = entry["run_name"]
            planned = len(entry.get("sample_ids", [])) * int(entry.get("epochs", 1))
            # a sweep's runs are the operator's: a pushed run of the same name is someone else's
            run = s.scalar(select(RunRow).where(RunRow.name == name, RunRow.owner == OPERATOR))
            ud, ut = unit_counts.get(name, (0, 0))
            if run is None:
                rows.append(RunProgressRow(name, "queued", planned, 0, 0, 0, planned, ud, ut, 0.0, None))
                continue
            c = run_counts(s, run.id, planned, running=run.status == "running")
            eta = 0.0 if c.done >= planned else c.eta_s
            rows.append(RunProgressRow(name, run.status, planned, c.done, c.errors, c.leased, c.pending, ud, ut,
                                       c.rate_per_s or 0.0, eta))
        return rows


def format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
