"""Live-arena tables: the pool of models that answer voters' own prompts (with each model's health),
each live conversation (every turn's prompt and both replies with usage, latency and cost), and
every failed live reply (revision 0010).

A live battle is also an ``arena_battles`` row (sample id = the conversation's public id, no stored
result rows), so its vote goes through the same signed single-use token, the same rate limits and
lands in ``arena_votes`` like any other vote.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from harness.store.schema import Base, utcnow


class ArenaPoolRow(Base):
    """One model of the live pool: a model spec (any backend) and its ``-M`` settings, plus its health:
    the probe ``harness arena pool add`` sent, the last reply that worked and the last that failed
    (one line: what failed and why), and how many replies in a row have failed (revision 0010).
    ``enabled`` false: removed from the pool, kept so that its id (the votes' key) comes back if the
    same spec is added under the same label again."""

    __tablename__ = "arena_pool"
    id: Mapped[int] = mapped_column(primary_key=True)
    label: Mapped[str] = mapped_column(String(500), unique=True)  # what votes name it by
    spec: Mapped[str] = mapped_column(String(500))
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    kinds: Mapped[list[Any]] = mapped_column(JSON, default=list)  # "chat" and live kinds families add
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    probed_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    probe_error: Mapped[str | None] = mapped_column(Text, nullable=True)  # None: the probe answered
    last_ok_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_error_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    failures_in_row: Mapped[int] = mapped_column(Integer, default=0)


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


class ArenaFailureRow(Base):
    """One failed live reply (a model error, a time-out, or no text at all): counted per model, shown
    beside the ratings, never rated. ``model_key`` as on votes (``pool:<id>``); ``kind`` the error's
    kind (``connection``, ``timeout``, ``server``, ..., ``empty``)."""

    __tablename__ = "arena_failures"
    __table_args__ = (Index("ix_arena_failures_model_created", "model_key", "created_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    battle_id: Mapped[int] = mapped_column(ForeignKey("arena_battles.id", ondelete="CASCADE"), index=True)
    task: Mapped[str] = mapped_column(String(200))
    model_key: Mapped[str] = mapped_column(String(100))
    model_label: Mapped[str] = mapped_column(String(500))
    side: Mapped[str] = mapped_column(String(1))  # a (left) or b (right)
    turn: Mapped[int] = mapped_column(Integer, default=0)
    kind: Mapped[str] = mapped_column(String(40), default="model")
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
