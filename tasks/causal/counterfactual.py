"""Counterfactual queries of a binary treatment X on a binary outcome Y, their exact evaluation on an SCM,
and the twin network the LP and the NCM evaluate them on.

Write Y_1, Y_0 for the outcome under do(X = 1) and do(X = 0), in the same unit (the same exogenous
configuration) as the factual X and Y. Every query is a ratio of two expectations over the joint
counterfactual distribution P(X, Y, Y_1, Y_0):

- ``ett``, the effect of treatment on the treated: E[Y_1 - Y_0 | X = 1]
  = (P(X = 1, Y_1 = 1) - P(X = 1, Y_0 = 1)) / P(X = 1);
- ``pn``, the probability of necessity (Tian & Pearl 2000): P(Y_0 = 0 | X = 1, Y = 1), the chance that
  a treated unit with the outcome would not have had it untreated;
- ``ps``, the probability of sufficiency: P(Y_1 = 1 | X = 0, Y = 0), the chance that an untreated unit
  without the outcome would have had it treated;
- ``pns``, the probability of necessity and sufficiency: P(Y_1 = 1, Y_0 = 0).

Each denominator is an observational probability (1 for ``pns``); where it is 0 the query is
undefined and evaluating it is a one-line ValueError.

**Exogenous convention.** A table P(V = 1 | inputs) fixes every interventional distribution but not
how a unit's responses at different inputs are coupled, which counterfactuals depend on. Here (for
the generating SCMs and for the NCMs alike) a variable's responses at different inputs are
independent given the latents: V = r_V(pa_V) with the response function r_V drawn with
P(r_V) = prod_c p_c^{r_V(c)} (1 - p_c)^{1 - r_V(c)} over its parent configurations c, where
p_c = P(V = 1 | pa_V = c, latents). (The threshold coupling V = 1[U_V < p] would instead make every
unconfounded mechanism comonotone and put PNS exactly on its lower bound, where no bounding method
can be scored for containing it.)

**The twin network.** A state is one joint assignment of the factual world and the worlds under
do(X = 1) and do(X = 0): non-descendants of X take one value in all three, X is 1 and 0 in the
intervened worlds, and each strict descendant of X has its own value per world. A state is kept only
if it is consistent: a variable whose parents agree in two worlds agrees there too (the same
response function sees the same input). Its probability is a product over c-components of the
chance that the component's response functions produce its values in every world where they act.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from harness.tasks.causal.graphs import Diagram

CF_QUERIES = ("ett", "pn", "ps", "pns")
# the event each query conditions on, for the error that says it has probability 0
_DENOMINATOR = {"ett": "X = 1", "pn": "X = 1, Y = 1", "ps": "X = 0, Y = 0", "pns": ""}


def weights(query: str) -> tuple[Any, Any]:
    """(numerator, denominator) weights over the cells [x, y, y_1, y_0] of P(X, Y, Y_1, Y_0): the
    query is sum(num * P) / sum(den * P). ``ate`` and ``pyx`` are here too, so that the twin network
    can be checked against the interventional LP."""
    import numpy as np

    x, y, y1, y0 = np.indices((2, 2, 2, 2))
    one = np.ones((2, 2, 2, 2))
    table = {
        "ett": ((x == 1) * (y1 - y0), (x == 1) * one),
        "pn": ((x == 1) & (y == 1) & (y0 == 0), (x == 1) & (y == 1)),
        "ps": ((x == 0) & (y == 0) & (y1 == 1), (x == 0) & (y == 0)),
        "pns": ((y1 == 1) & (y0 == 0), one),
        "ate": (y1 - y0, one),
        "pyx": (y1 * one, one),
    }
    if query not in table:
        raise ValueError(f"unknown query {query!r}; choose one of {', '.join(table)}")
    num, den = table[query]
    return num.astype(float), den.astype(float)


def undefined(query: str) -> ValueError:
    return ValueError(f"{query} is undefined here: P({_DENOMINATOR[query]}) = 0")


def value(query: str, table: Any) -> float:
    """The query on a joint counterfactual table P(X, Y, Y_1, Y_0) (shape [2, 2, 2, 2])."""
    num, den = weights(query)
    d = float((den * table).sum())
    if d <= 0:
        raise undefined(query)
    return float((num * table).sum()) / d


# one latent configuration: its probability and each variable's P(V = 1 | pa_V) at it (an array
# indexed by the parents' values in the diagram's order; a number for a parentless variable)
Mixture = Iterable[tuple[float, Mapping[str, Any]]]


def exact_table(d: Diagram, mixture: Mixture, x: str = "X", y: str = "Y") -> Any:
    """P(X, Y, Y_1, Y_0) by abduction, action and prediction over every exogenous configuration, exactly.

    An exogenous configuration is a latent configuration plus one response function per variable,
    with the probability of the module docstring's convention. It fixes the factual world and, the
    same response functions acting with X set (action), the worlds under do(X = 1) and do(X = 0)
    (prediction); its probability goes to the cell (X, Y, Y_1, Y_0) they give. Conditioning on the
    factual evidence (abduction: the posterior over exogenous configurations given X, Y) is then the
    ratio :func:`value` takes. No sampling: every configuration of positive probability is visited."""
    import numpy as np

    order = d.order()
    pa = {v: d.parents(v) for v in order}
    table = np.zeros((2, 2, 2, 2))
    for weight, probs in mixture:
        type_probs = []
        for v in order:
            p_c = np.asarray(probs[v], dtype=float).reshape(-1, order="F")  # index c = sum_j pa_j 2^j
            bits = (np.arange(2 ** len(p_c))[:, None] >> np.arange(len(p_c))[None, :]) & 1  # [types, configs]
            type_probs.append(np.prod(np.where(bits == 1, p_c[None, :], 1 - p_c[None, :]), axis=1))
        for combo in itertools.product(*(range(len(tp)) for tp in type_probs)):
            w = weight * float(np.prod([tp[t] for tp, t in zip(type_probs, combo, strict=True)]))
            if w == 0.0:
                continue
            resp = dict(zip(order, combo, strict=True))

            def world(do: int | None, resp: dict[str, int] = resp) -> dict[str, int]:
                vals: dict[str, int] = {}
                for v in order:
                    if v == x and do is not None:
                        vals[v] = do
                        continue
                    c = sum(vals[a] << j for j, a in enumerate(pa[v]))
                    vals[v] = (resp[v] >> c) & 1
                return vals

            f, w1, w0 = world(None), world(1), world(0)
            table[f[x], f[y], w1[y], w0[y]] += w
    return table


@dataclass(frozen=True)
class Twin:
    """The consistent states of the twin network of ``d`` for treatment x and outcome y."""

    desc: tuple[str, ...]  # strict descendants of x (their values may differ across worlds)
    worlds: Any  # [3, S, n] int: every variable's value in the factual, do(x=1) and do(x=0) worlds
    live: dict[str, tuple[int, ...]]  # worlds in which a variable's own response function acts
    new: dict[str, Any]  # [3, S] bool: v acts in world w on a parent configuration no earlier world gave it
    cells: Any  # [S, 4] int: (x, y, y_1, y_0) of each state
    factual: Any  # [S] int: the factual configuration index k (v_i = bit i of k)


@lru_cache(maxsize=64)
def twin(d: Diagram, x: str = "X", y: str = "Y") -> Twin:
    import numpy as np

    from harness.tasks.causal.scm import configs

    names = d.names
    n, xi = len(names), names.index(x)
    desc = tuple(v for v in names if x in d.ancestors(v))
    di = [names.index(v) for v in desc]
    V = configs(n)
    B = configs(len(di)) if di else np.zeros((1, 0), dtype=int)
    k, b1, b0 = (a.ravel() for a in np.meshgrid(np.arange(len(V)), np.arange(len(B)), np.arange(len(B)),
                                                indexing="ij"))
    worlds = np.stack([V[k], V[k], V[k]])
    worlds[1][:, xi], worlds[2][:, xi] = 1, 0
    worlds[1][:, di], worlds[2][:, di] = B[b1], B[b0]
    live: dict[str, tuple[int, ...]] = {v: (0, 1, 2) if v in desc else (0,) for v in names}

    def pa_index(v: str) -> Any:  # [3, S]: v's parent configuration in each world
        cols = [names.index(a) for a in d.parents(v)]
        return (worlds[:, :, cols] * (2 ** np.arange(len(cols)))).sum(axis=2)

    keep = np.ones(worlds.shape[1], dtype=bool)
    for v in desc:
        c, val = pa_index(v), worlds[:, :, names.index(v)]
        for w, w2 in ((0, 1), (0, 2), (1, 2)):
            keep &= (c[w] != c[w2]) | (val[w] == val[w2])
    worlds = worlds[:, keep]
    new = {}
    for v in names:
        c = pa_index(v)
        m = np.zeros(c.shape, dtype=bool)
        for w in live[v]:
            m[w] = np.all([c[w] != c[w2] for w2 in live[v] if w2 < w], axis=0) if w else True
        new[v] = m
    yi = names.index(y)
    cells = np.stack([worlds[0][:, xi], worlds[0][:, yi], worlds[1][:, yi], worlds[2][:, yi]], axis=1)
    return Twin(desc, worlds, live, new, cells, k[keep])


def state_weights(tw: Twin, query: str) -> tuple[Any, Any]:
    """(numerator, denominator) weight of every twin state for the query."""
    num, den = weights(query)
    idx = tuple(tw.cells.T)
    return num[idx], den[idx]
