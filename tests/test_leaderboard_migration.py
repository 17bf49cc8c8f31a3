"""Migration 0002 (api_tokens) upgrades and downgrades on both engines."""

from __future__ import annotations

from sqlalchemy import inspect

from harness.store.db import current_revision, make_engine, upgrade


def test_api_tokens_migration_round_trip(db_url):
    engine = make_engine(db_url)
    assert upgrade(engine, "0001") == "0001"
    assert not inspect(engine).has_table("api_tokens")
    assert upgrade(engine, "0002") == "0002"  # later migrations add columns (0004: scope)
    cols = {c["name"] for c in inspect(engine).get_columns("api_tokens")}
    assert cols == {"id", "name", "token_hash", "revoked", "created_at", "last_used_at"}
    uniques = {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("api_tokens")}
    assert ("token_hash",) in uniques and ("name",) in uniques
    from alembic import command

    from harness.store.db import alembic_config

    command.downgrade(alembic_config(engine), "0001")
    assert current_revision(engine) == "0001" and not inspect(engine).has_table("api_tokens")
    engine.dispose()
