"""Seeded random binary SCMs on a diagram: exact observational distribution, exact interventional
queries, and samples.

Each bidirected edge is a fair binary latent; each variable's mechanism is a table
P(V = 1 | parents, its latents) drawn from Beta(0.5, 0.5) and clipped to [0.03, 0.97] (strong but
positive effects and confounding: every configuration keeps positive probability).

Configurations are indexed by ``k`` with ``v_i = (k >> i) & 1`` for the i-th name of the diagram.
Queries: ``pyx`` = P(Y = 1 | do(X = 1)); ``ate`` = P(Y = 1 | do(X = 1)) - P(Y = 1 | do(X = 0)).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from harness.tasks.causal.graphs import Diagram

QUERIES = ("ate", "pyx")


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

    def query(self, query: str, x: str = "X", y: str = "Y") -> float:
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
    """No-assumption bounds: P(Y_1 = 1) in [P(X=1, Y=1), P(X=1, Y=1) + P(X=0)]."""
    V = configs(len(names))
    xi, yi = names.index(x), names.index(y)
    p11 = float(p[(V[:, xi] == 1) & (V[:, yi] == 1)].sum())
    p01 = float(p[(V[:, xi] == 0) & (V[:, yi] == 1)].sum())
    px1 = float(p[V[:, xi] == 1].sum())
    if query == "pyx":
        return p11, p11 + 1 - px1
    return p11 - p01 - px1, p11 + (1 - px1) - p01
