"""The 2-Step Agent's closed-form posterior: equal to Monte Carlo within its CI (importance
sampling under the stated likelihood), calibrated on worlds drawn from the simulator itself (the
full pipeline: historical data, least-squares ML model, prediction), and the structural
properties the headline rests on (no update on the effect when the policy belief is 0, a
sign-flipped update when it is flipped)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import math  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402

from harness.tasks.decision.posterior import Prior, update  # noqa: E402
from harness.tasks.decision.world import POPULATION_MEAN, POPULATION_SD, WorldConfig, simulate  # noqa: E402

CASES = [  # (prior mean, prior cov, gamma0, x, yhat, se): correlated and independent priors, both signs
    ((1.0, 0.2), ((1.0, 0.0), (0.0, 1.0)), 1.0, 0.8, 2.1, 0.15),
    ((0.5, -0.3), ((0.8, 0.3), (0.3, 1.5)), -0.7, -1.3, 0.4, 0.5),
    ((0.0, 1.0), ((2.0, -0.6), (-0.6, 0.5)), 2.0, 0.3, -0.2, 0.05),
]


def _importance_posterior(prior: Prior, x: float, yhat: float, se: float, n: int = 400_000, seed: int = 0):
    """Self-normalised importance sampling from the prior, weighted by N(yhat; h'theta, se^2):
    posterior mean of (beta, tau), E[tau^2], and their Monte Carlo standard errors."""
    rng = np.random.default_rng(seed)
    theta = rng.multivariate_normal(prior.mean, prior.cov, size=n)
    mu = theta[:, 0] * x + theta[:, 1] * prior.gamma0 * x
    logw = -0.5 * ((yhat - mu) / se) ** 2
    w = np.exp(logw - logw.max())
    w /= w.sum()
    out = {}
    for name, f in (("beta", theta[:, 0]), ("tau", theta[:, 1]), ("tau2", theta[:, 1] ** 2)):
        est = float(w @ f)
        out[name] = (est, float(math.sqrt(np.sum(w**2 * (f - est) ** 2))))
    return out


@pytest.mark.parametrize("case", CASES)
def test_closed_form_equals_monte_carlo_within_its_ci(case):
    mean, cov, gamma0, x, yhat, se = case
    prior = Prior(mean, cov, gamma0)
    post = update(prior, x, yhat, se)
    mc = _importance_posterior(prior, x, yhat, se)
    second = post.cov[1][1] + post.mean[1] ** 2
    for got, (est, err) in ((post.mean[0], mc["beta"]), (post.mean[1], mc["tau"]), (second, mc["tau2"])):
        assert abs(got - est) < 4 * err, (got, est, err)
    # and the update is real: the data moved the belief by many Monte Carlo errors
    assert abs(post.mean[1] - mean[1]) > 20 * mc["tau"][1]


def test_posterior_is_calibrated_on_worlds_from_the_simulator():
    """For the aligned agent the simulator *is* its generative model (prior = population, gamma0 =
    gamma), so on its worlds the posterior must be calibrated: the standardised errors
    (tau - E[tau|yhat]) / sd[tau|yhat] have mean 0 and variance 1, and regressing tau on the
    posterior mean has slope 1. This runs the whole pipeline: historical policy, outcomes,
    least-squares ML model, prediction and its standard error."""
    w = simulate(6000, 11, WorldConfig(gamma=1.0, n_train=60))
    prior = Prior(POPULATION_MEAN, ((POPULATION_SD[0] ** 2, 0.0), (0.0, POPULATION_SD[1] ** 2)), 1.0)
    posts = [update(prior, x, y, s) for x, y, s in zip(w["x"], w["yhat"], w["se"], strict=True)]
    m = np.array([p.tau_mean for p in posts])
    sd = np.array([p.tau_sd for p in posts])
    z = (w["tau"] - m) / sd
    n = len(z)
    assert abs(z.mean()) < 4 / math.sqrt(n)
    assert abs(z.var() - 1.0) < 0.08  # the var of a var estimate at n = 6000 is ~0.018 sd; plug-in se adds a little
    slope = np.cov(w["tau"], m)[0, 1] / m.var(ddof=1)
    assert abs(slope - 1.0) < 0.06
    # the ML model is well specified: its prediction errors over its reported se are standard normal
    e = (w["yhat"] - w["x"] * (w["beta"] + 1.0 * w["tau"])) / w["se"]
    assert abs(e.mean()) < 4 / math.sqrt(n) and abs(e.std() - 1.0) < 0.05


def test_policy_belief_decides_what_the_prediction_says_about_the_effect():
    prior = Prior((1.0, 0.2), ((1.0, 0.0), (0.0, 1.0)), 1.0)
    up = update(prior, 0.9, 3.0, 0.1)
    flipped = update(Prior(prior.mean, prior.cov, -1.0), 0.9, 3.0, 0.1)
    blind = update(Prior(prior.mean, prior.cov, 0.0), 0.9, 3.0, 0.1)
    # the same evidence moves the effect up for gamma0 = 1 and down for gamma0 = -1 ...
    assert up.tau_mean > prior.mean[1] + 0.5 and flipped.tau_mean < prior.mean[1] - 0.5
    # ... and not at all when the agent believes the policy ignored x (independent prior)
    assert blind.tau_mean == prior.mean[1] and blind.cov[1][1] == prior.cov[1][1]
    assert blind.mean[0] > prior.mean[0]  # it learns about beta instead
    # information never increases the posterior variance; no information leaves the prior
    assert up.cov[1][1] < prior.cov[1][1] and up.cov[0][0] < prior.cov[0][0]
    vague = update(prior, 0.9, 3.0, 1e6)
    assert vague.tau_mean == pytest.approx(prior.mean[1], abs=1e-9)
    assert update(prior, 0.0, 0.0, 0.0).mean == prior.mean  # x = 0, se = 0: nothing to learn


def test_malformed_priors_and_predictions_are_one_line_errors():
    good = {"mean": [1.0, 0.2], "cov": [[1.0, 0.0], [0.0, 1.0]], "gamma0": 1.0}
    assert Prior.parse(good).gamma0 == 1.0
    for bad, msg in (({**good, "cov": [[1.0, 2.0], [2.0, 1.0]]}, "positive semi-definite"),
                     ({**good, "mean": [1.0]}, "mean \\[2\\]"), ({**good, "gamma0": float("nan")}, "NaN"),
                     ("aligned", "no prior")):
        with pytest.raises(ValueError, match=msg):
            Prior.parse(bad)
    with pytest.raises(ValueError, match="finite"):
        update(Prior.parse(good), 1.0, float("nan"), 0.1)
