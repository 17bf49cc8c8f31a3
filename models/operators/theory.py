"""The two closed forms of the channel-coding framework.

1. **Uniform vs quality-weighted averaging.** K estimates x_i = mu + n_i with noise variances v_i.
   Inverse-variance weights give variance ``1 / sum(1/v)``, uniform weights ``sum(v) / K^2``. The
   weights must be *estimated* (from judge scores); model their error as zero-mean noise of variance
   tau^2 on each weight, which adds ``tau^2 * sum(v)`` to the weighted estimator's variance (for a
   centred signal). Uniform then beats weighted iff
   ``tau^2 > 1/K^2 - 1/(sum(v) * sum(1/v))`` (the notes' result; the right side is >= 0 by
   Cauchy-Schwarz and 0 exactly when all v_i are equal, where weighting cannot help).
2. **Contractivity of generator-critic refinement.** With error e_t = 1 - quality, a critic that
   catches a fraction c of the error, corrections applied with damping d and a generator that
   re-introduces errors at rate beta (plus a floor beta*phi) give
   ``e_{t+1} = (1 - d (c - beta)) e_t + beta * phi``: contraction factor
   ``L = |1 - d (c - beta)|``, contractive (L < 1) iff c > beta (for 0 < d (c - beta) < 2), with
   fixed point ``e* = beta * phi / (d (c - beta))``. From observed per-round qualities we estimate
   L and e* by least squares on consecutive errors (:func:`contractivity_from_quality`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np


def uniform_beats_weighted_threshold(variances: Sequence[float]) -> float:
    """tau^2 above which uniform averaging beats quality-weighted averaging."""
    v = np.asarray(variances, dtype=float)
    if v.size == 0 or np.any(v <= 0):
        raise ValueError("need at least one positive noise variance")
    k = v.size
    return float(1.0 / k**2 - 1.0 / (v.sum() * (1.0 / v).sum()))


def uniform_beats_weighted(variances: Sequence[float], tau2: float) -> bool:
    return tau2 > uniform_beats_weighted_threshold(variances)


def combined_variances(variances: Sequence[float], tau2: float) -> tuple[float, float]:
    """(uniform, noisy inverse-variance weighted) estimator variances under the noise model above."""
    v = np.asarray(variances, dtype=float)
    return float(v.sum() / v.size**2), float(1.0 / (1.0 / v).sum() + tau2 * v.sum())


def contraction_factor(d: float, c: float, beta: float) -> float:
    return abs(1.0 - d * (c - beta))


def fixed_point_error(d: float, c: float, beta: float, phi: float) -> float:
    if c <= beta:
        raise ValueError("no finite fixed point unless c > beta (the loop is not contractive)")
    return beta * phi / (d * (c - beta))


@dataclass(slots=True)
class Contractivity:
    factor: float  # estimated L = |a| in e_{t+1} = a e_t + b
    slope: float  # a
    offset: float  # b
    contractive: bool
    fixed_point_error: float | None  # b / (1 - a) when contractive
    fixed_point_quality: float | None
    n_pairs: int

    def c_minus_beta(self, damping: float) -> float:
        """The implied (c - beta) for a known damping d: a = 1 - d (c - beta)."""
        return (1.0 - self.slope) / damping


def contractivity_from_quality(rounds: Sequence[Sequence[float]] | Sequence[float]) -> Contractivity:
    """Estimate the loop's contraction from per-round qualities in [0, 1].

    ``rounds`` is one trajectory [q_0, q_1, ...] or a list of trajectories (e.g. every sample's
    ``details["qualities"]`` from ``turbo``); all consecutive pairs (e_t, e_{t+1}) are pooled and
    e_{t+1} = a e_t + b is fitted by least squares. With a single distinct e_t the slope is not
    identifiable and b = 0 is assumed (pure contraction toward zero error)."""
    trajectories: list[list[float | None]] = (
        [list(cast(Sequence[float], rounds))] if rounds and not isinstance(rounds[0], Sequence)
        else [list(r) for r in cast(Sequence[Sequence[float]], rounds)]
    )
    xs, ys = [], []
    for traj in trajectories:
        errs = [1.0 - float(q) for q in traj if q is not None]
        for a, b in zip(errs, errs[1:], strict=False):
            xs.append(a)
            ys.append(b)
    if not xs:
        raise ValueError("need at least one trajectory with two rounds")
    x, y = np.asarray(xs), np.asarray(ys)
    if np.ptp(x) < 1e-12:
        slope = float(y.mean() / x.mean()) if x.mean() > 0 else 0.0
        offset = 0.0
    else:
        slope, offset = (float(v) for v in np.polyfit(x, y, 1))
    contractive = abs(slope) < 1.0
    e_star = offset / (1.0 - slope) if contractive else None
    return Contractivity(abs(slope), slope, offset, contractive, e_star,
                         None if e_star is None else 1.0 - e_star, len(xs))
