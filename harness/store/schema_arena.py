"""Arena tables: served battles, every raw vote, and a small key/value table for the server secret.

A battle is one served pair (same sample, two models, left/right fixed at serve time). A vote refers
to exactly one battle (unique ``battle_id``): that unique constraint is what makes a battle token
single-use even under concurrent submissions, on SQLite and PostgreSQL alike. Votes copy the models,
positions and sample so ratings can be recomputed from this table alone.

A model is named twice (revision 0010): ``*_model`` is its display label as it was when the battle
was served (labels can change: a second spec with the same short name gives both a suffix), and
``*_key`` its stable identity (``model:<models.id>`` for a stored run's model, ``pool:<arena_pool.id>``
for a live pool entry; ``label:<label>`` where neither was known). Ratings aggregate by key, never
by label (leaderboard/arena/keys.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base, utcnow


class ArenaBattleRow(Base):
    __tablename__ = "arena_battles"
    __table_args__ = (
        Index("ix_arena_battles_voter_created", "voter_hash", "created_at"),
        Index("ix_arena_battles_ip_created", "ip_hash", "created_at"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    public_id: Mapped[str] = mapped_column(String(64), unique=True)  # random, opaque: the only id clients see
    task: Mapped[str] = mapped_column(String(200))
    sample_id: Mapped[str] = mapped_column(String(300))
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    left_model: Mapped[str] = mapped_column(String(500))
    right_model: Mapped[str] = mapped_column(String(500))
    # stable model keys (see the module docstring); set for live battles, derived from the result rows
    # at vote time for stored ones (revision 0010)
    left_key: Mapped[str | None] = mapped_column(String(100), nullable=True)
    right_key: Mapped[str | None] = mapped_column(String(100), nullable=True)
    left_result_id: Mapped[int | None] = mapped_column(
        ForeignKey("sample_results.id", ondelete="SET NULL"), nullable=True
    )
    right_result_id: Mapped[int | None] = mapped_column(
        ForeignKey("sample_results.id", ondelete="SET NULL"), nullable=True
    )
    media: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # opaque slot -> file path
    features: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # style covariates left/right
    # family, language, length, kind (text/code/3d): ratings per category (revision 0008)
    categories: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=dict)
    voter_hash: Mapped[str] = mapped_column(String(64))
    ip_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime)
    voted_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class ArenaVoteRow(Base):
    __tablename__ = "arena_votes"
    __table_args__ = (
        Index("ix_arena_votes_voter_created", "voter_hash", "created_at"),
        Index("ix_arena_votes_ip_created", "ip_hash", "created_at"),
        Index("ix_arena_votes_task", "task"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    battle_id: Mapped[int] = mapped_column(ForeignKey("arena_battles.id", ondelete="CASCADE"), unique=True)
    task: Mapped[str] = mapped_column(String(200))
    sample_id: Mapped[str] = mapped_column(String(300))
    left_model: Mapped[str] = mapped_column(String(500))
    right_model: Mapped[str] = mapped_column(String(500))
    left_key: Mapped[str] = mapped_column(String(100), default="")  # what ratings aggregate by (0010)
    right_key: Mapped[str] = mapped_column(String(100), default="")
    outcome: Mapped[str] = mapped_column(String(20))  # left | right | tie | both_bad
    voter_hash: Mapped[str] = mapped_column(String(64))
    ip_hash: Mapped[str] = mapped_column(String(64))
    served_at: Mapped[datetime] = mapped_column(DateTime)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    features: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    categories: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True, default=dict)
    flagged: Mapped[bool] = mapped_column(Boolean, default=False)
    flag_reason: Mapped[str | None] = mapped_column(Text, nullable=True)


class ArenaMetaRow(Base):
    """Server-side settings shared by all workers (the HMAC secret when none is configured)."""

    __tablename__ = "arena_meta"
    key: Mapped[str] = mapped_column(String(100), primary_key=True)
    value: Mapped[str] = mapped_column(Text)
