"""The leaderboard's write and read paths under hostile input: run ownership, recomputed metrics,
auth before parsing, body size cap, bounded numbers, literal search, one error look; on SQLite and
PostgreSQL."""

from __future__ import annotations

import csv
import io
import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from harness.leaderboard.app import create_app
from harness.leaderboard.ingest import FORMAT
from harness.leaderboard.tokens import create_token
from harness.store.schema import MetricRow, RunRow, SampleResultRow

BIG = "1" + "0" * 39  # 40 digits


@pytest.fixture
def site(db_url):
    app = create_app(db_url, write_token="admin-secret", max_push_bytes=200_000)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield app, client
    app.state.sessions.kw["bind"].dispose()


def body(run: str = "r1", n: int = 4, outputs: list[str] | None = None, model: str = "m",
         metrics: list[dict] | None = None) -> dict:
    outputs = outputs or [f"out {i}" for i in range(n)]
    samples = [{"sample_id": f"s{i}", "output": o, "scores": {"accuracy": float(i % 2)}}
               for i, o in enumerate(outputs)]
    acc = sum(s["scores"]["accuracy"] for s in samples) / len(samples) if samples else 0.0
    return {"format": FORMAT, "task": {"name": "t", "version": "1", "content_hash": "h"},
            "model": {"spec": model, "display_name": model},
            "run": {"name": run, "config_hash": "c", "status": "finished", "n_samples": len(samples)},
            "metrics": metrics if metrics is not None else [{"name": "accuracy", "value": acc, "n": len(samples)}],
            "samples": samples}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _metrics(app, run_name: str) -> dict[str, tuple[float, int]]:
    with app.state.sessions() as s:
        run = s.scalar(select(RunRow).where(RunRow.name == run_name))
        return {m.name: (m.value, m.n) for m in s.scalars(select(MetricRow).where(MetricRow.run_id == run.id))}


def test_a_token_owns_its_runs_and_admin_may_write(site):
    app, client = site
    alice, bob = create_token(app.state.sessions, "alice"), create_token(app.state.sessions, "bob")
    admin = create_token(app.state.sessions, "ops", scope="admin")
    assert client.post("/api/runs", json=body(), headers=auth(alice)).status_code == 200
    hijack = body(outputs=["mine"] * 4)
    hijack["samples"] = [{**s, "sample_id": f"x{i}"} for i, s in enumerate(hijack["samples"])]
    r = client.post("/api/runs", json=hijack, headers=auth(bob))
    assert r.status_code == 403 and "belongs to another token" in r.json()["detail"]
    with app.state.sessions() as s:
        assert s.scalar(select(func.count(SampleResultRow.id))) == 4  # nothing of bob's landed
    assert client.post("/api/runs", json=body(), headers=auth(alice)).status_code == 200  # owner: fine
    assert client.post("/api/runs", json=hijack, headers=auth(admin)).status_code == 200
    assert client.post("/api/runs", json=body("bob-run"), headers=auth(bob)).status_code == 200


def test_metrics_are_recomputed_and_unverifiable_ones_never_rank(site):
    app, client = site
    tok = auth("admin-secret")
    inflated = body("inflated", metrics=[{"name": "accuracy", "value": 0.99, "n": 4}])
    r = client.post("/api/runs", json=inflated, headers=tok)
    assert r.status_code == 200 and r.json()["metrics_refused"] == ["accuracy"]
    assert "accuracy" not in _metrics(app, "inflated")
    honest = client.post("/api/runs", json=body("honest", model="m2"), headers=tok).json()
    assert honest["metrics_refused"] == [] and _metrics(app, "honest")["accuracy"] == (0.5, 4)
    empty = body("empty", n=0, model="claims", metrics=[{"name": "accuracy", "value": 1.0, "n": 10**6}])
    empty["samples"] = []
    assert client.post("/api/runs", json=empty, headers=tok).json()["metrics_refused"] == ["accuracy"]
    assert _metrics(app, "empty") == {}
    overview = json.dumps(client.get("/api/overview").json())
    assert "claims" not in overview and "m2" in overview


def test_token_is_checked_before_the_body_and_size_is_capped(site):
    app, client = site
    assert client.post("/api/runs", content=b"{not json", headers=auth("wrong")).status_code == 401
    huge = body("huge", outputs=["x" * 100_000, "y" * 100_000, "z"])
    assert client.post("/api/runs", json=huge).status_code == 401
    r = client.post("/api/runs", json=huge, headers=auth("admin-secret"))
    assert r.status_code == 413 and r.headers["content-type"].startswith("application/problem+json")

    def chunks():  # no Content-Length: the cap applies while streaming
        yield json.dumps(huge).encode()

    r = client.post("/api/runs", content=chunks(), headers={**auth("admin-secret"), "content-type": "application/json"})
    assert r.status_code == 413
    with app.state.sessions() as s:
        assert s.scalar(select(func.count(RunRow.id))) == 0


