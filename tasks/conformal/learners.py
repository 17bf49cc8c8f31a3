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
- ``dtaci``: dynamically-tuned ACI (Gibbs & Candes 2022) per level, as the authors' released
  ``conformalAdaptStable`` (isgibbs/DtACI @ 09ab1674, ``DtACI.R``): k ACI experts with step sizes
  ``DTACI_GAMMAS`` (the grid of their experiments), all updated unclipped from beta_t, the largest
  miscoverage whose set still covers s_t; exponential weights on the pinball loss
  ``alpha (beta - a) - min(beta - a, 0)`` with rate ``eta``, mixed with the uniform weights at rate
  ``sigma``. The played miscoverage is the weighted mean alphabar_t (the code's ``meanAlphaSeq``, the
  sequence their figures plot), not one expert drawn at random, so a run is deterministic; it maps to
  a threshold by the ``aci`` rule (<= 0 the whole line, >= 1 the empty set).
- ``saocp``: strongly adaptive online conformal prediction (Bhatnagar et al. 2023) per level, as the
  released ``SAOCP`` (salesforce/online_conformal @ d71cce3a, ``online_conformal/saocp.py``): at every
  step a new expert starts (scale-free OGD on the pinball loss of the threshold, from the current
  prediction), living ``lifetime`` x 2^u steps for the 2-adic valuation u of its start time (geometric
  covering intervals); experts are combined by coin betting (CBCE) with the prior 1/(t^2 (1 + floor(log2 t)))
  over start times. The scale is sqrt(3) times the largest burn-in score, and the burn-in scores are fed
  through the learner first, as the reference does with its calibration residuals.

Units: q0 are the empirical level-quantiles of the burn-in scores and B their maximum, so eta =
lr * B and the UP wealth are in score units whatever the scale of the series (fixed after burn-in).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from harness.tasks.conformal.isotonic import isotonic_projection

if TYPE_CHECKING:  # numpy is imported where it is used, so that importing the family stays cheap
    import numpy as np
    from numpy.typing import NDArray

METHODS = ("aci", "aci_clipped", "dtaci", "ogd", "ogd_lazy", "ogd_sorted", "pnorm", "saocp", "up")
DEFAULTS: dict[str, dict[str, float]] = {
    "ogd": {"lr": 0.05}, "ogd_sorted": {"lr": 0.05}, "ogd_lazy": {"lr": 0.05}, "pnorm": {"lr": 0.05},
    "up": {"wealth": 0.05, "grid": 201}, "aci": {"gamma": 0.005}, "aci_clipped": {"gamma": 0.005},
    # the defaults of conformalAdaptStable (DtACI.R); the experts' step sizes are fixed, see DTACI_GAMMAS
    "dtaci": {"sigma": 0.001, "eta": 2.72},
    "saocp": {"lifetime": 8},  # SAOCP(lifetime=8), the reference's default
}
# the gamma grid of the authors' experiments (``gammaGrid`` in VolatilityPredictions.R, isgibbs/DtACI)
DTACI_GAMMAS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128)


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


def aci_threshold(sorted_scores: Sequence[float], alpha_t: float) -> float:
    """The unclipped ACI set of miscoverage alpha_t: the whole line, the empty set or the conformal quantile."""
    if alpha_t <= 0.0:
        return math.inf
    if alpha_t >= 1.0:
        return -math.inf
    return conformal_quantile(sorted_scores, 1 - alpha_t)


def covering_beta(sorted_scores: Sequence[float], score: float) -> float:
    """beta_t = sup{b in (0, 1): score <= conformal_quantile(scores, 1 - b)}, 0 when no such b.

    With j the number of revealed scores below ``score``, the quantile at 1 - b is the
    (ceil((n+1)(1-b)))-th smallest, >= score exactly when that rank exceeds j, i.e. b < 1 - j/(n+1);
    when score exceeds every revealed score (j = n) no level in (0, 1) covers it (the quantile is
    clipped to the maximum), so beta = 0. The authors find beta by bisection on R's quantile; this is
    the same quantity for the harness's quantile, in closed form.
    """
    n = len(sorted_scores)
    j = bisect.bisect_left(sorted_scores, score)
    return 0.0 if j >= n else 1.0 - j / (n + 1)


class DtACI(Learner):
    """One DtACI (k ACI experts, exponential weights) per level; arrays are [level, expert]."""

    def __init__(self, alphas: Sequence[float], warm_scores: Sequence[float], settings: dict[str, float],
                 gammas: Sequence[float] = DTACI_GAMMAS) -> None:
        super().__init__(alphas, warm_scores, settings)
        import numpy as np

        self.sigma = float(settings["sigma"])
        self.eta = float(settings["eta"])
        if not 0.0 <= self.sigma <= 1.0:
            raise ValueError(f"dtaci: sigma must lie in [0, 1], got {self.sigma:g}")
        if not self.eta > 0.0:
            raise ValueError(f"dtaci: eta must be positive, got {self.eta:g}")
        self.gammas = np.asarray(gammas, dtype=float)
        k = self.gammas.size
        self.target = np.asarray(self.alphas)[:, None]
        self.expert_alphas = np.repeat(self.target, k, axis=1)  # alphaInit = alpha
        self.weights = np.ones((self.d, k))
        self.probs = np.full((self.d, k), 1.0 / k)
        self.scores = sorted(float(s) for s in warm_scores)
        self.alpha_t = self._mean_alphas()
        self.q = [aci_threshold(self.scores, a) for a in self.alpha_t]

    def _mean_alphas(self) -> list[float]:
        return [float(v) for v in (self.probs * self.expert_alphas).sum(axis=1)]

    def thresholds(self) -> list[float]:
        return list(self.q)

    def update(self, score: float) -> None:
        import numpy as np

        beta = covering_beta(self.scores, float(score))
        u = beta - self.expert_alphas
        losses = self.target * u - np.minimum(u, 0.0)  # pinball(beta - alpha_i, alpha)
        # every expert steps on its own error at beta, never clipped (their code's update)
        self.expert_alphas = self.expert_alphas + self.gammas[None, :] * (
            self.target - (self.expert_alphas > beta).astype(float))
        bar = self.weights * np.exp(-self.eta * losses)
        k = self.gammas.size
        nxt = (1.0 - self.sigma) * bar / bar.sum(axis=1, keepdims=True) + self.sigma / k
        self.probs = nxt / nxt.sum(axis=1, keepdims=True)
        self.weights = nxt
        bisect.insort(self.scores, float(score))
        self.alpha_t = self._mean_alphas()
        self.q = [aci_threshold(self.scores, a) for a in self.alpha_t]


