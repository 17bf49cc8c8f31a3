"""Reads and writes the runner and CLI need, in bulk and idempotently.

Sample rows go in with INSERT ... ON CONFLICT DO NOTHING on (run, sample, epoch), so a resumed or
doubly-submitted sample can never produce a second row, on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from harness.store import bulk
from harness.store.schema import (
    OPERATOR,
    CacheRow,
    JudgementRow,
    MetricRow,
    ModelRow,
    RunRow,
    SampleResultRow,
    TaskRow,
    utcnow,
)
from harness.types import Metric, SampleRecord


def insert_ignore(session: Session, table: Any, rows: Sequence[dict[str, Any]], keys: list[str]) -> None:
    if not rows:
        return
    dialect = session.get_bind().dialect.name
    if dialect == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        session.execute(sqlite_insert(table).on_conflict_do_nothing(index_elements=keys), list(rows))
    elif dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        session.execute(pg_insert(table).on_conflict_do_nothing(index_elements=keys), list(rows))
    else:  # pragma: no cover - other engines: plain insert, the unique constraint still guards
        from sqlalchemy import insert

        session.execute(insert(table), list(rows))


def insert_statement(entity: Any) -> Any:
    from sqlalchemy import insert

    return insert(entity)


def get_or_create_task(session: Session, owner: str = OPERATOR, **fields: Any) -> TaskRow:
    """The ``owner``'s row of this task (name, version, content hash), created on first use. Every
    owner has its own row: a pushed declaration (primary metric, directions) never becomes the
    operator's, and the operator's never changes under a push."""
    row = session.scalar(
        select(TaskRow).where(
            TaskRow.name == fields["name"],
            TaskRow.version == fields["version"],
            TaskRow.content_hash == fields["content_hash"],
            TaskRow.owner == owner,
        )
    )
    if row is None:
        row = TaskRow(owner=owner, **fields)
        session.add(row)
        session.flush()
    elif fields.get("metrics") and not row.metrics:
        # a row stored before tasks declared their metrics (or pushed by an older client) learns them
        # from the first run that knows them; a declaration once stored is not rewritten
        row.metrics = dict(fields["metrics"])
        session.flush()
    return row


def get_or_create_model(session: Session, spec: str, owner: str = OPERATOR, **fields: Any) -> ModelRow:
    """The ``owner``'s row of this model spec (its display name is that owner's), created on first use."""
    row = session.scalar(select(ModelRow).where(ModelRow.spec == spec, ModelRow.owner == owner))
    if row is None:
        row = ModelRow(spec=spec, owner=owner, **fields)
        session.add(row)
        session.flush()
    return row


def operator_run(session: Session, name: str) -> RunRow | None:
    """The operator's run of this name: the only run ``harness eval`` ever joins or resumes."""
    return session.scalar(select(RunRow).where(RunRow.name == name, RunRow.owner == OPERATOR))


def find_run(session: Session, name_or_id: str) -> RunRow | None:
    """A run by name (the operator's when a pushed run shares the name) or, failing that, by id."""
    row = session.scalars(select(RunRow).where(RunRow.name == name_or_id)
                          .order_by(RunRow.owner != OPERATOR, RunRow.id).limit(1)).first()
    if row is None and name_or_id.isdigit():
        row = session.get(RunRow, int(name_or_id))
    return row


def done_keys(session: Session, run_id: int) -> set[tuple[str, int]]:
    rows = session.execute(
        select(SampleResultRow.sample_id, SampleResultRow.epoch).where(SampleResultRow.run_id == run_id)
    )
    return {(sid, ep) for sid, ep in rows}


SAMPLE_KEY = ["run_id", "sample_id", "epoch"]


def write_samples(session: Session, rows: Sequence[dict[str, Any]]) -> int:
    """Insert sample rows, ignoring those already stored; how many were inserted (-1: unknown)."""
    inserted = bulk.insert_rows(session, SampleResultRow.__table__, rows, SAMPLE_KEY)
    if inserted is None:  # partial rows (defaults to fill) or another engine
        insert_ignore(session, SampleResultRow.__table__, rows, SAMPLE_KEY)
        return -1
    return inserted


def refresh_run_counts(session: Session, run_id: int) -> None:
    n_done, n_err, cost = session.execute(
        select(
            func.count(SampleResultRow.id),
            func.count(SampleResultRow.error),
            func.coalesce(func.sum(SampleResultRow.cost), 0.0),
        ).where(SampleResultRow.run_id == run_id)
    ).one()
    session.execute(
        update(RunRow).where(RunRow.id == run_id).values(n_done=n_done, n_errors=n_err, total_cost=cost)
    )


