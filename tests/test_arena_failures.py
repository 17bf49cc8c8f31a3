"""A battle is votable only when both sides answered: live battles against real local streaming
servers (one stopped, one that fails once), stored battles with an error side; failures are stored
and counted per model, never rated, logged in one line; votes are keyed by model, not by label;
``pool add`` checks the model first; the live reveal shows time to first token."""

from __future__ import annotations

import json
import logging
import time

import pytest
from arena_stream_server import StreamingServer
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from typer.testing import CliRunner

from harness.cli import app as cli
from harness.leaderboard.arena import create_arena_app, pool
from harness.leaderboard.arena.config import ArenaConfig
from harness.leaderboard.arena.failures import FAILED_OUTPUT, FAILED_REPLY
from harness.store.schema import ModelRow, SampleResultRow
from harness.store.schema_arena import ArenaVoteRow
from harness.store.schema_arena_live import ArenaFailureRow, ArenaPoolRow

WORDS = ["one ", "two ", "three"]


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def events(body: str) -> list[dict]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def dead_settings() -> dict:
    """An OpenAI-compatible server that was started and stopped: its port refuses connections."""
    srv = StreamingServer(WORDS)
    srv.close()
    return srv.settings()


@pytest.fixture
def arena(sqlite_url, tmp_path):
    clock = Clock()
    cfg = ArenaConfig(secret="fail", live_media_dir=str(tmp_path / "live"), clock=clock, stats_ttl_s=0.0, min_votes=0,
                      votes_per_minute=1000, battles_per_minute=1000)
    app = create_arena_app(sqlite_url, cfg)
    return app, TestClient(app), clock


def _start(client: TestClient, prompt: str = "Count to three") -> tuple[dict, list[dict]]:
    r = client.post("/api/arena/chat", json={"prompt": prompt})
    assert r.status_code == 200, r.text
    evs = events(r.text)
    return evs[0], evs


def _vote(client: TestClient, first: dict, outcome: str = "left"):
    return client.post(f"/api/arena/chat/{first['battle']}/vote", json={"token": first["token"], "outcome": outcome})


def test_one_dead_side_is_not_votable_counted_and_logged(arena, caplog):
    app, client, clock = arena
    with StreamingServer(WORDS) as alive:
        with app.state.sessions() as s:
            pool.add(s, "openai:alive-model", alive.settings(), label="alive")
            pool.add(s, "openai:dead-model", dead_settings(), label="dead")
            dead_id = s.scalar(select(ArenaPoolRow.id).where(ArenaPoolRow.label == "dead"))
        with caplog.at_level(logging.WARNING, logger="harness.leaderboard.arena.live"):
            first, evs = _start(client)
        done = {e["side"]: e["failed"] for e in evs if e["type"] == "done"}
        assert sorted(done.values()) == [False, True]
        failed = next(e for e in evs if e["type"] == "failed")
        dead_side = next(side for side, bad in done.items() if bad)
        assert failed == {"type": "failed", "sides": [dead_side], "can_retry": True}
        assert evs[-1] == {"type": "end", "turn": 1, "can_continue": False}  # no next turn from a failure
        assert "dead" not in json.dumps(evs)  # the failure names nobody before a vote
        # the vote is refused with one line, nothing stored
        for outcome in ("left", "right", "tie", "both_bad"):
            r = _vote(client, first, outcome)
            assert r.status_code == 409 and r.json()["detail"] == FAILED_REPLY and "\n" not in r.json()["detail"]
        turn = client.post(f"/api/arena/chat/{first['battle']}/turn", json={"token": first["token"], "prompt": "go"})
        assert turn.status_code == 409 and "regenerate" in turn.json()["detail"]
        with app.state.sessions() as s:
            assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == 0
            row = s.scalar(select(ArenaFailureRow))
            assert row is not None and row.model_key == f"pool:{dead_id}" and row.model_label == "dead"
            assert row.kind == "connection" and row.side == dead_side
            health = s.get(ArenaPoolRow, dead_id)
            assert health.failures_in_row == 1 and "connection" in (health.last_error or "")
        # the server log: one line naming the model and the reason
        lines = [r.getMessage() for r in caplog.records if "live reply failed" in r.getMessage()]
        assert len(lines) == 1 and "'dead'" in lines[0] and "connection" in lines[0] and "\n" not in lines[0]
        # counted beside the ratings once the battle is closed (never while it can be voted on), never rated
        board = client.get("/api/arena/ratings").json()
        assert board["failures"] == [] and board["models"] == []
        clock.now += app.state.arena_config.token_ttl_s + 1
        board = client.get("/api/arena/ratings").json()
        assert board["failures"] == [{"model": "dead", "key": f"pool:{dead_id}", "failures": 1, "battles": 1}]
        assert board["models"] == [] and board["total_votes"] == 0
        page = client.get("/arena/ratings").text
        assert 'id="failures"' in page and "<td class=\"model\">dead</td>" in page


