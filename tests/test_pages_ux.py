"""The sample browser's query language, page clamping, direction-following badges, the compare
page's disagreements, live progress from the store, chart decisions and compressed versioned
static files: fast checks against hand-made runs whose numbers are known (no browser)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from pages_ux_data import N, add_samples, lease, make_run

from harness.leaderboard.badges import Badges
from harness.leaderboard.sample_filter import MetaTerm, ScoreTerm, clamp_page, parse_filter, parse_sort
from harness.types import MetricInfo


def test_parse_filter_terms_text_and_problems():
    f = parse_filter('score:accuracy<1 score:R@20>=0.5 meta:category=b "meta:lang!=en us" error:timeout why not')
    assert f.scores == [ScoreTerm("accuracy", "<", 1.0), ScoreTerm("R@20", ">=", 0.5)]
    assert f.meta == [MetaTerm("category", "b"), MetaTerm("lang", "en us", negate=True)]
    assert f.error_kinds == ["timeout"] and f.text == "why not" and not f.problems
    assert parse_filter("score:f1==0.25").scores == [ScoreTerm("f1", "=", 0.25)]
    assert parse_filter("score:f1").scores == [ScoreTerm("f1", None)]
    bad = parse_filter("score:acc<abc score:<1 meta:novalue score:x<nan plain")
    assert bad.scores == [] and bad.meta == [] and bad.text == "plain" and len(bad.problems) == 4
    assert "'abc' is not a number" in bad.problems[0]
    assert parse_filter('unbalanced "quote').text == 'unbalanced "quote'  # never an exception


def test_parse_sort_keys():
    assert (parse_sort("-latency").key, parse_sort("-latency").desc) == ("latency", True)
    assert str(parse_sort("-latency")) == "-latency" and str(parse_sort("")) == "" and str(parse_sort("id")) == ""
    s = parse_sort("score:exact_match")
    assert (s.key, s.desc, s.problem) == ("score:exact_match", False, "")
    wrong = parse_sort("-colour")
    assert wrong.key == "id" and "unknown sort" in wrong.problem


@pytest.mark.parametrize(("page", "total", "per_page", "expected"), [
    (99999, 66 * 20, 20, (66, 66)), (0, 100, 20, (1, 5)), (-5, 0, 20, (1, 1)), (3, 41, 20, (3, 3)),
    (4, 41, 20, (3, 3)), (1, 0, 50, (1, 1))])
def test_clamp_page(page, total, per_page, expected):
    assert clamp_page(page, total, per_page) == expected


def test_badges_follow_the_declared_direction():
    b = Badges({"acc": MetricInfo("higher", "fraction"), "err": MetricInfo("lower", "fraction"),
                "n_floating": MetricInfo("lower", "raw"), "len": MetricInfo(None, "raw"), "pct": MetricInfo("higher",
                                                                                                        "percent")},
               {"n_floating": (0.0, 3.0), "len": (0.0, 9.0)})
    assert (b.css("acc", 1.0), b.css("acc", 0.0), b.css("acc", 0.5)) == ("good", "bad", "")
    assert (b.css("err", 0.0), b.css("err", 1.0)) == ("good", "bad")
    assert (b.css("n_floating", 0.0), b.css("n_floating", 3.0), b.css("n_floating", 1.0)) == ("good", "bad", "")
    assert b.css("len", 0.0) == b.css("len", 9.0) == ""  # no declared direction: never coloured
    assert (b.css("pct", 100), b.css("pct", 1.0)) == ("good", "")  # percent: 1 of 100 is not the best end
    assert b.css("unknown", 1.0) == "" and b.css("acc", True) == "" and b.css("acc", float("nan")) == ""
    assert b.wrong("acc") == "'score:acc<1'" and b.wrong("n_floating") == "'score:n_floating>0'"
    assert b.wrong("len") is None


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(request, tmp_path_factory):
    """The app on each engine: the filters are JSON functions, which SQLite and PostgreSQL spell apart."""
    from test_leaderboard_data import fresh_database

    from harness.leaderboard.app import create_app

    tmp = tmp_path_factory.mktemp("ux")
    with fresh_database(request.param, tmp) as url:
        app = create_app(url, media_roots=[tmp], cache_seconds=0)
        sessions = app.state.sessions
        a = make_run(sessions, "ux-a", "builtin:a")
        b = make_run(sessions, "ux-b", "builtin:b", right={0, 1, 2, 3, 4, 6, 8, 10})  # also right on 1 and 3
        live = make_run(sessions, "ux-live", "builtin:c", rows=[], status="running", n_samples=10)
        with TestClient(app) as client:
            yield client, sessions, {"a": a, "b": b, "live": live}, tmp
        sessions.kw["bind"].dispose()


def _ids(client, run_id, **params):
    body = client.get(f"/api/runs/{run_id}/samples", params={"per_page": 100, **params}).json()
    return [r["sample_id"] for r in body["samples"]], body


def test_score_metadata_error_filters_and_sorts_in_sql(site):
    client, _, ids, _ = site
    a = ids["a"]
    wrong, _ = _ids(client, a, q="score:exact_match<1")
    assert wrong == ["1", "3", "7", "9", "11"]  # 5 has no score (an error): not "wrong", not right
    assert _ids(client, a, q="score:exact_match=1 score:n_floating>0")[0] == []
    assert _ids(client, a, q="score:n_floating>=3")[0] == ["1", "3", "7", "9", "11"]
    assert _ids(client, a, q="meta:category=b")[0] == ["0", "4", "8"]
    assert _ids(client, a, q="meta:category!=b")[0] == [str(i) for i in range(N) if i % 4]
    assert _ids(client, a, q="meta:tags=t1")[0] == ["1", "4", "7", "10"]  # a list holds the value
    assert _ids(client, a, q="error:timeout")[0] == ["5"] and _ids(client, a, q="error:any")[0] == ["5"]
    assert _ids(client, a, q="error:oom")[0] == []
    assert _ids(client, a, q="score:exact_match<1 answer 1")[0] == ["1", "11"]  # typed terms and text together
    assert _ids(client, a, sort="-latency")[0] == [str(i) for i in reversed(range(N))]
    by_len = _ids(client, a, sort="-score:length")[0]
    assert by_len[:3] == ["11", "10", "9"] and by_len[-1] == "5"  # the sample without the score last
    assert _ids(client, a, sort="score:length")[0][-1] == "5"
    assert _ids(client, a, sort="-id")[0][0] == "11"
    # a page past the end is the last page
    ids_last, body = _ids(client, a, per_page=5, page=99999)
    assert body["page"] == 3 and ids_last == ["10", "11"] and body["total"] == N


def test_run_page_badges_quick_filters_problems_and_clamp(site):
    client, _, ids, _ = site
    html = client.get(f"/runs/{ids['a']}?page=99999&per_page=10").text
    assert "page 2 of 2" in html
    # n_floating is lower-is-better: 0 is green, the run's highest (3) red; length has no direction
    chips = re.findall(r'<span class="chip score ([a-z]*)" title="[^"]*">(\w+) ([0-9.]+)</span>', html)
    assert ("good", "n_floating", "0.000") in chips and ("bad", "n_floating", "3.000") in chips
    assert all(css == "" for css, name, _ in chips if name == "length")
    html = client.get(f"/runs/{ids['a']}").text
    assert "exact_match not best" in html and "category = b" in html and "error: timeout" in html
    filtered = client.get(f"/runs/{ids['a']}", params={"q": "score:exact_match<1", "sort": "-latency"}).text
    assert re.findall(r'<span class="sid">(\w+)</span>', filtered) == ["11", "9", "7", "3", "1"]
    odd = client.get(f"/runs/{ids['a']}", params={"q": "score:exact_match<x", "sort": "colour"}).text
    assert "Ignored:" in odd and "is not a number" in odd and "unknown sort" in odd
    assert "12 samples" in odd  # the rest of the page still works


def test_compare_lists_disagreements_first_with_direction(site):
    client, _, ids, _ = site
    html = client.get(f"/compare?a={ids['a']}&b={ids['b']}").text
    assert html.index('id="disagreements"') < html.index("<h2>Paired test") < html.index("<h2>Configuration")
    table = html[html.index('id="diffs"'):html.index("</table>", html.index('id="diffs"'))]
    assert re.findall(r'<td class="sid">(\w+)<', table) == ["1", "3"]
    assert "Samples where exact_match differs (2 of 12 shared)" in html
    # B is right where A is wrong: B's cell is the better one (higher is better), A's the worse
    assert table.count('class="better"') == 2 and table.count('class="worse"') == 2
    row = table[table.index('<td class="sid">1<'):]
    assert row.index('class="worse"') < row.index('class="better"')


def test_progress_counts_leases_rate_and_running_metric(site):
    client, sessions, ids, _ = site
    run = ids["live"]
    p = client.get(f"/api/runs/{run}/progress").json()
    assert (p["done"], p["pending"], p["leased"], p["errors"], p["value"]) == (0, 10, 0, 0, None)
    assert client.get(f"/api/runs/{run}/progress").headers["cache-control"] == "no-store"
    add_samples(sessions, run, range(4))
    add_samples(sessions, run, range(4, 6), right=False)
    lease(sessions, run, range(5, 8))  # 5 is stored already: only 6 and 7 count as in progress
    lease(sessions, run, range(8, 9), seconds=-5)  # expired: pending again
    p = client.get(f"/api/runs/{run}/progress").json()
    assert (p["done"], p["leased"], p["pending"], p["n_scored"]) == (6, 2, 2, 6)
    assert p["value"] == pytest.approx(4 / 6)
    assert p["ci_low"] < 4 / 6 < p["ci_high"]
    assert p["rate_per_s"] > 0 and p["eta_s"] == pytest.approx(4 / p["rate_per_s"])
    assert p["status"] == "running" and p["metric"] == "exact_match"
    html = client.get(f"/runs/{run}").text
    assert f'data-progress="/api/runs/{run}/progress"' in html and '<meta http-equiv="refresh"' in html
    assert 'data-live="done">6<' in html and "(running)" in html
    assert client.get("/api/runs/999999/progress").status_code == 404
    finished = client.get(f"/runs/{ids['a']}").text
    assert "data-progress" not in finished and "http-equiv" not in finished


def test_static_files_gzipped_versioned_and_cached(site):
    client, _, ids, _ = site
    html = client.get("/").text
    css = re.search(r'href="(/static/style\.css\?v=([0-9a-f]{12}))"', html)
    assert css, "the stylesheet link carries its version"
    r = client.get(css.group(1), headers={"accept-encoding": "gzip"})
    assert r.headers["content-encoding"] == "gzip" and "immutable" in r.headers["cache-control"]
    assert "max-age=31536000" in r.headers["cache-control"] and r.headers["etag"] == f'"{css.group(2)}"'
    stale = client.get("/static/style.css?v=000000000000")
    assert stale.headers["cache-control"] == "no-cache" and "--panel" in stale.text
    assert client.get("/static/style.css", headers={"if-none-match": r.headers["etag"]}).status_code == 304
    raw = client.get("/static/plotly.min.js", headers={"accept-encoding": "gzip"})
    assert raw.headers["content-encoding"] == "gzip"
    size = int(raw.headers["content-length"])
    assert size < len(raw.content) / 2  # gzip: 4.8 MB of JavaScript in well under half
    assert client.get("/static/../app.py").status_code == 404 and client.get("/static/nope.js").status_code == 404
    # JSON answers are compressed on the fly
    api = client.get(f"/api/runs/{ids['a']}/samples", params={"per_page": 100}, headers={"accept-encoding": "gzip"})
    assert api.headers.get("content-encoding") == "gzip"


def test_mesh_outputs_get_the_viewer(site, tmp_path):
    client, _, _, root = site
    obj = root / "cube.obj"
    obj.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 2 3\nf 1 2 4\nf 1 3 4\nf 2 3 4\n")
    fig = client.get("/media/mesh", params={"path": str(obj)}).json()
    assert fig["data"][0]["type"] == "mesh3d" and len(fig["data"][0]["i"]) == 4
    assert client.get("/media/mesh", params={"path": str(tmp_path / "elsewhere.obj")}).status_code == 404
    (root / "broken.obj").write_text("nothing here")
    assert "cannot be shown" in client.get("/media/mesh", params={"path": str(root / "broken.obj")}).json()["error"]
    from harness.leaderboard.media import sample_media

    items = sample_media({}, {"media": [{"type": "mesh", "path": str(obj)}]}, None, [root])
    assert items[0].kind == "mesh" and items[0].mesh_url.startswith("/media/mesh?path=")


def _run_info(run_id: int, value: float | None, cost: float | None, model: str = "m"):
    from harness.leaderboard.queries import RunInfo

    return RunInfo(run_id, f"r{run_id}", "finished", 100, 100, 0, 0.0, None, 1, "t", "1", "h", "text", ["text"],
                   "acc", run_id, model, model, "builtin", {}, value, value, value, 100, cost)


def test_charts_only_when_they_carry_information():
    from harness.leaderboard.charts import cost_pareto_chart, score_ci_chart, short

    acc = MetricInfo("higher", "fraction")
    free = [_run_info(1, 0.5, 0.0), _run_info(2, 0.7, 0.0)]
    assert cost_pareto_chart(free, "acc", acc) is None  # every cost zero: no Pareto chart
    assert cost_pareto_chart([_run_info(1, 0.5, 0.01)], "acc", acc) is None  # one run: no front to speak of
    paid = cost_pareto_chart([_run_info(1, 0.5, 0.0), _run_info(2, 0.7, 0.02)], "acc", acc)
    assert paid is not None and paid["layout"]["yaxis"]["range"] == pytest.approx([-0.02, 1.02])
    assert score_ci_chart([_run_info(1, None, None)], "acc", acc) is None  # nothing scored: no empty frame
    one = score_ci_chart([_run_info(1, 0.5, None)], "acc", acc)
    assert one is not None and one["layout"]["xaxis"]["range"] == pytest.approx([-0.02, 1.02])  # the 0..1 scale
    raw = score_ci_chart([_run_info(1, 42.0, None)], "n", MetricInfo("lower", "raw"))
    assert raw is not None and raw["layout"]["xaxis"]["range"] == pytest.approx([37.8, 46.2])  # not -1..1
    # long model names are cut in the middle on the axis and stay distinct; the hover has them whole
    long = [_run_info(i, 0.5, None, model="organisation/very-long-model-name-" + "x" * 40) for i in (1, 2)]
    fig = score_ci_chart(long, "acc", acc)
    assert fig is not None
    labels = fig["data"][0]["y"]
    assert len(set(labels)) == 2 and all(len(label.strip("\u200b")) <= 32 for label in labels)
    assert [row[3] for row in fig["data"][0]["customdata"]] == [f"{long[0].model} #1", f"{long[1].model} #2"]
    assert short("abcdefghij", 5) == "ab…ij" and short("abc", 5) == "abc"


def test_a_filter_on_a_score_the_run_does_not_have_says_so(site):
    """It said only "No samples match": a misspelt score name now gets its closest names."""
    client, _, ids, _ = site
    html = client.get(f"/runs/{ids['a']}", params={"q": "score:exact_mach<1"}).text
    assert "No samples match" in html
    assert "this run has no score &#39;exact_mach&#39;; did you mean exact_match?" in html
    fine = client.get(f"/runs/{ids['a']}", params={"q": "score:exact_match<1"}).text
    assert "this run has no score" not in fine


def test_counts_on_pages_agree_with_their_noun():
    """"1 tasks" read wrong: counts go through one plural filter."""
    from harness.leaderboard.templating import plural

    assert [plural(1, "task"), plural(2, "task"), plural([], "model"), plural(1500.0, "vote")] == [
        "1 task", "2 tasks", "0 models", "1,500 votes"]
