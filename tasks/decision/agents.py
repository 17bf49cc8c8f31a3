"""The three decision makers, as pure functions of what one agent sees (its prior, the patient's
feature, the tool's prediction and standard error, the cost of treating).

* ``bayes`` (the 2-Step Agent): step 1 updates the prior with the closed-form posterior of
  ``posterior.update``; step 2 treats iff the posterior mean effect exceeds the cost.
* ``no_support``: never sees the tool; treats iff the *prior* mean effect exceeds the cost. The
  task's scorer uses this same rule for its baseline, so ``outcome_gain`` is exactly "this agent's
  outcome minus the outcome the same agent would have had without decision support".
* ``naive``: takes the prediction at face value — as exact (no estimation noise) and as if every
  deviation from what it expected came from the treatment effect (``beta`` held at its prior
  mean). Under the same beliefs it over-reacts where the Bayesian weighs the evidence. This is our
  baseline, not one the paper defines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.tasks.decision.posterior import Belief, Prior, prior_belief, update

AGENTS = ("bayes", "no_support", "naive")


@dataclass(frozen=True, slots=True)
class View:
    """What one agent observes."""

    prior: Prior
    x: float
    yhat: float
    se: float
    cost: float

    @staticmethod
    def parse(opts: dict[str, Any]) -> View:
        try:
            x, yhat, se, cost = (float(opts[k]) for k in ("x", "yhat", "se", "cost"))
        except KeyError as exc:
            raise ValueError(f"the request lacks {exc.args[0]!r}") from None
        except (TypeError, ValueError):
            raise ValueError("x, yhat, se and cost must be numbers") from None
        return View(Prior.parse(opts.get("prior")), x, yhat, se, cost)


def _bayes(v: View) -> Belief:
    return update(v.prior, v.x, v.yhat, v.se)


def _no_support(v: View) -> Belief:
    return prior_belief(v.prior)


def _naive(v: View) -> Belief:
    # beta pinned at its prior mean (zero variance) and the prediction taken as exact (se = 0)
    pinned = Prior(v.prior.mean, ((0.0, 0.0), (0.0, v.prior.cov[1][1])), v.prior.gamma0)
    return update(pinned, v.x, v.yhat, 0.0)


BELIEFS: dict[str, Callable[[View], Belief]] = {"bayes": _bayes, "no_support": _no_support, "naive": _naive}


def treats(belief: Belief, cost: float) -> bool:
    """Step 2: treat iff the expected effect beats the cost (a risk-neutral agent)."""
    return belief.tau_mean > cost


def decide(agent: str, view: View) -> dict[str, Any]:
    """The agent's reply: its decision and its belief about the treatment effect."""
    belief = BELIEFS[agent](view)
    return {"treat": treats(belief, view.cost), "tau_mean": belief.tau_mean, "tau_sd": belief.tau_sd}
