"""Leaderboard pages and JSON/CSV API on a database filled by real runs, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
from fastapi.testclient import TestClient
from test_leaderboard_data import IMG, SCRIPT, XSS_MODEL, XSS_OUTPUT, fresh_database, populate

from harness.leaderboard.app import create_app
from harness.runner import EvalConfig, Runner


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def site(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"lb-{request.param}")
    media = tmp / "media"
    media.mkdir()
    (tmp / "secret.png").write_bytes(b"\x89PNG not for the web")
    with fresh_database(request.param, tmp) as url:
        ids = populate(url, media)
        app = create_app(url, media_roots=[media], cache_seconds=0.0)
        with TestClient(app) as client:
            yield client, ids, url, tmp
        app.state.sessions.kw["bind"].dispose()


PAGES = ["/", "/?sort=task:gsm8k", "/?sort=model&dir=asc", "/?family=text", "/tasks", "/tasks/gsm8k", "/models",
         "/runs", "/compare"]


def test_every_page_renders_and_escapes_hostile_text(site):
    client, ids, _, _ = site
    pages = PAGES + [f"/runs/{i}" for i in ids.values()] + [f"/models/{i}" for i in range(1, 5)]
    pages += [f"/compare?a={ids['builtin:number']}&b={ids['hostile']}", "/api"]
    for url in pages:
        r = client.get(url)
        assert r.status_code == 200, (url, r.text[:300])
        assert r.headers["content-type"].startswith("text/html")
        assert "script-src 'self'" in r.headers["content-security-policy"]
        html = r.text
        assert SCRIPT not in html and IMG not in html, url  # never raw
        # the only <script> tags are our own: external files and inert JSON data blocks
        for tag in re.findall(r"<script[^>]*>", html):
            assert 'src="/static/' in tag or 'type="application/json"' in tag, (url, tag)
    run = client.get(f"/runs/{ids['hostile']}").text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in run and "&lt;img src=x onerror=alert(1)&gt;" in run
    assert run.count("onerror=alert(1)&gt;") >= 6  # model name, outputs, answers, input text, git revision...


def test_overview_ranks_and_sorts(site):
    client, ids, _, _ = site
    data = client.get("/api/overview").json()
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == {"builtin:number", "builtin:echo", "builtin:constant", XSS_MODEL}
    # number echoes the last number of the question; constant says 18: both score on some of 30 items
    assert rows["builtin:echo"]["gsm8k_n"] == 30
    assert rows[XSS_MODEL]["gsm8k"] == 1.0 and rows[XSS_MODEL]["gsm8k_provisional"] is True
    # the hostile run measured another gsm8k (its own content hash): shown, marked, never ranked, so
    # the three real runs rank among themselves (it used to be ranked first among them)
    assert (rows[XSS_MODEL]["rank_best"], rows[XSS_MODEL]["rank_worst"]) == (None, None)
    assert rows[XSS_MODEL]["gsm8k_settings_differ"] is True and rows[XSS_MODEL]["gsm8k_settings"] == "v1 · hostile"
    for name in ("builtin:number", "builtin:echo", "builtin:constant"):
        assert rows[name]["rank_best"] >= 1 and rows[name]["rank_worst"] <= 3
        assert rows[name]["gsm8k_ci_low"] <= rows[name]["gsm8k"] <= rows[name]["gsm8k_ci_high"]
        assert rows[name]["gsm8k_settings_differ"] is False and rows[name]["kind"] == "stub"
    by_score = [r["model"] for r in client.get("/api/overview?sort=task:gsm8k&dir=asc").json()["rows"]]
    values = [rows[m]["gsm8k"] for m in by_score]
    assert values == sorted(values)
    by_name = [r["model"] for r in client.get("/api/overview?sort=model&dir=desc").json()["rows"]]
    assert by_name == sorted(by_name, key=str.lower, reverse=True)
    html = client.get("/?sort=model&dir=asc").text
    order = [html.index(f">{m}</a>") for m in ("builtin:constant", "builtin:echo", "builtin:number")]
    assert order == sorted(order)
    # filters: a family nobody has empties the table; a backend filter keeps its models
    assert client.get("/api/overview?family=3d").json()["rows"] == []
    assert len(client.get("/api/overview?backend=builtin&q=echo").json()["rows"]) == 1
    # sizes: only the hostile model has one, and it is not a number
    assert [r["model"] for r in client.get("/api/overview?size=unknown").json()["rows"]] != []
    assert client.get("/api/overview?size=1-10B").json()["rows"] == []


def test_csv_exports_match_json(site):
    client, ids, _, _ = site
    for base in ("/api/overview", "/api/tasks", "/api/models", "/api/runs"):
        js = client.get(base).json()
        r = client.get(base + ".csv")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(r.text)))
        assert list(rows[0]) == js["columns"] and len(rows) == len(js["rows"]), base
    for table in ("runs", "metrics"):
        js = client.get(f"/api/tasks/gsm8k/{table}.json").json()
        rows = list(csv.DictReader(io.StringIO(client.get(f"/api/tasks/gsm8k/{table}.csv").text)))
        assert len(rows) == len(js["rows"]) > 0
    run_id = ids["builtin:number"]
    metrics = client.get(f"/api/runs/{run_id}/metrics.json").json()["rows"]
    assert {m["metric"] for m in metrics} >= {"exact_match_flexible", "exact_match_strict", "errors"}
    assert client.get("/api/models/1/runs.csv").text.startswith("run_id,")
    # CSV cells that a spreadsheet would run as formulas are defused
    hostile = client.get("/api/runs.csv").text
    assert "=alert" not in hostile.replace("onerror=alert", "")


def test_run_api_samples_paging_search_and_jsonl(site):
    client, ids, _, _ = site
    run_id = ids["builtin:number"]
    info = client.get(f"/api/runs/{run_id}").json()
    assert info["config"]["task_hash"] and info["harness_version"] and info["n_done"] == 30
    p1 = client.get(f"/api/runs/{run_id}/samples?per_page=10&page=1").json()
    p3 = client.get(f"/api/runs/{run_id}/samples?per_page=10&page=3").json()
    assert p1["total"] == 30 and len(p1["samples"]) == 10 and len(p3["samples"]) == 10
    assert [s["sample_id"] for s in p1["samples"]][:3] == ["0", "1", "2"]  # natural order
    assert {s["sample_id"] for s in p1["samples"]}.isdisjoint({s["sample_id"] for s in p3["samples"]})
    lines = client.get(f"/api/runs/{run_id}/samples.jsonl").text.splitlines()
    assert len(lines) == 30 and {json.loads(x)["sample_id"] for x in lines} == {str(i) for i in range(30)}
    hostile = ids["hostile"]
    found = client.get(f"/api/runs/{hostile}/samples?q=boom").json()
    assert [s["sample_id"] for s in found["samples"]] == ["x2"]
    assert client.get(f"/api/runs/{hostile}/samples?status=errors").json()["total"] == 1
    assert client.get(f"/api/runs/{hostile}/samples").json()["samples"][0]["output"] == XSS_OUTPUT
    page = client.get(f"/runs/{run_id}?per_page=10&page=2").text
    assert "page 2 of 3" in page and 'rel="next"' in page
    assert client.get(f"/api/runs/{run_id}/samples?per_page=9999").status_code == 422


def test_run_page_shows_judge_verdicts_errors_and_media(site):
    client, ids, _, tmp = site
    html = client.get(f"/runs/{ids['hostile']}").text
    assert "Judge verdicts (1)" in html and "raw reply" in html
    assert "boom &lt;script&gt;" in html and "error: model" in html
    assert re.search(r'<div class="label">errors</div><div class="big">1</div><div class="ci">model 1</div>', html)
    media = re.findall(r'<img src="(/media\?path=[^"]+)"', html)
    assert media, "the input image under the media root is shown"
    img = client.get(media[0].replace("&amp;", "&"))
    assert img.status_code == 200 and img.content.startswith(b"\x89PNG")
    # other files under the root are downloads, never pages of this origin
    (tmp / "media" / "page.html").write_text("<script>alert(1)</script>")
    page = client.get("/media", params={"path": str(tmp / "media" / "page.html")})
    assert page.status_code == 200 and page.headers["content-type"] == "application/octet-stream"
    assert page.headers["content-disposition"].startswith("attachment")
    # nothing outside the media root, however the path is spelt
    for path in (str(tmp / "secret.png"), str(tmp / "media" / ".." / "secret.png"), "/etc/passwd"):
        assert client.get("/media", params={"path": path}).status_code == 404


def test_task_page_charts_and_pareto(site):
    client, ids, _, _ = site
    html = client.get("/tasks/gsm8k").text
    figs = re.findall(r'<script type="application/json" id="(chart-[a-z]+)-data">(.*?)</script>', html, re.S)
    # the charts draw the comparable runs: the hostile run measured another gsm8k (its own content hash)
    # and is left out; the three built-in runs cost nothing, so there is no cost chart
    assert {name for name, _ in figs} == {"chart-scores"}
    scores = json.loads(dict(figs)["chart-scores"])
    assert len(scores["data"][0]["x"]) == 3 and "arrayminus" in scores["data"][0]["error_x"]
    runs = client.get("/api/tasks/gsm8k/runs.json").json()["rows"]
    front = {r["model"] for r in runs if r["pareto"]}
    best = max((r for r in runs if not r["settings_differ"]), key=lambda r: r["value"])["model"]
    assert best in front and XSS_MODEL not in front  # the best score at any cost is always on the front
    assert {r["model"]: r["rank_best"] for r in runs}[XSS_MODEL] is None
    assert "/static/plotly.min.js" in html
    js = client.get("/static/plotly.min.js")
    assert js.status_code == 200 and len(js.content) > 1_000_000


def test_compare_runs_paired_test(site):
    client, ids, _, _ = site
    a, b = ids["builtin:number"], ids["builtin:constant"]
    rows = client.get(f"/api/compare?a={a}&b={b}").json()["rows"]
    em = next(r for r in rows if r["metric"] == "exact_match_flexible")
    assert em["n"] == 30 and "McNemar" in em["test"] and 0 < em["p_value"] <= 1
    assert em["diff_b_minus_a"] == pytest.approx(em["mean_b"] - em["mean_a"])
    html = client.get(f"/compare?a={a}&b={b}").text
    assert "exact McNemar" in html and "Samples where exact_match_flexible differs" in html


def test_not_found_and_cache_invalidation(site):
    client, ids, url, _ = site
    assert client.get("/runs/999999").status_code == 404
    assert client.get("/api/runs/999999").status_code == 404
    assert client.get("/tasks/nope").status_code == 404
    before = client.get("/api/overview").json()["rows"]
    # a run written straight to the database (as `harness eval` does) shows up without a restart
    sessions = client.app.state.sessions
    cfg = EvalConfig(task="gsm8k", model="builtin:constant", model_settings={"text": "#### 3"}, limit=5,
                     progress=False)
    Runner(cfg, session_factory=sessions).run()
    after = client.get("/api/overview").json()["rows"]
    assert len(after) == len(before) + 1
    assert any(r["spec"] == "builtin:constant?text=#### 3" for r in after)
