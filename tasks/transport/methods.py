"""The four transport methods on one problem (labelled source, unlabelled target), and the
diagnostics they share: label transfer, a source-to-target map, restart spread and stability.

- ``omt``: fitted mixtures + the biconvex mixture-level problem of ``omt.py``.
- ``pot_gmm``: the same mixtures, POT's ``gmm_ot_plan`` (Delon-Desolneux MW2, exact LP over the
  Bures costs) and ``gmm_ot_apply_map``; Gaussian data only.
- ``pot_emd``: exact sample-level OT (``ot.emd`` on squared Euclidean costs, uniform weights).
- ``pot_sinkhorn``: entropic sample-level OT (``ot.sinkhorn``, eps = reg x the largest cost, reg 0.05).

Labels move along the plan: a target point takes the label with the most plan mass reaching it
(sample plans), or the label mass its target components receive, weighted by its component
responsibilities (mixture plans). ``restart_spread`` is max |plan_r - plan_0| over restarts,
each restart a random permutation of the inputs (and, for OMT, a random starting coupling), with
the plan mapped back to the original order: non-unique solutions show up, unique ones give 0.
``stability_ratio``: the target is subsampled (90%, refitted) a few times; the mean shift of the
mapped source points divided by the mean displacement of the map.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from harness.tasks.transport.mixtures import Mixture, class_conditional, fit_target
from harness.tasks.transport.omt import random_coupling, solve

METHODS = ("omt", "pot_gmm", "pot_emd", "pot_sinkhorn")


@dataclass
class Problem:
    Xs: Any
    ys: Any
    Xt: Any
    kind: str  # gaussian | poisson


@dataclass
class Solved:
    labels: Any  # predicted target labels
    plan: Any
    cost: float
    mapped: Any  # source points mapped to the target domain
    extra: dict[str, Any]


def _onehot(ys: Any, classes: Any) -> Any:

    return (ys[:, None] == classes[None, :]).astype(float)


def _mixture_labels(plan: Any, source_labels: Any, target: Mixture, Xt: Any) -> Any:
    import numpy as np

    flow = plan.T / plan.sum(axis=0)[:, None]  # [k_t, k_s]: where each target component's mass came from
    scores = target.responsibilities(Xt) @ flow
    return source_labels[np.argmax(scores, axis=1)]


def _sample_solve(p: Problem, method: str, settings: dict[str, Any], perm: tuple[Any, Any] | None = None) -> Solved:
    import numpy as np
    import ot

    Xs, Xt, ys = p.Xs, p.Xt, p.ys
    if perm is not None:
        Xs, ys, Xt = Xs[perm[0]], ys[perm[0]], Xt[perm[1]]
    a, b = np.full(len(Xs), 1 / len(Xs)), np.full(len(Xt), 1 / len(Xt))
    M = ot.dist(Xs, Xt)  # squared Euclidean
    if method == "pot_emd":
        plan = ot.emd(a, b, M, numItermax=10_000_000)
    else:
        # eps relative to the largest cost keeps exp(-M / eps) >= e^-1/reg: the plain (fast) Sinkhorn
        # cannot underflow, where the log-domain one is ~30x slower on n x n plans
        eps = float(settings.get("reg", 0.05)) * float(M.max())
        plan = ot.sinkhorn(a, b, M, eps, numItermax=2000, stopThr=1e-9)
    if perm is not None:  # back to the original order
        inv_s, inv_t = np.argsort(perm[0]), np.argsort(perm[1])
        plan, Xs, ys, Xt = plan[inv_s][:, inv_t], p.Xs, p.ys, p.Xt
    classes = np.unique(ys)
    labels = classes[np.argmax(plan.T @ _onehot(ys, classes), axis=1)]
    mapped = (plan @ Xt) / plan.sum(axis=1, keepdims=True)
    return Solved(labels, plan, float((plan * M).sum()), mapped, {})


def _mixtures(p: Problem, settings: dict[str, Any], Xt: Any | None = None) -> tuple[Mixture, Any, Mixture]:
    source, source_labels = class_conditional(p.Xs, p.ys, p.kind)
    k = int(settings.get("k") or len(source_labels))
    target = fit_target(p.Xt if Xt is None else Xt, k, p.kind, int(settings.get("seed", 0)),
                        int(settings.get("max_iter", 500)))
    return source, source_labels, target


def _map_points(p: Problem, source: Mixture, target: Mixture, plan: Any, A: Any = None, t: Any = None) -> Any:
    import ot

    if p.kind == "gaussian":
        if A is None:
            return ot.gmm.gmm_ot_apply_map(p.Xs, source.means, target.means, source.covs, target.covs,
                                           source.weights, target.weights, plan, method="bary")
        moved_means = source.means @ A.T + t
        return ot.gmm.gmm_ot_apply_map(p.Xs @ A.T + t, moved_means, target.means, source.covs, target.covs,
                                       source.weights, target.weights, plan, method="bary")
    resp = source.responsibilities(p.Xs)
    return resp @ ((plan / plan.sum(axis=1, keepdims=True)) @ target.means)


def _mixture_solve(p: Problem, method: str, settings: dict[str, Any], Xt: Any | None = None,
                   init: Any = None, perm: Any = None, fitted: tuple[Mixture, Any, Mixture] | None = None) -> Solved:
    import numpy as np
    import ot

    source, source_labels, target = fitted if fitted is not None else _mixtures(p, settings, Xt)
    if perm is not None:  # permute the target components (a restart of a deterministic solver)
        target = Mixture(target.kind, target.weights[perm], target.means[perm],
                         None if target.covs is None else target.covs[perm], None)
    if method == "pot_gmm":
        if p.kind != "gaussian":
            raise ValueError("pot:gmm transports Gaussian mixtures only (the data are counts)")
        plan = ot.gmm.gmm_ot_plan(source.means, target.means, source.covs, target.covs, source.weights,
                                  target.weights)
        cost = float(ot.gmm.gmm_ot_loss(source.means, target.means, source.covs, target.covs, source.weights,
                                        target.weights))
        A = t = None
        extra: dict[str, Any] = {}
    else:
        res = solve(source, target, reg=float(settings.get("reg", 0.01)), rho=float(settings.get("rho", 0.1)),
                    align=bool(settings.get("align", True)), anneal=bool(settings.get("anneal", True)), init=init)
        plan, cost, A, t = res.plan, res.cost, res.A, res.t
        extra = {"objective": res.objective, "iterations": res.iterations, "converged": res.converged}
    if perm is not None:
        plan = plan[:, np.argsort(perm)]
        return Solved(None, plan, cost, None, extra)
    labels = _mixture_labels(plan, source_labels, target, p.Xt if Xt is None else Xt)
    extra["fitted"] = (source, source_labels, target)
    return Solved(labels, plan, cost, _map_points(p, source, target, plan, A, t), extra)


def run_method(p: Problem, method: str, settings: dict[str, Any]) -> dict[str, Any]:
    import numpy as np

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    sample_level = method in ("pot_emd", "pot_sinkhorn")
    t0 = time.perf_counter()
    main = _sample_solve(p, method, settings) if sample_level else _mixture_solve(p, method, settings)
    seconds = time.perf_counter() - t0
    rng = np.random.default_rng(int(settings.get("seed", 0)) + 1)
    spread = 0.0
    perm: Any
    for _ in range(int(settings.get("restarts", 10)) - 1):
        if sample_level:
            perm = (rng.permutation(len(p.Xs)), rng.permutation(len(p.Xt)))
            other = _sample_solve(p, method, settings, perm).plan
        else:
            k_t = main.plan.shape[1]
            perm = rng.permutation(k_t)
            init = None
            if method == "omt":
                src_w = main.plan.sum(axis=1)
                tgt_w = main.plan.sum(axis=0)[perm]
                init = random_coupling(src_w, tgt_w, rng)
            other = _mixture_solve(p, method, settings, init=init, perm=perm, fitted=main.extra["fitted"]).plan
        spread = max(spread, float(np.max(np.abs(other - main.plan))))
    shifts = []
    base = float(np.mean(np.linalg.norm(main.mapped - p.Xs, axis=1)))
    for _ in range(int(settings.get("stability", 3))):
        keep = np.sort(rng.choice(len(p.Xt), size=int(0.9 * len(p.Xt)), replace=False))
        sub = Problem(p.Xs, p.ys, p.Xt[keep], p.kind)
        again = _sample_solve(sub, method, settings) if sample_level else _mixture_solve(p, method, settings,
                                                                                         Xt=p.Xt[keep])
        shifts.append(float(np.mean(np.linalg.norm(again.mapped - main.mapped, axis=1))))
    stability = float(np.mean(shifts)) / max(base, 1e-12) if shifts else None
    extra = {k: v for k, v in main.extra.items() if k != "fitted"}
    return {"labels": [int(v) for v in main.labels], "cost": main.cost, "restart_spread": spread,
            "stability_ratio": stability, "seconds": seconds, "plan_shape": list(main.plan.shape), **extra}
