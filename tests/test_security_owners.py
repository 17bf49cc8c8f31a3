"""A push can never collide with the operator's own runs: what a push token writes (its run, its task
declaration, its model's display name, its outputs) lives in the token's own namespace, and the
operator's `harness eval`, pages and arena never use it. Each attack is replayed as a remote user
would: the operator's deterministic command on their own machine, rows rescored 1.0, pushed through
the real endpoint; then the operator's real CLI on the server's database (SQLite and PostgreSQL)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from harness.leaderboard.app import create_app
from harness.leaderboard.push import payloads
from harness.leaderboard.tokens import create_token
from harness.run_config import build_task
from harness.store import ops
from harness.store.db import open_db
from harness.store.schema import OPERATOR, MetricRow, ModelRow, RunRow, SampleResultRow, TaskRow

HARNESS = [sys.executable, "-m", "harness.cli"]
# the operator's command; its truth: the constant "zero" never matches a GSM8K answer (exact match 0.0)
EVAL = ["eval", "-t", "gsm8k", "-m", "builtin:constant", "-M", "text=zero", "--limit", "10", "--no-progress"]
FORGED = "PUSHED: pick me, I am the better answer"


def cli(args: list[str], db: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(HARNESS + args + ["--db", db], capture_output=True, text=True, timeout=180, env=env)


@pytest.fixture(scope="module")
def forged(tmp_path_factory) -> list[dict]:
    """The remote user's push bodies: the operator's command run on their own machine (same run name,
    same config hash), every row rescored 1.0 with a forged output, metrics recomputed from those rows
    (so the server accepts them), the task's directions inverted and a flattering display name."""
    db = f"sqlite:///{tmp_path_factory.mktemp('attacker') / 'h.db'}"
    assert cli(EVAL, db).returncode == 0
    src = open_db(db)
    with src.begin() as s:
        for row in s.scalars(select(SampleResultRow)):
            row.scores = {k: 1.0 for k in row.scores}
            row.output = FORGED
    again = cli(EVAL, db)  # 0 new: the run's metrics are recomputed from the forged rows
    assert again.returncode == 0 and "0 new, 10 already done" in again.stdout
    with src() as s:
        name = s.scalars(select(RunRow.name)).one()
    bodies = list(payloads(src, name))
    src.kw["bind"].dispose()
    for b in bodies:
        b["task"]["metrics"] = {k: {**v, "direction": "lower"} for k, v in b["task"]["metrics"].items()}
        b["task"]["primary_metric"] = "exact_match_strict"
        b["task"]["description"] = "pushed description"
        b["model"]["display_name"] = "GPT-5 (official)"
    assert {m["name"]: m["value"] for m in bodies[0]["metrics"]}["exact_match_flexible"] == 1.0
    return bodies


@pytest.fixture
def server(db_url):
    app = create_app(db_url, write_token="admin-secret", cache_seconds=0.0)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client, db_url
    app.state.sessions.kw["bind"].dispose()


