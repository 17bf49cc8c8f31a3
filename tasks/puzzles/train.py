"""Training and iterated inference for the puzzle networks (nets.py).

Training: AdamW on random mini-batches of the train split; the loss is taken at the last step
(binary cross-entropy on the maze path mask, cross-entropy on the sudoku digits). The number of NCA
steps per batch is drawn from [steps, 1.25 * steps] so the state learns to stay put once it has
converged instead of being right only at one step count. Maze NCAs run ``steps_per_cell * (n + 2)``
steps on a grid of side n + 2 (more on larger grids); sudoku NCAs run ``steps`` steps.

Inference records the prediction after every step up to the evaluation step count and reports the
step after which it no longer changes (``steps_to_converge``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TrainConfig:
    arch: str = "anca"
    hidden: int = 12
    depth: int = 8  # cnn layers
    iters: int = 150
    batch: int = 8
    lr: float = 3e-3
    steps: int = 0  # sudoku NCA steps (0: 24); mazes use steps_per_cell
    steps_per_cell: float = 2.0
    seed: int = 0


def nca_steps(cfg: TrainConfig, kind: str, side: int) -> int:
    if cfg.arch == "cnn":
        return 1
    if kind == "maze":
        return max(int(math.ceil(cfg.steps_per_cell * side)), 1)
    return cfg.steps or 24


def train(cfg: TrainConfig, kind: str, X: Any, Y: Any, tick: Callable[[], None] | None = None
          ) -> tuple[dict[str, Any], dict[str, Any]]:
    """Fit on stacked inputs X [N, C, H, W] and targets Y; returns (state_dict, record)."""
    import torch

    from harness.tasks.puzzles.encode import CHANNELS
    from harness.tasks.puzzles.nets import build, n_params

    torch.manual_seed(cfg.seed)
    c_in, c_out = CHANNELS[kind]
    net = build(cfg.arch, c_in, c_out, cfg.hidden, cfg.depth)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    base = nca_steps(cfg, kind, X.shape[-1])
    t0, losses = time.perf_counter(), []
    for _ in range(cfg.iters):
        idx = torch.randint(0, X.shape[0], (min(cfg.batch, X.shape[0]),), generator=gen)
        extra = max(base // 4, 1)
        steps = base if cfg.arch == "cnn" else int(torch.randint(base, base + extra + 1, (1,), generator=gen))
        out = net(X[idx], steps)
        loss = _loss(kind, out, Y[idx])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        losses.append(float(loss.detach()))
        if tick:
            tick()
    tail = losses[-max(len(losses) // 10, 1):]
    record = {"seconds": time.perf_counter() - t0, "iters": cfg.iters, "params": n_params(net),
              "first_loss": losses[0] if losses else float("nan"), "final_loss": sum(tail) / len(tail)}
    return net.state_dict(), record


def _loss(kind: str, out: Any, y: Any) -> Any:
    import torch.nn.functional as F

    if kind == "maze":
        return F.binary_cross_entropy_with_logits(out, y)
    return F.cross_entropy(out, y)


def load(cfg: TrainConfig, kind: str, state: dict[str, Any]) -> Any:
    from harness.tasks.puzzles.encode import CHANNELS
    from harness.tasks.puzzles.nets import build

    c_in, c_out = CHANNELS[kind]
    net = build(cfg.arch, c_in, c_out, cfg.hidden, cfg.depth)
    net.load_state_dict(state)
    net.eval()
    return net


def run(net: Any, cfg: TrainConfig, kind: str, x: Any) -> tuple[Any, int]:
    """(final logits [C, H, W], steps to converge) for one puzzle x [C, H, W]."""
    import torch

    steps = nca_steps(cfg, kind, x.shape[-1])
    with torch.no_grad():
        trace = net(x[None], steps, trace=True)
    preds = [(t[0] > 0) if kind == "maze" else t[0].argmax(0) for t in trace]
    converged = len(preds)
    while converged > 1 and torch.equal(preds[converged - 2], preds[-1]):
        converged -= 1
    return trace[-1][0], converged
