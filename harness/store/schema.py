"""SQLAlchemy 2 typed ORM: the results database.

Samples are the unit of truth: every per-sample input hash, output, score, judge verdict, usage and
error is a row, and metrics are derived from rows. The same tables serve SQLite and PostgreSQL.
Any change here needs an Alembic migration in ``migrations/versions``.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


# Who a row belongs to. OPERATOR is the database's operator: what its own harness (eval, sweep, demo) and
# admin-token pushes write. A push token's rows carry the token's name instead, so a pushed model, task
# declaration or run lives in its pusher's namespace and can never become (or steer) the operator's.
OPERATOR = ""
OWNER_LEN = 200  # a token's name (api_tokens.name)


def _owner() -> Mapped[str]:
    return mapped_column(String(OWNER_LEN), default=OPERATOR, server_default=OPERATOR)


class ModelRow(Base):
    __tablename__ = "models"
    __table_args__ = (UniqueConstraint("spec", "owner", name="uq_models_spec_owner"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    spec: Mapped[str] = mapped_column(String(500))
    owner: Mapped[str] = _owner()  # the display name below is the owner's own name for the spec
    backend: Mapped[str] = mapped_column(String(100), default="")
    display_name: Mapped[str] = mapped_column(String(300), default="")
    info: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # size, modalities, licence
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (UniqueConstraint("name", "version", "content_hash", "owner", name="uq_tasks_identity_owner"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    version: Mapped[str] = mapped_column(String(50))
    content_hash: Mapped[str] = mapped_column(String(64))
    owner: Mapped[str] = _owner()  # whose declaration (primary metric, directions) this row holds
    family: Mapped[str] = mapped_column(String(100), default="")
    description: Mapped[str] = mapped_column(Text, default="")
    modalities: Mapped[list[Any]] = mapped_column(JSON, default=list)
    primary_metric: Mapped[str] = mapped_column(String(100), default="accuracy")
    # the task's declared metrics: name -> {direction, scale, display} (MetricInfo.to_dict); the
    # leaderboard ranks by these and never guesses a direction from a metric's name
    metrics: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class RunRow(Base):
    __tablename__ = "runs"
    # a name is unique within its owner's namespace: a pushed run never takes the name of (or is
    # joined by) the operator's own run of the same name
    __table_args__ = (UniqueConstraint("name", "owner", name="uq_runs_name_owner"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(300))
    owner: Mapped[str] = _owner()
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id"), index=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    judge_spec: Mapped[str | None] = mapped_column(String(500), nullable=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    config_hash: Mapped[str] = mapped_column(String(64), default="")
    harness_version: Mapped[str] = mapped_column(String(50), default="")
    git_revision: Mapped[str] = mapped_column(String(64), default="")
    status: Mapped[str] = mapped_column(String(20), default="running")
    n_samples: Mapped[int] = mapped_column(Integer, default=0)
    n_done: Mapped[int] = mapped_column(Integer, default=0)
    n_errors: Mapped[int] = mapped_column(Integer, default=0)
    total_cost: Mapped[float] = mapped_column(Float, default=0.0)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime, nullable=True)


class SampleResultRow(Base):
    __tablename__ = "sample_results"
    __table_args__ = (UniqueConstraint("run_id", "sample_id", "epoch", name="uq_sample_epoch"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    sample_id: Mapped[str] = mapped_column(String(300))
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    input_hash: Mapped[str] = mapped_column(String(64), default="")
    input: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)  # messages, metadata
    target: Mapped[Any] = mapped_column(JSON, nullable=True)
    output: Mapped[str] = mapped_column(Text, default="")
    prediction: Mapped[Any] = mapped_column(JSON, nullable=True)
    answer: Mapped[str | None] = mapped_column(Text, nullable=True)
    scores: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    unscored: Mapped[str | None] = mapped_column(Text, nullable=True)
    explanation: Mapped[str] = mapped_column(Text, default="")
    details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    input_tokens: Mapped[int] = mapped_column(Integer, default=0)
    output_tokens: Mapped[int] = mapped_column(Integer, default=0)
    calls: Mapped[int] = mapped_column(Integer, default=0)
    cost: Mapped[float] = mapped_column(Float, default=0.0)
    latency_s: Mapped[float] = mapped_column(Float, default=0.0)
    cached: Mapped[bool] = mapped_column(Boolean, default=False)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_kind: Mapped[str | None] = mapped_column(String(50), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class MetricRow(Base):
    __tablename__ = "metrics"
    __table_args__ = (
        UniqueConstraint("run_id", "name", "breakdown_key", "breakdown_value", name="uq_metric"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(200))
    value: Mapped[float] = mapped_column(Float)
    ci_low: Mapped[float | None] = mapped_column(Float, nullable=True)
    ci_high: Mapped[float | None] = mapped_column(Float, nullable=True)
    n: Mapped[int] = mapped_column(Integer, default=0)
    breakdown_key: Mapped[str] = mapped_column(String(100), default="")
    breakdown_value: Mapped[str] = mapped_column(String(300), default="")


class CacheRow(Base):
    """Model replies keyed by hash(model spec, request, generation settings); shared by runs."""

    __tablename__ = "response_cache"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_spec: Mapped[str] = mapped_column(String(500))
    response: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)


class JudgementRow(Base):
    """Every judge verdict with the judge spec, prompt hash and raw reply."""

    __tablename__ = "judgements"
    __table_args__ = (Index("ix_judgements_run_sample", "run_id", "sample_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=True)
    sample_id: Mapped[str] = mapped_column(String(300), default="")
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    judge_spec: Mapped[str] = mapped_column(String(500))
    prompt_hash: Mapped[str] = mapped_column(String(64))
    raw: Mapped[str] = mapped_column(Text, default="")
    verdict: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    created_at: Mapped[datetime] = mapped_column(DateTime, default=utcnow)
