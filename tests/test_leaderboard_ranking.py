"""Rank ranges from CIs, the Pareto front, declared metric direction, CSV safety."""

from __future__ import annotations

import csv
import io
import math

from harness.leaderboard.ranking import (
    Scored,
    format_rank,
    metric_info,
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
    assert rank_ranges(items[:4], "lower") == [(3, 4), (2, 4), (2, 3), (1, 1)]
    # no declared direction: nobody is ranked
    assert rank_ranges(items[:4], None) == [None] * 4
    # no CI: plain ranks, ties share the range
    assert rank_ranges([Scored(1, None, None), Scored(1, None, None), Scored(0, None, None)]) == [(1, 2), (1, 2),
                                                                                                 (3, 3)]


def test_pareto_front():
    pts = [(0.0, 0.1), (1.0, 0.5), (2.0, 0.4), (3.0, 0.9), (3.0, 0.8), (0.5, 0.1), (5.0, 0.9)]
    assert pareto_front(pts) == [0, 1, 3]
    assert pareto_front([]) == []
    assert pareto_front([(math.nan, 1.0), (1.0, 0.5)]) == [1]


def test_direction_comes_from_declarations_never_from_names():
    # names that the old heuristic called lower-is-better have no direction unless declared
    for name in ("wer", "chamfer_distance", "loss", "objective", "accuracy"):
        assert metric_info({}, name) is None, name
    assert metric_info({"loss": {"direction": "higher", "scale": "raw"}}, "loss").direction == "higher"
    assert metric_info({"n": {"direction": None, "scale": "raw"}}, "n").direction is None
    # the harness declares what it emits itself for every task
    assert metric_info({}, "cost_per_sample").direction == "lower"
    assert metric_info({}, "errors").direction is None


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
