"""Claiming, renewing and releasing sample leases (see :mod:`harness.store.schema_leases`)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from harness.store.ops import insert_ignore
from harness.store.schema import utcnow
from harness.store.schema_leases import SampleLeaseRow

LEASE_SECONDS = 60.0  # renewed by a writing run every sixth of this (harness.writer.RENEW_SECONDS)
_HOST = socket.gethostname()[:80]


def new_owner() -> str:
    """``host:pid:tag``: the host and pid let a process on the same host see that an owner died."""
    return f"{_HOST}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _owner_is_dead(owner: str) -> bool:
    host, _, rest = owner.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != _HOST or not pid_text.isdigit():
        return False  # another machine: only the expiry can tell
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def claim(session: Session, run_id: int, owner: str, keys: Sequence[tuple[str, int]],
          seconds: float = LEASE_SECONDS) -> set[tuple[str, int]]:
    """Claim leases on ``keys``; returns the keys this owner now holds (the rest belong to a live
    process). Free keys are inserted; expired leases and leases of dead local owners are taken over."""
    if not keys:
        return set()
    now = utcnow()
    until = now + timedelta(seconds=seconds)
    inserted = _insert_free(session, run_id, owner, until, keys)
    if inserted == len(keys):
        return set(keys)  # the common case: nobody else works on this run; no read-back needed
    wanted = set(keys)
    held: set[tuple[str, int]] = set()
    sample_ids = sorted({sid for sid, _ in keys})
    for i in range(0, len(sample_ids), 500):  # stay under SQLite's bound-parameter limit
        rows = session.execute(select(SampleLeaseRow.sample_id, SampleLeaseRow.epoch, SampleLeaseRow.owner,
                                      SampleLeaseRow.expires_at)
                               .where(SampleLeaseRow.run_id == run_id,
                                      SampleLeaseRow.sample_id.in_(sample_ids[i : i + 500]))).all()
        for sid, ep, who, expires in rows:
            key = (sid, ep)
            if key not in wanted:
                continue
            if who == owner:
                held.add(key)
            elif expires < now or _owner_is_dead(who):
                taken = session.execute(update(SampleLeaseRow).where(
                    SampleLeaseRow.run_id == run_id, SampleLeaseRow.sample_id == sid, SampleLeaseRow.epoch == ep,
                    SampleLeaseRow.owner == who).values(owner=owner, expires_at=until))
                if getattr(taken, "rowcount", 0) == 1:
                    held.add(key)
    return held


def _insert_free(session: Session, run_id: int, owner: str, until: Any, keys: Sequence[tuple[str, int]]) -> int:
    """Insert leases for the keys nobody holds; the number inserted (-1 when the driver cannot say).
    Plain driver SQL: it runs once per window of samples on the runner's hot path, and SQLAlchemy's
    per-row statement building cost more than the insert itself."""
    dialect = session.get_bind().dialect.name
    columns = "(run_id, sample_id, epoch, owner, expires_at)"
    if dialect == "sqlite":
        sql = f"INSERT OR IGNORE INTO sample_leases {columns} VALUES (?, ?, ?, ?, ?)"
    elif dialect == "postgresql":
        sql = f"INSERT INTO sample_leases {columns} VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"
    else:  # pragma: no cover - other engines: the portable (slower) statement
        insert_ignore(session, SampleLeaseRow.__table__,
                      [{"run_id": run_id, "sample_id": sid, "epoch": ep, "owner": owner, "expires_at": until}
                       for sid, ep in keys], ["run_id", "sample_id", "epoch"])
        return -1
    result = session.connection().exec_driver_sql(sql, [(run_id, sid, ep, owner, until) for sid, ep in keys])
    count = getattr(result, "rowcount", -1)
    return int(count) if isinstance(count, int) else -1


def renew(session: Session, run_id: int, owner: str, seconds: float = LEASE_SECONDS) -> None:
    session.execute(update(SampleLeaseRow).where(SampleLeaseRow.run_id == run_id, SampleLeaseRow.owner == owner)
                    .values(expires_at=utcnow() + timedelta(seconds=seconds)))


def release(session: Session, run_id: int, owner: str) -> None:
    session.execute(delete(SampleLeaseRow).where(SampleLeaseRow.run_id == run_id, SampleLeaseRow.owner == owner))


def held_elsewhere(session: Session, run_id: int, owner: str) -> int:
    """How many live leases of this run other owners hold."""
    now = utcnow()
    rows = session.scalars(select(SampleLeaseRow.owner).where(
        SampleLeaseRow.run_id == run_id, SampleLeaseRow.owner != owner,
        SampleLeaseRow.expires_at >= now)).all()
    return sum(1 for who in rows if not _owner_is_dead(who))
