"""One bounding problem as it travels in a request: variable names, the observed distribution (or
sample frequencies), the PAG, the true diagram (for the known-graph oracle only) and the query."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness.tasks.causal.graphs import PAG, Diagram, parse_diagram, parse_pag
from harness.tasks.causal.scm import QUERIES
from harness.types import Message


@dataclass
class Problem:
    names: tuple[str, ...]
    probs: list[float]
    n: int  # sample size behind ``probs`` (0: the exact distribution)
    pag_text: str
    diagram_text: str
    query: str
    x: str = "X"
    y: str = "Y"

    def to_options(self) -> dict[str, Any]:
        return {"names": list(self.names), "probs": self.probs, "n": self.n, "pag": self.pag_text,
                "diagram": self.diagram_text, "query": self.query, "x": self.x, "y": self.y}

    def pag(self) -> PAG:
        return parse_pag(self.pag_text, self.names)

    def diagram(self) -> Diagram:
        return parse_diagram(self.diagram_text, self.names)

    def p(self) -> Any:
        import numpy as np

        return np.asarray(self.probs, dtype=float)


def problem_of(messages: Sequence[Message]) -> Problem:
    """The problem in the first part that carries one; a one-line ValueError otherwise."""
    for m in messages:
        for part in m.content:
            o = part.options or {}
            if "probs" in o and "names" in o:
                names = tuple(str(v) for v in o["names"])
                probs = [float(v) for v in o["probs"]]
                if len(probs) != 2 ** len(names) or min(probs) < 0 or sum(probs) <= 0:
                    raise ValueError(f"the distribution needs {2 ** len(names)} non-negative values")
                query = str(o.get("query", "ate"))
                if query not in QUERIES:
                    raise ValueError(f"unknown query {query!r}; choose one of {', '.join(QUERIES)}")
                x, y = str(o.get("x", "X")), str(o.get("y", "Y"))
                if x not in names or y not in names:
                    raise ValueError(f"treatment {x!r} / outcome {y!r} not among the variables {', '.join(names)}")
                return Problem(names, probs, int(o.get("n", 0)), str(o.get("pag", "")), str(o.get("diagram", "")),
                               query, x, y)
    raise ValueError("no bounding problem in the request (a part with options names/probs/pag)")
