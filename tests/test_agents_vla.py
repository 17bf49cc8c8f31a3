"""VLA backends: fitted on demonstrations recorded by `harness agents record`, they play
crafter_instruct through the same loop; the abstractions' hindsight labels are what the replayed
demonstration did next; AAR's learned agreement tells corrupted demonstration steps apart; a
demonstration file of another format is a one-line error."""

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


def test_hindsight_labels_are_what_the_replayed_demonstration_did_next():
    from harness.tasks.agents import demos
    from harness.tasks.agents.backends.abstractions import IA_CLASSES as IA
    from harness.tasks.agents.backends.abstractions import NOWHERE, affordance_labels, intention_labels
    from harness.tasks.agents.env import VIEW_W
    from harness.tasks.agents.observation import parse_observation

    rec = demos.record(["place_table", "collect_sapling"], 2, 300, 60, corrupt=0.0)
    checked = 0
    for d in rec:
        steps = list(demos.replay_steps(d))
        assert len(steps) == len(d["actions"]) and [u for s in steps for u in s.unlocked] == d["unlocked"]
        ia, esa = intention_labels(steps), affordance_labels(steps)
        # the intention of a step is the next unlock at or after it: the unlock order, step by step
        order = [IA[i] for k, i in enumerate(ia) if k == 0 or ia[k - 1] != i]
        assert order == [u for s in steps for u in s.unlocked][:len(order)] and order[-1] == d["goal"]
        for k, s in enumerate(steps):
            if s.unlocked:
                assert ia[k] == IA.index(s.unlocked[0])
            if ACTIONS[s.action] == "do" and s.achieved:
                # an achieving `do` acts on the faced tile: the label is that tile of the view
                fx, fy = s.facing
                assert esa[k] == (3 + fy) * VIEW_W + 4 + fx
                obs = parse_observation(s.text)
                assert obs.grid[esa[k] // VIEW_W][esa[k] % VIEW_W] == obs.facing
                checked += 1
        assert esa[-1] != NOWHERE  # the goal step itself acts on a tile (table placed, grass searched)
    assert checked >= 2


def test_aar_weights_from_the_learned_abstractions_are_lower_on_corrupted_steps():
    from harness.tasks.agents import demos
    from harness.tasks.agents.backends.abstractions import aar_weights
    from harness.tasks.agents.backends.vla import vla_backend

    w = aar_weights([0.0, 0.5, 1.0, 1.0])
    assert abs(sum(w) / len(w) - 1.0) < 1e-9 and abs(w[0] / w[2] - 0.1) < 1e-9
    rec = demos.record(["place_table", "eat_cow"], 3, 300, 40, corrupt=0.3)
    model = vla_backend("3a", epochs=25, warmup=10, lr=3e-3)
    record = model.fit(demos.as_samples(rec))
    assert record["corrupted"] > 10  # the marks only score the weights here; training never reads them
    assert record["ia_accuracy"] > 0.6 and record["esa_accuracy"] > 0.5
    assert record["agreement_clean"] > 2 * record["agreement_corrupted"]
    assert record["weight_clean"] > 1.0 > record["weight_corrupted"] + 0.2


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
