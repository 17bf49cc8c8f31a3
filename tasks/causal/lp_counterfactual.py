"""Bounds on the counterfactual queries (ETT, PN, PS, PNS; counterfactual.py) of a binary diagram: the
response-function LP over the twin network.

A c-component's distribution q_j over its members' joint response types is *counterfactually active*
when a member is a strict descendant of X: then its members can see different parent values in the
factual, do(X = 1) and do(X = 0) worlds, and the query depends on how q_j couples them, which the
data do not identify. Every other component enters only through its observational Q-factor
Q[C_j](v) = prod_{i in C_j} P(v_i | v_<i) (Tian), which the data identify. So

    query = sum_states weight(state) * prod_{inactive j} Q[C_j](v) * prod_{active j} (A_j q_j)(state),

linear in each active q_j, and each q_j is constrained linearly by its own Q-factor. With one active
component (iv, bow, backdoor with its graph, and most PAG members) this is one LP, exact: sharp.

With several, the query is multilinear in them. One, the *main* block (X's component if active,
otherwise the one with most response types), stays the LP's unknown. A singleton with one parent
(the front-door mediator, the chain's outcome) is handled exactly: its q over the four response
types (r(0), r(1)) with the identified margins P(v = 1 | pa = 0), P(v = 1 | pa = 1) is a segment
between the comonotone and the countermonotone coupling, a multilinear optimum lies at a vertex, so
the bounds are the extremes of the LP over the vertex combinations. Any other active component is
merged into the main block as one joint q: that drops the independence between the merged
components, so the bounds stay valid but may be wider than sharp (``Bounds.sharp`` False).

On sample frequencies the main block gets the L1-slack treatment of lp.py; the one-parent
singletons' margins are the data's P(v = 1 | pa), always representable.
"""

from __future__ import annotations

import itertools
from typing import Any

from harness.tasks.causal.counterfactual import state_weights, twin, undefined, weights
from harness.tasks.causal.graphs import Diagram
from harness.tasks.causal.lp import ZERO_CELL_SMOOTHING, Bounds, _indicators, _rowwise_kron, conditionals, solve_bounds
from harness.tasks.causal.scm import configs


def _twin_indicators(d: Diagram, v: str, worlds: Any, live: tuple[int, ...]) -> Any:
    """[S, T_v]: 1 where v's response type t gives v's value in every world where v acts."""
    out = _indicators(d, v, worlds[live[0]])
    for w in live[1:]:
        out = out * _indicators(d, v, worlds[w])
    return out


def _n_types(d: Diagram, comp: tuple[str, ...]) -> int:
    return int(sum(2 ** len(d.parents(v)) for v in comp))  # log2 of the count is enough to compare


def _segment_vertices(p: Any, d: Diagram, v: str) -> list[Any]:
    """The vertices of {q over v's 4 response types : P(r(c) = 1) = P(v = 1 | pa = c), c = 0, 1}
    (type t outputs bit c of t): the comonotone and the countermonotone coupling."""
    import numpy as np

    names = d.names
    V = configs(len(names))
    pa, vi = names.index(d.parents(v)[0]), names.index(v)
    p = np.asarray(p, dtype=float)
    if not bool((p > 0).all()):
        p = p + ZERO_CELL_SMOOTHING  # as lp.conditionals: keeps P(v | pa) defined on a zero cell
    p0, p1 = (float(p[(V[:, pa] == c) & (V[:, vi] == 1)].sum() / p[V[:, pa] == c].sum()) for c in (0, 1))
    out = []
    for both in sorted({max(0.0, p0 + p1 - 1.0), min(p0, p1)}):  # P(r(0) = 1, r(1) = 1)
        out.append(np.array([1.0 - p0 - p1 + both, p0 - both, p1 - both, both]))
    return out


def cf_bounds(d: Diagram, p: Any, query: str, x: str = "X", y: str = "Y") -> Bounds:
    import numpy as np

    names = d.names
    V = configs(len(names))
    p = np.asarray(p, dtype=float)
    p = p / p.sum()
    xi, yi = names.index(x), names.index(y)
    _, den = weights(query)
    den_obs = float((p * den[V[:, xi], V[:, yi], 0, 0]).sum())  # every denominator is an event on (X, Y)
    if den_obs <= 0:
        raise undefined(query)
    tw = twin(d, x, y)
    num_s, _ = state_weights(tw, query)
    g = num_s / den_obs
    cond = conditionals(p, d)
    desc = set(tw.desc)
    comps = d.components()
    active = [c for c in comps if desc & set(c)]
    fixed = np.ones(len(g))
    for c in comps:
        if c not in active:
            fixed = fixed * np.prod(cond[tw.factual][:, [names.index(v) for v in c]], axis=1)
    if not active:  # Y_1 = Y_0 = Y for every unit: the query is a number of the data
        val = float(g @ fixed)
        return Bounds(val, val, 0.0)
    comp_x = next(c for c in comps if x in c)
    main = comp_x if comp_x in active else max(active, key=lambda c: _n_types(d, c))
    segments = [c for c in active if c != main and len(c) == 1 and len(d.parents(c[0])) == 1]
    merged = [c for c in active if c != main and c not in segments]
    members = [v for v in names if any(v in c for c in [main, *merged])]
    A = _rowwise_kron([_indicators(d, v, V) for v in members])
    b = np.prod(cond[:, [names.index(v) for v in members]], axis=1)
    A_tw = _rowwise_kron([_twin_indicators(d, v, tw.worlds, tw.live[v]) for v in members])
    factors = []
    for (v,) in segments:
        ind = _twin_indicators(d, v, tw.worlds, tw.live[v])
        factors.append([ind @ q for q in _segment_vertices(p, d, v)])
    objectives = [(g * fixed * np.prod(combo, axis=0)) @ A_tw for combo in itertools.product(*factors)] \
        if factors else [(g * fixed) @ A_tw]
    lower, upper, delta = solve_bounds(A, b, objectives)
    return Bounds(lower, upper, delta, A.shape[1], sharp=not merged)
