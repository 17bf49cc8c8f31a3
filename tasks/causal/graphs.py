"""Causal diagrams (directed + bidirected edges over observed binary variables) and PAGs.

A PAG is written one edge per ``;`` in causal-learn's notation, ``A o-> B; B --> C; A <-> C``: the
left/right characters are the marks at A/B (``<``/``>`` arrowhead, ``o`` circle, ``-`` tail).
The PAG of a diagram is causal-learn's ``dag2pag`` of the DAG in which each bidirected edge is an
explicit latent parent of its two ends.

The members of a PAG's class that matter for bounds are enumerated by :func:`diagrams_of_pag`: every
diagram over the PAG's skeleton (each adjacency ``->``, ``<-``, ``<->`` or a directed edge plus
``<->``) that is acyclic, respects the PAG's invariant marks (an arrowhead at B: B is no ancestor
of A; a tail at A: A is an ancestor of B) and whose ``dag2pag`` is the PAG again. Only members with
the same adjacencies are considered (an inducing path may give a member with fewer edges; such a
member is a sub-diagram of one enumerated here in every case we ship, and sub-diagrams never widen
bounds). :func:`maximal` keeps the members no other member contains: a sub-diagram's SCMs are SCMs
of its super-diagram, so the union of bounds over the class is the union over its maximal members.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import re
from dataclasses import dataclass
from functools import lru_cache

Pair = tuple[str, str]


@dataclass(frozen=True)
class Diagram:
    names: tuple[str, ...]
    directed: frozenset[Pair]  # (parent, child)
    bidirected: frozenset[frozenset[str]]

    def parents(self, v: str) -> tuple[str, ...]:
        return tuple(a for a in self.names if (a, v) in self.directed)

    def order(self) -> tuple[str, ...]:
        """A topological order (ties broken by the name order); raises ValueError on a cycle."""
        left, out = list(self.names), []
        while left:
            free = [v for v in left if all(p in out for p in self.parents(v))]
            if not free:
                raise ValueError("the directed edges have a cycle")
            out.append(free[0])
            left.remove(free[0])
        return tuple(out)

    def is_acyclic(self) -> bool:
        try:
            self.order()
        except ValueError:
            return False
        return True

    def ancestors(self, v: str) -> set[str]:
        seen, stack = set(), [v]
        while stack:
            for p in self.parents(stack.pop()):
                if p not in seen:
                    seen.add(p)
                    stack.append(p)
        return seen

    def components(self) -> list[tuple[str, ...]]:
        """c-components (connected by bidirected edges), in name order."""
        comp = {v: {v} for v in self.names}
        for e in self.bidirected:
            a, b = sorted(e)
            merged = comp[a] | comp[b]
            for v in merged:
                comp[v] = merged
        seen, out = set(), []
        for v in self.names:
            key = frozenset(comp[v])
            if key not in seen:
                seen.add(key)
                out.append(tuple(x for x in self.names if x in key))
        return out

    def contains(self, other: Diagram) -> bool:
        return other.directed <= self.directed and other.bidirected <= self.bidirected

    def __str__(self) -> str:
        parts = [f"{a} -> {b}" for a, b in sorted(self.directed)]
        parts += [f"{a} <-> {b}" for a, b in sorted(tuple(sorted(e)) for e in self.bidirected)]
        return "; ".join(parts)


def diagram(names: str | tuple[str, ...], directed: str = "", bidirected: str = "") -> Diagram:
    """``diagram("ZXY", "Z>X X>Y", "X-Y")``: a compact constructor for the named graphs."""
    nm = tuple(names)
    d = frozenset(tuple(e.split(">")) for e in directed.split())
    b = frozenset(frozenset(e.split("-")) for e in bidirected.split())
    return Diagram(nm, d, b)  # type: ignore[arg-type]


# the shipped structural families (binary variables; X the treatment, Y the outcome)
GRAPHS: dict[str, Diagram] = {
    "iv": diagram("ZXY", "Z>X X>Y", "X-Y"),
    "frontdoor": diagram("XMY", "X>M M>Y", "X-Y"),
    "backdoor": diagram("WZXY", "W>X Z>X Z>Y X>Y"),
    "bow": diagram("ZXY", "Z>Y X>Y", "X-Y"),
    "chain": diagram("ZXMY", "Z>X X>M M>Y", "X-M"),
}

# ---------------------------------------------------------------- PAGs

Marks = tuple[str, str]  # (mark at first node, mark at second node), each "-", "o" or ">"
_EDGE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s+([<o-])-([>o-])\s+([A-Za-z_][A-Za-z0-9_]*)\s*$")


@dataclass(frozen=True)
class PAG:
    names: tuple[str, ...]
    edges: frozenset[tuple[str, str, str, str]]  # (a, mark at a, mark at b, b) with a before b in names

    def marks(self) -> dict[Pair, Marks]:
        return {(a, b): (ma, mb) for a, ma, mb, b in self.edges}

    def __str__(self) -> str:
        out = []
        for a, ma, mb, b in sorted(self.edges, key=lambda e: (self.names.index(e[0]), self.names.index(e[3]))):
            out.append(f"{a} {'<' if ma == '>' else ma}-{mb} {b}")
        return "; ".join(out)


def _make_pag(names: tuple[str, ...], edges: list[tuple[str, str, str, str]]) -> PAG:
    canon = set()
    for a, ma, mb, b in edges:
        if names.index(a) > names.index(b):
            a, ma, mb, b = b, mb, ma, a
        canon.add((a, ma, mb, b))
    return PAG(names, frozenset(canon))


def parse_pag(text: str, names: tuple[str, ...] | None = None) -> PAG:
    """Parse ``A o-> B; B --> C``; a malformed string is a one-line ValueError."""
    edges, seen_nodes, pairs = [], [], set()
    for chunk in (c for c in re.split(r"[;\n,]", text) if c.strip()):
        m = _EDGE.match(chunk)
        if not m:
            raise ValueError(f"not a PAG edge: {chunk.strip()!r} (write e.g. 'A o-> B; B --> C')")
        a, left, right, b = m.groups()
        if a == b:
            raise ValueError(f"not a PAG: self-loop on {a!r}")
        if frozenset((a, b)) in pairs:
            raise ValueError(f"not a PAG: two edges between {a!r} and {b!r}")
        pairs.add(frozenset((a, b)))
        edges.append((a, ">" if left == "<" else left, right, b))
        seen_nodes += [x for x in (a, b) if x not in seen_nodes]
    if not edges:
        raise ValueError("not a PAG: no edges")
    if names is None:
        names = tuple(seen_nodes)
    else:
        extra = [v for v in seen_nodes if v not in names]
        if extra:
            raise ValueError(f"not a PAG over {', '.join(names)}: unknown node(s) {', '.join(extra)}")
    return _make_pag(tuple(names), edges)


def _latent_dag(d: Diagram):  # noqa: ANN202 - causal-learn types
    from causallearn.graph.Dag import Dag
    from causallearn.graph.GraphNode import GraphNode

    nodes = {n: GraphNode(n) for n in d.names}
    latents = []
    for i, _ in enumerate(sorted(tuple(sorted(e)) for e in d.bidirected)):
        latents.append(GraphNode(f"_L{i}"))
    dag = Dag(list(nodes.values()) + latents)
    for a, b in sorted(d.directed):
        dag.add_directed_edge(nodes[a], nodes[b])
    for lat, e in zip(latents, sorted(tuple(sorted(e)) for e in d.bidirected), strict=True):
        dag.add_directed_edge(lat, nodes[e[0]])
        dag.add_directed_edge(lat, nodes[e[1]])
    return dag, latents


def _mark(endpoint) -> str:  # noqa: ANN001 - causal-learn Endpoint (an enum without a hash)
    return {-1: "-", 1: ">", 2: "o"}[int(endpoint.value)]


def _edges_of(g) -> list[tuple[str, str, str, str]]:  # noqa: ANN001 - causal-learn GeneralGraph
    return [(e.get_node1().get_name(), _mark(e.get_endpoint1()), _mark(e.get_endpoint2()), e.get_node2().get_name())
            for e in g.get_graph_edges()]


@lru_cache(maxsize=4096)
def pag_of(d: Diagram) -> PAG:
    """causal-learn's dag2pag of the diagram (bidirected edges as explicit latents)."""
    from causallearn.utils.DAG2PAG import dag2pag

    dag, latents = _latent_dag(d)
    with contextlib.redirect_stdout(io.StringIO()):  # dag2pag prints progress lines
        g = dag2pag(dag, latents)
    edges = _edges_of(g)
    return _make_pag(d.names, edges)


