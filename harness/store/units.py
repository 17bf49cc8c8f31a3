"""Work units of a sweep: create, lease, heartbeat, complete (see :mod:`harness.store.schema_sweeps`).

Every state change is one short transaction with a conditional UPDATE (``WHERE id = ? AND owner IS
the expected one``), so two workers racing for a unit on PostgreSQL or SQLite end with exactly one
owner, and no transaction is held while a model is called.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from harness.store.leases import _owner_is_dead
from harness.store.schema import OPERATOR, RunRow, utcnow
from harness.store.schema_leases import SampleLeaseRow
from harness.store.schema_sweeps import SweepRow, WorkUnitRow

UNIT_LEASE_SECONDS = 30.0  # a worker renews every third of this while its unit runs


@dataclass(frozen=True)
class Unit:
    id: int
    sweep_id: int
    entry: int
    idx: int
    run_name: str
    sample_ids: list[str]
    attempts: int


def create_sweep(sessions: sessionmaker[Session], name: str, config: dict[str, Any],
                 units: Sequence[tuple[int, str, list[str]]]) -> tuple[int, bool]:
    """The sweep row and its units (entry, run name, sample ids), or the existing sweep of that name
    (a restarted sweep: its done units stay done). Returns (sweep id, created)."""
    with sessions.begin() as s:
        row = s.scalar(select(SweepRow).where(SweepRow.name == name))
        if row is not None:
            if row.status in ("cancelled", "failed", "finished"):
                row.status, row.updated_at = "running", utcnow()
            # leases of a previous driver's workers are void: their units go back to the pool
            s.execute(update(WorkUnitRow).where(WorkUnitRow.sweep_id == row.id, WorkUnitRow.status != "done")
                      .values(status="pending", owner=None, expires_at=None, error=None))
            return row.id, False
        row = SweepRow(name=name, config=config, status="running", created_at=utcnow(), updated_at=utcnow())
        s.add(row)
        s.flush()
        counters: dict[int, int] = {}
        for entry, run_name, ids in units:
            idx = counters.get(entry, 0)
            counters[entry] = idx + 1
            s.add(WorkUnitRow(sweep_id=row.id, entry=entry, idx=idx, run_name=run_name, sample_ids=list(ids),
                              status="pending", attempts=0))
        return row.id, True


def chunk(ids: Sequence[str], size: int) -> list[list[str]]:
    size = max(1, size)
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]


def claim(sessions: sessionmaker[Session], sweep_id: int, owner: str, *, entries: Iterable[int] | None = None,
          prefer: Iterable[int] = (), seconds: float = UNIT_LEASE_SECONDS) -> Unit | None:
    """Lease one claimable unit: pending, or leased with an expired lease or a dead local owner.
    Units of ``prefer``-red entries (models this worker has loaded) come first."""
    allowed = None if entries is None else set(entries)
    preferred = set(prefer)
    for _ in range(20):  # lost races retry with a fresh read
        now = utcnow()
        with sessions() as s:
            q = select(WorkUnitRow.id, WorkUnitRow.entry, WorkUnitRow.status, WorkUnitRow.owner,
                       WorkUnitRow.expires_at).where(WorkUnitRow.sweep_id == sweep_id,
                                                     WorkUnitRow.status.in_(("pending", "leased")))
            rows = s.execute(q.order_by(WorkUnitRow.id).limit(500)).all()
        candidates = [r for r in rows if (allowed is None or r.entry in allowed) and (
            r.status == "pending" or (r.expires_at is not None and r.expires_at < now)
            or (r.owner is not None and _owner_is_dead(r.owner)))]
        if not candidates:
            return None
        candidates.sort(key=lambda r: (r.entry not in preferred, r.status != "pending", r.id))
        for r in candidates[:5]:
            with sessions.begin() as s:
                cond = [WorkUnitRow.id == r.id, WorkUnitRow.status == r.status]
                cond.append(WorkUnitRow.owner.is_(None) if r.owner is None else WorkUnitRow.owner == r.owner)
                done = s.execute(update(WorkUnitRow).where(*cond).values(
                    status="leased", owner=owner, expires_at=now + timedelta(seconds=seconds),
                    attempts=WorkUnitRow.attempts + 1))
                if getattr(done, "rowcount", 0) == 1:
                    u = s.get(WorkUnitRow, r.id)
                    assert u is not None
                    return Unit(u.id, u.sweep_id, u.entry, u.idx, u.run_name, list(u.sample_ids), u.attempts)
    return None


def heartbeat(sessions: sessionmaker[Session], owner: str, seconds: float = UNIT_LEASE_SECONDS) -> int:
    """Extend every lease this owner holds; how many it still holds (0: they were taken or cancelled)."""
    with sessions.begin() as s:
        res = s.execute(update(WorkUnitRow).where(WorkUnitRow.owner == owner, WorkUnitRow.status == "leased")
                        .values(expires_at=utcnow() + timedelta(seconds=seconds)))
        return int(getattr(res, "rowcount", 0) or 0)


def finish(sessions: sessionmaker[Session], unit: Unit, owner: str, *, error: str | None = None) -> bool:
    """Mark the unit done (or failed with ``error``) if this owner still holds it."""
    with sessions.begin() as s:
        res = s.execute(update(WorkUnitRow).where(WorkUnitRow.id == unit.id, WorkUnitRow.owner == owner,
                                                  WorkUnitRow.status == "leased")
                        .values(status="failed" if error else "done", error=error, expires_at=None,
                                finished_at=utcnow()))
        return getattr(res, "rowcount", 0) == 1


def run_complete(s: Session, sweep_id: int, run_name: str) -> bool:
    """Every unit of this run is done (inside the caller's transaction, after it locked the run)."""
    left = s.scalar(select(func.count()).select_from(WorkUnitRow).where(
        WorkUnitRow.sweep_id == sweep_id, WorkUnitRow.run_name == run_name, WorkUnitRow.status != "done"))
    return not left


def outstanding(sessions: sessionmaker[Session], sweep_id: int) -> dict[str, int]:
    """Units by status."""
    with sessions() as s:
        rows = s.execute(select(WorkUnitRow.status, func.count()).where(WorkUnitRow.sweep_id == sweep_id)
                         .group_by(WorkUnitRow.status)).all()
    return {status: int(n) for status, n in rows}


def sweep_status(sessions: sessionmaker[Session], sweep_id: int) -> str:
    with sessions() as s:
        return s.scalar(select(SweepRow.status).where(SweepRow.id == sweep_id)) or "missing"


def set_sweep_status(sessions: sessionmaker[Session], sweep_id: int, status: str) -> None:
    with sessions.begin() as s:
        s.execute(update(SweepRow).where(SweepRow.id == sweep_id).values(status=status, updated_at=utcnow()))


def cancel(sessions: sessionmaker[Session], sweep_id: int) -> int:
    """Cancel a sweep: workers stop taking units, unfinished units go back to pending with no owner,
    and the sample leases of its runs are released. Returns the number of units released."""
    with sessions.begin() as s:
        s.execute(update(SweepRow).where(SweepRow.id == sweep_id).values(status="cancelled", updated_at=utcnow()))
        names = s.scalars(select(WorkUnitRow.run_name).where(WorkUnitRow.sweep_id == sweep_id).distinct()).all()
        res = s.execute(update(WorkUnitRow).where(WorkUnitRow.sweep_id == sweep_id, WorkUnitRow.status == "leased")
                        .values(status="pending", owner=None, expires_at=None))
        # the sweep's runs are the operator's: a pushed run of the same name is another owner's
        run_ids = s.scalars(select(RunRow.id).where(RunRow.name.in_(names), RunRow.owner == OPERATOR)).all() \
            if names else []
        if run_ids:
            s.execute(delete(SampleLeaseRow).where(SampleLeaseRow.run_id.in_(run_ids)))
            s.execute(update(RunRow).where(RunRow.id.in_(run_ids), RunRow.status == "running")
                      .values(status="interrupted"))
        return int(getattr(res, "rowcount", 0) or 0)


def find_sweep(sessions: sessionmaker[Session], name_or_id: str) -> SweepRow | None:
    with sessions() as s:
        # an id beyond the integer column is no sweep's (and would overflow the driver's integer)
        if name_or_id.isascii() and name_or_id.isdigit() and int(name_or_id) <= 2**31 - 1:
            row = s.get(SweepRow, int(name_or_id))
            if row is not None:
                return row
        return s.scalar(select(SweepRow).where(SweepRow.name == name_or_id))


def list_sweeps(sessions: sessionmaker[Session]) -> list[SweepRow]:
    with sessions() as s:
        return list(s.scalars(select(SweepRow).order_by(SweepRow.id.desc())).all())


def latest_expiry(sessions: sessionmaker[Session], sweep_id: int) -> datetime | None:
    with sessions() as s:
        return s.scalar(select(func.max(WorkUnitRow.expires_at)).where(WorkUnitRow.sweep_id == sweep_id,
                                                                        WorkUnitRow.status == "leased"))
