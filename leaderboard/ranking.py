"""Ranking helpers: declared metric direction, rank ranges from confidence intervals, Pareto front.

Direction comes only from what a task declared (stored with its task row); a metric without a
declared direction gets no rank, no front and no "better" wording anywhere.

Rank with CI follows the LMArena "Rank (UB)" idea extended to a range: a model's best possible rank
is 1 + the number of models whose whole interval lies above its interval; its worst possible rank
is 1 + the number of other models whose interval is not entirely below its interval. Two models
whose intervals overlap can therefore trade places, and the range says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.types import Direction, MetricInfo, lower, neutral

# A result with fewer scored samples than this (or from an unfinished run) is marked provisional:
# at n=100 a 95% CI of an accuracy near 0.5 is still about +-0.1 wide. Our choice, in the spirit of
# LMArena's and TTS-Arena's minimum-vote rules.
PROVISIONAL_N = 100

Z95 = 1.959963984540054

# The metrics every run carries whatever its task (harness/aggregate.py writes them): declared here,
# once, by the harness that emits them. Any other metric is what its task row declares, or unknown.
STANDARD: dict[str, MetricInfo] = {
    "errors": neutral("errors (count)"),
    "unscored": neutral("unscored samples (count)"),
    "cost_per_sample": lower("cost per sample (USD)"),
}


def metric_info(declared: Mapping[str, Any] | None, name: str) -> MetricInfo | None:
    """The declaration of ``name`` in a task row's ``metrics`` (or the harness's own); None when
    nobody declared it: such a metric is shown and never ranked (no direction is guessed)."""
    raw = (declared or {}).get(name)
    if isinstance(raw, Mapping):
        return MetricInfo.from_dict(dict(raw))
    return STANDARD.get(name)


def direction_of(info: MetricInfo | None) -> Direction | None:
    return info.direction if info is not None and info.direction in ("higher", "lower") else None


def direction_text(direction: Direction | None) -> str:
    if direction == "higher":
        return "higher is better"
    if direction == "lower":
        return "lower is better"
    return "no declared direction: shown, not ranked"


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


def rank_ranges(items: Sequence[Scored], direction: Direction | None = "higher") -> list[tuple[int, int] | None]:
    """(best, worst) rank of each item given the CIs; None for items without a value, and for
    every item when the direction is unknown."""
    if direction not in ("higher", "lower"):
        return [None] * len(items)
    spans = [_interval(s) for s in items]
    if direction == "lower":  # rank by the negated scale so "above" always means better
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