def pag_from_fci(data, names: tuple[str, ...], alpha: float = 0.01) -> PAG:  # noqa: ANN001 - ndarray
    """The PAG FCI learns from discrete samples (causal-learn, chi-square tests)."""
    from causallearn.search.ConstraintBased.FCI import fci

    with contextlib.redirect_stdout(io.StringIO()):
        g, _ = fci(data, independence_test_method="chisq", alpha=alpha, show_progress=False, verbose=False,
                   node_names=list(names))
    edges = _edges_of(g)
    if not edges:
        raise ValueError("FCI found no edges")
    return _make_pag(names, edges)


_OPTIONS = ("->", "<-", "<->", "->+", "<-+")  # "+": the directed edge plus a bidirected one


@lru_cache(maxsize=256)
def diagrams_of_pag(pag: PAG) -> tuple[Diagram, ...]:
    """Every diagram over the PAG's adjacencies whose PAG is this one (see the module docstring)."""
    marks = pag.marks()
    pairs = sorted(marks)
    out = []
    for choice in itertools.product(_OPTIONS, repeat=len(pairs)):
        directed, bidirected = set(), set()
        for (a, b), opt in zip(pairs, choice, strict=True):
            if opt.startswith("->"):
                directed.add((a, b))
            elif opt.startswith("<-") and opt != "<->":
                directed.add((b, a))
            if opt in ("<->", "->+", "<-+"):
                bidirected.add(frozenset((a, b)))
        d = Diagram(pag.names, frozenset(directed), frozenset(bidirected))
        if not d.is_acyclic() or not _respects_marks(d, marks):
            continue
        if pag_of(d) == pag:
            out.append(d)
    return tuple(out)


