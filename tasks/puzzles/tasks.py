"""Grid puzzles for iterated networks: ``maze_path`` (shortest path, easy-to-hard sizes) and ``sudoku``.

``maze_path``: train on ``-T n_train`` seeded mazes of ``-T train_size`` (16), test on ``-T n_test``
mazes of each of ``-T test_sizes`` (16,24,32: the train size and larger unseen ones), or on the mazes
of ``-T file=...`` (text blocks, ``#`` wall, ``.`` empty, ``S``/``T``; an unsolvable maze is a
one-line error). Scores: ``exact`` (the predicted cells are *a* shortest path: any valid shortest
path counts, see mazes.py), ``cell_accuracy`` (share of grid cells whose path/no-path label equals
the reference path's; an alternative shortest path loses cells here, not in ``exact``),
``steps_to_converge``; a breakdown by grid ``size``.

``sudoku``: seeded puzzles with ``-T clues`` givens (36) and a unique solution, or ``-T file=...``
(81 characters a line; a puzzle without exactly one solution is a one-line error). Scores:
``exact`` (a valid completion of the givens, which is the solution since it is unique),
``cell_accuracy`` (share of blank cells filled correctly), ``steps_to_converge``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.registry import task
from harness.task import ScoreContext, Task
from harness.types import Message, Output, Part, Sample, Score, higher, lower, stable_hash


def _metrics() -> dict[str, Any]:
    return {"exact": higher("Exact match"), "cell_accuracy": higher("Cell accuracy"),
            "steps_to_converge": lower("Steps to converge")}


def _maze_sample(m: Any, sid: str) -> Sample:
    rows = ["".join("#" if m.walls[y][x] else "S" if (y, x) == m.source else "T" if (y, x) == m.target else "."
                    for x in range(len(m.walls))) for y in range(len(m.walls))]
    text = "Mark a shortest path from S to T in this maze (# wall):\n" + "\n".join(rows)
    opts = {"maze": {"walls": m.walls, "source": list(m.source), "target": list(m.target)}, "puzzle": "maze"}
    return Sample(sid, [Message("user", [Part("text", text, options=opts)])], target=m.to_dict(),
                  metadata={"size": m.size, "path_length": len(m.path) - 1, "puzzle": "maze"})


def _sudoku_sample(s: Any, sid: str) -> Sample:
    text = "Solve this sudoku (0 = blank): " + "".join(map(str, s.puzzle))
    return Sample(sid, [Message("user", [Part("text", text, options={"sudoku": s.puzzle, "puzzle": "sudoku"})])],
                  target={"puzzle": s.puzzle, "solution": s.solution},
                  metadata={"blanks": s.blanks, "puzzle": "sudoku"})


def _int_list(text: Any, name: str) -> list[int]:
    items = list(text) if isinstance(text, (list, tuple)) else str(text).replace(";", ",").split(",")
    try:
        out = [int(v) for v in items if str(v).strip()]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated integers, got {text!r}") from None
    if not out or min(out) < 2:
        raise ValueError(f"{name} must be sizes >= 2, got {text!r}")
    return out


def score_maze(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    from harness.tasks.puzzles.mazes import Maze, is_shortest_path

    pred = output.prediction
    if not isinstance(pred, dict) or "cells" not in pred:
        return Score.not_scored("no predicted path cells in the reply")
    m = Maze.from_dict(sample.target)
    cells = {(int(a), int(b)) for a, b in pred["cells"]}
    ref = set(m.path)
    n = len(m.walls)
    wrong = len(cells ^ ref)
    values = {"exact": float(is_shortest_path(m, cells)), "cell_accuracy": 1.0 - wrong / (n * n)}
    if "steps" in pred:
        values["steps_to_converge"] = float(pred["steps"])
    return Score(values=values, details={"predicted_cells": len(cells), "path_cells": len(ref),
                                         "fit": output.details.get("fit")})


def score_sudoku(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    from harness.tasks.puzzles.sudoku import is_solution

    pred = output.prediction
    if not isinstance(pred, dict) or "grid" not in pred:
        digits = [int(c) for c in (output.text or "") if c.isdigit()]
        if len(digits) < 81:
            return Score.not_scored("no 81-digit grid in the reply")
        pred = {"grid": digits[-81:]}
    puzzle, solution = sample.target["puzzle"], sample.target["solution"]
    grid = [int(v) for v in pred["grid"]]
    blanks = [i for i, v in enumerate(puzzle) if v == 0]
    right = sum(1 for i in blanks if i < len(grid) and grid[i] == solution[i])
    values = {"exact": float(is_solution(puzzle, grid)), "cell_accuracy": right / max(len(blanks), 1)}
    if "steps" in pred:
        values["steps_to_converge"] = float(pred["steps"])
    return Score(values=values, details={"fit": output.details.get("fit")})


@task("maze_path", description="Maze shortest path (BFS target): exact match, cell accuracy, by grid size "
      "(train 16x16, test on larger unseen sizes)", family="puzzles")
def maze_path(train_size: int = 16, test_sizes: str = "16,24,32", n_train: int = 512, n_test: int = 50,
              wall_p: float = 0.3, seed: int = 0, file: str | None = None) -> Task:
    from harness.tasks.puzzles.mazes import generate, parse_maze_file

    train_size, n_train, n_test, seed = int(train_size), int(n_train), int(n_test), int(seed)
    sizes = _int_list(test_sizes, "test_sizes")
    if train_size < 2 or n_train < 1 or n_test < 1 or not 0.0 <= float(wall_p) < 0.9:
        raise ValueError("train_size >= 2, n_train >= 1, n_test >= 1 and 0 <= wall_p < 0.9 are needed")
    file_mazes = None
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise ValueError(f"maze file not found: {file}")
        file_mazes = parse_maze_file(path.read_text())  # an unsolvable maze fails here, in one line

    def train() -> list[Sample]:
        return [_maze_sample(generate(train_size, 10_000_000 + seed * 100_000 + i, float(wall_p)), f"train{i}")
                for i in range(n_train)]

    def load() -> list[Sample]:
        if file_mazes is not None:
            return [_maze_sample(m, f"file-{i}") for i, m in enumerate(file_mazes)]
        return [_maze_sample(generate(s, seed * 100_000 + 1000 * s + i, float(wall_p)), f"maze{s}-{i}")
                for s in sizes for i in range(n_test)]

    options = {"train_size": train_size, "test_sizes": sizes, "n_train": n_train, "n_test": n_test,
               "wall_p": float(wall_p), "seed": seed, "file": file}
    digest = stable_hash({"maze": options, "file": file_mazes and [m.to_dict() for m in file_mazes], "v": 1})
    return Task(version="1", load=load, train=train, score=score_maze, primary_metric="exact", metrics=_metrics(),
                breakdowns=("size",), content_hash=digest, options=options)


@task("sudoku", description="9x9 sudoku with a unique solution: exact match, cell accuracy, steps to converge",
      family="puzzles")
def sudoku(n_train: int = 512, n_test: int = 50, clues: int = 36, seed: int = 0, file: str | None = None) -> Task:
    from harness.tasks.puzzles.sudoku import generate, parse_sudoku_file

    n_train, n_test, clues, seed = int(n_train), int(n_test), int(clues), int(seed)
    if n_train < 1 or n_test < 1 or not 17 <= clues <= 80:
        raise ValueError("n_train >= 1, n_test >= 1 and 17 <= clues <= 80 are needed")
    file_puzzles = None
    if file is not None:
        path = Path(file)
        if not path.is_file():
            raise ValueError(f"sudoku file not found: {file}")
        file_puzzles = parse_sudoku_file(path.read_text())  # an unsolvable or ambiguous puzzle fails here

    def train() -> list[Sample]:
        return [_sudoku_sample(generate(10_000_000 + seed * 100_000 + i, clues), f"train{i}") for i in range(n_train)]

    def load() -> list[Sample]:
        if file_puzzles is not None:
            return [_sudoku_sample(s, f"file-{i}") for i, s in enumerate(file_puzzles)]
        return [_sudoku_sample(generate(seed * 100_000 + i, clues), f"sudoku-{i}") for i in range(n_test)]

    options = {"n_train": n_train, "n_test": n_test, "clues": clues, "seed": seed, "file": file}
    digest = stable_hash({"sudoku": options, "file": file_puzzles and [s.puzzle for s in file_puzzles], "v": 1})
    return Task(version="1", load=load, train=train, score=score_sudoku, primary_metric="exact", metrics=_metrics(),
                content_hash=digest, options=options)
