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
