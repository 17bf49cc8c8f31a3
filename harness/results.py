"""Read-only results API: what a family's analysis or report reads of stored runs, as typed records.

The tables (``harness.store.schema``) are the store's business: a family that reads runs, samples or
metrics (a report, a leaderboard chart hook, a pairwise judge over stored runs) reads them here, as
frozen records holding plain values, so a change of the tables is a change of this module only and
no family holds a live ORM row (or a session it could write through). Nothing here writes; the one
write a family's own command makes, its judgements, is :func:`harness.results_write.store_judgements`.

Every function takes ``db``: a session factory (``sessionmaker``; each call opens and closes its own
session) or an open ``Session`` (several reads in one snapshot). Orders are stated and do not depend
on the engine: runs and metrics by id (the order they were written), samples by (sample id, epoch)
compared as Python strings, as :func:`harness.store.ops.load_records` orders them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session, sessionmaker

from harness.store import ops
from harness.store.schema import MetricRow, ModelRow, RunRow, SampleResultRow, TaskRow
from harness.task import SampleRecord

Db = Session | sessionmaker[Session]


@dataclass(frozen=True)
class RunRecord:
    """One stored run with the names of its task and model (``model``: the spec it was built from)."""

    id: int
    name: str
    owner: str  # "" for the operator's own runs, else the push token's name
    status: str
    task: str
    task_version: str
    family: str
    primary_metric: str
    model: str
    model_name: str  # the model row's display name, "" when it has none
    judge_spec: str | None
    n_samples: int
    n_done: int
    n_errors: int
    total_cost: float
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def model_label(self) -> str:
        """The display name, or the spec when there is none: what a report shows for the model."""
        return self.model_name or self.model


@dataclass(frozen=True)
class StoredSample:
    """One stored sample (one epoch) as written: what was asked and replied, and how it scored.

    (Not :class:`harness.task.SampleRecord`, the aggregator's lighter view of the same row, which
    :func:`records` returns.)"""

    sample_id: str
    epoch: int
    input: dict[str, Any]  # {"messages": [...], "metadata": {...}} as the runner stored the request
    target: Any
    output: str
    prediction: Any
    answer: str | None
    scores: dict[str, Any]
    unscored: str | None
    explanation: str
    details: dict[str, Any]
    cost: float
    error: str | None
    error_kind: str | None

    @property
    def metadata(self) -> dict[str, Any]:
        meta = self.input.get("metadata")
        return meta if isinstance(meta, dict) else {}


@dataclass(frozen=True)
class MetricRecord:
    """One stored aggregate: the whole run's (``breakdown_key`` "") or one breakdown cell's."""

    name: str
    value: float
    ci_low: float | None
    ci_high: float | None
    n: int
    breakdown_key: str
    breakdown_value: str


@contextmanager
def _session(db: Db) -> Iterator[Session]:
    if isinstance(db, Session):
        yield db
    else:
        with db() as s:
            yield s


def _run_records(s: Session, *where: ColumnElement[bool]) -> list[RunRecord]:
    q = (select(RunRow, TaskRow, ModelRow)
         .join(TaskRow, RunRow.task_id == TaskRow.id)
         .join(ModelRow, RunRow.model_id == ModelRow.id)
         .where(*where).order_by(RunRow.id))
    return [_run_record(run, task, model) for run, task, model in s.execute(q)]


def _run_record(run: RunRow, task: TaskRow, model: ModelRow) -> RunRecord:
    return RunRecord(
        id=run.id, name=run.name, owner=run.owner, status=run.status, task=task.name, task_version=task.version,
        family=task.family, primary_metric=task.primary_metric, model=model.spec, model_name=model.display_name or "",
        judge_spec=run.judge_spec, n_samples=run.n_samples or 0, n_done=run.n_done or 0,
        n_errors=run.n_errors or 0, total_cost=float(run.total_cost or 0.0), config=dict(run.config or {}),
    )


def _run_id(run: RunRecord | int) -> int:
    return run.id if isinstance(run, RunRecord) else int(run)


def runs(db: Db, *, task: str | None = None, model: str | None = None) -> list[RunRecord]:
    """Every stored run (of the task named ``task``, of the model spec ``model``, when given), by id."""
    where = []
    if task is not None:
        where.append(TaskRow.name == task)
    if model is not None:
        where.append(ModelRow.spec == model)
    with _session(db) as s:
        return _run_records(s, *where)


def get_run(db: Db, run_id: int) -> RunRecord | None:
    """The run with this id, or None."""
    with _session(db) as s:
        found = _run_records(s, RunRow.id == run_id)
        return found[0] if found else None


def find_run(db: Db, name_or_id: str) -> RunRecord | None:
    """A run by name (the operator's when a pushed run shares the name) or, failing that, by id: the
    lookup every command that takes a run on its command line uses."""
    with _session(db) as s:
        row = ops.find_run(s, name_or_id)
        return get_run(s, row.id) if row is not None else None


def samples(db: Db, run: RunRecord | int, *, epoch: int | None = None) -> list[StoredSample]:
    """The run's stored samples (of one ``epoch``, when given), by (sample id, epoch)."""
    q = select(SampleResultRow).where(SampleResultRow.run_id == _run_id(run))
    if epoch is not None:
        q = q.where(SampleResultRow.epoch == epoch)
    with _session(db) as s:
        out = [StoredSample(
            sample_id=r.sample_id, epoch=r.epoch, input=r.input or {}, target=r.target, output=r.output or "",
            prediction=r.prediction, answer=r.answer, scores=r.scores or {}, unscored=r.unscored,
            explanation=r.explanation or "", details=r.details or {}, cost=float(r.cost or 0.0), error=r.error,
            error_kind=r.error_kind,
        ) for r in s.scalars(q)]
    # sorted here, not by ORDER BY: PostgreSQL's collation and SQLite's byte order disagree on text
    return sorted(out, key=lambda r: (r.sample_id, r.epoch))


def records(db: Db, run: RunRecord | int) -> list[SampleRecord]:
    """The run's samples as the aggregator sees them (scores, error, metadata, cost, details; no texts),
    by (sample id, epoch): what a report recomputes a metric or a paired test from."""
    with _session(db) as s:
        return ops.load_records(s, _run_id(run))


def metrics(db: Db, run: RunRecord | int, *, breakdown: str | None = None) -> list[MetricRecord]:
    """The run's stored metrics, by id: all of them, or with ``breakdown=""`` the whole run's only, with
    ``breakdown="KEY"`` that breakdown's cells only."""
    q = select(MetricRow).where(MetricRow.run_id == _run_id(run))
    if breakdown is not None:
        q = q.where(MetricRow.breakdown_key == breakdown)
    with _session(db) as s:
        return [MetricRecord(m.name, m.value, m.ci_low, m.ci_high, m.n or 0, m.breakdown_key, m.breakdown_value)
                for m in s.scalars(q.order_by(MetricRow.id))]
