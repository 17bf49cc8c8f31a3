"""Scores of multi-level interval forecasts: coverage per level, nesting, width and the Weighted
Interval Score of Bracher, Ray, Gneiting & Reich (2021, PLoS Comput. Biol.).

For K central intervals [l_k, u_k] at miscoverage alpha_k and a median m:
IS_a(l, u; y) = (u - l) + (2/a)(l - y) 1{y < l} + (2/a)(y - u) 1{y > u},
WIS = [ (1/2)|y - m| + sum_k (alpha_k / 2) IS_{alpha_k} ] / (K + 1/2),
which equals 2/(2K+1) times the summed pinball losses of the 2K+1 quantiles (tests check both).
Here the intervals are yhat -/+ q_k and the median is the point forecast yhat.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any


def interval_score(lower: Any, upper: Any, y: Any, alpha: float) -> Any:
    import numpy as np

    lower, upper, y = np.asarray(lower), np.asarray(upper), np.asarray(y)
    return (upper - lower) + (2.0 / alpha) * np.clip(lower - y, 0, None) + (2.0 / alpha) * np.clip(y - upper, 0, None)


def weighted_interval_score(lower: Any, upper: Any, median: Any, y: Any, alphas: Sequence[float]) -> Any:
    """Per-observation WIS; ``lower``/``upper`` are [n, K] with column k at ``alphas[k]``."""
    import numpy as np

    lower, upper = np.atleast_2d(lower), np.atleast_2d(upper)
    total = 0.5 * np.abs(np.asarray(y) - np.asarray(median))
    for k, a in enumerate(alphas):
        total = total + (a / 2.0) * interval_score(lower[:, k], upper[:, k], y, a)
    return total / (len(alphas) + 0.5)


def crossings(q: Any) -> int:
    """Steps whose sets are not nested: some threshold above the next (higher) level's."""
    import numpy as np

    q = np.asarray(q)
    if q.shape[1] < 2:
        return 0
    return int(np.any(q[:, :-1] > q[:, 1:], axis=1).sum())


def stream_metrics(y: Any, yhat: Any, q: Any, levels: Sequence[float]) -> dict[str, Any]:
    import numpy as np

    y, yhat, q = np.asarray(y, float), np.asarray(yhat, float), np.asarray(q, float)
    lower, upper = yhat[:, None] - q, yhat[:, None] + q
    covered = (y[:, None] >= lower) & (y[:, None] <= upper)
    coverage = covered.mean(axis=0)
    alphas = [1.0 - lv for lv in levels]
    # A set may be the whole line (ACI plays it once alpha_t <= 0): it covers, and its width is infinite.
    # Widths and WIS are taken over the finite sets (WIS: over the steps whose sets are all finite) and
    # the share of infinite sets is its own metric, so nothing infinite is dropped without a word.
    finite = np.isfinite(q)
    width = np.where(finite, upper - lower, np.nan)
    all_finite = finite.all(axis=1)
    wis = weighted_interval_score(lower[all_finite], upper[all_finite], yhat[all_finite], y[all_finite], alphas)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the mean of no finite set is NaN: left out, counted
        level_widths = np.nanmean(width, axis=0)
        width_mean = float(np.nanmean(width)) if finite.any() else float("nan")
    per_level = {f"{lv:g}": {"coverage": float(c), "coverage_error": float(c - lv), "width": float(w),
                             "infinite_sets": float(1.0 - f)}
                 for lv, c, w, f in zip(levels, coverage, level_widths, finite.mean(axis=0), strict=True)}
    return {
        "coverage_gap_max": float(np.max(np.abs(coverage - np.asarray(levels)))),
        "crossings": float(crossings(q)),
        "wis": float(wis.mean()) if len(wis) else float("nan"),
        "width_mean": width_mean,
        "infinite_sets": float(1.0 - finite.mean()),
        "levels": per_level,
    }
