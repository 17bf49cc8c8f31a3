"""`harness push`: a run copied between two real databases through the HTTP API, idempotently,
and refused without a valid token."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from test_leaderboard_data import SCRIPT, XSS_RUN, populate

from harness.leaderboard.app import create_app
from harness.leaderboard.ingest import FORMAT
from harness.leaderboard.push import PushError, payloads, push_run
from harness.leaderboard.tokens import TokenError, create_token, list_tokens, revoke_token
from harness.store.db import open_db
from harness.store.schema import JudgementRow, MetricRow, RunRow, SampleResultRow


def _counts(sessions) -> tuple[int, int, int, int]:
    with sessions() as s:
        return (s.scalar(select(func.count(RunRow.id))), s.scalar(select(func.count(SampleResultRow.id))),
                s.scalar(select(func.count(MetricRow.id))), s.scalar(select(func.count(JudgementRow.id))))


@pytest.fixture
def pair(tmp_path, db_url):
    """A local SQLite database with runs, and an empty leaderboard on ``db_url`` (both engines)."""
    src_url = f"sqlite:///{tmp_path / 'local.db'}"
    populate(src_url, limit=12)
    src = open_db(src_url)
    app = create_app(db_url, write_token="static-secret")
    with TestClient(app) as client:
        yield src, app, client
    app.state.sessions.kw["bind"].dispose()
    src.kw["bind"].dispose()


def test_push_round_trip_is_complete_and_idempotent(pair):
    src, app, client = pair
    dst = app.state.sessions
    token = create_token(dst, "ci")
    with src() as s:
        names = [r.name for r in s.scalars(select(RunRow).order_by(RunRow.id))]
    for name in names:
        totals = push_run(src, name, "http://testserver", token, client=client)
        assert totals["samples_inserted"] == totals["n_done"] > 0
    assert _counts(dst) == _counts(src)
    with src() as s, dst() as d:
        for name in names:
            a = s.scalar(select(RunRow).where(RunRow.name == name))
            b = d.scalar(select(RunRow).where(RunRow.name == name))
            assert (b.config_hash, b.config, b.status, b.n_done, b.n_errors, b.git_revision, b.judge_spec) == (
                a.config_hash, a.config, a.status, a.n_done, a.n_errors, a.git_revision, a.judge_spec)
            assert b.total_cost == pytest.approx(a.total_cost)
            rows_a = s.execute(select(SampleResultRow.sample_id, SampleResultRow.output, SampleResultRow.scores,
                                      SampleResultRow.error).where(SampleResultRow.run_id == a.id)
                               .order_by(SampleResultRow.sample_id)).all()
            rows_b = d.execute(select(SampleResultRow.sample_id, SampleResultRow.output, SampleResultRow.scores,
                                      SampleResultRow.error).where(SampleResultRow.run_id == b.id)
                               .order_by(SampleResultRow.sample_id)).all()
            assert rows_a == rows_b
            ma = sorted((m.name, m.breakdown_value, m.value) for m in s.scalars(select(MetricRow).where(
                MetricRow.run_id == a.id)))
            mb = sorted((m.name, m.breakdown_value, m.value) for m in d.scalars(select(MetricRow).where(
                MetricRow.run_id == b.id)))
            assert ma == mb
    # re-push: nothing new anywhere
    again = push_run(src, XSS_RUN, "http://testserver", token, client=client)
    assert again["samples_inserted"] == 0 and again["judgements_inserted"] == 0
    assert _counts(dst) == _counts(src)
    # the pushed run is on the pages, still escaped
    html = client.get(f"/runs/{again['run_id']}").text
    assert SCRIPT not in html and "Judge verdicts (1)" in html
    assert [t.name for t in list_tokens(dst)] == ["ci"] and list_tokens(dst)[0].last_used_at is not None


def test_push_is_refused_without_a_valid_token(pair):
    src, app, client = pair
    dst = app.state.sessions
    body = next(payloads(src, XSS_RUN))
    empty = _counts(dst)
    assert client.post("/api/runs", json=body).status_code == 401
    for header in ("Bearer wrong", "Basic c3RhdGljLXNlY3JldA==", "Bearer ", "static-secret"):
        r = client.post("/api/runs", json=body, headers={"Authorization": header})
        assert r.status_code == 401, header
    token = create_token(dst, "temp")
    revoke_token(dst, "temp")
    r = client.post("/api/runs", json=body, headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401 and "revoked" in r.json()["detail"]
    assert _counts(dst) == empty  # nothing was written by any refused request
    with pytest.raises(PushError, match="401"):
        push_run(src, XSS_RUN, "http://testserver", "nope", client=client)
    # the static token given to create_app works; reading never needs one
    ok = client.post("/api/runs", json=body, headers={"Authorization": "Bearer static-secret"})
    assert ok.status_code == 200 and ok.json()["created"] is True
    assert client.get("/api/runs").status_code == 200


def test_push_rejects_bad_bodies_and_name_clashes(pair):
    src, app, client = pair
    auth = {"Authorization": "Bearer static-secret"}
    body = next(payloads(src, XSS_RUN))
    assert body["format"] == FORMAT
    assert client.post("/api/runs", json={**body, "format": 99}, headers=auth).status_code == 422
    assert client.post("/api/runs", json={"task": {}}, headers=auth).status_code == 422
    bad_sample = {**body, "samples": [{**body["samples"][0], "epoch": -1}]}
    assert client.post("/api/runs", json=bad_sample, headers=auth).status_code == 422
    assert client.post("/api/runs", json=body, headers=auth).status_code == 200
    clash = {**body, "run": {**body["run"], "config_hash": "0" * 64}}
    r = client.post("/api/runs", json=clash, headers=auth)
    assert r.status_code == 409 and "different configuration" in r.json()["detail"]
    with pytest.raises(PushError, match="no run named"):
        next(payloads(src, "missing-run"))


def test_token_management(tmp_path):
    sessions = open_db(f"sqlite:///{tmp_path / 't.db'}")
    t1 = create_token(sessions, "alice")
    assert t1.startswith("hlb_") and len(t1) > 40
    with pytest.raises(TokenError, match="exists already"):
        create_token(sessions, "alice")
    with pytest.raises(TokenError, match="no token"):
        revoke_token(sessions, "bob")
    from harness.leaderboard.tokens import check_token

    assert check_token(sessions, t1) == "alice"
    assert check_token(sessions, t1 + "x") is None
    revoke_token(sessions, "alice")
    assert check_token(sessions, t1) is None
