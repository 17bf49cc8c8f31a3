"""Puzzle backends trained on the task's train split: ``anca`` (adaptive NCA, deformable perception),
``nca`` (fixed 3x3 perception) and ``cnn`` (feed-forward, about the adaptive NCA's parameter count).

Settings (``-M``): ``hidden`` (12), ``depth`` (cnn layers, 8), ``iters`` (150), ``batch`` (8), ``lr``
(3e-3), ``steps`` (sudoku NCA steps, 24), ``steps_per_cell`` (maze NCA steps per grid side, 2),
``seed`` (0), ``progress`` (true). The puzzle kind (maze or sudoku) comes from the train split.
Replies carry ``prediction``: ``cells`` (maze path cells) or ``grid`` (81 digits), and ``steps``
(steps to converge); ``details["fit"]`` has the training record (seconds, params, losses).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Annotated, Any

from pydantic import Field

from harness.backend_settings import NonNegativeInt, PositiveInt, Setting
from harness.model import Backend
from harness.modelspec import validate_settings
from harness.registry import model
from harness.tasks.puzzles.train import TrainConfig
from harness.types import Output, Request, Sample, Usage

_DEFAULT = TrainConfig()
SETTINGS = {
    "hidden": Setting(PositiveInt, _DEFAULT.hidden, "hidden channels"),
    "depth": Setting(PositiveInt, _DEFAULT.depth, "cnn layers"),
    "iters": Setting(PositiveInt, _DEFAULT.iters, "training iterations"),
    "batch": Setting(PositiveInt, _DEFAULT.batch, "batch size"),
    "lr": Setting(Annotated[float, Field(gt=0)], _DEFAULT.lr, "learning rate"),
    "steps": Setting(NonNegativeInt, _DEFAULT.steps, "sudoku NCA steps (0: 24)"),
    "steps_per_cell": Setting(Annotated[float, Field(gt=0)], _DEFAULT.steps_per_cell,
                              "maze NCA steps per grid side"),
    "seed": Setting(int, _DEFAULT.seed, "training seed"),
    # taken as the other fitted backends take it, so a sweep's shared -M progress=false works here too
    "progress": Setting(bool, True, "accepted for uniformity: puzzle training draws no progress bar"),
}


def _puzzle_of(messages: Any) -> tuple[str, Any]:
    from harness.tasks.puzzles.mazes import Maze, check_maze
    from harness.tasks.puzzles.sudoku import Sudoku

    for m in messages:
        for p in m.content:
            o = p.options or {}
            if "maze" in o:
                maze = Maze.from_dict(o["maze"])
                check_maze(maze)
                return "maze", maze
            if "sudoku" in o:
                grid = [int(v) for v in o["sudoku"]]
                if len(grid) != 81 or any(not 0 <= v <= 9 for v in grid):
                    raise ValueError("a sudoku is 81 digits 0..9")
                return "sudoku", Sudoku(grid, [])
    raise ValueError("no maze or sudoku in the request")


@dataclass
class PuzzleNet(Backend):
    arch: str
    settings: dict[str, Any] = field(default_factory=dict)
    spec: str = ""
    batch_size: int = 64
    cacheable: bool = False  # predictions depend on the fitted weights, which are not in the cache key
    kind: str | None = None
    net: Any = None
    cfg: Any = None
    record: dict[str, Any] = field(default_factory=dict)
    fit_error: str | None = None

    def config(self) -> TrainConfig:
        kw: dict[str, Any] = {f.name: self.settings[f.name] for f in fields(TrainConfig)
                              if f.name in self.settings and f.name != "arch"}
        return TrainConfig(arch=self.arch, **kw)

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        try:
            return self._fit(train)
        except ValueError as exc:
            self.net, self.fit_error = None, f"fit failed: {exc}"
            return {"error": self.fit_error}

    def _fit(self, train: Sequence[Sample]) -> dict[str, Any]:
        import torch

        from harness.tasks.puzzles.encode import maze_input, maze_target, sudoku_input, sudoku_target
        from harness.tasks.puzzles.train import load
        from harness.tasks.puzzles.train import train as train_net

        if not train:
            raise ValueError("empty train split")
        puzzles = [_puzzle_of(s.messages) for s in train]
        kinds = {k for k, _ in puzzles}
        if len(kinds) != 1:
            raise ValueError("the train split mixes mazes and sudokus")
        self.kind = kinds.pop()
        if self.kind == "maze":
            from harness.tasks.puzzles.mazes import Maze

            mazes = [Maze.from_dict(s.target) for s in train]
            if len({m.size for m in mazes}) != 1:
                raise ValueError("train mazes must share one size")
            X, Y = torch.stack([maze_input(m) for m in mazes]), torch.stack([maze_target(m) for m in mazes])
        else:
            from harness.tasks.puzzles.sudoku import Sudoku

            sud = [Sudoku(s.target["puzzle"], s.target["solution"]) for s in train]
            X, Y = torch.stack([sudoku_input(s) for s in sud]), torch.stack([sudoku_target(s) for s in sud])
        self.cfg = self.config()
        torch.set_num_threads(1)  # small convolutions; the machine is shared
        state, record = train_net(self.cfg, self.kind, X, Y)
        self.net = load(self.cfg, self.kind, state)
        self.record = {"method": self.spec, **record}
        return self.record

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        from harness.tasks.puzzles.encode import maze_cells, maze_input, sudoku_grid, sudoku_input
        from harness.tasks.puzzles.train import run

        if self.net is None:
            reason = self.fit_error or f"{self.spec} has not been fitted (the task needs a train split)"
            return [Output(error=reason) for _ in requests]
        outs = []
        for r in requests:
            t0 = time.perf_counter()
            try:
                kind, puzzle = _puzzle_of(r.messages)
            except ValueError as exc:
                outs.append(Output(error=str(exc)))
                continue
            if kind != self.kind:
                outs.append(Output(error=f"trained on {self.kind} puzzles, asked a {kind}"))
                continue
            x = maze_input(puzzle) if kind == "maze" else sudoku_input(puzzle)
            logits, steps = run(self.net, self.cfg, kind, x)
            if kind == "maze":
                cells = sorted(maze_cells(logits))
                pred: dict[str, Any] = {"cells": [list(c) for c in cells], "steps": steps}
                text = f"{len(cells)} path cells"
            else:
                grid = sudoku_grid(logits, puzzle.puzzle)
                pred = {"grid": grid, "steps": steps}
                text = "".join(map(str, grid))
            outs.append(Output(text=text, prediction=pred, details={"fit": self.record},
                               usage=Usage(calls=1, seconds=time.perf_counter() - t0)))
        return outs


def _build(arch: str, path: str | None, settings: dict[str, Any]) -> PuzzleNet:
    if path not in (None, "", "default"):
        raise ValueError(f"{arch} takes no variant (got {path!r}); the puzzle kind comes from the task")
    settings = validate_settings(arch, settings, SETTINGS)  # a factory called directly is checked too
    shown = "&".join(f"{k}={v}" for k, v in sorted(settings.items()) if k != "progress")
    return PuzzleNet(arch, dict(settings), arch + (f"?{shown}" if shown else ""))


@model("anca", kind="method", settings=SETTINGS, strict=True,
       description="Adaptive NCA (deformable-convolution perception) trained on the puzzle train split")
def anca_backend(path: str | None, **settings: Any) -> PuzzleNet:
    return _build("anca", path, settings)


@model("nca", kind="method", settings=SETTINGS, strict=True,
       description="Neural cellular automaton with fixed 3x3 perception, trained on the puzzle train split")
def nca_backend(path: str | None, **settings: Any) -> PuzzleNet:
    return _build("nca", path, settings)


@model("cnn", kind="method", settings=SETTINGS, strict=True,
       description="Feed-forward CNN (about the aNCA's parameter count) trained on the puzzle train split")
def cnn_backend(path: str | None, **settings: Any) -> PuzzleNet:
    return _build("cnn", path, settings)