def test_both_sides_dead_is_not_votable_and_breaker_stops_serving(arena):
    app, client, _ = arena
    with app.state.sessions() as s:
        pool.add(s, "openai:dead-a", dead_settings(), label="dead-a")
        pool.add(s, "openai:dead-b", dead_settings(), label="dead-b")
    for _ in range(3):
        first, evs = _start(client)
        assert {e["side"] for e in evs if e["type"] == "done" and e["failed"]} == {"a", "b"}
        assert _vote(client, first, "tie").status_code == 409
    # three failures in a row each: both are left out of new pairs for a while, with a clear refusal
    r = client.post("/api/arena/chat", json={"prompt": "again"})
    assert r.status_code == 503 and "answering" in r.json()["detail"] and int(r.headers["Retry-After"]) > 0
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == 0
        assert s.scalar(select(func.count()).select_from(ArenaFailureRow)) == 6


def test_regenerate_the_failed_side_then_vote(arena):
    app, client, _ = arena
    calls = {"n": 0}

    def flaky(body: dict) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("the first reply dies")
        return ["fine ", "now"]

    with StreamingServer(WORDS) as steady, StreamingServer(flaky) as shaky:
        with app.state.sessions() as s:
            pool.add(s, "openai:steady", steady.settings(), label="steady")
            pool.add(s, "openai:shaky", shaky.settings(), label="shaky")
            ids = dict(s.execute(select(ArenaPoolRow.label, ArenaPoolRow.id)).all())
        first, evs = _start(client)
        bad = [e["side"] for e in evs if e["type"] == "done" and e["failed"]]
        assert len(bad) == 1 and _vote(client, first).status_code == 409
        retry = client.post(f"/api/arena/chat/{first['battle']}/retry", json={"token": first["token"]})
        assert retry.status_code == 200
        revs = events(retry.text)
        assert revs[0] == {"type": "retry", "sides": bad}
        assert "".join(e["text"] for e in revs if e["type"] == "delta") == "fine now"
        assert not any(e["type"] == "failed" for e in revs) and revs[-1]["type"] == "end"
        assert len(steady.requests) == 1  # only the failed side was asked again
        again = client.post(f"/api/arena/chat/{first['battle']}/retry", json={"token": first["token"]})
        assert again.status_code == 409 and "nothing to regenerate" in again.json()["detail"]
        vote = _vote(client, first, "right")
        assert vote.status_code == 200 and vote.json()["counted"]
        shown = vote.json()
        for side in ("a", "b"):  # the reveal: tokens, seconds, time to first token, cost
            assert shown[side]["first_token_s"] is not None and 0 <= shown[side]["first_token_s"] <= 30
        with app.state.sessions() as s:
            v = s.scalar(select(ArenaVoteRow))
            assert {v.left_key, v.right_key} == {f"pool:{ids['steady']}", f"pool:{ids['shaky']}"}
            assert s.get(ArenaPoolRow, ids["shaky"]).failures_in_row == 0  # answered since
            assert s.scalar(select(func.count()).select_from(ArenaFailureRow)) == 1  # the failed attempt stays counted


def test_regenerate_is_bounded(arena):
    app, client, _ = arena
    with StreamingServer(WORDS) as alive:
        with app.state.sessions() as s:
            pool.add(s, "openai:alive", alive.settings(), label="alive")
            pool.add(s, "openai:dead", dead_settings(), label="dead")
        first, _ = _start(client)
        for _ in range(app.state.arena_config.live_retries):
            r = client.post(f"/api/arena/chat/{first['battle']}/retry", json={"token": first["token"]})
            assert r.status_code == 200 and events(r.text)[-1]["type"] == "end"
        last = [e for e in events(r.text) if e["type"] == "failed"]
        assert last == [{"type": "failed", "sides": last[0]["sides"], "can_retry": False}]
        over = client.post(f"/api/arena/chat/{first['battle']}/retry", json={"token": first["token"]})
        assert over.status_code == 409 and "at most" in over.json()["detail"]
        assert client.post(f"/api/arena/chat/{first['battle']}/retry", json={"token": "x.1.y"}).status_code == 403


