"""``ocp:<method>``: multi-level online conformal backends, one whole stream per request.

Methods (see ``learners.py``): ``pnorm`` (p-norm online mirror descent, p = 1 + 1/ln d) and ``up``
(coordinate-wise universal portfolio), both with lazy isotonic projection; baselines ``ogd``
(independent per-level OGD, no projection), ``ogd_sorted`` (eagerly projected state), ``ogd_lazy``
(OGD with lazy projection), ``aci`` (adaptive conformal inference per level, unclipped as its authors'
code: a set may be the whole line or empty), ``aci_clipped`` (MAPIE's clip of alpha_t to [0, 1]),
``dtaci`` (Gibbs & Candes' dynamically-tuned ACI: ACI experts over a grid of step sizes, exponential weights)
and ``saocp`` (Bhatnagar et al.'s strongly adaptive OCP: scale-free OGD experts on geometric intervals).

Settings (``-M``): ``lr`` (ogd*, pnorm: step = lr x burn-in score scale, default 0.05), ``wealth`` (up:
initial wealth in units of the score scale, 0.05), ``grid`` (up: betting fractions, 201), ``gamma``
(aci, aci_clipped: 0.005), ``sigma`` and ``eta`` (dtaci: mixing and learning rates, 0.001 and 2.72),
``lifetime`` (saocp: expert lifetime multiplier, a whole number, 8). A request whose stream has NaN/inf
values, or bad levels/forecaster, gets an error output naming the problem; the other streams of the run go on.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.conformal.forecasters import FORECASTERS
from harness.tasks.conformal.learners import DEFAULTS, METHODS
from harness.tasks.conformal.online import encode, run_online
from harness.tasks.conformal.streams import nan_steps, parse_levels
from harness.types import Output, Request, Usage, options_part

PositiveFloat = Annotated[float, Field(gt=0)]
# every method's keys (the union is what ``@model`` declares); a key of another method is refused by
# _settings, naming the ones this method takes
SETTINGS = {
    "lr": Setting(PositiveFloat, DEFAULTS["pnorm"]["lr"], "ogd*, pnorm: step = lr x the burn-in score scale",
                  expect="a positive number"),
    "wealth": Setting(PositiveFloat, DEFAULTS["up"]["wealth"], "up: initial wealth in units of the score scale",
                      expect="a positive number"),
    "grid": Setting(PositiveInt, DEFAULTS["up"]["grid"], "up: betting fractions"),
    "gamma": Setting(PositiveFloat, DEFAULTS["aci"]["gamma"], "aci, aci_clipped: step size",
                     expect="a positive number"),
    "sigma": Setting(Annotated[float, Field(gt=0, le=1)], DEFAULTS["dtaci"]["sigma"], "dtaci: mixing rate",
                     expect="a mixing rate in (0, 1]"),
    "eta": Setting(PositiveFloat, DEFAULTS["dtaci"]["eta"], "dtaci: learning rate", expect="a positive number"),
    "lifetime": Setting(PositiveInt, DEFAULTS["saocp"]["lifetime"], "saocp: expert lifetime multiplier",
                        expect="a whole number >= 1"),
}


def _stream_options(request: Request) -> dict[str, Any]:
    return options_part(request.messages, "stream", "the request carries no stream")


@dataclass
class OnlineConformal(Backend):
    method: str
    settings: dict[str, float] = field(default_factory=dict)
    spec: str = ""
    cacheable: bool = False  # a run is cheap and its reply is large: a cache would only double the storage

    def run_one(self, request: Request) -> Output:
        try:
            opts = _stream_options(request)
            stream = [float(v) for v in opts["stream"]]
            bad = nan_steps(stream)
            if bad:
                shown = ", ".join(map(str, bad[:5])) + (" ..." if len(bad) > 5 else "")
                return Output(error=f"the stream has {len(bad)} non-finite values (steps {shown})")
            levels = parse_levels(opts.get("levels"))
            forecaster = str(opts.get("forecaster", "ar"))
            if forecaster not in FORECASTERS:
                return Output(error=f"unknown forecaster {forecaster!r}; choose one of {', '.join(FORECASTERS)}")
            burn_in = int(opts.get("burn_in", 100))
            if not 2 <= burn_in < len(stream):
                return Output(error=f"burn_in {burn_in} must be at least 2 and shorter than the stream ({len(stream)})")
            res = run_online(stream, [1.0 - v for v in levels], self.method, forecaster, burn_in, self.settings)
        except (ValueError, TypeError, KeyError) as exc:
            return Output(error=f"{self.spec}: {exc}")
        pred = {"yhat": encode(res.yhat), "q": encode(res.q), "T": len(res.yhat), "d": len(levels),
                "burn_in": burn_in, "seconds": res.seconds}
        return Output(text=f"{len(res.yhat)} steps x {len(levels)} levels", prediction=pred,
                      usage=Usage(calls=1, seconds=res.seconds), details={"method": self.spec})

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [self.run_one(r) for r in requests]


def _settings(method: str, settings: dict[str, Any]) -> dict[str, float]:
    """The method's settings, typed by the declaration; a key of another method is refused."""
    for key in settings:
        if key in SETTINGS and key not in DEFAULTS[method]:
            raise ValueError(f"ocp:{method}: setting {key!r} does not apply (it takes {', '.join(DEFAULTS[method])})")
    # a factory called directly is checked too (build_model checked the union already)
    checked = validate_settings(f"ocp:{method}", settings, {k: SETTINGS[k] for k in DEFAULTS[method]})
    return {k: v for k, v in checked.items() if k in SETTINGS}


@model("ocp", kind="method",
       description="Multi-level online conformal prediction: ocp:pnorm | up | ogd | ogd_sorted | ogd_lazy "
                   "| aci | aci_clipped | dtaci | saocp", settings=SETTINGS, strict=True)
def ocp(path: str | None, **settings: Any) -> OnlineConformal:
    method = path or "pnorm"
    if method not in METHODS:
        close = difflib.get_close_matches(method, METHODS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown ocp method {method!r}{hint} (choose one of {', '.join(METHODS)})")
    cfg = _settings(method, settings)
    shown = "&".join(f"{k}={v:g}" for k, v in sorted(cfg.items()))
    return OnlineConformal(method, cfg, f"ocp:{method}" + (f"?{shown}" if shown else ""))
