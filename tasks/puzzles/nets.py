"""The three networks: an adaptive NCA (deformable perception), a plain NCA (fixed 3x3 perception)
and a feed-forward CNN of about the same parameter count.

NCA state: ``hidden`` channels per cell, zero at the start. One step (shared weights every step):
perception z = P([state, input]) (a 3x3 conv; for ``anca`` a deformable 3x3 conv whose 2*9 offsets
are predicted from [state, input] by a zero-initialised 3x3 conv), then the residual update
state += W2 relu(W1 z) (1x1 convs), applied ``steps`` times; the readout is a 1x1 conv of the state.
Walls of a maze stay in the input at every step, so the NCA can run for more steps on a larger grid.

``cnn``: ``depth`` 3x3 conv + ReLU layers of one width (chosen so the parameter count matches the
adaptive NCA's) and the same 1x1 readout, applied once: its receptive field is fixed by its depth.
"""

from __future__ import annotations

from typing import Any, cast

ARCHS = ("anca", "nca", "cnn")


def build(arch: str, c_in: int, c_out: int, hidden: int = 16, depth: int = 8) -> Any:
    import torch
    from torch import nn

    from harness.tasks.puzzles.deform import deform_module

    class NCA(nn.Module):
        def __init__(self, adaptive: bool) -> None:
            super().__init__()
            self.hidden = hidden
            width = hidden + c_in
            self.perceive = deform_module(width, 2 * hidden) if adaptive else nn.Conv2d(width, 2 * hidden, 3, padding=1)
            self.update = nn.Sequential(nn.Conv2d(2 * hidden, 2 * hidden, 1), nn.ReLU(),
                                        nn.Conv2d(2 * hidden, hidden, 1))
            nn.init.zeros_(cast(torch.Tensor, self.update[2].weight))  # start as the identity map: a stable fixed point
            nn.init.zeros_(cast(torch.Tensor, self.update[2].bias))
            self.readout = nn.Conv2d(hidden, c_out, 1)

        def forward(self, x: Any, steps: int, trace: bool = False) -> Any:
            B, _, H, W = x.shape
            s = torch.zeros(B, self.hidden, H, W, dtype=x.dtype)
            outs = []
            for _ in range(steps):
                s = s + self.update(self.perceive(torch.cat([s, x], 1)))
                if trace:
                    outs.append(self.readout(s))
            return outs if trace else self.readout(s)

    class CNN(nn.Module):
        def __init__(self, width: int) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            ch = c_in
            for _ in range(depth):
                layers += [nn.Conv2d(ch, width, 3, padding=1), nn.ReLU()]
                ch = width
            self.body = nn.Sequential(*layers)
            self.readout = nn.Conv2d(width, c_out, 1)

        def forward(self, x: Any, steps: int = 1, trace: bool = False) -> Any:
            y = self.readout(self.body(x))
            return [y] if trace else y

    if arch == "anca":
        return NCA(adaptive=True)
    if arch == "nca":
        return NCA(adaptive=False)
    if arch == "cnn":
        target = n_params(NCA(adaptive=True))
        best = min(range(4, 257), key=lambda w: abs(n_params(CNN(w)) - target))
        return CNN(best)
    raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}")


def n_params(net: Any) -> int:
    return sum(p.numel() for p in net.parameters())
