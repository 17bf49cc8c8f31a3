"""Confidence intervals and paired comparisons.

Every aggregate carries n and a seeded 95% interval: a percentile bootstrap over samples for
n <= ``BOOTSTRAP_MAX_N`` (resampling whole samples, so epochs of one sample stay together), the
normal-approximation interval above that (the bootstrap and CLT agree to well under 0.1 point
there, and the bootstrap's B x n matrix would cost more memory than it is worth).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_ROUNDS = 1000
BOOTSTRAP_MAX_N = 20000


@dataclass(slots=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n: int


def mean_ci(values: Sequence[float] | np.ndarray, *, seed: int = 0, alpha: float = 0.05) -> Estimate:
    """Mean with a seeded 95% interval. The bootstrap draws positions, so the interval depends on
    the order of ``values``: callers pass them in sample-id order (harness/aggregate.py does), and
    then the same samples give the same interval on any engine and in any arrival order."""
    x = np.asarray(values, dtype=float)
    n = int(x.size)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = float(x.mean())
    if n == 1 or np.all(x == x[0]):
        return Estimate(mean, mean, mean, n)
    if n > BOOTSTRAP_MAX_N:
        half = 1.959963984540054 * float(x.std(ddof=1)) / math.sqrt(n)
        return Estimate(mean, mean - half, mean + half, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(BOOTSTRAP_ROUNDS, n))
    boots = x[idx].mean(axis=1)
    lo, hi = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return Estimate(mean, float(lo), float(hi), n)


@dataclass(slots=True)
class PairedResult:
    metric: str
    n: int
    mean_a: float
    mean_b: float
    diff: float  # b - a
    ci_low: float
    ci_high: float
    p_value: float
    test: str


def paired_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    metric: str = "",
    seed: int = 0,
    rounds: int = 10000,
) -> PairedResult:
    """Paired comparison of per-sample scores of two runs on the same samples.

    The CI of the mean difference is a paired bootstrap; the p-value is an exact McNemar test when
    both score vectors are 0/1, else a sign-flip permutation test of the mean difference (two-sided,
    ``rounds`` random flips, with the +1 correction so p is never 0).
    """
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    if xa.shape != xb.shape:
        raise ValueError("paired test needs the same samples in both runs")
    n = int(xa.size)
    if n == 0:
        raise ValueError("no samples in common")
    d = xb - xa
    rng = np.random.default_rng(seed)
    est = mean_ci(d, seed=seed)
    binary = np.isin(xa, (0.0, 1.0)).all() and np.isin(xb, (0.0, 1.0)).all()
    if binary:
        from scipy.stats import binomtest

        b01 = int(((xa == 0) & (xb == 1)).sum())
        b10 = int(((xa == 1) & (xb == 0)).sum())
        p = 1.0 if b01 + b10 == 0 else float(binomtest(b01, b01 + b10, 0.5).pvalue)
        test = f"exact McNemar ({b01} vs {b10} discordant)"
    else:
        observed = abs(d.mean())
        count = 0
        chunk = max(1, min(rounds, 2_000_000 // max(n, 1)))
        done = 0
        while done < rounds:
            k = min(chunk, rounds - done)
            signs = rng.choice((-1.0, 1.0), size=(k, n))
            count += int((np.abs((signs * d).mean(axis=1)) >= observed - 1e-12).sum())
            done += k
        p = (count + 1) / (rounds + 1)
        test = f"sign-flip permutation ({rounds} rounds)"
    return PairedResult(metric, n, float(xa.mean()), float(xb.mean()), float(d.mean()),
                        est.ci_low, est.ci_high, p, test)
