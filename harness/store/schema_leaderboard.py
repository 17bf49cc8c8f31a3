"""Leaderboard tables on the shared ``Base``: API tokens for authenticated writes (``harness push``).

Which token a pushed run, task or model belongs to is the row's own ``owner`` column
(:mod:`harness.store.schema`): a push token's name, or the operator's namespace for admin pushes.

Only a SHA-256 of each token is stored. A plain fast hash is enough because tokens are 256-bit
random strings (no dictionary to attack), and it lets the server find a token by its hash in one
indexed lookup instead of trying a salted KDF against every row.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, String
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

