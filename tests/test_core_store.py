"""The store: migrations and the fast create path agree, on SQLite and PostgreSQL."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from harness.store.db import create_fresh, current_revision, head_revision, load_all_schemas, make_engine, upgrade
from harness.store.schema import Base


def _schema(engine):
    insp = inspect(engine)
    return {
        t: (sorted(c["name"] for c in insp.get_columns(t)),
            sorted(tuple(u["column_names"]) for u in insp.get_unique_constraints(t)))
        for t in insp.get_table_names()
    }


def test_migrations_match_models_and_fast_create(db_url, tmp_path):
    migrated = make_engine(db_url)
    assert upgrade(migrated) == head_revision()
    load_all_schemas()
    with migrated.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    assert diff == [], f"ORM and migrations disagree: {diff}"
    fresh = make_engine(f"sqlite:///{tmp_path / 'fresh.db'}")
    create_fresh(fresh)
    assert current_revision(fresh) == head_revision()
    if migrated.dialect.name == "sqlite":
        assert _schema(fresh) == _schema(migrated)


def test_connections_opening_a_brand_new_sqlite_file_at_once_all_succeed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Switching a new file to WAL from several connections at once: SQLite refuses all but one at
    once ("database is locked", no busy wait); every connection must still open. Before the retry,
    about one round in twenty failed here."""
    import threading

    failures: list[str] = []
    for round_ in range(200):
        engines = [make_engine(f"sqlite:///{tmp_path}/new{round_}.db") for _ in range(4)]
        barrier = threading.Barrier(len(engines))

        def connect(engine, barrier: threading.Barrier = barrier) -> None:  # type: ignore[no-untyped-def]
            barrier.wait()
            try:
                with engine.connect() as conn:
                    assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            except Exception as exc:  # noqa: BLE001 -- collected and asserted below
                failures.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=connect, args=(e,)) for e in engines]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for engine in engines:
            engine.dispose()
    assert failures == []
