"""Scores of multi-level interval forecasts: coverage per level, nesting, width and the Weighted
Interval Score of Bracher, Ray, Gneiting & Reich (2021, PLoS Comput. Biol.).

For K central intervals [l_k, u_k] at miscoverage alpha_k and a median m:
IS_a(l, u; y) = (u - l) + (2/a)(l - y) 1{y < l} + (2/a)(y - u) 1{y > u},
WIS = [ (1/2)|y - m| + sum_k (alpha_k / 2) IS_{alpha_k} ] / (K + 1/2),
which equals 2/(2K+1) times the summed pinball losses of the 2K+1 quantiles (tests check both).
Here the intervals are yhat -/+ q_k and the median is the point forecast yhat.
"""

from __future__ import annotations

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
    per_level = {f"{lv:g}": {"coverage": float(c), "coverage_error": float(c - lv), "width": float(w)}
                 for lv, c, w in zip(levels, coverage, (upper - lower).mean(axis=0), strict=True)}
    return {
        "coverage_gap_max": float(np.max(np.abs(coverage - np.asarray(levels)))),
        "crossings": float(crossings(q)),
        "wis": float(weighted_interval_score(lower, upper, yhat, y, alphas).mean()),
        "width_mean": float((upper - lower).mean()),
        "levels": per_level,
    }
