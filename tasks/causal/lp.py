"""Sharp bounds on P(Y = 1 | do(X = x)) and the ATE for a binary diagram: the response-function LP
(the counterfactual queries go to lp_counterfactual.py, which solves with :func:`solve_bounds` too).

Tian's factorisation P(v) = prod_j Q[C_j](v), Q[C_j](v) = prod_{i in C_j} P(v_i | v_<i) (topological
order), splits the observational constraints by c-component, and the interventional distribution is
prod_{j != C_X} Q[C_j](v) * Q_x[C_X \\ X](v): every factor but X's own component is identified. So the
only unknown is the distribution q over the joint response types of C_X (one response function
pa_i -> {0, 1} per member; the component shares one latent), the data constrain it linearly
(A q = Q[C_X] for every configuration) and the query is linear in q: min / max of one LP
(Balke-Pearl generalised; exact for a single binary treatment, solved with scipy's HiGHS).

With a sample distribution the equalities may be infeasible (sampling noise breaks the diagram's
independences a little), so the LP first finds the least L1 violation delta* and bounds the query
over the q within delta* (+1e-9): on the true distribution of a compatible diagram delta* = 0.
If X is not an ancestor of Y the query is identified: P(Y = 1) (ATE 0).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.tasks.causal.counterfactual import CF_QUERIES
from harness.tasks.causal.graphs import Diagram
from harness.tasks.causal.scm import configs


@dataclass
class Bounds:
    lower: float
    upper: float
    violation: float  # least L1 violation of the observational constraints (0: the diagram fits exactly)
    types: int = 0
    sharp: bool = True  # False: an outer bound (counterfactual LP with c-components merged; lp_counterfactual.py)

    def lower_upper(self) -> list[float]:
        return [self.lower, self.upper]


ZERO_CELL_SMOOTHING = 1e-9


def conditionals(p: Any, d: Diagram, smooth: float | None = None) -> Any:
    """[K, n] matrix of P(v_i | v_<i) (topological order) at every configuration.

    The conditionals are the distribution's own: no pseudo-count is added where every configuration
    has positive probability (even 1e-9 moved "sharp" bounds by up to 3e-4 on near-deterministic
    SCMs). Only where a configuration has probability zero, so that some P(v_i | v_<i) is 0/0, is a
    pseudo-count of ``ZERO_CELL_SMOOTHING`` added to every cell (``smooth`` sets it explicitly)."""
    import numpy as np

    names, order = d.names, d.order()
    V = configs(len(names))
    p = np.asarray(p, dtype=float)
    if smooth is None:
        smooth = 0.0 if bool((p > 0).all()) else ZERO_CELL_SMOOTHING
    p = p + smooth
    p = p / p.sum()
    out = np.ones((len(V), len(names)))
    for pos, v in enumerate(order):
        before = [names.index(a) for a in order[:pos]]
        cols = before + [names.index(v)]
        joint = _marginal(p, V, cols)
        prev = _marginal(p, V, before) if before else np.ones(len(V))
        out[:, names.index(v)] = joint / prev
    return out


def _marginal(p: Any, V: Any, cols: list[int]) -> Any:
    """P(v_cols) evaluated at each configuration's values."""
    import numpy as np

    key = (V[:, cols] * (2 ** np.arange(len(cols)))[None, :]).sum(axis=1)
    sums = np.bincount(key, weights=p, minlength=2 ** len(cols))
    return sums[key]


def _indicators(d: Diagram, v: str, V: Any, fixed: dict[str, int] | None = None) -> Any:
    """[K, T_v]: 1 where response type t of v outputs v's value at configuration k (parents from V)."""
    import numpy as np

    names = d.names
    pa = d.parents(v)
    T = 2 ** (2 ** len(pa))
    col = V[:, [names.index(a) for a in pa]].copy() if pa else np.zeros((len(V), 0), dtype=int)
    for j, a in enumerate(pa):
        if fixed and a in fixed:
            col[:, j] = fixed[a]
    pa_idx = (col * (2 ** np.arange(len(pa)))[None, :]).sum(axis=1) if pa else np.zeros(len(V), dtype=int)
    out_bit = (np.arange(T)[None, :] >> pa_idx[:, None]) & 1  # [K, T]
    return (out_bit == V[:, names.index(v)][:, None]).astype(float)


