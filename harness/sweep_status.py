"""Where a sweep stands, per run, from the database alone: done / leased / pending / errors, rate, ETA.

Done and errors count stored sample rows; leased counts live sample leases (a worker is on them
now); pending is the rest of the run's planned samples. The rate is rows stored in the last minute.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from harness.store.schema import RunRow, SampleResultRow, utcnow
from harness.store.schema_leases import SampleLeaseRow
from harness.store.schema_sweeps import SweepRow, WorkUnitRow

RATE_WINDOW_S = 60.0


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
    rate: float  # samples per second over the last minute
    eta_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def run_progress(s: Session, run_id: int, planned: int) -> dict[str, Any]:
    """done / errors / leased / pending / rate / eta of one run (also the run page's live numbers)."""
    now = utcnow()
    done, errors = s.execute(select(func.count(SampleResultRow.id), func.count(SampleResultRow.error))
                             .where(SampleResultRow.run_id == run_id)).one()
    leased = s.scalar(select(func.count()).select_from(SampleLeaseRow).where(
        SampleLeaseRow.run_id == run_id, SampleLeaseRow.expires_at >= now)) or 0
    recent = s.scalar(select(func.count(SampleResultRow.id)).where(
        SampleResultRow.run_id == run_id,
        SampleResultRow.created_at >= now - timedelta(seconds=RATE_WINDOW_S))) or 0
    pending = max(0, planned - int(done) - int(leased))
    rate = recent / RATE_WINDOW_S
    left = max(0, planned - int(done))
    return {"done": int(done), "errors": int(errors), "leased": int(leased), "pending": pending,
            "rate": rate, "eta_s": (left / rate) if rate > 0 and left else (0.0 if not left else None)}


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
            run = s.scalar(select(RunRow).where(RunRow.name == name))
            ud, ut = unit_counts.get(name, (0, 0))
            if run is None:
                rows.append(RunProgressRow(name, "queued", planned, 0, 0, 0, planned, ud, ut, 0.0, None))
                continue
            p = run_progress(s, run.id, planned)
            rows.append(RunProgressRow(name, run.status, planned, p["done"], p["errors"], p["leased"], p["pending"],
                                       ud, ut, p["rate"], p["eta_s"]))
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
