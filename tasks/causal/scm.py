"""Seeded random binary SCMs on a diagram: exact observational distribution, exact interventional
queries, and samples.

Each bidirected edge is a fair binary latent; each variable's mechanism is a table
P(V = 1 | parents, its latents) drawn from Beta(0.5, 0.5) and clipped to [0.03, 0.97] (strong but
positive effects and confounding: every configuration keeps positive probability).

Configurations are indexed by ``k`` with ``v_i = (k >> i) & 1`` for the i-th name of the diagram.
Queries: ``pyx`` = P(Y = 1 | do(X = 1)); ``ate`` = P(Y = 1 | do(X = 1)) - P(Y = 1 | do(X = 0)); the
counterfactual ``ett``, ``pn``, ``ps``, ``pns`` are defined in counterfactual.py, which also fixes how
the tables become exogenous noise (a variable's responses at different inputs are independent given
the latents); the interventional queries do not depend on that choice.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from harness.tasks.causal.counterfactual import CF_QUERIES, exact_table, undefined, value
from harness.tasks.causal.graphs import Diagram

QUERIES = ("ate", "pyx", *CF_QUERIES)


def configs(n: int) -> Any:
    import numpy as np

    k = np.arange(2**n)
    return (k[:, None] >> np.arange(n)[None, :]) & 1  # [2^n, n]


@dataclass
class SCM:
    diagram: Diagram
    latents: list[tuple[str, str]]
    tables: dict[str, Any]  # name -> array indexed by (parent values..., latent values...)

    def _inputs(self, v: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
        pa = self.diagram.parents(v)
        lat = tuple(i for i, e in enumerate(self.latents) if v in e)
        return pa, lat

    def joint(self, do: dict[str, int] | None = None) -> Any:
        """P(v) over all 2^n configurations (under ``do``: the intervened variable is fixed)."""
        import numpy as np

        names = self.diagram.names
        V = configs(len(names))
        total = np.zeros(len(V))
        for u in itertools.product((0, 1), repeat=len(self.latents)):
            p = np.full(len(V), 0.5 ** len(self.latents))
            for j, v in enumerate(names):
                if do and v in do:
                    p *= V[:, j] == do[v]
                    continue
                pa, lat = self._inputs(v)
                idx = tuple(V[:, names.index(a)] for a in pa) + tuple(np.full(len(V), u[i]) for i in lat)
                p1 = self.tables[v][idx] if idx else np.full(len(V), float(self.tables[v]))
                p *= np.where(V[:, j] == 1, p1, 1 - p1)
            total += p
        return total

    def mixture(self) -> list[tuple[float, dict[str, Any]]]:
        """The latent configurations (each fair binary latent 0 or 1) with each variable's table at them."""
        out = []
        for u in itertools.product((0, 1), repeat=len(self.latents)):
            probs = {}
            for v in self.diagram.names:
                pa, lat = self._inputs(v)
                probs[v] = self.tables[v][(slice(None),) * len(pa) + tuple(u[i] for i in lat)]
            out.append((0.5 ** len(self.latents), probs))
        return out

    def counterfactual_table(self, x: str = "X", y: str = "Y") -> Any:
        """P(X, Y, Y_1, Y_0), exactly (counterfactual.exact_table over this SCM's exogenous configurations)."""
        return exact_table(self.diagram, self.mixture(), x, y)

    def query(self, query: str, x: str = "X", y: str = "Y") -> float:
        if query in CF_QUERIES:
            return value(query, self.counterfactual_table(x, y))
        names = self.diagram.names
        V = configs(len(names))
        yi = names.index(y)

        def p_y(xv: int) -> float:
            return float(self.joint({x: xv})[V[:, yi] == 1].sum())

        return p_y(1) if query == "pyx" else p_y(1) - p_y(0)


def random_scm(d: Diagram, seed: int) -> SCM:
    import numpy as np

    rng = np.random.default_rng(seed)
    latents = sorted(tuple(sorted(e)) for e in d.bidirected)
    tables = {}
    for v in d.names:
        k = len(d.parents(v)) + sum(v in e for e in latents)
        tables[v] = np.clip(rng.beta(0.5, 0.5, size=(2,) * k), 0.03, 0.97)
    return SCM(d, latents, tables)  # type: ignore[arg-type]


def sample_counts(p: Any, n: int, seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed + 7919).multinomial(n, p / p.sum())


def counts_to_rows(counts: Any, n_vars: int) -> Any:
    """Samples as a [n, n_vars] int array (for FCI)."""
    import numpy as np

    V = configs(n_vars)
    return np.repeat(V, counts, axis=0)


def manski(p: Any, names: tuple[str, ...], query: str, x: str = "X", y: str = "Y") -> tuple[float, float]:
    """No-assumption bounds: P(Y_1 = 1) in [P(X=1, Y=1), P(X=1, Y=1) + P(X=0)]. For the counterfactual
    queries, the sharp bounds from P(x, y) alone (X -> Y with arbitrary confounding; Tian & Pearl 2000):
    ETT in [P(Y=1 | X=1) - 1, P(Y=1 | X=1)], PN and PS in [0, 1], PNS in [0, P(X=1, Y=1) + P(X=0, Y=0)]."""
    V = configs(len(names))
    xi, yi = names.index(x), names.index(y)
    p11 = float(p[(V[:, xi] == 1) & (V[:, yi] == 1)].sum())
    p01 = float(p[(V[:, xi] == 0) & (V[:, yi] == 1)].sum())
    px1 = float(p[V[:, xi] == 1].sum())
    if query == "pyx":
        return p11, p11 + 1 - px1
    if query == "ate":
        return p11 - p01 - px1, p11 + (1 - px1) - p01
    total = float(p.sum())
    if query == "ett":
        if px1 <= 0:
            raise undefined(query)
        return p11 / px1 - 1, p11 / px1
    if query == "pns":
        return 0.0, (p11 + (total - px1 - p01)) / total
    num = p11 if query == "pn" else total - px1 - p01
    if num <= 0:
        raise undefined(query)
    return 0.0, 1.0
