"""The ``twostep`` task: ML decision support in the linear-Gaussian world of the 2-Step Agent.

One sample is one agent facing one new patient (see ``world.py`` for how its world, the
historical data and the ML model are drawn). The request shows the agent only what it would see:
its prior (coefficient means and covariance, its belief ``gamma0`` about the historical policy),
the patient's feature, the tool's prediction with its standard error, and the cost of treating.
The truths (``beta``, ``tau``, the patient's outcome noise) stay in the sample.

``-T prior=`` sets the agents' beliefs. Every prior matches the population the worlds are drawn
from on the coefficients; they differ in the single belief about the historical policy:
``aligned`` (``gamma0 = gamma``, the truth), ``misaligned`` (``gamma0 = -gamma``: the agent thinks
past treatment went the other way) and ``uninformative`` (``gamma0 = 0``: the agent thinks past
treatment ignored the feature, so the prediction says nothing to it about the effect).
``-T gamma0=`` overrides the belief directly for sweeps.

Scores, recomputed from the agent's decision and the hidden truths:
``outcome_gain`` (realised outcome minus the outcome of the same agent without decision support,
``(tau - cost)(a - a_no_support)``; the mean carries a bootstrap CI over agents),
``decision_accuracy`` (share of agents whose decision is the one they would take knowing ``tau``),
``posterior_error`` (``|E[tau | what it saw] - tau|``), ``outcome`` and ``treat_rate``.
"""

from __future__ import annotations

import difflib
import functools
import hashlib
import math
from typing import Any

from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.decision.agents import View, treats
from harness.tasks.decision.posterior import prior_belief
from harness.tasks.decision.world import POPULATION_MEAN, POPULATION_SD, WorldConfig, simulate
from harness.types import (
    GenerationConfig,
    Message,
    MetricInfo,
    Output,
    Part,
    Request,
    Sample,
    Score,
    higher,
    lower,
    neutral,
    options_part,
    stable_hash,
)

VERSION = "1"
PRIORS = ("aligned", "misaligned", "uninformative")
MAX_AGENTS = 200_000
METRICS: dict[str, MetricInfo] = {
    "outcome_gain": higher("Outcome gain over no support", scale="raw"),
    "decision_accuracy": higher("Decision accuracy (vs knowing the effect)"),
    "posterior_error": lower("|E[effect | seen] - effect|"),
    "outcome": higher("Realised outcome minus treatment cost", scale="raw"),
    "treat_rate": neutral("Share of agents treating", scale="fraction"),
}


def policy_belief(prior: str, gamma: float, gamma0: float | None) -> float:
    if prior not in PRIORS:
        close = difflib.get_close_matches(prior, PRIORS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown prior {prior!r}{hint} (choose aligned, misaligned or uninformative)")
    if gamma0 is not None:
        return gamma0
    return {"aligned": gamma, "misaligned": -gamma, "uninformative": 0.0}[prior]


def view_options(sample: Sample) -> dict[str, Any]:
    return options_part(sample.messages, "prior", "the sample carries no decision problem")


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    pred = output.prediction
    if not isinstance(pred, dict) or not isinstance(pred.get("treat"), bool):
        return Score.not_scored("the reply holds no treatment decision")
    view = View.parse(view_options(sample))
    beta, tau, eps = (float(sample.target[k]) for k in ("beta", "tau", "eps"))
    a = float(pred["treat"])
    a0 = float(treats(prior_belief(view.prior), view.cost))  # the same agent without support
    values = {"outcome_gain": (tau - view.cost) * (a - a0),
              "decision_accuracy": float(pred["treat"] == (tau > view.cost)),
              "outcome": beta * view.x + (tau - view.cost) * a + eps,
              "treat_rate": a}
    if isinstance(pred.get("tau_mean"), int | float):
        values["posterior_error"] = abs(float(pred["tau_mean"]) - tau)
    return Score(values=values)


def _prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=1))