def _two_adic_valuation(t: int) -> int:
    u = 0
    while t % 2 == 0:
        t //= 2
        u += 1
    return u


class SAOCPLevel:
    """SAOCP for one level: the live experts as parallel arrays, oldest first (the reference's dict order)."""

    def __init__(self, alpha: float, scale: float, lifetime: int) -> None:
        import numpy as np

        self.alpha, self.coverage, self.scale, self.g = alpha, 1.0 - alpha, scale, lifetime
        self.base_lr = scale / math.sqrt(3)
        self.t = 1
        self.start = np.zeros(0, dtype=np.int64)
        self.life = np.zeros(0, dtype=np.int64)
        self.age = np.zeros(0, dtype=np.int64)  # s_t: steps the expert has been updated
        self.yhat, self.grad_norm, self.z, self.wz = (np.zeros(0) for _ in range(4))

    def _w(self) -> NDArray[np.float64]:
        import numpy as np

        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.age == 0, 0.0, self.z / np.maximum(self.age, 1) * (1.0 + self.wz))

    def predict(self) -> float:
        import numpy as np

        if self.start.size == 0:
            return 0.0
        # sums run left to right (cumsum), as the reference's Python sums: a new expert's first coin is
        # meta_loss - its own loss, a rounding residue whose sign decides whether it may bet against itself
        st = self.start.astype(float)
        prior = 1.0 / (st ** 2 * (1.0 + np.floor(np.log2(st))))
        prior = prior / np.cumsum(prior)[-1]
        p = prior * np.maximum(0.0, self._w())
        total = float(np.cumsum(p)[-1])
        p = p / total if total > 0 else prior
        return float(np.cumsum(p * self.yhat)[-1])

    def _pinball(self, y: float, yhat: NDArray[np.float64] | float) -> NDArray[np.float64]:
        import numpy as np

        q = self.coverage
        return np.maximum(q * (y - yhat), (1 - q) * (yhat - y))

    def update(self, s: float) -> None:
        import numpy as np

        s_hat = self.predict()
        keep = self.age <= self.life  # an expert expires once it has lived past its interval
        self.start, self.life, self.age = self.start[keep], self.life[keep], self.age[keep]
        self.yhat, self.grad_norm, self.z, self.wz = (a[keep] for a in (self.yhat, self.grad_norm, self.z, self.wz))
        self.start = np.append(self.start, self.t)
        self.life = np.append(self.life, self.g * 2 ** _two_adic_valuation(self.t))
        self.age = np.append(self.age, 0)
        self.yhat = np.append(self.yhat, s_hat)
        self.grad_norm, self.z, self.wz = (np.append(a, 0.0) for a in (self.grad_norm, self.z, self.wz))
        meta_loss = float(self._pinball(s, self.predict()))
        # coin betting on each expert's excess loss (CBCE); a non-positive bettor may not lose more
        w = self._w()
        ratio = (meta_loss - self._pinball(s, self.yhat)) / self.scale / max(self.alpha, 1 - self.alpha)
        g = np.clip(ratio, np.where(w > 0, -1.0, 0.0), 1.0)
        self.z = self.z + g
        self.wz = self.wz + g * w
        self.age = self.age + 1
        # scale-free OGD on the pinball loss of the threshold, kept >= 0
        q = self.coverage
        grad = -q * (s > self.yhat) + (1 - q) * (s < self.yhat)
        self.grad_norm = self.grad_norm + grad ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(self.grad_norm != 0, self.base_lr / np.sqrt(self.grad_norm) * grad, 0.0)
        self.yhat = np.maximum(0.0, self.yhat - step)
        self.t += 1


class SAOCP(Learner):
    def __init__(self, alphas: Sequence[float], warm_scores: Sequence[float], settings: dict[str, float]) -> None:
        super().__init__(alphas, warm_scores, settings)
        lifetime = float(settings["lifetime"])
        if lifetime < 1 or lifetime != int(lifetime):
            raise ValueError(f"saocp: lifetime must be a whole number >= 1, got {lifetime:g}")
        scale = max(abs(float(s)) for s in warm_scores) * math.sqrt(3)
        self.levels = [SAOCPLevel(a, scale, int(lifetime)) for a in self.alphas]
        for s in warm_scores:  # in time order, as the reference learns on its calibration residuals
            for lv in self.levels:
                lv.update(float(s))
        self.q = [lv.predict() for lv in self.levels]

    def thresholds(self) -> list[float]:
        return list(self.q)

    def update(self, score: float) -> None:
        for lv in self.levels:
            lv.update(float(score))
        self.q = [lv.predict() for lv in self.levels]


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
    if method == "dtaci":
        return DtACI(alphas, warm_scores, cfg)
    if method == "saocp":
        return SAOCP(alphas, warm_scores, cfg)
    return ACI(alphas, warm_scores, cfg, clip=method == "aci_clipped")