def _rowwise_kron(mats: list[Any]) -> Any:
    out = mats[0]
    for m in mats[1:]:
        out = (out[:, :, None] * m[:, None, :]).reshape(out.shape[0], -1)
    return out


def lp_bounds(d: Diagram, p: Any, query: str, x: str = "X", y: str = "Y") -> Bounds:
    import numpy as np

    if query in CF_QUERIES:
        from harness.tasks.causal.lp_counterfactual import cf_bounds

        return cf_bounds(d, p, query, x, y)
    names = d.names
    V = configs(len(names))
    xi, yi = names.index(x), names.index(y)
    p = np.asarray(p, dtype=float)
    if x not in d.ancestors(y):
        val = float(p[V[:, yi] == 1].sum() / p.sum()) if query == "pyx" else 0.0
        return Bounds(val, val, 0.0)
    comp = next(c for c in d.components() if x in c)
    cond = conditionals(p, d)
    others = [i for i in range(len(names)) if names[i] not in comp]
    q_rest = np.prod(cond[:, others], axis=1) if others else np.ones(len(V))
    b = np.prod(cond[:, [names.index(v) for v in comp]], axis=1)
    A = _rowwise_kron([_indicators(d, v, V) for v in comp])
    n_t, K = A.shape[1], A.shape[0]

    def coef(xv: int) -> Any:
        rows = (V[:, xi] == xv) & (V[:, yi] == 1)
        mats = [_indicators(d, v, V, {x: xv}) if v != x else np.ones((K, 2 ** (2 ** len(d.parents(v)))))
                for v in comp]
        M = _rowwise_kron(mats)
        return (M[rows] * q_rest[rows][:, None]).sum(axis=0)

    c = coef(1) if query == "pyx" else coef(1) - coef(0)
    lower, upper, delta = solve_bounds(A, b, [c])
    return Bounds(lower, upper, delta, n_t)


def solve_bounds(A: Any, b: Any, objectives: list[Any]) -> tuple[float, float, float]:
    """(min, max, delta*): the least and greatest c @ q over the objectives c, for q >= 0, sum q = 1,
    within the least L1 violation delta* of A q = b (+1e-9)."""
    import numpy as np
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix, hstack, identity, vstack

    K, n_t = A.shape
    # variables [q (n_t), s+ (K), s- (K)]; A q + s+ - s- = b, sum q = 1
    A_eq = hstack([csr_matrix(A), identity(K), -identity(K)]).tocsr()
    ones = csr_matrix(np.concatenate([np.ones(n_t), np.zeros(2 * K)])[None, :])
    A_all = vstack([A_eq, ones]).tocsr()
    b_all = np.concatenate([b, [1.0]])
    slack = np.concatenate([np.zeros(n_t), np.ones(2 * K)])
    r0 = linprog(slack, A_eq=A_all, b_eq=b_all, bounds=(0, None), method="highs")
    if r0.status != 0:
        raise RuntimeError(f"LP failed: {r0.message}")
    delta = float(r0.fun)
    lows, highs = [], []
    for c in objectives:
        obj = np.concatenate([c, np.zeros(2 * K)])
        res = []
        for sign in (1.0, -1.0):
            r = linprog(sign * obj, A_ub=slack[None, :], b_ub=[delta + 1e-9], A_eq=A_all, b_eq=b_all,
                        bounds=(0, None), method="highs")
            if r.status != 0:
                raise RuntimeError(f"LP failed: {r.message}")
            res.append(sign * float(r.fun))
        lows.append(res[0])
        highs.append(res[1])
    return min(lows), max(highs), delta


def class_bounds(diagrams: tuple[Diagram, ...], p: Any, query: str, tol: float = 1e-7) -> tuple[Bounds, list[Bounds]]:
    """Union of the LP bounds over the diagrams compatible with ``p`` (violation within ``tol`` of the
    best-fitting one): the sharp bounds over a PAG's class when given its maximal members."""
    each = [lp_bounds(d, p, query) for d in diagrams]
    best = min(b.violation for b in each)
    keep = [b for b in each if b.violation <= best + tol]
    return Bounds(min(b.lower for b in keep), max(b.upper for b in keep), best,
                  sharp=all(b.sharp for b in keep)), each