def test_stored_battle_with_an_error_side_is_never_served_nor_votable(sqlite_url):
    from harness.leaderboard.arena.demo import seed_text

    cfg = ArenaConfig(secret="s", stats_ttl_s=0.0, votes_per_minute=1000, battles_per_minute=1000)
    app = create_arena_app(sqlite_url, cfg)
    runs = seed_text(app.state.sessions, models=("demo-alpha", "demo-bravo"), n_samples=8, n_identical=0, n_failed=0)
    with app.state.sessions() as s:  # alpha failed on half its samples (bravo answered them)
        for row in s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == runs["demo-alpha"])):
            if int(row.sample_id[1:]) % 2:
                row.error, row.output = "RuntimeError: backend timeout", ""
        s.commit()
    client = TestClient(app)
    for _ in range(20):  # alpha's failed samples are never served: such a battle could not be voted on
        b = client.get("/api/arena/battle").json()
        assert b["left"]["text"] and b["right"]["text"] and not b["left"]["failed"] and not b["right"]["failed"]
        assert int(b["prompt"]["text"].split(":")[0].split()[-1]) % 2 == 0
        assert 'id="not-votable"' not in client.get("/arena").text
    # a battle served before its output turned out to be an error (or by an older server): refused
    b = client.get("/api/arena/battle").json()
    with app.state.sessions() as s:
        from harness.store.schema_arena import ArenaBattleRow

        battle = s.scalar(select(ArenaBattleRow).where(ArenaBattleRow.public_id == b["battle"]))
        s.execute(update(SampleResultRow).where(SampleResultRow.id == battle.left_result_id).values(
            error="RuntimeError: it broke", output=""))
        s.commit()
    r = client.post("/api/arena/vote", json={"token": b["token"], "outcome": "right"})
    assert r.status_code == 409 and r.json()["detail"] == FAILED_OUTPUT
    form = client.post("/arena/vote", data={"token": b["token"], "outcome": "left"})
    assert form.status_code == 409 and "cannot be voted on" in form.text
    with app.state.sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaVoteRow)) == 0


def test_votes_follow_the_model_when_its_label_gains_a_suffix(sqlite_url):
    from harness.leaderboard.arena.demo import seed_text
    from harness.store.ops import get_or_create_model

    cfg = ArenaConfig(secret="s", stats_ttl_s=0.0, min_votes=0, votes_per_minute=1000, battles_per_minute=1000)
    app = create_arena_app(sqlite_url, cfg)
    seed_text(app.state.sessions, models=("demo-alpha", "demo-bravo"), n_samples=6, n_identical=0, n_failed=0)
    client = TestClient(app)

    def vote_once() -> dict:
        b = client.get("/api/arena/battle").json()
        r = client.post("/api/arena/vote", json={"token": b["token"], "outcome": "tie"})
        assert r.status_code == 200
        return r.json()

    before = vote_once()
    assert {before["left_model"], before["right_model"]} == {"demo-alpha", "demo-bravo"}
    with app.state.sessions() as s:  # a second spec with alpha's short name: both labels gain a suffix
        get_or_create_model(s, "demo:demo-alpha?variant=2", backend="demo", display_name="demo-alpha")
        s.commit()
    after = vote_once()
    assert "demo-alpha" not in (after["left_model"], after["right_model"])  # alpha is shown under its new label
    board = client.get("/api/arena/ratings").json()
    assert len(board["ratings"]) == 2 and all(r["votes"] == 2 for r in board["ratings"])  # one model each, not four
    with app.state.sessions() as s:
        alpha = s.scalar(select(ModelRow.id).where(ModelRow.spec == "demo:demo-alpha"))
        keys = {k for v in s.scalars(select(ArenaVoteRow)) for k in (v.left_key, v.right_key)}
    assert f"model:{alpha}" in keys and len(keys) == 2
    assert board["keys"][next(r["model"] for r in board["ratings"] if "alpha" in r["model"])] == f"model:{alpha}"
    raw = client.get("/api/arena/votes").json()
    assert {r["left_key"] for r in raw} | {r["right_key"] for r in raw} == keys


