"""Per-scene Gaussian splatting fits: the Gaussians, their two colour models, the training loop.

``sh``: every Gaussian carries its own degree-0/1 spherical-harmonic colour (3DGS). ``neural``: the
colour of a Gaussian is a field c(x, d) of its position x and the view direction d (an MLP), built
so that ||c(x, d) - c(x', d)|| <= L ||x - x'|| for every d: the position features are scaled to be
1-Lipschitz, every linear layer's operator norm is capped at 1 (ReLU is 1-Lipschitz)
and the output gain is 4L before the sigmoid (whose slope is at most 1/4). Neighbouring Gaussians
therefore cannot take unrelated colours: a Gaussian floating off the surface cannot paint a
view-specific patch of colour, which is the seed paper's argument for better geometry.

No densification or pruning during training (fixed count, random initialisation in the cameras'
bounding region, as 3DGS does for synthetic scenes); after training, Gaussians whose opacity is
below ``prune_opacity`` are dropped.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from harness.tasks.nvs.gs_raster import render, sh_to_rgb, torch_camera


@dataclass(frozen=True)
class GSConfig:
    color: str = "sh"  # "sh" | "neural"
    steps: int = 400
    gaussians: int = 2000
    patch: int = 32  # side of the random square patch rendered per step
    lr: float = 1.0  # multiplies every per-parameter learning rate
    sh_degree: int = 1
    lipschitz: float = 20.0  # neural: colour change per unit of position change
    hidden: int = 64
    field_lr: float = 0.001  # neural: Adam step of the colour field (its output gain is 4L, so keep it small)
    prune_opacity: float = 0.005
    seed: int = 0
    device: str = "cpu"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _neural_field(cfg: GSConfig) -> Any:
    import torch
    from torch import nn

    class LipschitzLinear(nn.Linear):
        """A linear layer whose operator norm is capped at 1: W / max(1, ||W||_2) (the exact spectral
        norm, cheap at these sizes). Unlike a plain spectral normalisation (which fixes ||W||_2 = 1)
        the cap lets a layer start small, so the sigmoid after the 4L gain does not start saturated."""

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            sigma = torch.linalg.matrix_norm(self.weight, ord=2)
            return nn.functional.linear(x, self.weight / sigma.clamp_min(1.0), self.bias)

    class ColourField(nn.Module):
        """c(x, d) with Lipschitz constant <= ``lipschitz`` in x (see the module docstring)."""

        freqs = (1.0, 2.0, 4.0, 8.0)

        def __init__(self) -> None:
            super().__init__()
            n_in = 3 * (1 + 2 * len(self.freqs))
            h = cfg.hidden
            self.pos = nn.Sequential(LipschitzLinear(n_in, h), nn.ReLU(), LipschitzLinear(h, h), nn.ReLU())
            self.out = LipschitzLinear(h + 3, 3)
            with torch.no_grad():
                self.out.weight.mul_(0.02)
                self.out.bias.zero_()
            self.gain = 4.0 * cfg.lipschitz
            # x -> [x, sin(f pi x)/(f pi), cos(f pi x)/(f pi)]: each block is 1-Lipschitz per coordinate, so
            # the concatenation is sqrt(1 + 2F)-Lipschitz; dividing by that makes the features 1-Lipschitz
            self.norm = math.sqrt(1 + 2 * len(self.freqs))

        def forward(self, x: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
            feats = [x]
            for f in self.freqs:
                w = f * math.pi
                feats += [torch.sin(w * x) / w, torch.cos(w * x) / w]
            h = self.pos(torch.cat(feats, -1) / self.norm)
            return torch.sigmoid(self.gain * self.out(torch.cat([h, d], -1)))

    return ColourField()


class GaussianScene:
    """The fitted Gaussians of one scene and how to colour and render them."""

    def __init__(self, cfg: GSConfig, center: Sequence[float], radius: float) -> None:
        import torch

        self.cfg = cfg
        gen = torch.Generator().manual_seed(cfg.seed)
        n = cfg.gaussians
        self.center = torch.tensor(list(center), dtype=torch.float32)
        self.radius = float(radius)
        means = self.center + (torch.rand(n, 3, generator=gen) * 2 - 1) * radius
        spacing = 2 * radius / n ** (1 / 3)
        self.params: dict[str, torch.Tensor] = {
            "means": means,
            "log_scales": torch.full((n, 3), math.log(0.5 * spacing)),
            "quats": torch.cat([torch.ones(n, 1), torch.zeros(n, 3)], 1) + 0.01 * torch.randn(n, 4, generator=gen),
            "opacity_logits": torch.full((n,), math.log(0.1 / 0.9)),
        }
        self.field = None
        if cfg.color == "sh":
            k = (cfg.sh_degree + 1) ** 2
            self.params["sh"] = torch.zeros(n, k, 3)
        else:
            torch.manual_seed(cfg.seed)
            self.field = _neural_field(cfg)
        self.center = self.center.to(cfg.device)
        self.params = {k: v.to(cfg.device).requires_grad_(True) for k, v in self.params.items()}
        if self.field is not None:
            self.field = self.field.to(cfg.device)

    def parameters_with_lr(self) -> list[dict[str, Any]]:
        s = self.cfg.lr
        groups = [
            {"params": [self.params["means"]], "lr": 0.01 * self.radius * s},
            {"params": [self.params["log_scales"]], "lr": 0.02 * s},
            {"params": [self.params["quats"]], "lr": 0.01 * s},
            {"params": [self.params["opacity_logits"]], "lr": 0.05 * s},
        ]
        if self.field is not None:
            groups.append({"params": list(self.field.parameters()), "lr": self.cfg.field_lr * s})
        else:
            groups.append({"params": [self.params["sh"]], "lr": 0.05 * s})
        return groups

    def colours(self, cam_center: Any) -> Any:
        means = self.params["means"]
        dirs = means - cam_center
        dirs = dirs / dirs.norm(dim=-1, keepdim=True).clamp_min(1e-8)
        if self.field is not None:
            return self.field((means - self.center) / self.radius * 1.0, dirs)
        return sh_to_rgb(self.params["sh"], dirs)

    def opacities(self) -> Any:
        import torch

        return torch.sigmoid(self.params["opacity_logits"])

    def render(self, camera: Any, pixels: Any | None = None, rect: tuple[int, int, int, int] | None = None
               ) -> dict[str, Any]:
        import torch

        cam = torch_camera(camera, self.cfg.device)
        p = self.params
        return render(p["means"], torch.exp(p["log_scales"]), p["quats"], self.opacities(), self.colours(cam.center),
                      cam, pixels, rect=rect)

    def prune(self) -> int:
        """Drop Gaussians below ``prune_opacity``; returns how many remain."""
        import torch

        with torch.no_grad():
            keep = self.opacities() >= self.cfg.prune_opacity
            for k in list(self.params):
                self.params[k] = self.params[k][keep].detach().clone().requires_grad_(True)
        return int(keep.sum())

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {k: v.detach().cpu().numpy() for k, v in self.params.items()}
        if self.field is not None:
            out["field"] = {k: v.detach().cpu().numpy() for k, v in self.field.state_dict().items()}
        out["center"], out["radius"], out["cfg"] = self.center.cpu().numpy(), self.radius, self.cfg.to_dict()
        return out

    @staticmethod
    def from_state(state: dict[str, Any]) -> GaussianScene:
        import torch

        cfg = GSConfig(**state["cfg"])
        scene = GaussianScene(cfg, state["center"].tolist(), float(state["radius"]))
        scene.params = {k: torch.from_numpy(state[k]).to(cfg.device) for k in scene.params}
        if scene.field is not None:
            scene.field.load_state_dict({k: torch.from_numpy(v).to(cfg.device) for k, v in state["field"].items()})
            scene.field.eval()
        return scene


def scene_bounds(cameras: Sequence[Any]) -> tuple[list[float], float]:
    """Where to put the initial Gaussians: the cameras look at a common centre, so a cube around
    the point nearest to all their optical axes, of half-size 0.45x their mean distance to it."""
    import numpy as np

    A, b = np.zeros((3, 3)), np.zeros(3)
    for cam in cameras:
        c2w = np.asarray(cam.c2w)
        o, d = c2w[:3, 3], -c2w[:3, 2] / np.linalg.norm(c2w[:3, 2])
        P = np.eye(3) - np.outer(d, d)
        A += P
        b += P @ o
    center = np.linalg.lstsq(A, b, rcond=None)[0]
    dist = float(np.mean([np.linalg.norm(np.asarray(c.c2w)[:3, 3] - center) for c in cameras]))
    return center.tolist(), 0.45 * dist


def fit_scene(cfg: GSConfig, cameras: Sequence[Any], images: Any, tick: Callable[[float], None] | None = None
              ) -> tuple[GaussianScene, dict[str, Any]]:
    """Fit Gaussians to ``images`` (V, H, W, 3 float tensor, white background) seen by ``cameras``.
    Each step renders a random ``patch`` x ``patch`` square of one random view (only the Gaussians
    overlapping it take part) and takes an Adam step on the L1 loss."""
    import torch

    torch.manual_seed(cfg.seed)
    center, radius = scene_bounds(cameras)
    model = GaussianScene(cfg, center, radius)
    opt = torch.optim.Adam(model.parameters_with_lr(), eps=1e-15)
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    losses: list[float] = []
    nonfinite = 0
    t0 = time.perf_counter()
    for step in range(cfg.steps):
        v = int(torch.randint(len(cameras), (1,), generator=gen))
        cam = cameras[v]
        pw, ph = min(cfg.patch, cam.width), min(cfg.patch, cam.height)
        x0 = int(torch.randint(cam.width - pw + 1, (1,), generator=gen))
        y0 = int(torch.randint(cam.height - ph + 1, (1,), generator=gen))
        target = images[v][y0:y0 + ph, x0:x0 + pw].reshape(-1, 3)
        out = model.render(cam, rect=(x0, y0, x0 + pw, y0 + ph))
        loss = (out["rgb"] - target).abs().mean()
        if not torch.isfinite(loss):
            nonfinite += 1
            opt.zero_grad(set_to_none=True)
            continue
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if tick is not None:
            tick(float(loss))
        if step == cfg.steps // 2:  # a late learning-rate drop settles the positions
            for g in opt.param_groups:
                g["lr"] *= 0.3
    kept = model.prune()
    first = sum(losses[:20]) / max(len(losses[:20]), 1)
    last = sum(losses[-20:]) / max(len(losses[-20:]), 1)
    record = {"steps": cfg.steps, "seconds": round(time.perf_counter() - t0, 2), "loss_first": first,
              "loss_last": last, "n_gaussians": kept, "nonfinite_steps": nonfinite}
    return model, record