def build_samples(n_agents: int, seeds: range, config: WorldConfig, gamma0: float) -> list[Sample]:
    prior = {"mean": list(POPULATION_MEAN), "cov": [[POPULATION_SD[0] ** 2, 0.0], [0.0, POPULATION_SD[1] ** 2]],
             "gamma0": gamma0}
    samples = []
    for s in seeds:
        w = simulate(n_agents, s, config)
        for i in range(n_agents):
            opts = {"prior": prior, "x": float(w["x"][i]), "yhat": float(w["yhat"][i]), "se": float(w["se"][i]),
                    "cost": config.cost}
            text = (f"A patient with feature x = {opts['x']:.4g}; the ML tool predicts outcome {opts['yhat']:.4g} "
                    f"(standard error {opts['se']:.3g}). Treat (cost {config.cost:g})?")
            samples.append(Sample(id=f"seed{s}-agent{i:06d}",
                                  messages=[Message("user", [Part("text", text=text, options=opts)])],
                                  target={k: float(w[k][i]) for k in ("beta", "tau", "eps")},
                                  metadata={"seed": s}))
    return samples


def _number(name: str, value: Any, kind: type) -> Any:
    try:
        out = kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a{'n integer' if kind is int else ' number'}, got {value!r}") from None
    if kind is float and not math.isfinite(out):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return out


@task("twostep", description="2-Step Agent: Bayesian decision makers using an ML prediction in a linear-Gaussian "
      "world (-T prior=aligned|misaligned|uninformative n_agents= seed= seeds= n_train= gamma= cost= gamma0=)",
      family="decision")
def twostep(prior: str = "aligned", n_agents: int = 2000, seed: int = 0, seeds: int = 1, n_train: int = 100,
            gamma: float = 1.0, cost: float = 0.0, gamma0: float | None = None) -> Task:
    """One agent per sample facing one new patient with an ML prediction.

    Data: generated by the family's seeded linear-Gaussian simulator (no files)
    Licence: none needed (generated data)

    ``prior``: the agents' belief about the historical policy (aligned: the truth, misaligned: its
    negative, uninformative: 0); ``n_agents``: agents (worlds) per seed; ``seed``: first seed;
    ``seeds``: number of seeds, each a fresh population; ``n_train``: historical rows the ML model
    is fitted on; ``gamma``: the true historical policy; ``cost``: cost of treating;
    ``gamma0``: set the policy belief directly (overrides the prior's).
    """
    prior = str(prior)
    n_agents, seed, seeds, n_train = (_number(k, v, int) for k, v in
                                      (("n_agents", n_agents), ("seed", seed), ("seeds", seeds), ("n_train", n_train)))
    gamma, cost = _number("gamma", gamma, float), _number("cost", cost, float)
    g0 = None if gamma0 is None else _number("gamma0", gamma0, float)
    belief = policy_belief(prior, gamma, g0)
    if not 1 <= n_agents * seeds <= MAX_AGENTS or seeds < 1:
        raise ValueError(f"need n_agents >= 1, seeds >= 1 and n_agents x seeds <= {MAX_AGENTS}, "
                         f"got n_agents={n_agents} seeds={seeds}")
    if n_train < 3:
        raise ValueError(f"n_train must be at least 3 historical rows, got {n_train}")
    if gamma == 0 and prior == "misaligned" and g0 is None:
        raise ValueError("with gamma=0 a misaligned policy belief (-gamma) equals the truth; set gamma != 0")
    config = WorldConfig(gamma=gamma, n_train=n_train, cost=cost)
    options = {"prior": prior, "n_agents": n_agents, "seed": seed, "seeds": seeds, "n_train": n_train,
               "gamma": gamma, "cost": cost, "gamma0": belief}

    @functools.cache
    def load() -> tuple[Sample, ...]:
        return tuple(build_samples(n_agents, range(seed, seed + seeds), config, belief))

    # the samples are a function of the options and the simulator's code version, so the digest
    # needs no pass over the data (which, at 10^5 agents, would cost more than the run)
    code = hashlib.sha256(repr((POPULATION_MEAN, POPULATION_SD)).encode()).hexdigest()[:12]
    return Task(version=VERSION, load=lambda: list(load()), prompt=_prompt, score=score,
                primary_metric="outcome_gain", metrics=METRICS, breakdowns=("seed",) if seeds > 1 else (),
                content_hash=stable_hash({"v": VERSION, "world": code, "options": options}), options=options)
