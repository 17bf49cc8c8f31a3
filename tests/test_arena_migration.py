"""Arena migrations (0003: battles, votes, meta; 0008: live pool, conversations, categories) upgrade,
match the ORM at head, and downgrade, on both engines."""

from __future__ import annotations

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect

from harness.store.db import alembic_config, current_revision, load_all_schemas, make_engine, upgrade
from harness.store.schema import Base

ARENA_TABLES = {"arena_battles", "arena_votes", "arena_meta"}
LIVE_TABLES = {"arena_pool", "arena_chats"}


def _arena_diffs(engine) -> list:  # type: ignore[no-untyped-def]
    load_all_schemas()
    with engine.connect() as conn:
        diffs = compare_metadata(MigrationContext.configure(conn), Base.metadata)

    def table_of(diff) -> str | None:  # type: ignore[no-untyped-def]
        for item in diff if isinstance(diff, list) else [diff]:
            for part in item[1:] if isinstance(item, tuple) else []:
                name = getattr(part, "name", None) if not hasattr(part, "table") else part.table.name
                if isinstance(part, str) and part in ARENA_TABLES | LIVE_TABLES:
                    return part
                if name in ARENA_TABLES | LIVE_TABLES:
                    return name
        return None

    return [d for d in diffs if table_of(d)]


def test_arena_migrations_round_trip_and_match_orm(db_url):
    engine = make_engine(db_url)
    assert upgrade(engine, "0002") == "0002"
    assert not ARENA_TABLES & set(inspect(engine).get_table_names())
    upgrade(engine, "0003")
    assert ARENA_TABLES <= set(inspect(engine).get_table_names())
    uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("arena_votes")}
    assert ("battle_id",) in uniques  # what makes a battle token single-use
    upgrade(engine, "0007")
    assert not LIVE_TABLES & set(inspect(engine).get_table_names())
    assert "categories" not in {c["name"] for c in inspect(engine).get_columns("arena_votes")}
    upgrade(engine, "0008")
    assert LIVE_TABLES <= set(inspect(engine).get_table_names())
    for table in ("arena_votes", "arena_battles"):
        assert "categories" in {c["name"] for c in inspect(engine).get_columns(table)}
    upgrade(engine, "head")
    assert _arena_diffs(engine) == []
    command.downgrade(alembic_config(engine), "0007")
    assert not LIVE_TABLES & set(inspect(engine).get_table_names())
    assert "categories" not in {c["name"] for c in inspect(engine).get_columns("arena_battles")}
    command.downgrade(alembic_config(engine), "0002")
    assert current_revision(engine) == "0002"
    assert not ARENA_TABLES & set(inspect(engine).get_table_names())
    engine.dispose()
