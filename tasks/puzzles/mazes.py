"""Seeded maze generation and BFS shortest paths (after smearle/pathfinding-nca's setup).

A maze of size n is an (n + 2) x (n + 2) grid: a border of walls around an n x n interior whose cells
are walls with probability ``wall_p`` (0.5 by default, here 0.3: see below), and a random source and
target on distinct empty cells; a draw is rejected until BFS finds a path. The target is one BFS
shortest path (cells from source to target inclusive), found with a fixed neighbour order (up, down,
left, right) so it is reproducible. At p = 0.5 most draws are unsolvable or have very short paths on
small grids; 0.3 keeps the mean path length near the grid size (say so in the README).

A predicted path counts as correct if it is *a* shortest path: the predicted cells are exactly d + 1
empty cells (d the BFS distance), include source and target, and connect them within themselves
(then they are one shortest path, since any source-target walk has at least d + 1 cells).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

WALL, EMPTY = 1, 0


@dataclass
class Maze:
    walls: list[list[int]]  # 1 = wall
    source: tuple[int, int]
    target: tuple[int, int]
    path: list[tuple[int, int]]  # one shortest path, source ... target

    @property
    def size(self) -> int:
        return len(self.walls) - 2

    def to_dict(self) -> dict[str, Any]:
        return {"walls": self.walls, "source": list(self.source), "target": list(self.target),
                "path": [list(c) for c in self.path]}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Maze:
        return Maze([list(map(int, r)) for r in d["walls"]], tuple(d["source"]), tuple(d["target"]),  # type: ignore[arg-type]
                    [tuple(c) for c in d.get("path", [])])  # type: ignore[misc]


_STEPS = ((-1, 0), (1, 0), (0, -1), (0, 1))


def bfs(walls: list[list[int]], source: tuple[int, int], allowed: set[tuple[int, int]] | None = None
        ) -> dict[tuple[int, int], tuple[int, int] | None]:
    """Parent pointers of a BFS over empty cells (restricted to ``allowed`` if given)."""
    parent: dict[tuple[int, int], tuple[int, int] | None] = {source: None}
    queue = deque([source])
    H, W = len(walls), len(walls[0])
    while queue:
        y, x = queue.popleft()
        for dy, dx in _STEPS:
            c = (y + dy, x + dx)
            if 0 <= c[0] < H and 0 <= c[1] < W and walls[c[0]][c[1]] == EMPTY and c not in parent:
                if allowed is None or c in allowed:
                    parent[c] = (y, x)
                    queue.append(c)
    return parent


def shortest_path(walls: list[list[int]], source: tuple[int, int], target: tuple[int, int]
                  ) -> list[tuple[int, int]] | None:
    parent = bfs(walls, source)
    if target not in parent:
        return None
    path: list[tuple[int, int]] = []
    c: tuple[int, int] | None = target
    while c is not None:
        path.append(c)
        c = parent[c]
    return path[::-1]


def generate(size: int, seed: int, wall_p: float = 0.3, max_tries: int = 10_000) -> Maze:
    import random

    rng = random.Random(seed)
    n = size + 2
    for _ in range(max_tries):
        walls = [[1 if (y in (0, n - 1) or x in (0, n - 1) or rng.random() < wall_p) else 0 for x in range(n)]
                 for y in range(n)]
        empty = [(y, x) for y in range(n) for x in range(n) if walls[y][x] == EMPTY]
        if len(empty) < 2:
            continue
        source, target = rng.sample(empty, 2)
        path = shortest_path(walls, source, target)
        if path is not None:
            return Maze(walls, source, target, path)
    raise RuntimeError(f"no solvable {size}x{size} maze in {max_tries} draws")


def check_maze(m: Maze) -> None:
    """A one-line ValueError unless the maze is well formed and solvable."""
    n = len(m.walls)
    if n < 3 or any(len(r) != n for r in m.walls):
        raise ValueError("a maze must be a square grid of at least 3x3")
    for name, c in (("source", m.source), ("target", m.target)):
        if not (0 <= c[0] < n and 0 <= c[1] < n) or m.walls[c[0]][c[1]] != EMPTY:
            raise ValueError(f"the maze's {name} {c} is not an empty cell")
    if shortest_path(m.walls, m.source, m.target) is None:
        raise ValueError("unsolvable maze: no path from source to target")


def is_shortest_path(m: Maze, cells: set[tuple[int, int]]) -> bool:
    d = len(m.path) - 1
    if len(cells) != d + 1 or m.source not in cells or m.target not in cells:
        return False
    if any(m.walls[y][x] != EMPTY for y, x in cells):
        return False
    return m.target in bfs(m.walls, m.source, allowed=cells)


def parse_maze_file(text: str) -> list[Maze]:
    """Mazes as text blocks separated by blank lines: ``#`` wall, ``.`` empty, ``S`` source, ``T`` target.
    An unsolvable or malformed maze is a one-line ValueError naming it."""
    blocks = [b for b in text.replace("\r", "").split("\n\n") if b.strip()]
    out = []
    for i, block in enumerate(blocks, 1):
        rows = [r.strip() for r in block.strip().split("\n")]
        try:
            walls = [[1 if ch == "#" else 0 for ch in r] for r in rows]
            cells = {ch: (y, x) for y, r in enumerate(rows) for x, ch in enumerate(r) if ch in "ST"}
            if "S" not in cells or "T" not in cells:
                raise ValueError("needs one S and one T")
            if any(ch not in "#.ST" for r in rows for ch in r):
                raise ValueError("only # . S T are allowed")
            m = Maze(walls, cells["S"], cells["T"], [])
            check_maze(m)
        except ValueError as exc:
            raise ValueError(f"maze {i}: {exc}") from None
        m.path = shortest_path(m.walls, m.source, m.target) or []
        out.append(m)
    if not out:
        raise ValueError("no mazes in the file")
    return out