def add_run_counts(session: Session, run_id: int, rows: Sequence[dict[str, Any]]) -> None:
    """Add freshly inserted rows (every one of them new) to the run's counts: what
    :func:`refresh_run_counts` would find, without counting the whole run at every commit."""
    n_err = sum(1 for r in rows if r["error"] is not None)
    cost = sum(r["cost"] or 0.0 for r in rows)
    session.execute(update(RunRow).where(RunRow.id == run_id).values(
        n_done=RunRow.n_done + len(rows), n_errors=RunRow.n_errors + n_err, total_cost=RunRow.total_cost + cost))


def cache_get(session: Session, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
    keys = list(keys)
    out: dict[str, dict[str, Any]] = {}
    for i in range(0, len(keys), 500):  # stay under SQLite's bound-parameter limit
        chunk = keys[i : i + 500]
        for key, resp in session.execute(select(CacheRow.key, CacheRow.response).where(CacheRow.key.in_(chunk))):
            out[key] = resp
    return out


def cache_put(session: Session, entries: Sequence[dict[str, Any]]) -> None:
    if bulk.insert_rows(session, CacheRow.__table__, entries, ["key"]) is None:
        insert_ignore(session, CacheRow.__table__, entries, ["key"])


def write_judgements(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    if rows and bulk.insert_rows(session, JudgementRow.__table__, rows) is None:
        session.execute(insert_statement(JudgementRow), list(rows))


def replace_metrics(session: Session, run_id: int, metrics: Iterable[Metric]) -> None:
    session.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
    rows = [
        {
            "run_id": run_id,
            "name": m.name,
            "value": m.value,
            "ci_low": m.ci_low,
            "ci_high": m.ci_high,
            "n": m.n,
            "breakdown_key": m.breakdown_key,
            "breakdown_value": m.breakdown_value,
        }
        for m in metrics
    ]
    if rows:
        session.execute(insert_statement(MetricRow), rows)


def load_records(session: Session, run_id: int,
                 prefetched: dict[int, SampleRecord] | None = None) -> list[SampleRecord]:
    """Every stored sample of the run as a record, in (sample, epoch) order. ``prefetched`` (row id ->
    record, from ``records_by_id`` earlier in the run) saves reading those rows again: only the
    ids list is read, and the rows not in it; prefetched rows gone since are left out."""
    if not prefetched:
        records = list(records_by_id(session, run_id).values())
    else:
        ids = session.scalars(select(SampleResultRow.id).where(SampleResultRow.run_id == run_id)).all()
        fetched = records_by_id(session, run_id, [i for i in ids if i not in prefetched])
        records = [prefetched[i] if i in prefetched else fetched[i] for i in ids]
    # sorted here, not by ORDER BY: PostgreSQL's collation and SQLite's byte order disagree on text,
    # and the bootstrap CIs computed from these records must not depend on the engine
    return sorted(records, key=record_order)


_IDS_PER_QUERY = 500  # rows fetched by id per statement (well inside every engine's parameter limit)


def records_by_id(session: Session, run_id: int, ids: Sequence[int] | None = None) -> dict[int, SampleRecord]:
    """Row id -> record for the run's rows (only ``ids``, when given)."""
    q = select(
        SampleResultRow.id,
        SampleResultRow.sample_id,
        SampleResultRow.epoch,
        SampleResultRow.scores,
        SampleResultRow.unscored,
        SampleResultRow.error,
        # the metadata only, extracted by the database: decoding every row's whole input (the
        # messages) made the end of a large run's aggregation slower than its writes
        SampleResultRow.input["metadata"],
        SampleResultRow.cost,
        SampleResultRow.details,
    ).where(SampleResultRow.run_id == run_id)
    if ids is None:
        batches = [q]
    else:
        ids = list(ids)
        batches = [q.where(SampleResultRow.id.in_(ids[i:i + _IDS_PER_QUERY]))
                   for i in range(0, len(ids), _IDS_PER_QUERY)]
    out: dict[int, SampleRecord] = {}
    for batch in batches:
        for rid, sid, ep, scores, uns, err, meta, cost, det in session.execute(batch):
            out[rid] = SampleRecord(sid, ep, scores or {}, uns, err, meta if meta is not None else {}, cost or 0.0,
                                    det or {})
    return out


def record_order(r: SampleRecord) -> tuple[str, int]:
    return r.sample_id, r.epoch


def finish_run(session: Session, run_id: int, status: str) -> None:
    session.execute(update(RunRow).where(RunRow.id == run_id).values(status=status, finished_at=utcnow()))
