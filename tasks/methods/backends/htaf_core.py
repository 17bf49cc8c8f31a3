"""HTAF (heavy-tailed sigmoid-tanh composite activation) and the binary networks it trains (torch).

Paper: Park et al., "A Composite Activation Function for Learning Stable Binary Representations"
(arXiv 2605.11558, NeurIPS 2026). No code is public; the formula below is our reconstruction from
the paper's description ([inferred]):

    h_a(x)  = (sig(a tanh x) - sig(-a)) / (sig(a) - sig(-a))            in [0, 1], h_a(0) = 1/2
    h_a'(x) = a s (1 - s) sech^2(x) / (sig(a) - sig(-a)),   s = sig(a tanh x)

slope about a/4 at 0 (for large a), gradient tail ~ e^{-2|x|} (sech^2) rather than the steep
sigmoid's e^{-a|x|}. At test time every HTAF unit is replaced by the Heaviside step 1[x > 0], which
is where h_a crosses 1/2, so "hard" accuracy is the binary network's accuracy.

Networks (``arch``): ``mlp`` (one binary hidden layer + linear head), ``heaviside`` (a deep Heaviside
network: ``depth`` binary hidden layers + linear head; the stress setting for surrogate gradients),
``icbm`` (Implicit Concept Bottleneck: a small ReLU CNN, a linear layer to ``concepts`` HTAF units
thresholded at test, and a linear head on the binary concepts); ``snn`` (leaky integrate-and-fire) and
``bnn`` (binary weights and activations), both trained as steps with a surrogate gradient, are built in
``htaf_snn``. Activations (``act``): ``htaf``,
``relu`` / ``sigmoid`` (steep sigmoid sig(beta x)) baselines whose units are thresholded the same way
at test, and ``ste`` (Heaviside forward, straight-through clipped-identity gradient 1[|x| <= 1]).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

ACTIVATIONS = ("htaf", "relu", "sigmoid", "ste")
ARCHS = ("mlp", "heaviside", "icbm", "snn", "bnn")  # snn, bnn: htaf_snn


def htaf_reference(x: torch.Tensor, a: float) -> torch.Tensor:
    """h_a written as the plain composition (autograd differentiates it; used to check the closed form)."""
    lo, hi = 1.0 / (1.0 + math.exp(a)), 1.0 / (1.0 + math.exp(-a))
    return (torch.sigmoid(a * torch.tanh(x)) - lo) / (hi - lo)


class _HTAF(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, a: float) -> torch.Tensor:
        lo, hi = 1.0 / (1.0 + math.exp(a)), 1.0 / (1.0 + math.exp(-a))
        t = torch.tanh(x)
        s = torch.sigmoid(a * t)
        ctx.save_for_backward(s, t)
        ctx.a, ctx.scale = a, hi - lo
        return (s - lo) / (hi - lo)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        s, t = ctx.saved_tensors
        # closed form: a s (1 - s) sech^2(x) / (sig(a) - sig(-a)), with sech^2 = 1 - tanh^2
        return grad * (ctx.a * s * (1.0 - s) * (1.0 - t * t) / ctx.scale), None


def htaf(x: torch.Tensor, a: float = 8.0) -> torch.Tensor:
    return _HTAF.apply(x, float(a))


def htaf_derivative(x: torch.Tensor, a: float) -> torch.Tensor:
    lo, hi = 1.0 / (1.0 + math.exp(a)), 1.0 / (1.0 + math.exp(-a))
    s = torch.sigmoid(a * torch.tanh(x))
    return a * s * (1.0 - s) / torch.cosh(x) ** 2 / (hi - lo)


class _STE(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return (x > 0).to(x.dtype)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 1.0).to(grad.dtype)


class BinaryUnit(nn.Module):
    """The hidden nonlinearity: soft (the trained surrogate) or hard (Heaviside step) mode."""

    def __init__(self, act: str, alpha: float = 8.0, beta: float = 8.0) -> None:
        super().__init__()
        if act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {act!r}; choose one of {', '.join(ACTIVATIONS)}")
        self.act, self.alpha, self.beta, self.hard = act, alpha, beta, False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.hard:
            return (x > 0).to(x.dtype)
        if self.act == "htaf":
            return htaf(x, self.alpha)
        if self.act == "relu":
            return torch.relu(x)
        if self.act == "sigmoid":
            return torch.sigmoid(self.beta * x)
        return _STE.apply(x)


class SurrogateNet(nn.Module):
    """What training and prediction use of a network: its binary units (mode and steepness), the
    logits with the last binary layer's code, and a hook after each optimiser step."""

    def units(self) -> list[BinaryUnit]:
        return [m for m in self.modules() if isinstance(m, BinaryUnit)]

    def set_hard(self, hard: bool) -> None:
        for u in self.units():
            u.hard = hard

    def set_alpha(self, alpha: float) -> None:
        for u in self.units():
            u.alpha = alpha

    def readout(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(logits, the last binary layer's units in {0, 1}) in the current mode."""
        raise NotImplementedError

    def after_step(self) -> None:
        """Called after every optimiser step (bnn clips its latent weights)."""


class BinaryNet(SurrogateNet):
    """mlp / heaviside / icbm; ``codes`` returns the last binary layer (the concepts)."""

    def __init__(self, arch: str, n_in: int, n_out: int, act: str, *, hidden: int = 128, depth: int = 1,
                 concepts: int = 32, image_shape: tuple[int, int] | None = None, alpha: float = 8.0,
                 beta: float = 8.0, norm: bool = False) -> None:
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"unknown architecture {arch!r}; choose one of {', '.join(ARCHS)}")
        self.arch, self.image_shape = arch, image_shape
        layers: list[nn.Module] = []
        if arch == "icbm":
            if image_shape is None:
                raise ValueError("icbm needs image inputs (features with options['shape'] = [H, W])")
            h, w = image_shape
            self.features: nn.Module = nn.Sequential(
                nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
                nn.AdaptiveAvgPool2d((max(h // 2, 1), max(w // 2, 1))), nn.Flatten())
            width = 32 * max(h // 2, 1) * max(w // 2, 1)
            layers += [nn.Linear(width, concepts), BinaryUnit(act, alpha, beta)]
            last = concepts
        else:
            self.features = nn.Identity()
            width = n_in
            for _ in range(depth if arch == "heaviside" else 1):
                # optional BatchNorm before each binary unit: {0,1} outputs are not centred, and deep
                # stacks without it saturate (bench/methods_htaf_stress.py); at test it is affine
                layers += [nn.Linear(width, hidden), *([nn.BatchNorm1d(hidden)] if norm else []),
                           BinaryUnit(act, alpha, beta)]
                width = hidden
            last = hidden
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(last, n_out)

    def codes(self, x: torch.Tensor) -> torch.Tensor:
        if self.arch == "icbm":
            assert self.image_shape is not None
            x = x.view(-1, 1, *self.image_shape)
        return self.body(self.features(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.codes(x))

    def readout(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.codes(x)
        return self.head(c), c


@dataclass
class TrainConfig:
    arch: str = "mlp"
    act: str = "htaf"
    hidden: int = 128
    depth: int = 1
    concepts: int = 32
    alpha: float = 8.0
    alpha_end: float | None = None  # anneal alpha linearly from alpha to alpha_end over the epochs
    beta: float = 8.0
    epochs: int = 100
    lr: float = 3e-3
    batch: int = 64
    seeds: int = 3
    norm: bool = False
    steps: int = 8  # snn: time steps unrolled
    decay: float = 0.9  # snn: membrane leak per step (snnTorch's beta)
    threshold: float = 1.0  # snn: firing threshold


SNN_KEYS = ("steps", "decay", "threshold")  # TrainConfig fields only snn reads


def key_settings(cfg: TrainConfig) -> dict[str, Any]:
    """The config as the fit cache keys it: without the snn fields for the other architectures, so
    their keys (and cached fits) are the ones they had before snn existed."""
    from dataclasses import asdict

    return {k: v for k, v in asdict(cfg).items() if cfg.arch == "snn" or k not in SNN_KEYS}


def alpha_at(cfg: TrainConfig, epoch: int) -> float:
    if cfg.alpha_end is None or cfg.epochs <= 1:
        return cfg.alpha
    return cfg.alpha + (cfg.alpha_end - cfg.alpha) * epoch / (cfg.epochs - 1)


def build_net(cfg: TrainConfig, n_in: int, n_out: int, image_shape: tuple[int, int] | None) -> SurrogateNet:
    if cfg.arch in ("snn", "bnn"):
        # imported here: htaf_snn builds on this module's units
        from harness.tasks.methods.backends.htaf_snn import BinaryWeightNet, SpikingNet

        if cfg.arch == "snn":
            return SpikingNet(n_in, n_out, cfg.act, hidden=cfg.hidden, depth=cfg.depth, steps=cfg.steps,
                              decay=cfg.decay, threshold=cfg.threshold, alpha=cfg.alpha, beta=cfg.beta)
        return BinaryWeightNet(n_in, n_out, cfg.act, hidden=cfg.hidden, depth=cfg.depth, alpha=cfg.alpha,
                               beta=cfg.beta)
    return BinaryNet(cfg.arch, n_in, n_out, cfg.act, hidden=cfg.hidden, depth=cfg.depth, concepts=cfg.concepts,
                     image_shape=image_shape, alpha=cfg.alpha, beta=cfg.beta, norm=cfg.norm)


def train_nets(cfg: TrainConfig, X: np.ndarray, y: np.ndarray, n_out: int, image_shape: tuple[int, int] | None,
               tick: Callable[[str], None] | None = None) -> tuple[list[dict[str, np.ndarray]], dict[str, Any]]:
    """Train ``cfg.seeds`` networks (seeds 0..S-1) with Adam on cross-entropy; returns their state
    dicts (numpy) and a record: seconds, epochs, final train loss per seed, non-finite steps."""
    t0 = time.perf_counter()
    Xt, yt = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    states, losses, nonfinite = [], [], 0
    for seed in range(cfg.seeds):
        torch.manual_seed(seed)
        net = build_net(cfg, X.shape[1], n_out, image_shape)
        opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
        gen = torch.Generator().manual_seed(seed)
        loss_value = float("nan")
        for epoch in range(cfg.epochs):
            net.set_alpha(alpha_at(cfg, epoch))
            perm = torch.randperm(Xt.shape[0], generator=gen)
            total, count = 0.0, 0
            for start in range(0, Xt.shape[0], cfg.batch):
                idx = perm[start:start + cfg.batch]
                loss = nn.functional.cross_entropy(net(Xt[idx]), yt[idx])
                if not torch.isfinite(loss):
                    nonfinite += 1  # recorded: a diverging surrogate is a finding, not a crash
                    continue
                opt.zero_grad()
                loss.backward()
                opt.step()
                net.after_step()
                total += loss.item() * idx.numel()
                count += idx.numel()
            loss_value = total / max(count, 1)
            if tick is not None:
                tick(f"seed {seed} epoch {epoch + 1} loss {loss_value:.4f}")
        states.append({k: v.detach().numpy().copy() for k, v in net.state_dict().items()})
        losses.append(loss_value)
    record = {"seconds": time.perf_counter() - t0, "epochs": cfg.epochs, "seeds": cfg.seeds,
              "train_loss": losses, "nonfinite_steps": nonfinite}
    return states, record


@dataclass
class Predictions:
    soft: np.ndarray  # [seeds, n] classes with the trained surrogate
    hard: np.ndarray  # [seeds, n] classes with every binary unit thresholded
    codes: np.ndarray  # [seeds, n, units] binary codes of the last binary layer (hard mode)


def predict(cfg: TrainConfig, states: list[dict[str, np.ndarray]], X: np.ndarray, n_out: int,
            image_shape: tuple[int, int] | None) -> Predictions:
    Xt = torch.as_tensor(X, dtype=torch.float32)
    soft, hard, codes = [], [], []
    with torch.no_grad():
        for state in states:
            net = build_net(cfg, X.shape[1], n_out, image_shape)
            net.load_state_dict({k: torch.as_tensor(v) for k, v in state.items()})
            net.eval()
            net.set_alpha(alpha_at(cfg, cfg.epochs - 1))
            net.set_hard(False)
            soft.append(net(Xt).argmax(1).numpy())
            net.set_hard(True)
            logits, c = net.readout(Xt)
            hard.append(logits.argmax(1).numpy())
            codes.append(c.numpy().astype(np.uint8))
    return Predictions(np.stack(soft), np.stack(hard), np.stack(codes))
