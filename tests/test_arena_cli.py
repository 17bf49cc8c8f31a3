"""`harness arena ratings|audit|demo` on a database of stored votes; active pair sampling."""

from __future__ import annotations

import json
import random
from datetime import datetime

import numpy as np
from scipy.special import expit
from typer.testing import CliRunner

from harness.cli import app
from harness.leaderboard.arena.battles import PairStats, pair_order
from harness.leaderboard.arena.config import ArenaConfig
from harness.store.db import open_db
from harness.store.schema_arena import ArenaBattleRow, ArenaVoteRow

STRENGTH = {"strong": 1.5, "middle": 0.0, "weak": -1.5}


def add_votes(url: str, n: int, seed: int = 0, bot: int = 0) -> None:
    """Votes drawn from known strengths (plus ``bot`` always-left votes from one voter)."""
    rng = np.random.default_rng(seed)
    names = list(STRENGTH)
    sessions = open_db(url)
    with sessions() as s:
        for i in range(n + bot):
            left, right = rng.choice(names, 2, replace=False)
            honest = i < n
            outcome = ("left" if rng.random() < expit(STRENGTH[left] - STRENGTH[right]) else "right") if honest \
                else "left"
            battle = ArenaBattleRow(public_id=f"b{i}", task="t", sample_id=f"s{i}", left_model=left, right_model=right,
                                    media={}, features={}, voter_hash=f"v{i % 10}" if honest else "bot", ip_hash="ip",
                                    expires_at=datetime(2100, 1, 1))
            s.add(battle)
            s.flush()
            s.add(ArenaVoteRow(battle_id=battle.id, task="t", sample_id=f"s{i}", left_model=left, right_model=right,
                               outcome=outcome, voter_hash=battle.voter_hash, ip_hash="ip",
                               served_at=datetime(2026, 1, 1), features={}))
        s.commit()


def test_ratings_command_prints_the_table(sqlite_url):
    add_votes(sqlite_url, 600)
    result = CliRunner().invoke(app, ["arena", "ratings", "--db", sqlite_url, "--bootstrap", "50"])
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.output.splitlines() if any(m in ln for m in STRENGTH)]
    assert [next(m for m in STRENGTH if m in ln) for ln in lines] == ["strong", "middle", "weak"]
    assert "600 votes" in result.output and "bootstrap x50" in result.output
    data = json.loads(CliRunner().invoke(app, ["arena", "ratings", "--db", sqlite_url, "--json",
                                               "--bootstrap", "0"]).output)
    assert data["method"] == "sandwich" and [r["rank"] for r in data["ratings"]] == [1, 2, 3]


def test_ratings_command_on_an_empty_arena_is_a_clear_error(sqlite_url):
    result = CliRunner().invoke(app, ["arena", "ratings", "--db", sqlite_url, "--task", "nothing"])
    assert result.exit_code == 2 and "no arena votes on task 'nothing'" in result.output


def test_audit_flags_and_marks_the_bot(sqlite_url):
    add_votes(sqlite_url, 300, bot=40)
    result = CliRunner().invoke(app, ["arena", "audit", "--db", sqlite_url, "--apply"])
    assert result.exit_code == 0, result.output
    assert "bot" in result.output and "position bias" in result.output and "marked 40 vote(s)" in result.output
    again = CliRunner().invoke(app, ["arena", "audit", "--db", sqlite_url])
    assert "no implausible voters" in again.output
    data = json.loads(CliRunner().invoke(app, ["arena", "ratings", "--db", sqlite_url, "--json"]).output)
    assert data["votes_used"] == 300


def test_demo_command_is_idempotent(sqlite_url, tmp_path):
    for _ in range(2):
        result = CliRunner().invoke(app, ["arena", "demo", "--db", sqlite_url, "--renders", str(tmp_path / "r")])
        assert result.exit_code == 0, result.output
    assert len(list((tmp_path / "r").rglob("*.png"))) == 4 * 6 * 4


def test_active_sampling_prefers_pairs_with_few_votes_and_wide_intervals():
    models = ["a", "b", "c", "d"]
    stats = PairStats(votes={frozenset(("a", "b")): 400}, se={"a": 10.0, "b": 10.0, "c": 80.0, "d": 80.0})
    rng = random.Random(0)
    first = [pair_order(models, stats, ArenaConfig(uniform_share=0.0), rng)[0] for _ in range(3000)]
    share = {p: first.count(p) / len(first) for p in set(first)}
    assert share.get(("a", "b"), 0) < 0.01  # the well-covered pair is almost never first
    assert share[("c", "d")] > share[("a", "c")]  # the widest intervals win
    uniform = [pair_order(models, stats, ArenaConfig(sampling="uniform"), rng)[0] for _ in range(3000)]
    assert abs(uniform.count(("a", "b")) / 3000 - 1 / 6) < 0.04
    # the uniform share is kept under active sampling: the covered pair still comes up now and then
    mixed = [pair_order(models, stats, ArenaConfig(uniform_share=0.3), rng)[0] for _ in range(3000)]
    assert abs(mixed.count(("a", "b")) / 3000 - 0.3 / 6) < 0.02
