"""Ranking helpers: metric direction, rank ranges from confidence intervals, averages, Pareto front.

Rank with CI follows the LMArena "Rank (UB)" idea extended to a range: a model's best possible rank
is 1 + the number of models whose whole interval lies above its interval; its worst possible rank
is 1 + the number of other models whose interval is not entirely below its interval. Two models
whose intervals overlap can therefore trade places, and the range says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

# A result with fewer scored samples than this (or from an unfinished run) is marked provisional:
# at n=100 a 95% CI of an accuracy near 0.5 is still about +-0.1 wide. Our choice, in the spirit of
# LMArena's and TTS-Arena's minimum-vote rules.
PROVISIONAL_N = 100

# Names of metrics where smaller is better. Task rows carry no direction, so this is a name
# heuristic (our choice); everything else ranks higher-is-better.
_LOWER = re.compile(r"(^|_)(error|errors|wer|cer|loss|mae|mse|rmse|chamfer|distance|dist|latency|cost|"
                    r"perplexity|ppl|fid|kid|lpips|unscored|over_refusal|misaligned|abandon_rate|"
                    r"contradiction_rate|over_steering|unsafe_compliance)($|_|s$)")

Z95 = 1.959963984540054


def lower_is_better(metric: str) -> bool:
    return bool(_LOWER.search(metric.lower()))


@dataclass(slots=True)
class Scored:
    value: float | None
    ci_low: float | None
    ci_high: float | None


def _interval(s: Scored) -> tuple[float, float] | None:
    if s.value is None or not math.isfinite(s.value):
        return None
    lo = s.ci_low if s.ci_low is not None and math.isfinite(s.ci_low) else s.value
    hi = s.ci_high if s.ci_high is not None and math.isfinite(s.ci_high) else s.value
    return lo, hi


def rank_ranges(items: Sequence[Scored], lower_better: bool = False) -> list[tuple[int, int] | None]:
    """(best, worst) rank of each item given the CIs; None for items without a value."""
    spans = [_interval(s) for s in items]
    if lower_better:  # rank by the negated scale so "above" always means better
        spans = [(-sp[1], -sp[0]) if sp else None for sp in spans]
    out: list[tuple[int, int] | None] = []
    valid = [sp for sp in spans if sp is not None]
    for sp in spans:
        if sp is None:
            out.append(None)
            continue
        lo, hi = sp
        surely_better = sum(1 for olo, _ in valid if olo > hi)
        surely_worse = sum(1 for _, ohi in valid if ohi < lo)
        out.append((1 + surely_better, len(valid) - surely_worse))
    return out


def format_rank(r: tuple[int, int] | None) -> str:
    if r is None:
        return ""
    return str(r[0]) if r[0] == r[1] else f"{r[0]}–{r[1]}"


def mean_of_estimates(items: Sequence[Scored]) -> Scored:
    """Unweighted mean of independent estimates with a normal-approximation 95% CI.

    Reconstructed: each item's standard error is recovered from its CI as (high - low) / (2 * 1.96),
    and the mean's SE is sqrt(sum se_i^2) / k (tasks are independent samples).
    """
    vals = [s for s in items if s.value is not None and math.isfinite(s.value)]
    if not vals:
        return Scored(None, None, None)
    k = len(vals)
    mean = sum(s.value for s in vals) / k  # type: ignore[misc]
    var = 0.0
    for s in vals:
        lo, hi = _interval(s) or (s.value, s.value)
        var += ((hi - lo) / (2 * Z95)) ** 2  # type: ignore[operator]
    half = Z95 * math.sqrt(var) / k
    # the mean of bounded metrics stays within the range their own intervals span (a normal
    # interval for a mean near 0 would otherwise dip below 0, e.g. an accuracy of -0.01)
    floor = min(_interval(s)[0] if _interval(s) else s.value for s in vals)  # type: ignore[index]
    ceil = max(_interval(s)[1] if _interval(s) else s.value for s in vals)  # type: ignore[index]
    return Scored(mean, max(mean - half, floor), min(mean + half, ceil))


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """Indices of points (cost, score) that no other point beats: lower-or-equal cost and
    higher-or-equal score, one of them strictly. Returned in order of increasing cost."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], -points[i][1]))
    front: list[int] = []
    best = -math.inf
    for i in order:
        cost, score = points[i]
        if not (math.isfinite(cost) and math.isfinite(score)):
            continue
        if score > best:
            front.append(i)
            best = score
    return front
