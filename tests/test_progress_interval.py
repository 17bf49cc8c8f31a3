"""The live run page's provisional interval stays inside the metric's declared range: Wilson for 0/1
scores on a fraction scale (the normal one read "0.024 [-0.023, 0.070]"), the normal one clipped
otherwise."""

from __future__ import annotations

import math

import pytest

from harness.leaderboard.progress import run_progress, running_interval
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db


def wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson (1927) as usually written: (p + z^2/2n -+ z sqrt(p(1-p)/n + z^2/4n^2)) / (1 + z^2/n)."""
    p = k / n
    centre = p + z * z / (2 * n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)


@pytest.mark.parametrize("k,n", [(1, 41), (0, 10), (10, 10), (5, 9), (2, 3)])
def test_binary_scores_get_the_wilson_interval(k: int, n: int) -> None:
    lo, hi = running_interval(k / n, k / n, n, "fraction")
    ref = wilson(k, n)
    assert (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert 0.0 <= lo <= k / n <= hi <= 1.0


def test_other_scores_get_the_normal_interval_clipped_to_the_scale() -> None:
    values = [0.0, 0.0, 0.0, 0.1, 0.9]
    mean = sum(values) / len(values)
    mean_sq = sum(v * v for v in values) / len(values)
    lo, hi = running_interval(mean, mean_sq, len(values), "fraction")
    assert lo == 0.0 and 0.2 < hi < 1.0
    lo_raw, _ = running_interval(mean, mean_sq, len(values), "raw")  # unbounded: not clipped
    assert lo_raw < 0.0
    lo_pct, hi_pct = running_interval(99.0, 99.0**2 + 4.0, 5, "percent")
    assert hi_pct == 100.0 and lo_pct < 99.0


def test_the_progress_of_a_low_accuracy_run_never_goes_below_zero(tmp_path) -> None:
    sessions = open_db(f"sqlite:///{tmp_path / 'h.db'}")
    cfg = EvalConfig(task="gsm8k", model="builtin:constant", model_settings={"text": "#### 18"}, limit=41,
                     progress=False)
    summary = Runner(cfg, session_factory=sessions).run()
    with sessions() as s:
        progress = run_progress(s, summary.run_id)
    assert progress is not None and progress.n_scored == 41
    assert 0.0 < progress.value < 0.2  # the constant answer is right on a few problems only
    assert progress.ci_low is not None and progress.ci_high is not None
    assert 0.0 <= progress.ci_low <= progress.value <= progress.ci_high <= 1.0
