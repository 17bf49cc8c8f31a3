"""Crafter's evaluation protocol over stored episodes.

As Crafter's own analysis code (``analysis/common.py``: ``compute_success_rates``,
``compute_scores``) defines it: an achievement's success rate is the percentage of episodes in which
it was unlocked at least once; the Crafter score is the geometric mean of (1 + success rate %) over
the 22 achievements, minus 1 (percent, higher is better). Reward and length are per-episode means.
Here one run is one seed of the published protocol, every stored (sample, epoch) one episode.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from harness.stats import bootstrap_ci, mean_ci
from harness.tasks.agents.env import ACHIEVEMENTS
from harness.types import Metric


def success_rates(unlocked: Sequence[dict[str, float]]) -> dict[str, float]:
    """Percent of episodes that unlocked each achievement (all 22, 0 when never)."""
    n = len(unlocked)
    return {a: 100.0 * sum(1 for ep in unlocked if ep.get(f"achievement_{a}", 0.0) >= 1) / n if n else math.nan
            for a in ACHIEVEMENTS}


def crafter_score(rates: dict[str, float]) -> float:
    """Geometric mean of (1 + rate) minus 1, rates in percent (NaN rates are left out, as nanmean does)."""
    vals = [r for r in rates.values() if not math.isnan(r)]
    if not vals:
        return math.nan
    return math.exp(sum(math.log(1.0 + r) for r in vals) / len(vals)) - 1.0


def _batched_scores(resampled: np.ndarray) -> np.ndarray:
    """Crafter scores of (rounds, episodes, 22) unlocked flags: one score per resample."""
    rates = 100.0 * resampled.mean(axis=1)  # (rounds, 22)
    return np.exp(np.log1p(rates).mean(axis=1)) - 1.0


def score_ci(episodes: Sequence[dict[str, float]], seed: int = 0, rounds: int = 1000) -> tuple[float, float]:
    """A 95% bootstrap interval of the Crafter score, resampling episodes (each stored (sample, epoch)
    is its own episode with its own seed, so episodes are the sampling units)."""
    n = len(episodes)
    if n < 2:
        return math.nan, math.nan
    mat = np.array([[1.0 if ep.get(f"achievement_{a}", 0.0) >= 1 else 0.0 for a in ACHIEVEMENTS] for ep in episodes])
    est = bootstrap_ci(mat, _batched_scores, seed=seed, rounds=rounds, batched=True)
    return est.ci_low, est.ci_high


def crafter_metrics(episodes: Sequence[dict[str, float]], *, key: str = "", value: str = "") -> list[Metric]:
    """The protocol's rows for a set of episodes (score, reward, length, per-achievement rates)."""
    n = len(episodes)
    if not n:
        return []
    rates = success_rates(episodes)
    lo, hi = score_ci(episodes)
    out = [Metric("score", crafter_score(rates), lo, hi, n, key, value)]
    for name in ("reward", "length", "illegal_actions", "illegal_rate", "model_errors", "seconds_per_step"):
        vals = [ep[name] for ep in episodes if name in ep]
        if vals:
            est = mean_ci(vals)
            out.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n, key, value))
    if not key:  # one row per achievement: the breakdown Crafter's spectrum plots show
        for ach, rate in rates.items():
            out.append(Metric("success_rate", rate, None, None, n, "achievement", ach))
    return out
