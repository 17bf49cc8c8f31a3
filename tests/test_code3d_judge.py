"""Pairwise 3D judge: prompt assembly, verdict parsing, A/B swap, agreement, Bradley-Terry."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path

import pytest
from requirements import missing

from harness.modelspec import build_model
from harness.task import ScoreContext
from harness.tasks.code3d.judge import Contestant, agreement, judge_messages, judge_pair, parse_verdict, rate_verdicts


def test_parse_verdict() -> None:
    assert parse_verdict('{"winner": "a", "reasoning": "closer"}') == "a"
    assert parse_verdict('thinking...\n{"winner": "both_bad", "reasoning": "x"}') == "both_bad"
    assert parse_verdict('{"winner": "maybe"}') is None
    assert parse_verdict("no json") is None


def test_messages_put_a_before_b_with_reference_images() -> None:
    a, b = Contestant("m1", ["a1.png"] * 4), Contestant("m2", ["b1.png"] * 4)
    msgs = judge_messages("a chair", a, b, reference_images=["ref.png"])
    assert "impartial judge" in msgs[0].text_content
    paths = [p.path for p in msgs[1].content if p.type == "image"]
    assert paths == ["ref.png"] + ["a1.png"] * 4 + ["b1.png"] * 4
    assert msgs[1].content[0].text.startswith("--- ORIGINAL PROMPT ---\na chair")
    code = judge_messages("a chair", Contestant("m1", [], "import bpy  # A"), Contestant("m2", [], "# B"), mode="code")
    assert "# A" in code[1].text_content and code[1].text_content.index("# A") < code[1].text_content.index("# B")


def test_judge_pair_maps_swapped_verdicts_back() -> None:
    judge_model = build_model("builtin:constant", {"text": '{"winner": "a", "reasoning": "first is better"}'})
    ctx = ScoreContext(judge=judge_model, judge_spec="builtin:constant")
    a, b = Contestant("m1", ["a.png"]), Contestant("m2", ["b.png"])
    results = {}
    for vote_id in [f"v{i}" for i in range(12)]:
        outcome, verdict = asyncio.run(judge_pair(ctx, vote_id, "a chair", a, b))
        swapped = verdict.records[0].verdict["swapped"]
        # the judge always prefers whichever side it saw first
        assert outcome == ("b" if swapped else "a")
        results[vote_id] = swapped
    assert any(results.values()) and not all(results.values())  # both orders occur


def test_agreement_drops_ties_and_computes_kappa() -> None:
    judge_votes = ["a", "a", "b", "b", "tie", "a"]
    human_votes = ["a", "b", "b", "b", "a", "both_bad"]
    out = agreement(judge_votes, human_votes)
    # kept: (a,a) (a,b) (b,b) (b,b): accuracy 3/4; p_judge(a)=.5, p_human(a)=.25 -> pe=.5 -> kappa=.5
    assert out["n"] == 4 and out["accuracy"] == pytest.approx(0.75) and out["kappa"] == pytest.approx(0.5)
    assert math.isnan(agreement(["tie"], ["a"])["accuracy"])


def test_ratings_rank_the_better_model_first() -> None:
    votes = [("good", "bad", "a")] * 8 + [("good", "bad", "b")] * 2 + [("good", "bad", "tie")] * 2
    ratings = rate_verdicts(votes)
    by = ratings.by_model()
    assert by["good"].rating > by["bad"].rating


def test_judge_command_over_two_stored_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stored runs (one writes the reference script, one a broken one) judged end to end."""
    from harness.tasks.code3d.executor import BpyUnavailable, bpy_python

    try:
        bpy_python()
    except BpyUnavailable:
        missing("the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")
    from typer.testing import CliRunner

    from harness.cli import app
    from harness.runner import EvalConfig, evaluate

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    db = f"sqlite:///{tmp_path / 'j.db'}"
    refs = Path(__file__).resolve().parents[1] / "tasks" / "code3d" / "references"
    scripts = {"good": (refs / "snowman.py").read_text(), "cube": "import bpy\nbpy.ops.mesh.primitive_cube_add()\n",
               "broken": "import bpy\nbpy.ops.mesh.primitive_cube_add(sizee=1)\n"}  # fmt: skip
    names = []
    for name, text in scripts.items():
        summary = evaluate(EvalConfig(
            task="code3d", model="builtin:constant", model_settings={"text": text}, sample_ids=["snowman"],
            db_url=db, progress=False, run_name=f"run-{name}", task_options={"size": 64, "samples": 2},
        ))  # fmt: skip
        names.append(summary.run_name)
    human = tmp_path / "human.jsonl"
    spec = {n: f"builtin:constant?text={t}" for n, t in scripts.items()}
    human.write_text(json.dumps({"sample_id": "snowman", "model_a": spec["good"], "model_b": spec["cube"],
                                 "winner": "a"}) + "\n")  # fmt: skip
    verdict = 'Verdict: {"winner": "a", "reasoning": "first"}'  # a plain literal would be parsed by -J
    result = CliRunner().invoke(app, ["code3d", "judge", *names, "--judge", "builtin:constant", "-J",
                                      f"text={verdict}", "--db", db, "--out", str(tmp_path / "votes.jsonl"),
                                      "--human", str(human)])  # fmt: skip
    assert result.exit_code == 0, result.output
    votes = [json.loads(line) for line in (tmp_path / "votes.jsonl").read_text().splitlines()]
    assert len(votes) == 3  # good-cube (judged), good-broken and cube-broken (decided by execution)
    by_source = {(v["model_a"], v["model_b"]): (v["source"], v["outcome"]) for v in votes}
    assert by_source[(spec["good"], spec["broken"])] == ("status", "a")
    assert by_source[(spec["cube"], spec["broken"])] == ("status", "a")
    assert by_source[(spec["good"], spec["cube"])][0] == "judge"
    assert "Rating" in result.output and "agreement with 1 human votes" in result.output
    import sqlite3

    con = sqlite3.connect(tmp_path / "j.db")
    n = con.execute("select count(*) from judgements").fetchone()[0]
    con.close()
    assert n == 1
