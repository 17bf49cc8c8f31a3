"""The linear-Gaussian world of the 2-Step Agent: a population of settings, a historical policy,
outcomes, and an ML model trained on the historical data.

For agent i (one clinic, say) the world draws its own coefficients from the population,
``beta_i ~ N(m_beta, s_beta^2)`` and ``tau_i ~ N(m_tau, s_tau^2)`` (independent), then

* historical data, ``n_train`` rows: ``X ~ N(0, 1)``, treatment by the historical policy
  ``A = gamma X + u`` with ``u ~ N(0, 1)``, outcome ``Y = beta_i X + tau_i A + eps``, ``eps ~ N(0, 1)``;
* the ML model: least squares of ``Y`` on ``X`` through the origin (the tool predicts the outcome
  from the patient's features, not from the treatment). ``E[Y | X] = (beta + gamma tau) X`` exactly,
  so the model is well specified: its slope is unbiased for ``beta + gamma tau`` and its reported
  standard error ``s / sqrt(sum X^2)`` is calibrated;
* a new patient ``x ~ N(0, 1)`` with the tool's prediction ``yhat = slope * x`` and its standard
  error ``se = |x| s / sqrt(sum X^2)``; and that patient's outcome noise ``eps_new ~ N(0, 1)``.

The decision maker then chooses a in {0, 1} for the new patient and receives
``Y(a) - cost a = beta x + tau a + eps_new - cost a``. The arrays are drawn in one vectorised pass
from one seeded generator, so a seed fixes every agent's world whatever the agent count's batching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

POPULATION_MEAN = (1.0, 0.2)  # (beta, tau): the average setting; treating helps a little on average
POPULATION_SD = (1.0, 1.0)
_CHUNK = 2048  # agents per vectorised block: bounds memory at n_agents x n_train floats per block


@dataclass(frozen=True, slots=True)
class WorldConfig:
    gamma: float = 1.0  # the true historical policy: how strongly X drove past treatment
    n_train: int = 100  # historical rows the ML model is trained on
    cost: float = 0.0  # cost of treating, on the outcome's scale


def simulate(n_agents: int, seed: int, config: WorldConfig) -> dict[str, Any]:
    """Every agent's world: truths (``beta``, ``tau``, ``eps``) and what the tool shows (``x``,
    ``yhat``, ``se``, plus ``slope`` for diagnostics), as float arrays of length ``n_agents``."""
    import numpy as np

    rng = np.random.default_rng([seed, 2])  # 2: the family's stream tag, so seeds never collide with others'
    parts: dict[str, list[Any]] = {k: [] for k in ("beta", "tau", "x", "yhat", "se", "slope", "eps")}
    for start in range(0, n_agents, _CHUNK):
        n = min(_CHUNK, n_agents - start)
        beta = rng.normal(POPULATION_MEAN[0], POPULATION_SD[0], n)
        tau = rng.normal(POPULATION_MEAN[1], POPULATION_SD[1], n)
        X = rng.normal(size=(n, config.n_train))
        A = config.gamma * X + rng.normal(size=X.shape)
        Y = beta[:, None] * X + tau[:, None] * A + rng.normal(size=X.shape)
        sxx = (X * X).sum(axis=1)
        slope = (X * Y).sum(axis=1) / sxx
        resid = Y - slope[:, None] * X
        s2 = (resid * resid).sum(axis=1) / (config.n_train - 1)
        x = rng.normal(size=n)
        for key, val in (("beta", beta), ("tau", tau), ("x", x), ("yhat", slope * x),
                         ("se", np.abs(x) * np.sqrt(s2 / sxx)), ("slope", slope), ("eps", rng.normal(size=n))):
            parts[key].append(val)
    return {k: np.concatenate(v) for k, v in parts.items()}