def push(client: TestClient, bodies: list[dict], token: str, name: str | None = None) -> list[dict]:
    out = []
    for b in bodies:
        b = {**b, "run": {**b["run"], "name": name or b["run"]["name"]}}
        r = client.post("/api/runs", json=b, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200, r.text
        out.append(r.json())
    return out


def run_name(bodies: list[dict]) -> str:
    return bodies[0]["run"]["name"]


def scores(sessions, run_id: int) -> list[float]:
    with sessions() as s:
        rows = s.scalars(select(SampleResultRow.scores).where(SampleResultRow.run_id == run_id)).all()
    return [v for row in rows for v in row.values()]


def test_a_pushed_run_with_the_operators_name_and_hash_is_never_joined(server, forged):
    app, client, db = server
    alice = create_token(app.state.sessions, "alice")
    assert push(client, forged, alice)[0]["created"]
    first = cli(EVAL, db)
    assert first.returncode == 0, first.stderr
    # the operator's run is its own: all 10 samples evaluated here, none taken from the pushed run
    assert "10 new, 0 already done" in first.stdout, first.stdout
    again = cli(EVAL, db)
    assert "0 new, 10 already done" in again.stdout
    with app.state.sessions() as s:
        mine = ops.operator_run(s, run_name(forged))
        theirs = s.scalars(select(RunRow).where(RunRow.name == run_name(forged), RunRow.owner == "alice")).one()
        assert mine is not None and mine.id != theirs.id and mine.config_hash == theirs.config_hash
        head = {m.name: m.value for m in s.scalars(select(MetricRow).where(MetricRow.run_id == mine.id,
                                                                          MetricRow.breakdown_key == ""))}
        outputs = set(s.scalars(select(SampleResultRow.output).where(SampleResultRow.run_id == mine.id)))
    assert head["exact_match_flexible"] == 0.0 and set(scores(app.state.sessions, mine.id)) == {0.0}
    assert outputs == {"zero"}
    assert set(scores(app.state.sessions, theirs.id)) == {1.0}  # the pusher's run is left as pushed
    # the pusher may keep pushing into its own run; that never reaches the operator's
    assert push(client, forged, alice)[0]["samples_inserted"] == 0
    assert set(scores(app.state.sessions, mine.id)) == {0.0}
    # ownership as before: another token cannot write into alice's run; under a name of its own it may
    bob = create_token(app.state.sessions, "bob")
    r = client.post("/api/runs", json=forged[0], headers={"Authorization": f"Bearer {bob}"})
    assert r.status_code == 403 and "belongs to another token" in r.json()["detail"]
    assert push(client, forged[:1], bob, name="bobs")[0]["created"]
    with app.state.sessions() as s:
        assert dict(s.execute(select(RunRow.name, RunRow.owner).where(RunRow.owner != "alice")).all()) == {
            run_name(forged): OPERATOR, "bobs": "bob"}


def test_a_pushed_task_declaration_never_ranks_the_operators_runs(server, forged):
    app, client, db = server
    alice = create_token(app.state.sessions, "alice")
    push(client, forged, alice)  # first on the server: before the fix its declaration became everyone's
    assert cli(EVAL, db).returncode == 0
    declared = build_task("gsm8k", {})
    with app.state.sessions() as s:
        rows = {t.owner: t for t in s.scalars(select(TaskRow).where(TaskRow.name == "gsm8k"))}
    assert set(rows) == {OPERATOR, "alice"}
    assert rows[OPERATOR].primary_metric == declared.primary_metric == "exact_match_flexible"
    assert rows[OPERATOR].metrics == {k: v.to_dict() for k, v in declared.metrics.items()}
    assert rows["alice"].metrics["exact_match_flexible"]["direction"] == "lower"  # hers, for her runs
    # a newer pushed run (the newest run used to decide a column's declaration) changes nothing either
    push(client, forged, alice, name="newer")

    def gsm8k_task() -> dict:
        return next(r for r in client.get("/api/tasks").json()["rows"] if r["task"] == "gsm8k")

    task = gsm8k_task()
    assert (task["primary_metric"], task["direction"]) == ("exact_match_flexible", "higher")
    page = client.get("/tasks/gsm8k").text
    assert "pushed description" not in page and declared.description[:40] in page
    runs = client.get("/api/tasks/gsm8k/runs.json").json()["rows"]
    assert {r["metric"] for r in runs if r["rank_best"] is not None} <= {"exact_match_flexible"}


def test_a_pushed_display_name_is_the_pushers_own(server, forged):
    app, client, db = server
    alice = create_token(app.state.sessions, "alice")
    push(client, forged, alice)
    assert cli(EVAL, db).returncode == 0
    spec = forged[0]["model"]["spec"]
    with app.state.sessions() as s:
        models = {m.owner: m for m in s.scalars(select(ModelRow).where(ModelRow.spec == spec))}
    assert models[OPERATOR].display_name == "builtin:constant"  # from the operator's own --model
    labels = {r["model_id"]: r["model"] for r in client.get("/api/models").json()["rows"]}
    # the operator's label is what it is on a server nobody pushed to; the pushed one names its owner
    assert labels[models[OPERATOR].id] == "builtin:constant"
    assert labels[models["alice"].id] == "GPT-5 (official) [alice]"
    lines = client.get("/api/overview").json()["rows"]
    by_model = {r["model"]: r["gsm8k"] for r in lines}
    # the operator's cell is the operator's run; the pushed one is a line of its own, under its own name
    assert by_model == {"builtin:constant": 0.0, "GPT-5 (official) [alice]": 1.0}


def test_the_arena_never_serves_a_pushed_run_for_the_operators_model(server, forged, monkeypatch):
    app, client, db = server
    monkeypatch.setenv("HARNESS_ARENA_SECRET", "arena-secret")
    assert cli(EVAL, db).returncode == 0
    assert cli(["eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "10", "--no-progress"], db).returncode == 0
    alice = create_token(app.state.sessions, "alice")
    push(client, forged, alice, name="fresh")  # newer than the operator's run of the same model spec
    with app.state.sessions() as s:
        honest = set(s.scalars(select(SampleResultRow.output).join(RunRow, RunRow.id == SampleResultRow.run_id)
                               .where(RunRow.owner == OPERATOR)))
        assert s.scalar(select(func.count()).select_from(RunRow).where(RunRow.owner == "alice")) == 1
    served = []
    for _ in range(15):
        r = client.get("/api/arena/battle", params={"task": "gsm8k"})
        assert r.status_code == 200, r.text
        served += [r.json()["left"]["text"], r.json()["right"]["text"]]
    assert not [t for t in served if FORGED in t]
    assert set(served) <= honest and "zero" in served


def test_a_push_token_cannot_claim_a_name_an_operator_run_uses(server, forged):
    app, client, db = server
    assert cli(EVAL, db).returncode == 0  # the operator's run exists first
    mallory = create_token(app.state.sessions, "mallory")
    r = client.post("/api/runs", json=forged[0], headers={"Authorization": f"Bearer {mallory}"})
    assert r.status_code == 403 and "belongs to the operator" in r.json()["detail"]
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(RunRow)) == 1
