"""Leaderboard tables on the shared ``Base``: API tokens for authenticated writes (``harness push``).

Only a SHA-256 of each token is stored. A plain fast hash is enough because tokens are 256-bit
random strings (no dictionary to attack), and it lets the server find a token by its hash in one
indexed lookup instead of trying a salted KDF against every row.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base, utcnow


class ApiTokenRow(Base):
    __tablename__ = "api_tokens"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    scope: Mapped[str] = mapped_column(String(20), default="push", server_default="push")  # "push" or "admin"


class RunOwnerRow(Base):
    """Which token pushed a run first: only that token (or an admin one) may push into it again."""

    __tablename__ = "run_owners"
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    token_name: Mapped[str] = mapped_column(String(200))
