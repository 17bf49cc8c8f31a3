"""Migration 0009 (owners) on a database with data, both engines: every sample row survives the
rebuild of the tables it references (SQLite batch mode), a run pushed by a push token becomes that
token's with its task and model, admin pushes stay the operator's, names become unique per owner,
foreign keys are enforced again afterwards, and the downgrade restores ``run_owners``."""

from __future__ import annotations

import pytest
from alembic import command
from sqlalchemy import inspect, text
from sqlalchemy.exc import IntegrityError

from harness.store.db import alembic_config, make_engine, upgrade

RUN = ("INSERT INTO runs (name, task_id, model_id, config, config_hash, harness_version, git_revision, status, "
       "n_samples, n_done, n_errors, total_cost, created_at) VALUES (:name, :task, :model, '{}', 'c', '', '', "
       "'finished', 1, 1, 0, 0, CURRENT_TIMESTAMP)")
SAMPLE = ("INSERT INTO sample_results (run_id, sample_id, epoch, input_hash, input, output, scores, explanation, "
          "details, input_tokens, output_tokens, calls, cost, latency_s, cached, created_at) VALUES (:run, :sid, 0, "
          "'', '{}', 'o', '{}', '', '{}', 0, 0, 0, 0, 0, false, CURRENT_TIMESTAMP)")


def test_owners_migration_keeps_every_row_and_assigns_pushed_rows(db_url):
    engine = make_engine(db_url)
    assert upgrade(engine, "0008") == "0008"
    with engine.begin() as c:
        c.execute(text("INSERT INTO tasks (name, version, content_hash, family, description, modalities, "
                       "primary_metric, metrics, created_at) VALUES ('t', '1', 'h', '', '', '[]', 'acc', '{}', "
                       "CURRENT_TIMESTAMP), ('pushed', '1', 'h', '', '', '[]', 'acc', '{}', CURRENT_TIMESTAMP)"))
        c.execute(text("INSERT INTO models (spec, backend, display_name, info, created_at) VALUES "
                       "('m', '', 'm', '{}', CURRENT_TIMESTAMP), ('m2', '', 'm2', '{}', CURRENT_TIMESTAMP)"))
        for name, task, model in (("local", 1, 1), ("by-admin", 1, 1), ("by-alice", 2, 2), ("alice-on-m", 1, 1)):
            c.execute(text(RUN), {"name": name, "task": task, "model": model})
        for run in (1, 2, 3, 4):
            c.execute(text(SAMPLE), [{"run": run, "sid": f"s{i}"} for i in range(3)])
        c.execute(text("INSERT INTO api_tokens (name, token_hash, revoked, created_at, scope) VALUES "
                       "('alice', 'x', false, CURRENT_TIMESTAMP, 'push'), ('ops', 'y', false, CURRENT_TIMESTAMP, "
                       "'admin')"))
        c.execute(text("INSERT INTO run_owners (run_id, token_name) VALUES (2, 'ops'), (3, 'alice'), (4, 'alice')"))
    assert upgrade(engine, "0009") == "0009"
    with engine.connect() as c:
        assert c.execute(text("SELECT COUNT(*) FROM sample_results")).scalar() == 12
        assert dict(c.execute(text("SELECT name, owner FROM runs")).all()) == {
            "local": "", "by-admin": "", "by-alice": "alice", "alice-on-m": "alice"}
        # a task or model row only alice's runs use is hers; one the operator's runs use stays the operator's
        assert dict(c.execute(text("SELECT name, owner FROM tasks")).all()) == {"t": "", "pushed": "alice"}
        assert dict(c.execute(text("SELECT spec, owner FROM models")).all()) == {"m": "", "m2": "alice"}
        if engine.dialect.name == "sqlite":
            assert c.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    assert "run_owners" not in inspect(engine).get_table_names()
    with engine.begin() as c:  # a name is unique per owner now
        c.execute(text(RUN.replace("(name, ", "(owner, name, ").replace("VALUES (:name", "VALUES ('bob', :name")),
                  {"name": "local", "task": 1, "model": 1})
    with pytest.raises(IntegrityError), engine.begin() as c:  # but two operator runs cannot share one
        c.execute(text(RUN), {"name": "local", "task": 1, "model": 1})
    with engine.begin() as c:
        c.execute(text("DELETE FROM runs WHERE owner = 'bob'"))
    command.downgrade(alembic_config(engine), "0008")
    with engine.connect() as c:
        assert c.execute(text("SELECT COUNT(*) FROM sample_results")).scalar() == 12
        assert sorted(c.execute(text("SELECT run_id, token_name FROM run_owners")).all()) == [(3, "alice"),
                                                                                            (4, "alice")]
    assert {tuple(u["column_names"]) for u in inspect(engine).get_unique_constraints("runs")} == {("name",)}
    assert upgrade(engine, "0009") == "0009"
    engine.dispose()