def test_pool_add_checks_the_model_first(sqlite_url):
    runner = CliRunner()

    def add(*args: str):
        return runner.invoke(cli, ["arena", "pool", "add", *args, "--db", sqlite_url])

    typo = add("opneai:x")
    assert typo.exit_code == 2 and "did you mean 'openai'" in typo.output and len(typo.output.strip().splitlines()) == 1
    setting = add("openai:x", "-M", "base_ur=http://127.0.0.1:9/v1")
    assert setting.exit_code == 2 and "did you mean 'base_url'" in setting.output
    nocheck = add("openai:x", "-M", "base_ur=http://127.0.0.1:9/v1", "--no-probe")
    assert nocheck.exit_code == 2 and "did you mean 'base_url'" in nocheck.output  # names are checked even then
    dead = dead_settings()
    started = time.monotonic()
    down = add("openai:m", "-M", f"base_url={dead['base_url']}", "-M", "api_key_env=", "--probe-timeout", "5")
    took = time.monotonic() - started
    assert down.exit_code == 2 and "probe request failed" in down.output and "connection" in down.output, down.output
    assert len(down.output.strip().splitlines()) == 1 and took < 15, took
    hung = StreamingServer(lambda body: iter(lambda: "x", None), delay=1.0)  # answers, never finishes
    try:
        started = time.monotonic()
        slow = add("openai:m", "-M", f"base_url={hung.base_url}", "-M", "api_key_env=", "--probe-timeout", "1")
        assert slow.exit_code == 2 and "no reply within 1 s" in slow.output and time.monotonic() - started < 10
    finally:
        hung.close()
    sessions = __import__("harness.store.db", fromlist=["open_db"]).open_db(sqlite_url)
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(ArenaPoolRow)) == 0  # nothing refused was added
    with StreamingServer(WORDS) as srv:
        ok = add("openai:m", "-M", f"base_url={srv.base_url}", "-M", "api_key_env=", "-M", "max_retries=0")
        assert ok.exit_code == 0 and "probe: openai:m answered" in ok.output and len(srv.requests) == 1
    listed = runner.invoke(cli, ["arena", "pool", "list", "--db", sqlite_url])
    assert "\tchat\tok;" in listed.output and "0 failed in the last hour" in listed.output
    with sessions() as s:
        row = s.scalar(select(ArenaPoolRow))
        assert row.probed_at is not None and row.probe_error is None
        first_id = row.id
    # removed and added again (same spec, same label): the same entry, so its votes' key comes back
    assert runner.invoke(cli, ["arena", "pool", "remove", "openai:m", "--db", sqlite_url]).exit_code == 0
    assert add("openai:m", "--no-probe").exit_code == 0
    with sessions() as s:
        assert s.scalar(select(ArenaPoolRow.id).where(ArenaPoolRow.label == "openai:m")) == first_id


def test_pool_health_api_is_for_admins(sqlite_url):
    from harness.leaderboard.app import create_app

    app = create_app(sqlite_url, write_token="admin-secret")
    app.state.arena_config = ArenaConfig(secret="h", live_media_dir=None)
    with app.state.sessions() as s:
        pool.add(s, "openai:dead", dead_settings(), label="dead")
        pool.add(s, "builtin:echo", label="echo")
    client = TestClient(app)
    assert client.get("/api/arena/pool").status_code == 401
    assert client.get("/api/arena/pool", headers={"Authorization": "Bearer nope"}).status_code == 403
    client.post("/api/arena/chat", json={"prompt": "hello there"})
    r = client.get("/api/arena/pool", headers={"Authorization": "Bearer admin-secret"})
    assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
    health = {m["label"]: m for m in r.json()["models"]}
    assert health["dead"]["status"] == "failing" and "connection" in health["dead"]["last_error"]
    assert health["dead"]["recent_failures"] == 1 and health["echo"]["status"] == "ok"


def test_the_stored_battle_page_disables_the_votes_when_a_side_did_not_answer():
    from harness.leaderboard.arena.failures import answered_view
    from harness.leaderboard.arena.routes import _env

    def page(left: dict) -> str:
        view = {"battle": "b1", "token": "t", "task": "t", "expires_in_s": 60, "prompt": {"text": "p", "images": []},
                "left": left, "right": {"text": "an answer", "failed": False, "images": [], "mesh": None}}
        votable = all(answered_view(view[s]) for s in ("left", "right"))
        return _env.get_template("arena.html").render(base="arena_base.html", battle=view, votable=votable, task="",
                                                      tasks=[], plotly_src="/p.js", message=None)

    failed = page({"text": "", "failed": True, "images": [], "mesh": None})
    assert failed.count(" disabled>") == 4 and 'id="not-votable"' in failed
    # a render task's code that did not run is an answer: judged, not refused
    code = page({"text": "import bpy", "failed": True, "images": [], "mesh": None})
    assert " disabled>" not in code and 'id="not-votable"' not in code
