"""Transport backends: ``omt:auto|gaussian|poisson`` and the POT baselines ``pot:gmm|emd|sinkhorn``.

Each request is one transport problem (see ``tasks.py``); the reply labels every target point
(``prediction["labels"]``) and reports cost, restart spread, stability and seconds. Settings
(``-M``): ``k`` (target components; default: the number of source classes), ``reg`` (entropic eps
relative to the median cost for omt (0.01), to the largest cost for sinkhorn (0.05);
``reg=0`` makes omt's coupling step exact),
``rho`` (omt: alignment ridge, relative, 0.1), ``align`` (omt: learn the alignment, true),
``anneal`` (omt: eps continuation, true), ``restarts`` (10), ``stability`` (3 subsampled refits),
``seed`` (0), ``max_iter`` (500 EM iterations). A mixture fit that does not converge, or bad data,
is that sample's error.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.backend_settings import NonNegativeFloat, NonNegativeInt, PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.types import Output, Request, Usage

# omt and pot take the same keys (a method reads those it uses)
SETTINGS = {
    "k": Setting(PositiveInt | None, None, "target mixture components (default: the number of source classes)"),
    "reg": Setting(NonNegativeFloat | None, None, "entropic eps, relative to the median cost for omt (default 0.01; "
                   "0: exact coupling step) and to the largest cost for sinkhorn (default 0.05)"),
    "rho": Setting(NonNegativeFloat, 0.1, "omt: alignment ridge, relative"),
    "align": Setting(bool, True, "omt: learn the alignment"),
    "anneal": Setting(bool, True, "omt: eps continuation from 100x the target eps"),
    "restarts": Setting(PositiveInt, 10, "restarts (their spread is reported)"),
    "stability": Setting(NonNegativeInt, 3, "subsampled refits for the stability score"),
    "seed": Setting(int, 0, "mixture fit and restart seed"),
    "max_iter": Setting(PositiveInt, 500, "EM iterations of the mixture fit"),
}


def _parse(spec: str, settings: dict[str, Any]) -> dict[str, Any]:
    """The method's settings, typed (a factory called directly is checked too); the generation keys
    are the model client's, except the seed, which is also the method's."""
    checked = validate_settings(spec, settings, SETTINGS)
    return {k: v for k, v in checked.items() if k in SETTINGS and v is not None}


@dataclass
class TransportModel(Backend):
    method: str
    kind: str  # auto | gaussian | poisson
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""

    def run_one(self, request: Request) -> Output:
        import numpy as np

        from harness.tasks.transport.methods import Problem, run_method
        from harness.tasks.transport.mixtures import MixtureFitError
        from harness.tasks.transport.tasks import problem_part

        try:
            opts = problem_part(request.messages)
            Xs, Xt = np.asarray(opts["source"], float), np.asarray(opts["target"], float)
            ys = np.asarray(opts["source_labels"], int)
            if Xs.ndim != 2 or Xt.ndim != 2 or Xs.shape[1] != Xt.shape[1] or len(ys) != len(Xs):
                return Output(error="source and target must be [n, d] arrays with one d and a label per source point")
            if not (np.isfinite(Xs).all() and np.isfinite(Xt).all()):
                return Output(error="the source or target points contain NaN/inf values")
            kind = str(opts.get("kind", "gaussian")) if self.kind == "auto" else self.kind
            res = run_method(Problem(Xs, ys, Xt, kind), self.method, self.settings)
        except (MixtureFitError, ValueError, KeyError, np.linalg.LinAlgError) as exc:
            return Output(error=f"{self.spec}: {exc}")
        return Output(text=f"{len(res['labels'])} target labels", prediction=res,
                      usage=Usage(calls=1, seconds=res["seconds"]), details={"method": self.spec})

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [self.run_one(r) for r in requests]


@model("omt", kind="method",
       description="Optimal Mixture Transport (biconvex mixture-level OT): omt:auto | gaussian | poisson",
       settings=SETTINGS, strict=True)
def omt(path: str | None, **settings: Any) -> TransportModel:
    kind = path or "auto"
    if kind not in ("auto", "gaussian", "poisson"):
        raise ValueError(f"unknown omt variant {kind!r}; choose auto, gaussian or poisson")
    spec = f"omt:{kind}"
    return TransportModel("omt", kind, _parse(spec, settings), spec)


@model("pot", kind="method",
       description="POT baselines: pot:gmm (Delon-Desolneux MW2) | pot:emd (exact OT) | pot:sinkhorn",
       settings=SETTINGS, strict=True)
def pot(path: str | None, **settings: Any) -> TransportModel:
    variant = path or "gmm"
    if variant not in ("gmm", "emd", "sinkhorn"):
        close = difflib.get_close_matches(variant, ["gmm", "emd", "sinkhorn"], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ValueError(f"unknown pot variant {variant!r}{hint} (choose gmm, emd or sinkhorn)")
    spec = f"pot:{variant}"
    return TransportModel(f"pot_{variant}", "auto", _parse(spec, settings), spec)