def test_huge_numbers_and_nan_answer_422_or_404_not_500(site):
    app, client = site
    tok = auth("admin-secret")
    assert client.post("/api/runs", json=body(), headers=tok).status_code == 200
    for path in (f"/api/runs/{BIG}", f"/api/runs/{BIG}/metrics.json", f"/api/runs/1/samples?page={BIG}",
                 f"/api/compare?a={BIG}&b=1", f"/api/models/{BIG}/runs.csv", f"/api/arena/votes?offset={BIG}"):
        r = client.get(path)
        assert r.status_code in (404, 422), (path, r.status_code)
        assert r.headers["content-type"].startswith("application/problem+json"), path
    for path in (f"/runs/{BIG}", f"/models/{BIG}", f"/compare?a={BIG}&b=1"):
        r = client.get(path)
        assert r.status_code in (404, 422) and r.headers["content-type"].startswith("text/html"), path
    bad = body("bad")
    bad["samples"][0]["input_tokens"] = int(BIG)
    r = client.post("/api/runs", json=bad, headers=tok)
    assert r.status_code == 422 and "samples.0.input_tokens" in r.json()["detail"]
    nan = json.dumps(body("nan")).replace('"value": 0.5', '"value": NaN')
    r = client.post("/api/runs", content=nan, headers={**tok, "content-type": "application/json"})
    assert r.status_code == 422 and "metrics.0.value" in r.json()["detail"]


def test_search_wildcards_are_literal(site):
    app, client = site
    outputs = ["100% sure", "plain", "snake_case", "other"]
    run_id = client.post("/api/runs", json=body(outputs=outputs), headers=auth("admin-secret")).json()["run_id"]
    found = {q: {s["output"] for s in client.get(f"/api/runs/{run_id}/samples", params={"q": q}).json()["samples"]}
             for q in ("%", "_", "e_c")}
    assert found == {"%": {"100% sure"}, "_": {"snake_case"}, "e_c": {"snake_case"}}


def test_errors_are_styled_pages_or_json_problems(site):
    app, client = site
    for path, method in (("/no-such-page", "get"), ("/tasks", "post"), ("/runs/abc", "get")):
        r = getattr(client, method)(path)
        assert r.status_code in (404, 405, 422) and r.headers["content-type"].startswith("text/html"), path
        assert '<nav' in r.text or "Back to the overview" in r.text, path
    for path, method in (("/api/no-such", "get"), ("/api/runs/abc", "get"), ("/api/overview", "post")):
        r = getattr(client, method)(path)
        problem = r.json()
        assert r.headers["content-type"].startswith("application/problem+json"), path
        assert problem["status"] == r.status_code and problem["title"] and problem["detail"], path


def test_csv_exports_neutralise_formulas_and_quote_line_breaks(site, tmp_path):
    from harness.csvsafe import neutralise
    from harness.export import export_run

    assert [neutralise(v) for v in ("=1+1", "  =cmd|x", "\t=x", "\rx", "@SUM(A1)", "+1", "-2.5", "-1+cmd", "ok")] \
        == ["'=1+1", "'  =cmd|x", "'\t=x", "'\rx", "'@SUM(A1)", "+1", "-2.5", "'-1+cmd", "ok"]
    app, client = site
    hostile = ["=HYPERLINK(\"http://x\")", "  @SUM(1)", "a\rb", "c\nd", "-3+cmd|' /C calc'!A0"]
    r = client.post("/api/runs", json=body("=evil-run", outputs=hostile, model="+evil"), headers=auth("admin-secret"))
    assert r.status_code == 200
    web = client.get("/api/runs.csv").text
    rows = list(csv.reader(io.StringIO(web, newline="")))
    cells = [c for row in rows[1:] for c in row]
    assert "'=evil-run" in cells and not any(c.lstrip(" ")[:1] in "=+@" for c in cells if c)
    out = tmp_path / "x.csv"
    assert export_run(app.state.sessions, r.json()["run_id"], out, "csv") == 5
    with open(out, newline="", encoding="utf-8") as fh:
        exported = list(csv.DictReader(fh))
    assert len(exported) == 5  # CR/LF inside a cell never starts a new row
    assert sorted(row["output"] for row in exported) == sorted(neutralise(h) for h in hostile)
    assert all(row["output"].lstrip(" ")[:1] not in ("=", "+", "-", "@") for row in exported)
