"""Migration 0003 (arena tables) upgrades, matches the ORM, and downgrades, on both engines."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

import harness.store.schema_arena  # noqa: F401  (registers the arena tables on Base.metadata)
from harness.store.db import alembic_config, current_revision, make_engine, upgrade
from harness.store.schema import Base

ARENA_TABLES = {"arena_battles", "arena_votes", "arena_meta"}


def test_arena_migration_round_trip_and_matches_orm(db_url):
    engine = make_engine(db_url)
    assert upgrade(engine, "0002") == "0002"
    assert not ARENA_TABLES & set(inspect(engine).get_table_names())
    upgrade(engine, "0003")
    assert current_revision(engine) >= "0003"
    assert ARENA_TABLES <= set(inspect(engine).get_table_names())
    uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("arena_votes")}
    assert ("battle_id",) in uniques  # what makes a battle token single-use
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)

    def table_of(diff) -> str | None:  # type: ignore[no-untyped-def]
        for item in diff if isinstance(diff, list) else [diff]:
            for part in item[1:] if isinstance(item, tuple) else []:
                name = getattr(part, "name", None) if not hasattr(part, "table") else part.table.name
                if isinstance(part, str) and part in ARENA_TABLES:
                    return part
                if name in ARENA_TABLES:
                    return name
        return None

    assert [d for d in diffs if table_of(d)] == []
    command.downgrade(alembic_config(engine), "0002")
    assert current_revision(engine) == "0002"
    assert not ARENA_TABLES & set(inspect(engine).get_table_names())
    engine.dispose()
