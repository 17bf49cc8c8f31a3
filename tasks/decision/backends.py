"""Decision-maker backends: ``twostep:bayes`` (the 2-Step Agent), ``twostep:no_support`` (prior
only) and ``twostep:naive`` (takes the prediction at face value); see ``agents.py``.

Each request is one agent's view (see ``tasks.py``); the reply's prediction is
``{"treat": bool, "tau_mean": float, "tau_sd": float}``. A malformed view (no prior, a covariance
that is not positive semi-definite, a NaN prediction) is that sample's error row. The backends
take no ``-M`` settings beyond the generation keys every backend accepts.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.decision.agents import AGENTS, View, decide
from harness.types import Output, Request, Usage, options_part


def _view_options(request: Request) -> dict[str, Any]:
    return options_part(request.messages, "prior", "the request carries no decision problem")


@dataclass
class DecisionMaker(Backend):
    agent: str
    spec: str
    batch_size: int = 256
    cacheable: bool = False  # answering is cheaper than a cache lookup

    def run_one(self, request: Request) -> Output:
        try:
            reply = decide(self.agent, View.parse(_view_options(request)))
        except ValueError as exc:
            return Output(error=f"{self.spec}: {exc}")
        return Output(text="treat" if reply["treat"] else "do not treat", prediction=reply, usage=Usage(calls=1))

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [self.run_one(r) for r in requests]


@model("twostep", kind="agent", description="2-Step Agent decision makers: twostep:bayes | no_support | naive",
       settings={}, strict=True)
def twostep(path: str | None, **settings: Any) -> DecisionMaker:
    agent = path or "bayes"
    if agent not in AGENTS:
        close = difflib.get_close_matches(agent, AGENTS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown twostep agent {agent!r}{hint} (choose bayes, no_support or naive)")
    spec = f"twostep:{agent}"
    validate_settings(spec, settings, {})  # only the generation keys; a factory called directly is checked too
    return DecisionMaker(agent, spec)
