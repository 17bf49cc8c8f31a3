"""Spiking (``snn``) and binary-weight (``bnn``) networks trained through a surrogate step (torch).

The HTAF abstract claims its surrogate trains spiking and binary neural networks; these are the two
standard forms, written here (not copied) so every surrogate of ``htaf_core`` can train them:

* the **step with a surrogate gradient** (:class:`StepUnit`): the forward pass is the Heaviside step
  1[x > 0], the backward pass the chosen surrogate's derivative (:func:`surrogate_derivative`):
  htaf h_a'(x), sigmoid beta s(1 - s) with s = sig(beta x), ste 1[|x| <= 1]. Training therefore runs
  the binary network itself. ReLU is no surrogate of a step and is refused (the backend says so).

* ``snn``: leaky integrate-and-fire layers unrolled over ``steps`` time steps, in snnTorch ``Leaky``'s
  update order with reset by subtraction and a detached reset (its default):

      v[t] = decay * v[t-1] + I[t] - threshold * s[t-1]        s[t] = H(v[t] - threshold)

  The input is presented as a constant current (I[t] = W x + b at every step: no rate coding, so a
  prediction is deterministic). The output layer spikes too; its spike counts over the steps are the
  logits of the cross-entropy and the class at test (ties go to the lowest class, as argmax does).
  snnTorch calls the leak ``beta``; here ``beta`` is the steep sigmoid's slope, so it is ``decay``.

* ``bnn``: BinaryConnect / BinaryNet (Courbariaux et al.): every linear layer uses the sign of its
  latent real weights (+1 at 0), straight through for the weights (identity; the latent weights are
  clipped to [-1, 1] after each step, so BinaryNet's 1[|w| <= 1] cancellation never applies), with
  BatchNorm after every layer (the output too) and ±1 activations 2 H(x) - 1 whose gradient is twice
  the surrogate's derivative. No XNOR scaling factor: the BatchNorm after each layer divides any
  per-layer scale out. The first layer takes the real (standardised) features, as in BinaryNet.

At test ("hard", the default mode) the forward pass is exactly binary: spikes in {0, 1}; weights and
hidden activations in {-1, +1}. The "soft" reading replaces each step by its surrogate's value
(h_a(x), sig(beta x); the STE's value is the step itself) in the network trained with steps: it says
how far the relaxed network is from the binary one, and is not what was trained.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from harness.tasks.methods.backends.htaf_core import BinaryUnit, SurrogateNet, htaf

SURROGATES = ("htaf", "sigmoid", "ste")


def surrogate_derivative(x: torch.Tensor, act: str, alpha: float, beta: float) -> torch.Tensor:
    """d/dx of the surrogate standing in for H(x) in the backward pass (closed forms)."""
    if act == "htaf":
        lo, hi = 1.0 / (1.0 + math.exp(alpha)), 1.0 / (1.0 + math.exp(-alpha))
        t = torch.tanh(x)
        s = torch.sigmoid(alpha * t)
        # a s (1 - s) sech^2 x / (sig(a) - sig(-a)); sech^2 = 1 - tanh^2 does not overflow for large |x|
        return alpha * s * (1.0 - s) * (1.0 - t * t) / (hi - lo)
    if act == "sigmoid":
        s = torch.sigmoid(beta * x)
        return beta * s * (1.0 - s)
    if act == "ste":
        return (x.abs() <= 1.0).to(x.dtype)
    raise ValueError(f"{act!r} is no surrogate of a step; choose one of {', '.join(SURROGATES)}")


class _Step(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, act: str, alpha: float, beta: float) -> torch.Tensor:
        ctx.save_for_backward(x)
        ctx.act, ctx.alpha, ctx.beta = act, alpha, beta
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None, None]:
        (x,) = ctx.saved_tensors
        return grad * surrogate_derivative(x, ctx.act, ctx.alpha, ctx.beta), None, None, None


def step(x: torch.Tensor, act: str, alpha: float = 8.0, beta: float = 8.0) -> torch.Tensor:
    """H(x) forward, the surrogate's derivative backward."""
    return _Step.apply(x, act, float(alpha), float(beta))


