"""Sample leases: which process is working on which (run, sample, epoch) right now.

Several processes may work on one run at once (two identical ``harness eval`` commands, or the
workers of a sweep). Before a window of samples is prepared, a process claims a lease on each;
samples another live process holds are left to it, so no sample is sent to the model twice. A
lease names its owner (host, pid, a random tag) and expires unless renewed (a writing run renews its
leases every ten seconds); a lease whose owner is dead (same host, pid gone) or expired may be taken over.
Sample rows stay idempotent on their own (ON CONFLICT DO NOTHING), so leases only save model calls;
they never decide what is stored.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base


class SampleLeaseRow(Base):
    __tablename__ = "sample_leases"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    sample_id: Mapped[str] = mapped_column(String(300), primary_key=True)
    epoch: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime] = mapped_column(DateTime)
