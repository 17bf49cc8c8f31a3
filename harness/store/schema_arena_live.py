"""Live-arena tables: the pool of models that answer voters' own prompts, and each live
conversation (every turn's prompt and both replies with usage, latency and cost).

A live battle is also an ``arena_battles`` row (sample id = the conversation's public id, no stored
result rows), so its vote goes through the same signed single-use token, the same rate limits and
lands in ``arena_votes`` like any other vote.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base, utcnow


class ArenaPoolRow(Base):
    """One model of the live pool: a model spec (any backend) and its ``-M`` settings."""

    __tablename__ = "arena_pool"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(500), unique=True)  # what votes name it by
    spec: Mapped[str] = mapped_column(String(500))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    kinds: Mapped[list[Any]] = mapped_column(JSON, default=list)  # "chat", "code3d"
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class ArenaChatRow(Base):
    """A live conversation: ``turns`` is a list of {prompt, image, a: reply, b: reply}; a reply is
    {text, failed, error, usage, latency_s, first_token_s, cost} (``a`` is the left side)."""

    __tablename__ = "arena_chats"
    id: Mapped[int] = mapped_column(primary_key=True)
    battle_id: Mapped[int] = mapped_column(ForeignKey("arena_battles.id", ondelete="CASCADE"), unique=True)
    kind: Mapped[str] = mapped_column(String(20), default="chat")
    turns: Mapped[list[Any]] = mapped_column(JSON, default=list)
    n_turns: Mapped[int] = mapped_column(Integer, default=0)
    busy: Mapped[bool] = mapped_column(Boolean, default=False)  # a turn is streaming now
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