class StepUnit(BinaryUnit):
    """A binary unit trained as a step (``hard`` by default, unlike :class:`BinaryUnit`): hard mode is
    H(x) with the surrogate gradient, soft mode the surrogate's value. ``signed``: 2 H(x) - 1 in {-1, 1}."""

    def __init__(self, act: str, alpha: float = 8.0, beta: float = 8.0, signed: bool = False) -> None:
        if act not in SURROGATES:
            raise ValueError(f"{act!r} is no surrogate of a step; choose one of {', '.join(SURROGATES)}")
        super().__init__(act, alpha, beta)
        self.hard, self.signed = True, signed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.hard or self.act == "ste":
            u = step(x, self.act, self.alpha, self.beta)
        elif self.act == "htaf":
            u = htaf(x, self.alpha)
        else:
            u = torch.sigmoid(self.beta * x)
        return 2.0 * u - 1.0 if self.signed else u


class SpikingNet(SurrogateNet):
    """``depth`` hidden LIF layers of ``hidden`` neurons and a spiking output layer; logits = output
    spike counts over ``steps`` steps of constant input current."""

    def __init__(self, n_in: int, n_out: int, act: str, *, hidden: int = 128, depth: int = 1, steps: int = 8,
                 decay: float = 0.9, threshold: float = 1.0, alpha: float = 8.0, beta: float = 8.0) -> None:
        super().__init__()
        widths = [n_in] + [hidden] * depth + [n_out]
        self.fcs = nn.ModuleList(nn.Linear(a, b) for a, b in zip(widths[:-1], widths[1:], strict=True))
        self.lifs = nn.ModuleList(StepUnit(act, alpha, beta) for _ in self.fcs)
        self.widths = widths[1:]  # each layer's neurons
        self.steps, self.decay, self.threshold = steps, decay, threshold

    def run(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(output spike counts [B, n_out], each layer's spikes [steps, B, width])."""
        current0 = self.fcs[0](x)  # constant current: the same input at every step
        mems = [torch.zeros(x.shape[0], width, dtype=x.dtype) for width in self.widths]
        spikes: list[list[torch.Tensor]] = [[] for _ in self.fcs]
        for _ in range(self.steps):
            inp = current0
            for layer, (fc, lif) in enumerate(zip(self.fcs, self.lifs, strict=True)):
                current = inp if layer == 0 else fc(inp)
                # reset by subtraction with the previous step's spike, detached (snnTorch's default)
                reset = spikes[layer][-1].detach() if spikes[layer] else 0.0
                mems[layer] = self.decay * mems[layer] + current - self.threshold * reset
                spk = lif(mems[layer] - self.threshold)
                spikes[layer].append(spk)
                inp = spk
        stacked = [torch.stack(s) for s in spikes]
        return stacked[-1].sum(0), stacked

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x)[0]

    def readout(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        counts, spikes = self.run(x)
        # the last hidden layer's code: which neurons spiked at all
        return counts, (spikes[-2].sum(0) > 0).to(x.dtype)


class BinaryLinear(nn.Linear):
    """A linear layer computing with the sign of its latent weights (no bias: BatchNorm follows)."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__(n_in, n_out, bias=False)

    def binary_weight(self) -> torch.Tensor:
        return torch.where(self.weight >= 0, 1.0, -1.0).to(self.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        # straight through: the forward sees sign(w), the gradient reaches w unchanged
        return nn.functional.linear(x, w + (self.binary_weight() - w).detach())

    def clip_(self) -> None:
        with torch.no_grad():
            self.weight.clamp_(-1.0, 1.0)


class BinaryWeightNet(SurrogateNet):
    """``depth`` x (binary linear, BatchNorm, ±1 step) and a binary linear head with BatchNorm."""

    def __init__(self, n_in: int, n_out: int, act: str, *, hidden: int = 128, depth: int = 1, alpha: float = 8.0,
                 beta: float = 8.0) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = n_in
        for _ in range(depth):
            layers += [BinaryLinear(width, hidden), nn.BatchNorm1d(hidden), StepUnit(act, alpha, beta, signed=True)]
            width = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Sequential(BinaryLinear(width, n_out), nn.BatchNorm1d(n_out))

    def binary_layers(self) -> list[BinaryLinear]:
        return [m for m in self.modules() if isinstance(m, BinaryLinear)]

    def run(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """(logits, each hidden layer's activations)."""
        acts = []
        for m in self.body:
            x = m(x)
            if isinstance(m, StepUnit):
                acts.append(x)
        return self.head(x), acts

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.run(x)[0]

    def readout(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits, acts = self.run(x)
        return logits, (acts[-1] > 0).to(x.dtype)

    def after_step(self) -> None:
        for layer in self.binary_layers():
            layer.clip_()
