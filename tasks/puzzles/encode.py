"""Puzzles as tensors, and predictions back as puzzles.

Maze (size n, an (n+2)^2 grid with its border): 3 input channels (wall, source, target); the target
is the path mask (1 on the cells of the reference shortest path); a prediction is the set of cells
whose path logit is > 0. Sudoku: 10 input channels on the 9x9 grid (one-hot given digit 1..9, and
a blank flag); the target is the solution digit - 1 per cell; a prediction is the arg-max digit,
with the givens kept.
"""

from __future__ import annotations

from typing import Any

from harness.tasks.puzzles.mazes import Maze
from harness.tasks.puzzles.sudoku import Sudoku

CHANNELS = {"maze": (3, 1), "sudoku": (10, 9)}


def maze_input(m: Maze) -> Any:
    import torch

    walls = torch.tensor(m.walls, dtype=torch.float32)
    src, tgt = torch.zeros_like(walls), torch.zeros_like(walls)
    src[m.source] = 1.0
    tgt[m.target] = 1.0
    return torch.stack([walls, src, tgt])


def maze_target(m: Maze) -> Any:
    import torch

    y = torch.zeros(len(m.walls), len(m.walls), dtype=torch.float32)
    for c in m.path:
        y[c] = 1.0
    return y[None]


def maze_cells(logits: Any) -> set[tuple[int, int]]:
    """[1, H, W] path logits -> the predicted path cells."""
    idx = (logits[0] > 0).nonzero().tolist()
    return {(int(a), int(b)) for a, b in idx}


def sudoku_input(s: Sudoku) -> Any:
    import torch

    g = torch.tensor(s.puzzle).view(9, 9)
    x = torch.zeros(10, 9, 9)
    for d in range(1, 10):
        x[d - 1] = (g == d).float()
    x[9] = (g == 0).float()
    return x


def sudoku_target(s: Sudoku) -> Any:
    import torch

    return torch.tensor(s.solution).view(9, 9) - 1


def sudoku_grid(logits: Any, puzzle: list[int]) -> list[int]:
    """[9, 9, 9] digit logits -> 81 digits, the givens kept."""
    pred = (logits.argmax(0).view(-1) + 1).tolist()
    return [p if p else int(q) for p, q in zip(puzzle, pred, strict=True)]
