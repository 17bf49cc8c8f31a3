"""The space of causal diagrams a PAG's class is parameterised over, edge type by edge type.

Each adjacency of the PAG takes one of five types (:data:`TYPES`): ``->``, ``<-``, ``<->``, or a
directed edge plus ``<->`` (``->+``, ``<-+``). The PAG's invariant marks rule types out *locally*,
with no enumeration of the class:

- an arrowhead at B on ``A *-> B``: B is no ancestor of A, so no ``B -> A`` edge;
- a tail at B on ``A *-- B``: B is an ancestor of A, so no ``A -> B`` edge (a cycle), and a pure
  ``<->`` only if B reaches A along another path (the membership check decides);
- a *visible* ``A --> B`` (Zhang 2008: some C not adjacent to B has an edge into A, or a collider
  path into A whose inner vertices are all parents of B) has no latent confounder: ``->`` only.

What the local rules cannot see (acyclicity, an arrowhead's ancestral constraint along longer paths,
inducing paths that would change the PAG) is left to the training's penalties and to
:meth:`StructureSpace.is_member`, the same test as the enumeration's: acyclic, every invariant mark
respected, and causal-learn's ``dag2pag`` giving the PAG back (graphs.py). A choice is one type
index into :data:`TYPES` per adjacency; each member of the class with the PAG's adjacencies is the
diagram of exactly one choice (tests check this against the enumerated class on the shipped graphs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from harness.tasks.causal.graphs import PAG, Diagram, Pair, _respects_marks, pag_of

TYPES = ("->", "<-", "<->", "->+", "<-+")  # the adjacency (a, b), a before b in the names: a -> b, b -> a, ...
FORWARD = (0, 3)  # types with a -> b
BACKWARD = (1, 4)  # types with b -> a
BIDIRECTED = (2, 3, 4)  # types with a latent shared by a and b
# the type with the same directed part and the bidirected part flipped (None: <-> has no bare twin,
# since the adjacency must stay)
BETA_FLIP = {0: 3, 3: 0, 1: 4, 4: 1, 2: None}


def visible(pag: PAG, a: str, b: str) -> bool:
    """Zhang's visibility of the PAG edge a --> b: no member has a latent confounder of a and b."""
    marks = pag.marks()

    def mark_at(u: str, v: str) -> str | None:  # the mark at v on the edge u *-* v, None if not adjacent
        if (u, v) in marks:
            return marks[(u, v)][1]
        if (v, u) in marks:
            return marks[(v, u)][0]
        return None

    adjacent_b = {u for u in pag.names if mark_at(u, b) is not None}

    def parent_of_b(u: str) -> bool:  # u --> b
        return mark_at(u, b) == ">" and mark_at(b, u) == "-"

    def collider_to_a(v: str, seen: frozenset[str]) -> bool:
        """Is there a C not adjacent to b with C *-> v <-> ... <-> a, every inner vertex a parent of b?
        (``v`` is an inner vertex already known to be a parent of b with v <-> its successor.)"""
        for c in pag.names:
            if c in seen or mark_at(c, v) != ">":
                continue
            if c not in adjacent_b and c != b:
                return True
            if parent_of_b(c) and mark_at(v, c) == ">" and collider_to_a(c, seen | {c}):
                return True
        return False

    for c in pag.names:
        if c in (a, b) or mark_at(c, a) != ">":
            continue
        if c not in adjacent_b:
            return True  # c *-> a with c not adjacent to b
        if parent_of_b(c) and mark_at(a, c) == ">" and collider_to_a(c, frozenset({a, b, c})):
            return True  # c <-> a, c --> b, and a collider path on into c from a vertex not adjacent to b
    return False


def allowed_types(pag: PAG, a: str, b: str, ma: str, mb: str) -> tuple[int, ...]:
    """The type indices the adjacency (a, b) with marks ``ma`` at a and ``mb`` at b may take."""
    out = []
    for t, _ in enumerate(TYPES):
        fwd, bwd = t in FORWARD, t in BACKWARD
        if (mb == ">" and bwd) or (ma == ">" and fwd):  # an arrowhead: that end is no ancestor of the other
            continue
        if (mb == "-" and fwd) or (ma == "-" and bwd):  # a tail: that end is an ancestor; the reverse is a cycle
            continue
        if ma == "-" and mb == "-":  # an undirected edge (selection bias): no causal diagram here
            continue
        if ma == ">" and mb == ">" and t != 2:  # a <-> b: neither is an ancestor of the other
            continue
        if ma == "-" and mb == ">" and t in BIDIRECTED and visible(pag, a, b):
            continue
        if mb == "-" and ma == ">" and t in BIDIRECTED and visible(pag, b, a):
            continue
        out.append(t)
    return tuple(out)


