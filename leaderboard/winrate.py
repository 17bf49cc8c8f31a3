"""The overview's summary column: HELM's mean win rate over the tasks each pair of models shares.

Per task, a model's win rate is the share of the other models on that task whose headline score it
beats by the task's declared direction (a tie counts one half); its mean win rate is the mean of
those per-task rates over its tasks. Only scores are compared, never averaged, so a 0-100 task and
a 0-1 task weigh the same, and a model that skipped a task is still summarised over the tasks it
ran. Tasks whose headline metric declares no direction take no part (a win cannot be defined).

The 95% interval is a parametric bootstrap: each score is redrawn from a normal with the standard
error its own CI implies ((high - low) / 3.92), the win rates are recomputed, and the 2.5%/97.5%
quantiles of each model's mean are taken (seeded: the same scores give the same interval).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from harness.stats import bootstrap_rng, normal_replicates, percentile_interval
from harness.types import Direction

from .ranking import Z95, Scored

ROUNDS = 1000


@dataclass(slots=True)
class WinRate:
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n_tasks: int  # tasks where the model met at least one opponent
    n_opponents: int  # distinct models it was compared with

    @property
    def scored(self) -> Scored:
        return Scored(self.value, self.ci_low, self.ci_high)


def _rates(values: np.ndarray, sign: float) -> np.ndarray:
    """Per-model win rates on one task for (rounds, k) scores: (rounds, k)."""
    v = sign * values
    diff = v[:, :, None] - v[:, None, :]  # (rounds, k, k): model i against model j
    wins = (diff > 0).sum(axis=2) + 0.5 * ((diff == 0).sum(axis=2) - 1)  # minus the self-tie
    return wins / (values.shape[1] - 1)


def mean_win_rates(cells: Mapping[int, Mapping[str, Scored]], directions: Mapping[str, Direction | None], *,
                   rounds: int = ROUNDS, seed: int = 0) -> dict[int, WinRate]:
    """{model: WinRate} from {model: {task: headline score}} and each task's declared direction."""
    models = sorted(cells)
    index = {m: i for i, m in enumerate(models)}
    sums = np.zeros((rounds + 1, len(models)))  # row 0: the point estimate; rows 1..: bootstrap draws
    n_tasks = np.zeros(len(models), dtype=int)
    opponents: dict[int, set[int]] = {m: set() for m in models}
    rng = bootstrap_rng(seed)  # one stream for every task, drawn in task order
    for task in sorted(directions):
        direction = directions[task]
        if direction not in ("higher", "lower"):
            continue
        present = [m for m in models if task in cells[m] and _finite(cells[m][task].value)]
        if len(present) < 2:
            continue
        value = np.array([cells[m][task].value for m in present], dtype=float)
        se = np.array([_se(cells[m][task]) for m in present])
        draws = normal_replicates(value, se, rounds=rounds, rng=rng)
        rates = _rates(np.vstack([value[None, :], draws]), 1.0 if direction == "higher" else -1.0)
        cols = [index[m] for m in present]
        sums[:, cols] += rates
        n_tasks[cols] += 1
        for m in present:
            opponents[m].update(o for o in present if o != m)
    out: dict[int, WinRate] = {}
    for m in models:
        i = index[m]
        k = int(n_tasks[i])
        if k == 0:
            out[m] = WinRate(None, None, None, 0, 0)
            continue
        means = sums[:, i] / k
        lo, hi = percentile_interval(means[1:]) if rounds else (means[0], means[0])
        out[m] = WinRate(float(means[0]), float(min(lo, means[0])), float(max(hi, means[0])), k, len(opponents[m]))
    return out


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _se(s: Scored) -> float:
    if s.ci_low is None or s.ci_high is None or not (_finite(s.ci_low) and _finite(s.ci_high)):
        return 0.0
    return max(s.ci_high - s.ci_low, 0.0) / (2 * Z95)
