"""Bounding backends for ``causal_bounds`` (each request carries its own data, so there is no fit step).
Every backend answers every query of scm.QUERIES: the interventional ``ate``/``pyx`` and the
counterfactual ``ett``/``pn``/``ps``/``pns`` (counterfactual.py).

- ``pncm``: the P-NCM. From the request's PAG, the class of causal diagrams with that PAG is
  enumerated and checked with causal-learn's dag2pag (graphs.py); one NCM per maximal member is
  fitted to the observed distribution and pushed to the query's minimum and maximum (ncm.py); the
  bounds are the union over members that fit the data.
  With ``-M class=param`` no class is enumerated: one minimising and one maximising NCM (``restarts``
  each) learn their diagram over the class, Gumbel-max draws of edge-type logits per PAG adjacency,
  NOTEARS' acyclicity penalty, the dag2pag membership test on every drawn and
  the final structure (pncm_param.py); ``struct_lr`` (0.05), ``struct_share`` (0.4) and
  ``struct_grad`` (local | st) set the logits' step, the share of lambda's anneal they learn over
  and their gradient. The reply adds ``class``,
  ``lower_structure`` / ``upper_structure`` (the diagrams the ends came from), ``nonmember_modes``
  (replicas whose logits' mode left the class) and ``redrawn`` (share of draws outside the class).
- ``ncm:known_graph``: the same NCM on the true diagram (the oracle that knows the graph).
- ``bounds:lp``: the sharp response-function LP bounds on the observed distribution (``-M
  information=pag`` (default): union over the PAG's maximal members; ``known_graph``: the true
  diagram; for counterfactual queries lp_counterfactual.py, and ``sharp: false`` in the reply where
  it had to merge c-components); ``bounds:manski``: the no-assumption bounds (for counterfactual
  queries Tian & Pearl's bounds from P(x, y) alone).

NCM settings (``-M``): ``iters`` (1000), ``lr`` (4e-3), ``width`` (16), ``latent_dim`` (4),
``latent_points`` (32), ``lam_start`` (1), ``lam_end`` (1e-3), ``anneal`` (0.6), ``restarts`` (2 per
sense), ``kl_tol`` (5e-4), ``seed`` (0), ``atom_scale`` (0: 1 for ate/pyx, 4 for counterfactual
queries). The reply's ``prediction``: ``lower``, ``upper``,
``information`` (pag | known_graph),
``diagrams`` (members used), ``trained`` (NCMs trained), ``kl`` (worst kept fit), ``seconds``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import Field

from harness.backend_settings import NonNegativeFloat, PositiveInt, Probability, Setting
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.causal.ncm import NCMConfig
from harness.tasks.causal.pncm_param import STRUCT_LR, STRUCT_SHARE
from harness.types import Output, Request, Usage

_LP_TOL_SAMPLE = 0.02  # a member is kept if its least L1 violation is within this of the best member's
PositiveFloat = Annotated[float, Field(gt=0)]
_NCM = NCMConfig()
NCM_SETTINGS = {
    "iters": Setting(PositiveInt, _NCM.iters, "training iterations per NCM"),
    "lr": Setting(PositiveFloat, _NCM.lr, "learning rate"),
    "width": Setting(PositiveInt, _NCM.width, "hidden units of each mechanism"),
    "latent_dim": Setting(PositiveInt, _NCM.latent_dim, "latent noise dimension"),
    "latent_points": Setting(PositiveInt, _NCM.latent_points, "latent samples per step"),
    "lam_start": Setting(NonNegativeFloat, _NCM.lam_start, "weight of the query term at the start"),
    "lam_end": Setting(NonNegativeFloat, _NCM.lam_end, "weight of the query term at the end"),
    "anneal": Setting(Probability, _NCM.anneal, "share of the iterations over which lambda anneals"),
    "restarts": Setting(PositiveInt, _NCM.restarts, "seeds per sense, trained side by side"),
    "seed": Setting(int, _NCM.seed, "training seed"),
    "atom_scale": Setting(NonNegativeFloat, _NCM.atom_scale, "spread of the initial latent atoms (0: 1 for "
                          "ate/pyx, 4 for counterfactual queries)"),
    "kl_tol": Setting(PositiveFloat, 5e-4, "a member is kept when its fit's KL is within this"),
}
PNCM_CLASS_DEFAULT = "enumerate"
PNCM_SETTINGS = NCM_SETTINGS | {
    "class": Setting(Literal["param", "enumerate"], PNCM_CLASS_DEFAULT,
                     "param: one NCM per sense whose diagram is learned over the PAG's class (edge-type logits, "
                     "Gumbel-max draws, NOTEARS penalty, dag2pag check); enumerate: one NCM pair per maximal member"),
    "struct_lr": Setting(PositiveFloat, STRUCT_LR, "class=param: learning rate of the edge-type logits"),
    "struct_share": Setting(Probability, STRUCT_SHARE, "class=param: share of lambda's anneal during which the "
                            "structure is learned (then frozen at its mode)"),
    "struct_grad": Setting(Literal["local", "st"], "local", "class=param: the logits' gradient, local (exact "
                           "over each adjacency's member types) or st (straight through Gumbel-softmax)"),
}
LP_SETTINGS = {
    "information": Setting(Literal["pag", "known_graph"], "pag", "bounds:lp: union over the PAG's maximal members, "
                           "or the true diagram"),
}


@dataclass
class BoundsModel:
    kind: str  # pncm | ncm_known | lp | manski
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 1
    concurrency: int = 1
    cacheable: bool = True  # deterministic given the request and settings
    modalities: frozenset[str] = frozenset({"text"})

    def _ncm_config(self) -> NCMConfig:
        return NCMConfig(**{f.name: self.settings[f.name] for f in fields(NCMConfig) if f.name in self.settings})

    def answer(self, request: Request) -> dict[str, Any]:
        from harness.tasks.causal.graphs import check_pag, maximal
        from harness.tasks.causal.problem import problem_of
        from harness.tasks.causal.scm import manski

        t0 = time.perf_counter()
        prob = problem_of(request.messages)
        p = prob.p()
        info = "known_graph" if self.kind == "ncm_known" or self.settings.get("information") == "known_graph" \
            else "pag"
        if self.kind == "manski":
            lo, hi = manski(p, prob.names, prob.query, prob.x, prob.y)
            return {"lower": lo, "upper": hi, "information": "none", "seconds": time.perf_counter() - t0}
        if self.kind == "pncm" and self.settings.get("class", PNCM_CLASS_DEFAULT) == "param":
            learned = self._param(prob, p)
            learned["seconds"] = time.perf_counter() - t0
            return learned
        members = (prob.diagram(),) if info == "known_graph" else maximal(check_pag(prob.pag()))
        out: dict[str, Any] = {"information": info, "diagrams": len(members)}
        if self.kind == "pncm":
            out["class"] = "enumerate"
        if self.kind == "lp":
            from harness.tasks.causal.lp import class_bounds

            tol = 1e-7 if prob.n == 0 else _LP_TOL_SAMPLE
            b, _ = class_bounds(members, p, prob.query, tol=tol)
            out |= {"lower": b.lower, "upper": b.upper, "violation": b.violation}
            if not b.sharp:  # a counterfactual query with merged c-components: valid, perhaps not sharp
                out["sharp"] = False
        else:
            import torch

            from harness.tasks.causal.ncm import ncm_bounds

            torch.set_num_threads(1)  # tiny networks: threads cost more than they give
            res = ncm_bounds(members, p, prob.query, self._ncm_config(),
                             kl_tol=self.settings.get("kl_tol", NCM_SETTINGS["kl_tol"].default))
            out |= {"lower": res.lower, "upper": res.upper, "diagrams": res.diagrams, "trained": res.trained,
                    "kl": res.kl, "poor_fit": res.poor_fit}
        out["seconds"] = time.perf_counter() - t0
        return out

    def _param(self, prob: Any, p: Any) -> dict[str, Any]:
        """``pncm -M class=param``: one NCM per sense over the PAG's parameterised class (pncm_param.py);
        no enumeration of the class."""
        import torch

        from harness.tasks.causal.ncm import Fit, bounds_of_fits
        from harness.tasks.causal.pag_space import structure_space
        from harness.tasks.causal.pncm_param import fit_param_bounds

        torch.set_num_threads(1)
        space = structure_space(prob.pag())
        lo, hi, redrawn = fit_param_bounds(space, p, prob.query, self._ncm_config(),
                                           struct_lr=self.settings.get("struct_lr", STRUCT_LR),
                                           struct_share=self.settings.get("struct_share", STRUCT_SHARE),
                                           struct_grad=self.settings.get("struct_grad", "local"),
                                           x=prob.x, y=prob.y)
        runs: list[tuple[list[Fit], list[Fit]]] = [(list(lo), list(hi))]  # list is invariant: ParamFit as Fit
        res = bounds_of_fits(runs, kl_tol=self.settings.get("kl_tol", NCM_SETTINGS["kl_tol"].default))
        lower_fit = next(f for f in lo if f.value == res.lower)  # the fits the bounds came from
        upper_fit = next(f for f in hi if f.value == res.upper)
        return {"information": "pag", "class": "param", "lower": res.lower, "upper": res.upper,
                "diagrams": len({f.structure for f in lo + hi}), "trained": res.trained, "kl": res.kl,
                "poor_fit": res.poor_fit, "lower_structure": lower_fit.structure,
                "upper_structure": upper_fit.structure,
                "nonmember_modes": sum(1 for f in lo + hi if not f.mode_member), "redrawn": redrawn}

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outs = []
        for r in requests:
            t0 = time.perf_counter()
            try:
                pred = self.answer(r)
            except ValueError as exc:  # a malformed problem or a string that is not a PAG
                outs.append(Output(error=str(exc)))
                continue
            outs.append(Output(text=f"[{pred['lower']:.4f}, {pred['upper']:.4f}]", prediction=pred,
                               usage=Usage(calls=1, seconds=time.perf_counter() - t0)))
        return outs


def _spec(name: str, settings: dict[str, Any]) -> str:
    shown = "&".join(f"{k}={v}" for k, v in sorted(settings.items()))
    return name + (f"?{shown}" if shown else "")


@model("pncm", kind="method", settings=PNCM_SETTINGS, strict=True,
       description="P-NCM: NCMs over the PAG's causal diagrams, min/max of the query (bounds under a PAG; "
                   "-M class=param|enumerate)")
def pncm_backend(path: str | None, **settings: Any) -> BoundsModel:
    if path not in (None, "", "default"):
        raise ValueError(f"pncm takes no variant (got {path!r}); write pncm (the class's reading: -M class=...)")
    settings = validate_settings("pncm", settings, PNCM_SETTINGS)  # a factory called directly is checked too
    return BoundsModel("pncm", dict(settings), _spec("pncm", settings))


@model("ncm", kind="method", settings=NCM_SETTINGS, strict=True,
       description="NCM on the true causal diagram (oracle): ncm:known_graph")
def ncm_backend(path: str | None, **settings: Any) -> BoundsModel:
    if path != "known_graph":
        raise ValueError(f"unknown ncm variant {path!r}; write ncm:known_graph (the PAG-constrained class is pncm)")
    settings = validate_settings("ncm", settings, NCM_SETTINGS)  # a factory called directly is checked too
    return BoundsModel("ncm_known", dict(settings), _spec("ncm:known_graph", settings))


@model("bounds", kind="method", settings=LP_SETTINGS, strict=True,
       description="Closed-form bounds: bounds:lp (sharp response-function LP; -M information=pag|"
                   "known_graph), bounds:manski (no assumptions)")
def bounds_backend(path: str | None, **settings: Any) -> BoundsModel:
    if path not in ("lp", "manski"):
        raise ValueError(f"unknown bounds variant {path!r}; choose lp or manski")
    # the union is declared; manski takes none of it
    settings = validate_settings(f"bounds:{path}", settings, LP_SETTINGS if path == "lp" else {})
    return BoundsModel(path, dict(settings), _spec(f"bounds:{path}", settings))
