"""Rank ranges from CIs, averages of estimates, the Pareto front, metric direction, CSV safety."""

from __future__ import annotations

import csv
import io
import math

import pytest

from harness.leaderboard.ranking import (
    Scored,
    format_rank,
    lower_is_better,
    mean_of_estimates,
    pareto_front,
    rank_ranges,
)
from harness.leaderboard.tables import Table, to_csv, to_json


def test_rank_ranges_follow_overlapping_intervals():
    items = [Scored(0.9, 0.85, 0.95), Scored(0.8, 0.70, 0.86), Scored(0.75, 0.72, 0.78), Scored(0.2, 0.1, 0.3),
             Scored(None, None, None)]
    # A overlaps B only; B overlaps A and C; C overlaps B; D is surely last
    assert rank_ranges(items) == [(1, 2), (1, 3), (2, 3), (4, 4), None]
    assert [format_rank(r) for r in rank_ranges(items)] == ["1–2", "1–3", "2–3", "4", ""]
    # lower is better: the same intervals rank in reverse
    assert rank_ranges(items[:4], lower_better=True) == [(3, 4), (2, 4), (2, 3), (1, 1)]
    # no CI: plain ranks, ties share the range
    assert rank_ranges([Scored(1, None, None), Scored(1, None, None), Scored(0, None, None)]) == [(1, 2), (1, 2),
                                                                                                 (3, 3)]


def test_mean_of_estimates_combines_standard_errors():
    a, b = Scored(0.6, 0.5, 0.7), Scored(0.8, 0.78, 0.82)
    m = mean_of_estimates([a, b])
    se_a, se_b = 0.1 / 1.959963984540054, 0.02 / 1.959963984540054
    half = 1.959963984540054 * math.sqrt(se_a**2 + se_b**2) / 2
    assert m.value == pytest.approx(0.7) and m.ci_low == pytest.approx(0.7 - half)
    assert m.ci_high == pytest.approx(0.7 + half)
    assert mean_of_estimates([Scored(None, None, None)]).value is None


def test_pareto_front():
    pts = [(0.0, 0.1), (1.0, 0.5), (2.0, 0.4), (3.0, 0.9), (3.0, 0.8), (0.5, 0.1), (5.0, 0.9)]
    assert pareto_front(pts) == [0, 1, 3]
    assert pareto_front([]) == []
    assert pareto_front([(math.nan, 1.0), (1.0, 0.5)]) == [1]


def test_lower_is_better_names():
    for name in ("wer", "cer", "chamfer_distance", "cost_per_sample", "errors", "mean_latency", "loss"):
        assert lower_is_better(name), name
    for name in ("accuracy", "exact_match", "f1", "recall_at_50", "win_rate", "bleu", "iou"):
        assert not lower_is_better(name), name


def test_tables_csv_defuses_formulas_and_json_drops_nan():
    t = Table("t", ["model", "value", "meta"], [["=HYPERLINK(\"x\")", math.nan, {"a": 1}], ["-3", 2.5, None]])
    rows = list(csv.reader(io.StringIO(to_csv(t))))
    assert rows[1] == ["'=HYPERLINK(\"x\")", "", '{"a": 1}'] and rows[2] == ["-3", "2.5", ""]
    js = to_json(t)
    assert js["rows"][0]["value"] is None and js["rows"][0]["meta"] == {"a": 1}


def test_model_sizes_sort_by_parameter_count():
    from harness.leaderboard.views import size_value

    sizes = ["70B", "", "135M", "7B", "1.5b", "14B"]
    assert sorted(sizes, key=size_value) == ["", "135M", "1.5b", "7B", "14B", "70B"]


def test_average_interval_stays_within_the_components_range():
    from harness.leaderboard.ranking import Scored, mean_of_estimates

    avg = mean_of_estimates([Scored(0.01, 0.0, 0.05), Scored(0.01, 0.0, 0.05)])
    assert avg.value == pytest.approx(0.01)
    # the normal interval would be 0.01 -/+ 0.0177, i.e. below 0
    half = 1.959963984540054 * (0.05 / 3.919927969) * 2**0.5 / 2
    assert avg.ci_low == 0.0 and avg.ci_high == pytest.approx(0.01 + half)
