"""End to end through the CLI: `harness eval -t crafter -m crafter:random` stores every episode's
trajectory and Crafter's metrics; the run page shows the thumbnail strip."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from typer.testing import CliRunner

from harness.store.db import open_db
from harness.store.schema import MetricRow, RunRow, SampleResultRow
from harness.tasks.agents.env import ACHIEVEMENTS, ACTIONS


def _stored(url: str, task: str):
    sessions = open_db(url)
    with sessions() as s:
        run = s.scalars(select(RunRow).where(RunRow.name.like(f"{task}__%")).order_by(RunRow.id.desc())).first()
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run.id)).all()
        metrics = s.scalars(select(MetricRow).where(MetricRow.run_id == run.id)).all()
        return run, rows, metrics


def test_harness_eval_crafter_random_stores_trajectories_and_metrics(sqlite_url, tmp_path, monkeypatch):
    from harness.cli import app

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    result = CliRunner().invoke(app, ["eval", "-t", "crafter", "-m", "crafter:random", "-T", "episodes=2",
                                      "-T", "max_steps=30", "--db", sqlite_url, "--no-progress"])
    assert result.exit_code == 0, result.output
    run, rows, metrics = _stored(sqlite_url, "crafter")
    assert run.status == "finished" and sorted(r.sample_id for r in rows) == ["crafter-s0", "crafter-s1"]
    for r in rows:
        assert r.error is None and r.unscored is None
        d = r.details
        assert len(d["actions"]) == 30 == r.scores["length"] and set(d["actions"]) <= set(ACTIONS)
        assert len(d["rewards"]) == 30 and d["seed"] in (0, 1)
        assert sorted(d["achievements"]) == sorted(ACHIEVEMENTS)
        assert sum(d["achievements"].values()) == sum(r.scores[f"achievement_{a}"] for a in ACHIEVEMENTS)
        assert r.scores["reward"] == round(sum(d["rewards"]), 3)
        assert r.calls == 30  # the runner's first step plus 29 in the scorer loop
        strip = Path(d["media"][0]["path"])
        assert strip.is_file() and strip.is_relative_to(tmp_path / "art")
        assert r.input["messages"][0]["content"][0]["type"] == "image"
    by = {(m.name, m.breakdown_key, m.breakdown_value): m.value for m in metrics}
    rates = [by[("success_rate", "achievement", a)] for a in ACHIEVEMENTS]
    for a, rate in zip(ACHIEVEMENTS, rates, strict=True):
        assert rate == 100.0 * sum(r.scores[f"achievement_{a}"] >= 1 for r in rows) / 2
    import math

    expected = math.exp(sum(math.log1p(x) for x in rates) / 22) - 1
    assert abs(by[("score", "", "")] - expected) < 1e-9
    assert by[("length", "", "")] == 30.0 and by[("illegal_actions", "", "")] == 0.0

    from harness.leaderboard.media import sample_media

    media = sample_media(rows[0].input, rows[0].details, rows[0].prediction, [tmp_path / "art"])
    assert any(m.label == "output" and m.kind == "image" and m.url for m in media)
