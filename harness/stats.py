"""Confidence intervals and paired comparisons: the one seeded percentile bootstrap every family calls.

Every aggregate carries n and a seeded 95% interval: a percentile bootstrap over sampling units
(resampling whole units; the epochs of one unit are averaged into it first, ``unit_means``), and for
plain means of more than ``BOOTSTRAP_MAX_N`` units the normal-approximation interval (the bootstrap
and CLT agree to well under 0.1 point there, and the bootstrap's B x n matrix would cost more memory
than it is worth).

The pieces, each used by some family:

- ``bootstrap_ci`` / ``bootstrap_cis``: a statistic (one value, or several named ones from the same
  resamples) over resampled units, per round or vectorised over all rounds at once; the statistic
  sees either the resampled units or, for additive statistics (ratios of sums), how often each unit
  was drawn;
- ``resample_positions`` / ``resample_counts``: the draws themselves, for statistics vectorised in
  ways the above does not fit (``strata``: resample within consecutive blocks);
- ``normal_replicates``: the parametric bootstrap of estimates that carry standard errors;
- ``percentile_interval``: the interval of a set of replicates.

Resamples are ``bootstrap_rng(seed).integers(0, n, (rounds, n))`` (or drawn from a caller's
generator), the draws every family made by hand before it called this module, so the intervals it
reports did not move; tests/test_bootstrap_core.py holds each old formula against its new call.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import numpy as np

BOOTSTRAP_ROUNDS = 1000
BOOTSTRAP_MAX_N = 20000

K = TypeVar("K", bound=Hashable)
U = TypeVar("U", bound=Hashable)
Units = int | np.ndarray | Sequence[Any]


@dataclass(slots=True)
class Estimate:
    value: float
    ci_low: float
    ci_high: float
    n: int


def bootstrap_rng(seed: int = 0) -> np.random.Generator:
    """The generator every bootstrap here draws from: one seed, one stream, one interval."""
    return np.random.default_rng(seed)


def _check(rounds: int, alpha: float) -> None:
    if rounds < 1:
        raise ValueError(f"bootstrap rounds must be at least 1, got {rounds}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")


def resample_positions(n: int, *, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0,
                       rng: np.random.Generator | None = None, strata: Sequence[int] | None = None) -> np.ndarray:
    """(rounds, n) positions: row b lists the units of resample b, drawn uniformly with replacement.

    ``strata``: sizes of consecutive blocks of units, each resampled within itself (a stratified
    bootstrap: every resample keeps each block's size), drawn block after block."""
    if n < 1:
        raise ValueError("no units to resample")
    g = rng if rng is not None else bootstrap_rng(seed)
    if strata is None:
        return g.integers(0, n, size=(rounds, n))
    if any(size < 1 for size in strata) or sum(strata) != n:
        raise ValueError(f"strata sizes {list(strata)} must be positive and add up to the {n} units")
    blocks, start = [], 0
    for size in strata:
        blocks.append(start + g.integers(0, size, size=(rounds, size)))
        start += size
    return np.concatenate(blocks, axis=1)


def _tally(positions: np.ndarray, n: int) -> np.ndarray:
    """(rounds, n) float counts of each unit in each row of ``positions``."""
    rounds = positions.shape[0]
    flat = (positions + n * np.arange(rounds)[:, None]).ravel()
    return np.bincount(flat, minlength=rounds * n).reshape(rounds, n).astype(float)


def resample_counts(n: int, *, rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0, rng: np.random.Generator | None = None,
                    strata: Sequence[int] | None = None, multinomial: bool = False) -> np.ndarray:
    """(rounds, n) how often each unit is drawn in each resample (floats, so a matrix product with
    per-unit sums gives every resample's sums at once). By default the tally of ``resample_positions``
    (the same resamples, the same stream); ``multinomial``: drawn directly as multinomial counts (an
    equally valid bootstrap with another stream of numbers, kept for the family that always used it)."""
    if n < 1:
        raise ValueError("no units to resample")
    g = rng if rng is not None else bootstrap_rng(seed)
    if multinomial:
        if strata is not None:
            raise ValueError("multinomial counts are not stratified")
        return g.multinomial(n, np.full(n, 1.0 / n), size=rounds).astype(float)
    return _tally(resample_positions(n, rounds=rounds, rng=g, strata=strata), n)


def normal_replicates(values: Sequence[float] | np.ndarray, ses: Sequence[float] | np.ndarray, *,
                      rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0,
                      rng: np.random.Generator | None = None) -> np.ndarray:
    """(rounds, k) parametric-bootstrap draws: each estimate redrawn from a normal centred on it with
    its standard error (for estimates whose units are not at hand, only their intervals)."""
    v = np.asarray(values, dtype=float)
    g = rng if rng is not None else bootstrap_rng(seed)
    return v + np.asarray(ses, dtype=float) * g.standard_normal((rounds, v.size))


def percentile_interval(replicates: Sequence[float] | np.ndarray, *, alpha: float = 0.05) -> tuple[float, float]:
    """The (alpha/2, 1 - alpha/2) percentiles of the finite replicates; (nan, nan) when none is.

    A replicate that is not finite is a resample on which the statistic is undefined (a constant
    resample has no correlation, a ratio over a group the resample drew none of): it is left out,
    not counted as some value."""
    r = np.asarray(replicates, dtype=float).ravel()
    r = r[np.isfinite(r)]
    if r.size == 0:
        return math.nan, math.nan
    lo, hi = np.quantile(r, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)


def bootstrap_cis(
    units: Units,
    statistic: Callable[[np.ndarray], Mapping[K, Any]],
    *,
    seed: int = 0,
    rounds: int = BOOTSTRAP_ROUNDS,
    alpha: float = 0.05,
    rng: np.random.Generator | None = None,
    batched: bool = False,
    resample: Literal["units", "counts"] = "units",
    strata: Sequence[int] | None = None,
    value: Mapping[K, float] | None = None,
) -> dict[K, Estimate]:
    """Named statistics of the same resamples, each with its percentile interval.

    ``units``: the sampling units along axis 0 (or, with ``resample="counts"``, just their number).
    ``statistic`` gets, per resample, the resampled units (``units[positions]``, ``resample="units"``)
    or the (n,) count of each unit (``resample="counts"``), and returns {name: value}. ``batched``:
    it gets all resamples at once ((rounds, n, ...) units or (rounds, n) counts) and returns
    {name: (rounds,) values}. ``value``: the point estimates when the caller computes them its own
    way; otherwise the statistic of the observed units (batched: row 0 of the same call, so the point
    estimate comes out of the same arithmetic as the replicates). A non-finite point estimate has no
    interval (nan, nan). One unit: every resample is that unit, the interval is the value.
    ``rng``: draw from the caller's generator (several statistics drawing one after another from one
    stream) instead of a fresh one seeded with ``seed``.
    """
    _check(rounds, alpha)
    n = units if isinstance(units, int) else len(units)
    if n < 1:
        raise ValueError("no units to resample")
    data = None if isinstance(units, int) else np.asarray(units)
    if resample == "units" and data is None:
        raise ValueError('resample="units" needs the units themselves, not their number')

    def seen(rows: np.ndarray) -> np.ndarray:  # what the statistic is handed for these draws
        if resample == "counts":
            return rows
        assert data is not None
        picked: np.ndarray = data[rows]
        return picked

    observed = np.ones(n) if resample == "counts" else np.arange(n)
    if n == 1:
        point = dict(value) if value is not None else (
            {k: float(np.asarray(v).ravel()[0]) for k, v in statistic(seen(observed[None, :])).items()} if batched
            else {k: float(v) for k, v in statistic(seen(observed)).items()})
        return {k: Estimate(v, v, v, 1) if math.isfinite(v) else Estimate(v, math.nan, math.nan, 1)
                for k, v in point.items()}
    positions = resample_positions(n, rounds=rounds, seed=seed, rng=rng, strata=strata)
    draws = _tally(positions, n) if resample == "counts" else positions
    replicates: dict[K, np.ndarray]
    if batched:
        if value is None:
            draws = np.concatenate([observed[None, :].astype(draws.dtype), draws])
        got = {k: np.asarray(v, dtype=float).ravel() for k, v in statistic(seen(draws)).items()}
        if value is None:
            point = {k: float(v[0]) for k, v in got.items()}
            replicates = {k: v[1:] for k, v in got.items()}
        else:
            point, replicates = dict(value), got
    else:
        point = dict(value) if value is not None else {k: float(v) for k, v in statistic(seen(observed)).items()}
        per_round = [statistic(seen(row)) for row in draws]
        replicates = {k: np.asarray([r[k] for r in per_round], dtype=float) for k in point}
    out = {}
    for k, v in point.items():
        lo, hi = percentile_interval(replicates[k], alpha=alpha) if math.isfinite(v) else (math.nan, math.nan)
        out[k] = Estimate(v, lo, hi, n)
    return out


def bootstrap_ci(
    units: Units,
    statistic: Callable[[np.ndarray], Any],
    *,
    seed: int = 0,
    rounds: int = BOOTSTRAP_ROUNDS,
    alpha: float = 0.05,
    rng: np.random.Generator | None = None,
    batched: bool = False,
    resample: Literal["units", "counts"] = "units",
    strata: Sequence[int] | None = None,
    value: float | None = None,
) -> Estimate:
    """One statistic over resampled units with its seeded percentile interval (``bootstrap_cis`` with
    one name; the same arguments). E.g. a ratio of sums over units holding (num, den) rows:
    ``bootstrap_ci(rows, lambda r: r[..., 0].sum(-1) / r[..., 1].sum(-1), batched=True)``."""
    return bootstrap_cis(units, lambda x: {0: statistic(x)}, seed=seed, rounds=rounds, alpha=alpha, rng=rng,
                         batched=batched, resample=resample, strata=strata,
                         value=None if value is None else {0: value})[0]


def unit_means(keys: Sequence[U], values: Sequence[Any] | np.ndarray) -> tuple[list[U], np.ndarray]:
    """Per-(unit, epoch) rows (axis 0 of ``values``, ``keys[i]`` the unit of row i) averaged within
    each unit: (units in order of first appearance, one row each). Repeated epochs of one item are
    one sampling unit, never extra evidence: bootstrap over the result. A unit whose rows are all
    equal keeps that row bit for bit (a deterministic model's epochs are copies, and an average of
    copies can be an ulp off, which could reorder exact ties downstream)."""
    x = np.asarray(values, dtype=float)
    if len(keys) != x.shape[0]:
        raise ValueError(f"{len(keys)} unit keys for {x.shape[0]} rows")
    rows: dict[U, list[int]] = {}
    for i, k in enumerate(keys):
        rows.setdefault(k, []).append(i)
    out = np.empty((len(rows), *x.shape[1:]))
    for j, idx in enumerate(rows.values()):
        block = x[idx]
        out[j] = block[0] if (block == block[0]).all() else block.mean(axis=0)
    return list(rows), out


def _row_means(resampled: np.ndarray) -> np.ndarray:
    means: np.ndarray = resampled.mean(axis=1)
    return means


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
    return bootstrap_ci(x, _row_means, seed=seed, alpha=alpha, batched=True, value=mean)


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
