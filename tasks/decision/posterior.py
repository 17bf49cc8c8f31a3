"""The 2-Step Agent's belief update from one ML prediction, in closed form (linear-Gaussian case).

Reading of the paper (Nyberg, Carcassi, Tugnoli & Cinà, "2-Step Agent", arXiv 2602.21889): the
paper's own derivation and code are not public, so this is the closest faithful reading of its
linear-Gaussian setting, written out here so it can be checked.

**The agent's model.** The agent believes outcomes follow ``Y = beta X + tau A + eps`` and holds a
Gaussian prior over the coefficients, ``theta = (beta, tau) ~ N(m, S)``. It also holds a belief
``gamma0`` about the historical policy that produced the ML model's training data,
``A = gamma0 X + u`` with ``E[u | X] = 0``. The ML model regresses ``Y`` on ``X`` alone, so under the
agent's beliefs it estimates the *predictive* slope

    E[Y | X = x] = beta x + tau E[A | X = x] = (beta + gamma0 tau) x,

an association that mixes the direct effect ``beta`` with the treatment effect ``tau`` through
the policy. This is why a prediction carries information about ``tau`` at all, and why that
information hinges on ``gamma0``.

**The likelihood of a prediction.** The tool reports, for the new patient ``x``, its prediction
``yhat = slope_hat x`` and a standard error ``se``. Least squares is unbiased and (for the
training-set sizes used) normal, so the agent models

    yhat | theta ~ N(h' theta, se^2),    h = (x, gamma0 x)',

treating the reported ``se`` as known (the usual plug-in: the residual spread the tool reports
also depends weakly on ``tau``, which the agent does not exploit).

**The posterior.** ``theta`` and ``yhat`` are then jointly Gaussian with
``Cov(theta, yhat) = S h`` and ``Var(yhat) = v = h' S h + se^2``, so conditioning gives

    E[theta | yhat]   = m + S h (yhat - h' m) / v,
    Cov[theta | yhat] = S - S h h' S / v.

Two consequences the tests check: with ``gamma0 = 0`` the update on ``tau`` is zero whenever the
prior is independent across coefficients (``(S h)_tau = s_tau,beta x``), and flipping the sign of
``gamma0`` flips the sign of the update on ``tau`` while the data are the same — the mechanism by
which one misaligned belief turns good evidence into harmful advice.

**The decision (step 2).** The agent treats iff ``E[tau | yhat] > cost``: under its beliefs the
expected gain from treating is ``E[tau] - cost`` whatever the patient's ``x``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Prior:
    mean: tuple[float, float]  # (beta, tau)
    cov: tuple[tuple[float, float], tuple[float, float]]
    gamma0: float  # the agent's belief about the historical policy

    @staticmethod
    def parse(raw: object) -> Prior:
        """A prior from a request's JSON (``{"mean": [..], "cov": [[..], [..]], "gamma0": ..}``);
        ValueError with one line when it is malformed or not a valid Gaussian."""
        if not isinstance(raw, dict):
            raise ValueError("the request carries no prior (a mapping with mean, cov and gamma0)")
        try:
            mean = _pair(raw["mean"])
            cov = (_pair(raw["cov"][0]), _pair(raw["cov"][1]))
            gamma0 = float(raw["gamma0"])
        except (KeyError, IndexError, TypeError, ValueError):
            raise ValueError("the prior needs mean [2], cov [2][2] and gamma0 as numbers") from None
        if not all(math.isfinite(v) for v in (*mean, *cov[0], *cov[1], gamma0)):
            raise ValueError("the prior holds NaN or infinite values")
        if cov[0][1] != cov[1][0] or cov[0][0] < 0 or cov[1][1] < 0 or cov[0][0] * cov[1][1] < cov[0][1] ** 2:
            raise ValueError("the prior covariance is not symmetric positive semi-definite")
        return Prior(mean, cov, gamma0)


def _pair(v: object) -> tuple[float, float]:
    if not isinstance(v, Sequence) or isinstance(v, str) or len(v) != 2:
        raise ValueError("not a pair")
    return float(v[0]), float(v[1])


@dataclass(frozen=True, slots=True)
class Belief:
    mean: tuple[float, float]
    cov: tuple[tuple[float, float], tuple[float, float]]

    @property
    def tau_mean(self) -> float:
        return self.mean[1]

    @property
    def tau_sd(self) -> float:
        return math.sqrt(max(self.cov[1][1], 0.0))


def prior_belief(prior: Prior) -> Belief:
    return Belief(prior.mean, prior.cov)


def update(prior: Prior, x: float, yhat: float, se: float) -> Belief:
    """The closed-form posterior over (beta, tau) after seeing the prediction ``yhat`` (standard
    error ``se``) for a patient with feature ``x`` (see the module docstring). A prediction that
    carries no information under the agent's beliefs (``v == 0``) leaves the prior unchanged."""
    if not all(math.isfinite(v) for v in (x, yhat, se)) or se < 0:
        raise ValueError("the prediction, its standard error and x must be finite (se >= 0)")
    (s11, s12), (s21, s22) = prior.cov
    h1, h2 = x, prior.gamma0 * x
    sh1, sh2 = s11 * h1 + s12 * h2, s21 * h1 + s22 * h2  # S h
    v = h1 * sh1 + h2 * sh2 + se * se
    if v <= 0.0:
        return prior_belief(prior)
    r = (yhat - (h1 * prior.mean[0] + h2 * prior.mean[1])) / v
    mean = (prior.mean[0] + sh1 * r, prior.mean[1] + sh2 * r)
    cov = ((s11 - sh1 * sh1 / v, s12 - sh1 * sh2 / v), (s21 - sh2 * sh1 / v, s22 - sh2 * sh2 / v))
    return Belief(mean, cov)
