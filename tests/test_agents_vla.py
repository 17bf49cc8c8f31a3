"""VLA backends: fitted on demonstrations recorded by `harness agents record`, they play
crafter_instruct through the same loop; AAR's alignment tells corrupted demonstration steps apart;
a demonstration file of another format is a one-line error."""

from __future__ import annotations

from sqlalchemy import select
from typer.testing import CliRunner

from harness.store.db import open_db
from harness.store.schema import MetricRow, RunRow, SampleResultRow
from harness.tasks.agents.env import ACTIONS


def _stored(url: str, task: str):
    sessions = open_db(url)
    with sessions() as s:
        run = s.scalars(select(RunRow).where(RunRow.name.like(f"{task}__%")).order_by(RunRow.id.desc())).first()
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run.id)).all()
        metrics = s.scalars(select(MetricRow).where(MetricRow.run_id == run.id)).all()
        return run, rows, metrics


def test_aar_alignment_is_lower_on_corrupted_steps():
    from harness.tasks.agents import demos
    from harness.tasks.agents.backends.abstractions import aar_weights, alignment, intention
    from harness.tasks.agents.observation import parse_observation

    rec = demos.record(["place_table", "eat_cow"], 2, 300, 40, corrupt=0.3)
    clean, bad = [], []
    for d in rec:
        for k, (_frame, text, action) in enumerate(demos.replay(d)):
            obs = parse_observation(text)
            (bad if d["corrupted"][k] else clean).append(alignment(obs, intention(obs), action))
    assert bad and clean
    # clean steps: 1 where they advance the intention, 0.5 while exploring; corrupted ones mostly 0.05-0.3
    assert sum(clean) / len(clean) > 0.6 > 0.3 > sum(bad) / len(bad)
    w = aar_weights(clean + bad)
    assert abs(sum(w) / len(w) - 1.0) < 1e-9 and min(w) > 0


def test_vla_backends_fit_on_recorded_demos_and_play_crafter_instruct(sqlite_url, tmp_path, monkeypatch):
    from harness.cli import app

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    demo_file = tmp_path / "demos.jsonl"
    result = CliRunner().invoke(app, ["agents", "record", "--out", str(demo_file), "--goals", "collect_wood",
                                      "--episodes", "2", "--max-steps", "25", "--corrupt", "0.3"])
    assert result.exit_code == 0, result.output
    assert "wrote 2 demonstrations" in result.output
    for method in ("vla:bc", "vla:3a"):
        result = CliRunner().invoke(app, ["eval", "-t", "crafter_instruct", "-m", method, "-M", "epochs=2",
                                          "-T", "goals=collect_wood", "-T", "episodes=1", "-T", "max_steps=20",
                                          "-T", f"demos={demo_file}", "--db", sqlite_url, "--no-progress"])
        assert result.exit_code == 0, result.output
        run, rows, metrics = _stored(sqlite_url, "crafter_instruct")
        assert run.status == "finished" and len(rows) == 1 and all(r.error is None for r in rows)
        by = {(m.name, m.breakdown_key, m.breakdown_value): m.value for m in metrics}
        assert ("success", "goal", "collect_wood") in by
        assert all(set(r.details["actions"]) <= set(ACTIONS) and r.details["goal"] == "collect_wood" for r in rows)
    # a demonstration file from another format is a one-line error, not a traceback
    demo_file.write_text('{"format": "other/9"}\n')
    result = CliRunner().invoke(app, ["eval", "-t", "crafter_instruct", "-m", "vla:3a", "-T", "goals=collect_wood",
                                      "-T", "episodes=1", "-T", f"demos={demo_file}", "--db", sqlite_url,
                                      "--no-progress"])
    assert result.exit_code != 0 and "is not a harness-crafter-demos/1 file" in result.output
    assert "Traceback" not in result.output
