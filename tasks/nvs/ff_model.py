"""A tiny feed-forward Gaussian predictor from two context views (pixelSplat / MVSplat in miniature).

Each context image goes through a small CNN to a feature map at 1/4 resolution; every feature
pixel becomes one Gaussian on its camera ray. The two views exchange information through
bidirectional cross-attention (A attends to B, B to A, one layer each way). With ``tokens=True``
the attention also sees *point-cloud consistency tokens*: each feature pixel is lifted to a 3D point
with a first depth estimate, and an embedding of that world-space point is added to its token, so
that tokens of the two views that see the same 3D point can find each other (the seed paper's
3D-consistency idea). Without them the attention sees image features only, as a 2D cross-view
transformer does. Heads then give each Gaussian its depth (a refinement of the first estimate,
within the scene's depth range), opacity, colour (a correction of the pixel's own colour) and size
(relative to the pixel's footprint at that depth). Trained self-supervised: render a held-out
train view with ``gs_raster`` and take the L1 loss.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from harness.tasks.nvs.gs_raster import TorchCamera, render


@dataclass(frozen=True)
class FFConfig:
    tokens: bool = True
    steps: int = 400
    width: int = 32
    lr: float = 2e-3
    seed: int = 0
    device: str = "cpu"
    patch: int = 32  # target pixels rendered per step: a random square of this side

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


STRIDE = 4


def build_network(cfg: FFConfig) -> Any:
    import torch
    from torch import nn

    class Predictor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = cfg.width
            self.encoder = nn.Sequential(
                nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(c, c, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            )  # fmt: skip
            self.ray = nn.Linear(3, c)  # the token's ray direction in the world (where it looks)
            self.depth0 = nn.Linear(c, 1)
            self.point = nn.Sequential(nn.Linear(3 * 9, c), nn.ReLU(), nn.Linear(c, c))
            self.a_to_b = nn.MultiheadAttention(c, 4, batch_first=True)
            self.b_to_a = nn.MultiheadAttention(c, 4, batch_first=True)
            self.norm = nn.LayerNorm(c)
            self.head = nn.Sequential(nn.Linear(2 * c, c), nn.ReLU(), nn.Linear(c, 6))

        def embed_points(self, x: torch.Tensor) -> torch.Tensor:
            feats = [x]
            for f in (1.0, 2.0, 4.0, 8.0):
                feats += [torch.sin(f * math.pi * x), torch.cos(f * math.pi * x)]
            return self.point(torch.cat(feats, -1))

        def forward(self, feats: list[torch.Tensor], points0: list[torch.Tensor] | None) -> list[torch.Tensor]:
            q = [self.norm(f) for f in feats]
            if points0 is not None:
                q = [qi + self.embed_points(p) for qi, p in zip(q, points0, strict=True)]
            a, b = q
            # bidirectional: each view's tokens query the other's
            a_new = self.b_to_a(a[None], b[None], b[None], need_weights=False)[0][0]
            b_new = self.a_to_b(b[None], a[None], a[None], need_weights=False)[0][0]
            return [self.head(torch.cat([f, m], -1)) for f, m in zip(feats, (a_new, b_new), strict=True)]

    return Predictor()


def token_rays(cam: TorchCamera) -> tuple[Any, Any]:
    """World-space origin (3,) and unit directions (T, 3) of the feature pixels' centres, with the
    camera-z of a unit step along each (to turn a z-depth into a distance along the ray)."""
    import torch

    h, w = cam.height // STRIDE, cam.width // STRIDE
    dev = cam.w2c.device
    ys, xs = torch.meshgrid(torch.arange(h, device=dev), torch.arange(w, device=dev), indexing="ij")
    x = (xs.reshape(-1).float() + 0.5) * STRIDE
    y = (ys.reshape(-1).float() + 0.5) * STRIDE
    d_cam = torch.stack([(x - cam.cx) / cam.fx, (y - cam.cy) / cam.fy, torch.ones_like(x)], -1)  # z = 1
    c2w = torch.linalg.inv(cam.w2c)
    return c2w[:3, 3], d_cam @ c2w[:3, :3].T


def predict_gaussians(net: Any, images: list[Any], cams: list[TorchCamera], depth_range: tuple[float, float],
                      center: Any, radius: float, tokens: bool) -> dict[str, Any]:
    """Gaussians (means, scales, opacities, colours) of two context views, images (H, W, 3) in [0, 1]."""
    import torch
    import torch.nn.functional as F

    near, far = depth_range
    feats, origins, dirs, colours = [], [], [], []
    for img, cam in zip(images, cams, strict=True):
        x = img.permute(2, 0, 1)[None] * 2 - 1
        f = net.encoder(x)[0]  # (C, h, w)
        f = f.flatten(1).T  # (T, C)
        o, d = token_rays(cam)
        f = f + net.ray(d / d.norm(dim=-1, keepdim=True))
        feats.append(f)
        origins.append(o)
        dirs.append(d)
        colours.append(F.avg_pool2d(img.permute(2, 0, 1)[None], STRIDE)[0].flatten(1).T)
    z0 = [near + (far - near) * torch.sigmoid(net.depth0(f)[:, 0]) for f in feats]
    points0 = None
    if tokens:  # lifted with the first depth estimate, in the scene's unit cube
        points0 = [((o + d * z[:, None]) - center) / radius for o, d, z in zip(origins, dirs, z0, strict=True)]
    outs = net(feats, points0)
    means, scales, opac, cols = [], [], [], []
    for o, d, z, c, out, cam in zip(origins, dirs, z0, colours, outs, cams, strict=True):
        logit_z = torch.logit(((z - near) / (far - near)).clamp(1e-4, 1 - 1e-4))
        z = near + (far - near) * torch.sigmoid(logit_z + out[:, 0])
        means.append(o + d * z[:, None])
        footprint = STRIDE * z / cam.fx  # a feature pixel's width in the world at depth z
        scales.append((footprint * torch.exp(out[:, 1].clamp(-3, 3)) * 0.5)[:, None].expand(-1, 3))
        opac.append(torch.sigmoid(out[:, 2] + 1.0))
        cols.append(torch.sigmoid(torch.logit(c.clamp(0.02, 0.98)) + out[:, 3:6]))
    return {"means": torch.cat(means), "scales": torch.cat(scales), "opacities": torch.cat(opac),
            "colours": torch.cat(cols)}


def render_gaussians(g: dict[str, Any], cam: TorchCamera, rect: tuple[int, int, int, int] | None = None
                     ) -> dict[str, Any]:
    import torch

    n = g["means"].shape[0]
    quats = torch.zeros(n, 4, device=g["means"].device)
    quats[:, 0] = 1.0
    return render(g["means"], g["scales"], quats, g["opacities"], g["colours"], cam, rect=rect)
