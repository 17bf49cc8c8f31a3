"""Sweeps and their work units: the shared to-do list of a distributed evaluation.

A sweep is a matrix of runs (tasks × models × seeds) expanded once by ``harness sweep run``. Each
run's samples are cut into *work units* (a run name and a chunk of sample ids); a worker leases a
unit (owner, expiry, heartbeat), evaluates it through the ordinary runner and marks it done. A unit
whose worker dies or hangs stops being renewed, its lease expires (or its owner is seen dead on the
same host) and another worker takes it; the runner then skips the samples that already have rows,
so only the unfinished ones are redone. The database is the single source of truth: the Ray driver
keeps no state a restart would need.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base, utcnow


class SweepRow(Base):
    __tablename__ = "sweeps"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(300), unique=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # the expanded matrix
    status: Mapped[str] = mapped_column(String(20), default="running")  # running|finished|failed|cancelled
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class WorkUnitRow(Base):
    __tablename__ = "work_units"
    __table_args__ = (UniqueConstraint("sweep_id", "entry", "idx"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    sweep_id: Mapped[int] = mapped_column(ForeignKey("sweeps.id", ondelete="CASCADE"), index=True)
    entry: Mapped[int] = mapped_column(Integer)  # index of the run in the sweep's config["runs"]
    idx: Mapped[int] = mapped_column(Integer)  # chunk number within that run
    run_name: Mapped[str] = mapped_column(String(300), index=True)
    sample_ids: Mapped[list[Any]] = mapped_column(JSON, default=list)
    status: Mapped[str] = mapped_column(String(20), default="pending")  # pending|leased|done|failed
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
