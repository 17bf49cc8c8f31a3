"""Online learners of the d per-level thresholds q_k on the nonconformity score s_t = |y_t - yhat_t|.

Every learner is fed the pinball-loss subgradient at the thresholds it *played*: for level k with
miscoverage alpha_k, g_k = alpha_k - err_k with err_k = 1{s_t > q_k}; its negative, the "coin"
c_k = err_k - alpha_k in [-1, 1], is what the dual states accumulate.

- ``ogd``: independent per-level online gradient descent q <- q - eta g, played as is (may cross).
- ``ogd_sorted``: the same step, then the *state itself* is projected onto non-decreasing vectors
  (eager projection).
- ``ogd_lazy``: dual averaging theta = sum of coins, played q = Proj(q0 + eta theta); the projection
  never enters the state (lazy projection, the Ochoa Rivera-Tewari construction for OGD).
- ``pnorm``: p-norm online mirror descent in its lazy (dual-averaging) form with p = 1 + 1/ln d:
  w = grad (1/2)||eta theta||_r^2 with r = p/(p-1) = 1 + ln d the dual exponent,
  w_i = sign(theta_i) |theta_i|^(r-1) / ||theta||_r^(r-2) (times eta); played q = Proj(q0 + w).
- ``up``: coordinate-wise universal portfolio (Cover's mixture over constant betting fractions, a
  uniform prior on a grid of fractions in (-1, 1)): per level, the wealth of fraction b is
  prod(1 + b c), the bet is the prior-weighted wealth times b (= the mixture's bet exactly, for a
  discrete prior), played q = Proj(q0 + B * wealth0 * bet). Lazy: the grid wealths are the state.
- ``aci``: adaptive conformal inference (Gibbs & Candes 2021) per level: alpha_t <- alpha_t +
  gamma (alpha - err_t), *unclipped*, as the authors' released code does (``ACCode.R``,
  ``runElectionNightPred``, isgibbs/AdaptiveConformal @ 6c312b45): alpha_t <= 0 plays the whole line
  (threshold +inf, never an error), alpha_t >= 1 the empty set (threshold -inf, always an error),
  otherwise the conformal (ceil((n+1)(1-alpha_t))-th smallest) quantile of all revealed scores. Their
  long-run coverage bound |coverage - (1 - alpha)| <= (max(alpha, 1 - alpha) + gamma) / (gamma T)
  needs the unclipped update. The score and its quantile are ours (the reference refits a quantile
  regression and takes R's type-7 quantile of a calibration split); the update and error rule are theirs.
- ``aci_clipped``: the same with alpha_t clipped to [0, 1] after each step, as MAPIE's
  ``adapt_conformal_inference`` does (so the sets stay finite and non-empty; the bound does not hold).

Units: q0 are the empirical level-quantiles of the burn-in scores and B their maximum, so eta =
lr * B and the UP wealth are in score units whatever the scale of the series (fixed after burn-in).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from harness.tasks.conformal.isotonic import isotonic_projection

METHODS = ("aci", "aci_clipped", "ogd", "ogd_lazy", "ogd_sorted", "pnorm", "up")
DEFAULTS: dict[str, dict[str, float]] = {
    "ogd": {"lr": 0.05}, "ogd_sorted": {"lr": 0.05}, "ogd_lazy": {"lr": 0.05}, "pnorm": {"lr": 0.05},
    "up": {"wealth": 0.05, "grid": 201}, "aci": {"gamma": 0.005}, "aci_clipped": {"gamma": 0.005},
}


def conformal_quantile(sorted_scores: Sequence[float], level: float) -> float:
    """The ceil((n+1) level)-th smallest score, clipped to the sample (level 1 -> the maximum)."""
    n = len(sorted_scores)
    k = min(max(math.ceil((n + 1) * level) - 1, 0), n - 1)
    return float(sorted_scores[k])


class Learner:
    """Base: per-level miscoverages ``alphas`` (decreasing), burn-in scores for q0 and the scale."""

    def __init__(self, alphas: Sequence[float], warm_scores: Sequence[float], settings: dict[str, float]) -> None:
        self.alphas = [float(a) for a in alphas]
        self.d = len(self.alphas)
        ordered = sorted(float(s) for s in warm_scores)
        self.scale = max(ordered[-1], 1e-12)
        self.q0 = [conformal_quantile(ordered, 1 - a) for a in self.alphas]
        self.settings = settings

    def coins(self, played: Sequence[float], score: float) -> list[float]:
        return [(1.0 if score > q else 0.0) - a for q, a in zip(played, self.alphas, strict=True)]

    def thresholds(self) -> list[float]:
        raise NotImplementedError

    def update(self, score: float) -> None:
        raise NotImplementedError


class OGD(Learner):
    def __init__(self, *args: object, project: bool = False) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.eta = float(self.settings["lr"]) * self.scale
        self.project = project
        self.q = isotonic_projection(self.q0) if project else list(self.q0)

    def thresholds(self) -> list[float]:
        return list(self.q)

    def update(self, score: float) -> None:
        step = [q + self.eta * c for q, c in zip(self.q, self.coins(self.q, score), strict=True)]
        self.q = isotonic_projection(step) if self.project else step


class LazyDual(Learner):
    """Dual averaging: theta accumulates coins at the played thresholds; the link maps it to primal."""

    def __init__(self, *args: object, r: float = 2.0) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        self.eta = float(self.settings["lr"]) * self.scale
        self.theta = [0.0] * self.d
        self.r = r
        self.played = isotonic_projection(self.q0)

    def link(self) -> list[float]:
        if self.r == 2.0:
            return [self.eta * t for t in self.theta]
        norm = sum(abs(t) ** self.r for t in self.theta) ** (1.0 / self.r)
        if norm == 0.0:
            return [0.0] * self.d
        return [self.eta * math.copysign(abs(t) ** (self.r - 1), t) / norm ** (self.r - 2) for t in self.theta]

    def thresholds(self) -> list[float]:
        return list(self.played)

    def update(self, score: float) -> None:
        self.theta = [t + c for t, c in zip(self.theta, self.coins(self.played, score), strict=True)]
        self.played = isotonic_projection([q + w for q, w in zip(self.q0, self.link(), strict=True)])


class UniversalPortfolio(Learner):
    def __init__(self, *args: object) -> None:
        super().__init__(*args)  # type: ignore[arg-type]
        import numpy as np

        n = int(self.settings["grid"])
        if n < 3:
            raise ValueError("up: grid must be at least 3 betting fractions")
        self.fractions = -1.0 + (2.0 * np.arange(n) + 1.0) / n  # midpoints: never +-1, wealth stays > 0
        self.log_wealth = np.zeros((self.d, n))
        self.unit = float(self.settings["wealth"]) * self.scale
        self.played = isotonic_projection(self.q0)

    def bets(self) -> list[float]:
        import numpy as np

        lw = self.log_wealth
        top = lw.max(axis=1, keepdims=True)
        w = np.exp(lw - top)
        # mixture wealth times the mixture's betting fraction = prior-weighted sum of b * W(b)
        mixture = np.exp(top[:, 0]) / w.shape[1]
        return list(mixture * (w @ self.fractions))

    def thresholds(self) -> list[float]:
        return list(self.played)

    def update(self, score: float) -> None:
        import numpy as np

        c = np.asarray(self.coins(self.played, score))
        self.log_wealth += np.log1p(c[:, None] * self.fractions[None, :])
        self.played = isotonic_projection([q + self.unit * b for q, b in zip(self.q0, self.bets(), strict=True)])


class ACI(Learner):
    def __init__(self, alphas: Sequence[float], warm_scores: Sequence[float], settings: dict[str, float],
                 clip: bool = False) -> None:
        super().__init__(alphas, warm_scores, settings)
        self.gamma = float(settings["gamma"])
        self.clip = clip
        self.alpha_t = list(self.alphas)
        self.scores = sorted(float(s) for s in warm_scores)
        self.q = self._quantiles()

    def _quantile(self, alpha_t: float) -> float:
        if not self.clip and alpha_t <= 0.0:
            return math.inf  # the whole line: covers every y
        if not self.clip and alpha_t >= 1.0:
            return -math.inf  # the empty set: covers nothing
        return conformal_quantile(self.scores, 1 - alpha_t)

    def _quantiles(self) -> list[float]:
        return [self._quantile(a) for a in self.alpha_t]

    def thresholds(self) -> list[float]:
        return list(self.q)

    def update(self, score: float) -> None:
        errs = [1.0 if score > q else 0.0 for q in self.q]
        steps = [at + self.gamma * (a - e) for at, a, e in zip(self.alpha_t, self.alphas, errs, strict=True)]
        self.alpha_t = [min(max(at, 0.0), 1.0) for at in steps] if self.clip else steps
        bisect.insort(self.scores, float(score))
        self.q = self._quantiles()


def make_learner(method: str, alphas: Sequence[float], warm_scores: Sequence[float],
                 settings: dict[str, float]) -> Learner:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    if not warm_scores:
        raise ValueError("no burn-in scores to initialise the thresholds (burn_in too short)")
    cfg = {**DEFAULTS[method], **settings}
    if method == "ogd":
        return OGD(alphas, warm_scores, cfg)
    if method == "ogd_sorted":
        return OGD(alphas, warm_scores, cfg, project=True)
    if method == "ogd_lazy":
        return LazyDual(alphas, warm_scores, cfg)
    if method == "pnorm":
        d = len(alphas)
        # p = 1 + 1/ln d has dual exponent r = 1 + ln d; d <= 2 would make p >= 2: use the Euclidean case then
        return LazyDual(alphas, warm_scores, cfg, r=max(1.0 + math.log(d), 2.0))
    if method == "up":
        return UniversalPortfolio(alphas, warm_scores, cfg)
    return ACI(alphas, warm_scores, cfg, clip=method == "aci_clipped")