@dataclass(frozen=True)
class StructureSpace:
    """The PAG's adjacencies, their allowed types, and the membership test of a choice of types."""

    pag: PAG
    pairs: tuple[Pair, ...]  # the adjacencies, (a, b) with a before b in the names
    allowed: tuple[tuple[int, ...], ...]  # per adjacency, the allowed indices into TYPES

    @property
    def names(self) -> tuple[str, ...]:
        return self.pag.names

    def diagram(self, choice: Sequence[int]) -> Diagram:
        directed, bidirected = set(), set()
        for (a, b), t in zip(self.pairs, choice, strict=True):
            if t in FORWARD:
                directed.add((a, b))
            elif t in BACKWARD:
                directed.add((b, a))
            if t in BIDIRECTED:
                bidirected.add(frozenset((a, b)))
        return Diagram(self.names, frozenset(directed), frozenset(bidirected))

    def choice_of(self, d: Diagram) -> tuple[int, ...] | None:
        """The choice whose diagram is ``d`` (None: ``d`` has other adjacencies or a disallowed type)."""
        out = []
        for i, (a, b) in enumerate(self.pairs):
            bi = frozenset((a, b)) in d.bidirected
            fwd, bwd = (a, b) in d.directed, (b, a) in d.directed
            t = {(True, False, False): 0, (False, True, False): 1, (False, False, True): 2,
                 (True, False, True): 3, (False, True, True): 4}.get((fwd, bwd, bi))
            if t is None or t not in self.allowed[i]:
                return None
            out.append(t)
        adj = {frozenset(e) for e in d.directed} | set(d.bidirected)
        return tuple(out) if adj == {frozenset(p) for p in self.pairs} else None

    def is_member(self, choice: Sequence[int]) -> bool:
        return _member(self, tuple(int(t) for t in choice))

    def upgrade(self, choice: Sequence[int]) -> tuple[int, ...]:
        """A member containing the member ``choice`` to which no single adjacency can add an edge
        without leaving the class (a bidirected edge beside a directed one, or a directed edge beside
        a bidirected one), found greedily adjacency by adjacency. Only the class's maximal members
        matter for bounds (graphs.py), and this is one above ``choice``."""
        return _upgrade(self, tuple(int(t) for t in choice))


@lru_cache(maxsize=65536)
def _member(space: StructureSpace, choice: tuple[int, ...]) -> bool:
    if any(t not in ok for t, ok in zip(choice, space.allowed, strict=True)):
        return False
    d = space.diagram(choice)
    if not d.is_acyclic() or not _respects_marks(d, space.pag.marks()):
        return False
    return pag_of(d) == space.pag


SUPER_TYPES = {0: (3,), 1: (4,), 2: (3, 4), 3: (), 4: ()}  # the types whose edges contain a type's


@lru_cache(maxsize=65536)
def _upgrade(space: StructureSpace, choice: tuple[int, ...]) -> tuple[int, ...]:
    current, changed = choice, True
    while changed:
        changed = False
        for i, t in enumerate(current):
            for u in SUPER_TYPES[t]:
                alt = current[:i] + (u,) + current[i + 1:]
                if u in space.allowed[i] and space.is_member(alt):
                    current, changed = alt, True
                    break
    return current


@lru_cache(maxsize=256)
def structure_space(pag: PAG) -> StructureSpace:
    """The space of ``pag``; a one-line ValueError where an adjacency allows no type at all."""
    pairs, allowed = [], []
    for a, ma, mb, b in sorted(pag.edges, key=lambda e: (pag.names.index(e[0]), pag.names.index(e[3]))):
        ok = allowed_types(pag, a, b, ma, mb)
        if not ok:
            raise ValueError(f"not a PAG: no causal diagram has the edge {a} {'<' if ma == '>' else ma}-{mb} {b}")
        pairs.append((a, b))
        allowed.append(ok)
    return StructureSpace(pag, tuple(pairs), tuple(allowed))
