"""The mixture-level transport problem of OMT, as reconstructed here (the paper's code is not public).

Variables: a coupling pi between the k_s source and k_t target components (marginals = the
mixture weights a, b) and an alignment of the source components to the target domain. Objective

    F(pi, g) = sum_ij pi_ij C_ij(g) + eps * sum_ij pi_ij (log pi_ij - 1) + rho * R(g)

- Gaussian components (means m, covariances S): g = (A, t), the source means move to A m + t,
  C_ij = ||A m_i + t - n_j||^2 + Bures^2(S_i, T_j) (the squared 2-Wasserstein distance between the
  moved source and the target Gaussian when only the means move), R = ||A - I||_F^2.
- Poisson components (rates l, m): g = t (a per-feature log-rate offset of the target side),
  C_ij = KL(Pois(l_i) || Pois(m_j e^-t)) summed over features, R = ||t||^2.

For fixed g the problem in pi is entropic OT: strictly convex for eps > 0 (Sinkhorn). For fixed pi
it is a strictly convex problem in g (a ridge regression for Gaussians; a separable convex problem
solved by Newton for Poisson). So F is strictly biconvex and is minimised by alternating the two
exact block minimisations from a start. With ``align=False`` g stays at the identity and with
eps = 0 the pi-step is the exact LP, so the value is then the Delon-Desolneux MW2^2 (POT's
``gmm_ot_loss``), which the tests check. Cost is O(k_s k_t d^2) per iteration: no sample size.

eps and rho are given relative to data scales fixed before any start (eps to the median identity
cost, rho to the weighted spread of the source means), so restarts share one objective.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.tasks.transport.mixtures import Mixture


@dataclass
class OMTResult:
    plan: Any  # [k_s, k_t]
    A: Any | None  # Gaussian alignment (d x d), None for Poisson
    t: Any  # shift (Gaussian) / log-rate offset (Poisson)
    cost: float  # sum pi C at the solution (no entropy or ridge term)
    objective: float
    iterations: int
    converged: bool


def bures_cost(source: Mixture, target: Mixture) -> Any:
    import ot

    return ot.gmm.dist_bures_squared(source.means, target.means, source.covs, target.covs) - \
        ((source.means[:, None, :] - target.means[None, :, :]) ** 2).sum(-1)


def poisson_cost(source: Mixture, target: Mixture, t: Any) -> Any:
    import numpy as np

    lam, mu = source.means[:, None, :], target.means[None, :, :]
    return (mu * np.exp(-t) - lam + lam * (np.log(lam) - np.log(mu) + t)).sum(-1)


def gaussian_cost(source: Mixture, target: Mixture, A: Any, t: Any, shape: Any) -> Any:
    moved = source.means @ A.T + t
    return ((moved[:, None, :] - target.means[None, :, :]) ** 2).sum(-1) + shape


def _lse(M: Any, axis: int) -> Any:
    import numpy as np

    top = M.max(axis=axis, keepdims=True)
    return (np.log(np.exp(M - top).sum(axis=axis, keepdims=True)) + top).squeeze(axis)


def coupling(a: Any, b: Any, C: Any, eps: float, tol: float = 1e-11, max_iter: int = 50_000) -> Any:
    """Exact OT (eps = 0, POT's network simplex) or entropic OT by log-domain Sinkhorn run to a
    relative marginal error below ``tol``: k x k problems are tiny, and POT's stopping rule (change of
    the scaling vectors) can stop far from the fixed point that restarts must agree on."""
    import numpy as np
    import ot

    if eps <= 0:
        return ot.emd(a, b, np.ascontiguousarray(C, dtype=np.float64), numItermax=1_000_000)
    la, lb = np.log(a), np.log(b)
    g = np.zeros(len(b))
    K = -C / eps
    for i in range(max_iter):
        f = la - _lse(K + g[None, :], 1)
        g = lb - _lse(K + f[:, None], 0)
        if i % 10 == 9:
            P = np.exp(K + f[:, None] + g[None, :])
            if np.max(np.abs(P.sum(axis=1) - a)) < tol * float(a.max()):
                return P
    return np.exp(K + f[:, None] + g[None, :])


def _align_gaussian(source: Mixture, target: Mixture, plan: Any, rho: float) -> tuple[Any, Any]:
    import numpy as np

    a = plan.sum(axis=1)
    Z = (plan @ target.means) / a[:, None]  # each source component's plan-weighted target mean
    X = np.hstack([source.means, np.ones((len(a), 1))])
    d = source.means.shape[1]
    R = np.diag([rho] * d + [0.0])
    prior = np.vstack([np.eye(d), np.zeros((1, d))])
    W = np.linalg.solve(X.T @ (a[:, None] * X) + R, X.T @ (a[:, None] * Z) + R @ prior)
    return W[:d].T, W[d]


def _align_poisson(source: Mixture, target: Mixture, plan: Any, rho: float) -> Any:
    import numpy as np

    P = plan.sum(axis=0) @ target.means  # sum_ij pi_ij mu_jf
    L = plan.sum(axis=1) @ source.means  # sum_ij pi_ij lambda_if
    t = np.log(np.maximum(P, 1e-300) / np.maximum(L, 1e-300))  # the rho = 0 solution
    for _ in range(100):  # Newton on -P e^-t + L + 2 rho t = 0 (strictly increasing in t)
        g = -P * np.exp(-t) + L + 2 * rho * t
        t = t - g / (P * np.exp(-t) + 2 * rho)
        if np.max(np.abs(g)) < 1e-13 * max(float(np.max(L)), 1.0):
            break
    return t


def solve(source: Mixture, target: Mixture, *, reg: float = 0.01, rho: float = 0.1, align: bool = True,
          anneal: bool = True, init: Any | None = None, max_iter: int = 500, tol: float = 1e-10) -> OMTResult:
    """Alternate the exact block minimisations. With ``anneal`` (default) eps starts at 100x its
    target, where the smoothed problem is well inside the regime with one minimiser, and halves
    stage by stage, each stage warm-started from the last: the result no longer depends on the
    start (``restart_spread``); with ``anneal=False`` the alternation starts at the target eps from
    ``init`` and can stop at different partial minimisers from different starts."""
    import numpy as np

    a, b = np.asarray(source.weights, float), np.asarray(target.weights, float)
    a, b = a / a.sum(), b / b.sum()
    d = source.means.shape[1]
    gauss = source.kind == "gaussian"
    shape = bures_cost(source, target) if gauss else None
    A: Any
    t: Any
    A, t = (np.eye(d), np.zeros(d)) if gauss else (None, np.zeros(d))

    def cost_at(A: Any, t: Any) -> Any:
        return gaussian_cost(source, target, A, t, shape) if gauss else poisson_cost(source, target, t)

    C0 = cost_at(A, t)
    scale = float(np.median(C0))
    eps = reg * scale if reg > 0 else 0.0
    spread = float((a[:, None] * (source.means - a @ source.means) ** 2).sum()) if gauss else 1.0
    rho_abs = rho * max(spread, 1e-12)
    schedule = [eps]
    if align and anneal and eps > 0:
        schedule = [eps * 2.0 ** j for j in range(int(np.ceil(np.log2(100.0))), 0, -1)] + [eps]
    plan = coupling(a, b, C0, schedule[0]) if init is None else np.asarray(init, float)
    it, converged = 0, not align
    if align:
        for stage, e in enumerate(schedule):
            last = stage == len(schedule) - 1
            for _ in range(max_iter):
                it += 1
                if gauss:
                    A, t = _align_gaussian(source, target, plan, rho_abs)
                else:
                    t = _align_poisson(source, target, plan, rho_abs)
                new = coupling(a, b, cost_at(A, t), e, tol=1e-11 if last else 1e-8)
                delta = float(np.max(np.abs(new - plan)))
                plan = new
                if delta < (tol if last else 1e-7):
                    converged = converged or last
                    break
    else:
        plan = coupling(a, b, C0, eps)
    C = cost_at(A, t)
    cost = float((plan * C).sum())
    ent = float((plan[plan > 0] * (np.log(plan[plan > 0]) - 1)).sum()) if eps > 0 else 0.0
    ridge = (float(((A - np.eye(d)) ** 2).sum()) if gauss else float((t ** 2).sum())) * rho_abs if align else 0.0
    return OMTResult(plan, A, t, cost, cost + eps * ent + ridge, it, converged)


def random_coupling(a: Any, b: Any, rng: Any) -> Any:
    """A random element of Pi(a, b) (random positive matrix, Sinkhorn-scaled): a restart's start."""
    import numpy as np

    K = rng.uniform(0.05, 1.0, size=(len(a), len(b)))
    u = np.ones(len(a))
    for _ in range(5000):
        v = b / (K.T @ u)
        u = a / (K @ v)
    return u[:, None] * K * v[None, :]
