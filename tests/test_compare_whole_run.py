"""Two k-means runs on one task can be compared: their metrics exist only over the whole run (ARI, NMI,
objective), so there is nothing to pair; the comparison shows both values and an unpaired interval
(it said "the two runs share no score names", exit 2, on the web and in `harness compare`)."""

from __future__ import annotations

import json
import math

import pytest
from requirements import require

require("sklearn", "the k-means baselines are scikit-learn's")

from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from harness.cli import app  # noqa: E402
from harness.compare import compare_runs, corpus_result  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.store.schema import MetricRow  # noqa: E402


@pytest.fixture
def two_kmeans(tmp_path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    for spec in ("kmeans:lloyd", "hartigan:batched"):
        Runner(EvalConfig(task="methods_cluster_iris", model=spec, progress=False), session_factory=sessions).run()
    return url, sessions


def test_cli_and_library_compare_whole_run_metrics(two_kmeans) -> None:
    url, sessions = two_kmeans
    results = {r.metric: r for r in compare_runs(sessions, 1, 2)}
    assert {"ari", "nmi", "objective"} <= set(results) and "errors" not in results
    ari = results["ari"]
    assert ari.diff == pytest.approx(ari.mean_b - ari.mean_a) and ari.ci_low < ari.diff < ari.ci_high
    assert 0.0 <= ari.p_value <= 1.0 and "unpaired" in ari.test
    assert math.isnan(results["objective"].p_value) and "values only" in results["objective"].test
    done = CliRunner().invoke(app, ["compare", "1", "2", "--db", url, "--json"])
    assert done.exit_code == 0, done.output
    assert {r["metric"] for r in json.loads(done.output)["results"]} >= {"ari", "nmi", "objective"}


def test_the_compare_page_shows_them(two_kmeans) -> None:
    from harness.leaderboard.app import create_app

    url, _ = two_kmeans
    html = TestClient(create_app(url)).get("/compare?a=1&b=2").text
    assert "share no score names" not in html and "whole-run metric" in html and "ari" in html


def test_the_unpaired_interval_is_the_root_sum_of_squares() -> None:
    a = MetricRow(name="ari", value=0.5, ci_low=0.4, ci_high=0.6, n=100)
    b = MetricRow(name="ari", value=0.8, ci_low=0.75, ci_high=0.85, n=100)
    r = corpus_result("ari", a, b)
    half = math.hypot(0.1, 0.05)
    assert (r.ci_low, r.ci_high) == pytest.approx((0.3 - half, 0.3 + half))
    assert r.p_value == pytest.approx(math.erfc(0.3 / (half / 1.959963984540054) / math.sqrt(2)))