def _respects_marks(d: Diagram, marks: dict[Pair, Marks]) -> bool:
    anc = {v: d.ancestors(v) for v in d.names}
    for (a, b), (ma, mb) in marks.items():
        for x, y, m in ((a, b, mb), (b, a, ma)):  # mark m at y on the edge x *-m y
            if m == ">" and y in anc[x]:
                return False
            if m == "-" and y not in anc[x]:
                return False
    return True


def maximal(diagrams: tuple[Diagram, ...]) -> tuple[Diagram, ...]:
    return tuple(d for d in diagrams if not any(o != d and o.contains(d) for o in diagrams))


def check_pag(pag: PAG) -> tuple[Diagram, ...]:
    """The PAG's class, or a one-line ValueError when no causal diagram has this PAG."""
    members = diagrams_of_pag(pag)
    if not members:
        raise ValueError(f"not a PAG: no causal diagram over its adjacencies has the PAG {pag}")
    return members


_DEDGE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*(->|<->)\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


def parse_diagram(text: str, names: tuple[str, ...]) -> Diagram:
    """``Z -> X; X -> Y; X <-> Y`` over ``names``; a malformed or cyclic one is a one-line ValueError."""
    directed, bidirected = set(), set()
    for chunk in (c for c in re.split(r"[;\n,]", text) if c.strip()):
        m = _DEDGE.match(chunk)
        if not m or m.group(1) not in names or m.group(3) not in names or m.group(1) == m.group(3):
            raise ValueError(f"not a diagram edge over {', '.join(names)}: {chunk.strip()!r} "
                             "(write 'A -> B' or 'A <-> B')")
        a, kind, b = m.groups()
        (directed.add((a, b)) if kind == "->" else bidirected.add(frozenset((a, b))))
    d = Diagram(tuple(names), frozenset(directed), frozenset(bidirected))
    if not d.is_acyclic():
        raise ValueError("not a causal diagram: the directed edges have a cycle")
    return d
