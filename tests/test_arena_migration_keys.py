"""Revision 0010 back-fills stable model keys: votes written at 0009 (labels only) end up under the
model's key, so a model whose label changed later is still one model in the ratings; and it
downgrades, on both engines."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from alembic import command
from sqlalchemy import JSON, Boolean, DateTime, Float, Integer, MetaData, String, Text, inspect, select
from sqlalchemy.orm import sessionmaker

from harness.store.db import alembic_config, make_engine, upgrade
from harness.store.schema import ModelRow
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

WHEN = datetime(2026, 11, 1, 12, 0, 0)


def _filler(column: Any) -> Any:
    t = column.type
    for kind, value in ((Boolean, False), (Integer, 0), (Float, 0.0), (DateTime, WHEN), (JSON, {}),
                        (Text, ""), (String, "")):
        if isinstance(t, kind):
            return value
    return None


def _insert(conn: Any, meta: MetaData, table: str, **values: Any) -> int:
    """A row of the table as it is at this revision: every NOT NULL column not given gets a plain value."""
    t = meta.tables[table]
    row = dict(values)
    for c in t.columns:
        if c.name not in row and not c.nullable and not c.primary_key and c.server_default is None:
            row[c.name] = _filler(c)
    return int(conn.execute(t.insert().values(**row)).inserted_primary_key[0])


def test_0010_backfills_keys_and_merges_a_relabelled_model(db_url):
    engine = make_engine(db_url)
    assert upgrade(engine, "0009") == "0009"
    meta = MetaData()
    meta.reflect(engine)
    with engine.begin() as conn:
        task = _insert(conn, meta, "tasks", name="t", version="1", content_hash="h", family="text")
        alpha = _insert(conn, meta, "models", spec="demo:alpha", display_name="alpha")
        bravo = _insert(conn, meta, "models", spec="demo:bravo", display_name="bravo")
        results = {}
        for model, name in ((alpha, "alpha"), (bravo, "bravo")):
            run = _insert(conn, meta, "runs", name=f"r-{name}", task_id=task, model_id=model, status="finished")
            results[name] = _insert(conn, meta, "sample_results", run_id=run, sample_id="s0", output=f"{name} says")
        pool_id = _insert(conn, meta, "arena_pool", label="live-x", spec="openai:x", settings={}, kinds=["chat"],
                          enabled=True)

        def battle_and_vote(task_name: str, left: str, right: str, lr: int | None, rr: int | None,
                            live: bool = False) -> None:
            b = _insert(conn, meta, "arena_battles", public_id=f"p{left}{right}{task_name}", task=task_name,
                        sample_id="s0", left_model=left, right_model=right, left_result_id=lr, right_result_id=rr,
                        media={}, features={}, voter_hash="v", ip_hash="ip", expires_at=WHEN)
            if live:
                _insert(conn, meta, "arena_chats", battle_id=b, kind="chat", turns=[], n_turns=1, busy=False)
            _insert(conn, meta, "arena_votes", battle_id=b, task=task_name, sample_id="s0", left_model=left,
                    right_model=right, outcome="left", voter_hash="v", ip_hash="ip", served_at=WHEN, features={},
                    flagged=False)

        # the same alpha voted on under two labels (its label gained a suffix in between)
        battle_and_vote("t", "alpha", "bravo", results["alpha"], results["bravo"])
        battle_and_vote("t", "alpha (demo:alpha)", "bravo", results["alpha"], results["bravo"])
        battle_and_vote("chat", "live-x", "gone-y", None, None, live=True)  # gone-y left the pool
        battle_and_vote("t", "old-z", "bravo", None, results["bravo"])  # old-z's result row is gone
    upgrade(engine, "head")
    sessions = sessionmaker(bind=engine)
    with sessions() as s:
        rows = s.scalars(select(ArenaVoteRow).order_by(ArenaVoteRow.id))
        votes = [(v.left_model, v.left_key, v.right_key) for v in rows]
        battles = [(b.left_key, b.right_key) for b in s.scalars(select(ArenaBattleRow).order_by(ArenaBattleRow.id))]
        assert votes == [("alpha", f"model:{alpha}", f"model:{bravo}"),
                         ("alpha (demo:alpha)", f"model:{alpha}", f"model:{bravo}"),
                         ("live-x", f"pool:{pool_id}", "label:gone-y"),
                         ("old-z", "label:old-z", f"model:{bravo}")]
        assert battles == [v[1:] for v in votes]
        from harness.leaderboard.arena.standings import compute

        board = compute(s, "t", ci="sandwich", rounds=0)
        by = {r.model: r.votes for r in board.ratings.ratings}
        assert by["alpha"] == 2 and by["bravo"] == 3  # one alpha, shown under its current label
        assert s.scalar(select(ModelRow.display_name).where(ModelRow.id == alpha)) == "alpha"
    for table in ("arena_votes", "arena_battles"):
        assert {"left_key", "right_key"} <= {c["name"] for c in inspect(engine).get_columns(table)}
    assert "arena_failures" in inspect(engine).get_table_names()
    command.downgrade(alembic_config(engine), "0009")
    assert "arena_failures" not in inspect(engine).get_table_names()
    assert "left_key" not in {c["name"] for c in inspect(engine).get_columns("arena_votes")}
    assert "failures_in_row" not in {c["name"] for c in inspect(engine).get_columns("arena_pool")}
    engine.dispose()
