"""A tiny feed-forward Gaussian predictor from two context views (pixelSplat / MVSplat in miniature),
with the seed paper's 3D consistency tokens as a separate set of 3D anchors.

Each context image goes through a small CNN to a feature map at 1/4 resolution; every feature pixel
(an *image token*) becomes one Gaussian on its camera ray. The two views exchange information through
bidirectional cross-attention (A attends to B, B to A, one layer each way), and heads give each
Gaussian its depth (a refinement of a first estimate, within the scene's depth range), opacity,
colour (a correction of the pixel's own colour) and size (relative to the pixel's footprint at that
depth). That is the whole network with ``tokens=False``: a 2D cross-view transformer.

With ``tokens=True`` an anchor branch comes before the cross-view attention:

1. *geometry estimate*: every image token of both views is lifted to a 3D point along its ray with
   the network's own first depth estimate (``depth0``) and the known context cameras (camera poses are
   inputs at test time; no ground-truth depth or geometry is read anywhere);
2. *anchor selection*: K of those points (``anchors``, 64 by default) are chosen by farthest-point
   sampling over the lifted cloud of both views. FPS rather than a voxel grid because it gives exactly K
   anchors whatever the scene's extent, spread over the whole cloud; the selection is an index choice
   (no gradient), the positions themselves keep their gradient into ``depth0``;
3. *anchor tokens*: each anchor's token is a positional encoding of its 3D position (in the scene's
   unit cube) plus the image-token features pooled where it projects: the anchor is projected into
   every context view with that view's camera, the view's token map is sampled bilinearly there, and
   the samples of the views it lands in front of and inside are averaged (no occlusion test);
4. *co-refinement*: ``rounds`` rounds (2 by default) of anchors attending to the image tokens of all
   context views together, then image tokens attending to the anchors (residual, pre-norm). Image
   tokens of the two views that see the same 3D region are thereby tied through shared anchors;
   the refined image tokens then go through the cross-view attention and heads as above.

Trained self-supervised: render a held-out train view with ``gs_raster`` and take the L1 loss.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from harness.tasks.nvs.gs_raster import TorchCamera, render


@dataclass(frozen=True)
class FFConfig:
    tokens: bool = True
    anchors: int = 64  # K anchor tokens (tokens=True only)
    rounds: int = 2  # anchor <-> image co-refinement rounds (tokens=True only)
    steps: int = 400
    width: int = 32
    lr: float = 2e-3
    seed: int = 0
    device: str = "cpu"
    patch: int = 32  # target pixels rendered per step: a random square of this side

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


STRIDE = 4
HEADS = 4  # attention heads: the width must be a multiple of it
ANCHOR_PREFIXES = ("point.", "pool.", "rounds.")  # the anchor branch's parameters (absent with tokens=False)


def positional_encoding(x: Any) -> Any:
    """(..., 3) positions in the unit cube -> (..., 27): the position and sin/cos at four octaves."""
    import torch

    feats = [x]
    for f in (1.0, 2.0, 4.0, 8.0):
        feats += [torch.sin(f * math.pi * x), torch.cos(f * math.pi * x)]
    return torch.cat(feats, -1)


def build_network(cfg: FFConfig) -> Any:
    import torch
    from torch import nn

    class CoRefine(nn.Module):
        """One round: the anchors read the image tokens of every context view, then every image token
        reads the anchors (pre-norm residual attention both ways, a small MLP on the anchors)."""

        def __init__(self, c: int) -> None:
            super().__init__()
            self.image_norm = nn.LayerNorm(c)
            self.anchor_norm = nn.LayerNorm(c)
            self.to_anchor = nn.MultiheadAttention(c, HEADS, batch_first=True)  # queries: anchors
            self.anchor_mlp = nn.Sequential(nn.LayerNorm(c), nn.Linear(c, 2 * c), nn.ReLU(), nn.Linear(2 * c, c))
            self.key_norm = nn.LayerNorm(c)
            self.to_image = nn.MultiheadAttention(c, HEADS, batch_first=True)  # queries: image tokens

        def forward(self, anchors: torch.Tensor, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            img = self.image_norm(images)[None]
            anchors = anchors + self.to_anchor(self.anchor_norm(anchors)[None], img, img, need_weights=False)[0][0]
            anchors = anchors + self.anchor_mlp(anchors)
            keys = self.key_norm(anchors)[None]
            images = images + self.to_image(img, keys, keys, need_weights=False)[0][0]
            return anchors, images

    class Predictor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            c = cfg.width
            self.tokens, self.n_anchors = cfg.tokens, cfg.anchors
            self.encoder = nn.Sequential(
                nn.Conv2d(3, c, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(c, c, 3, stride=2, padding=1), nn.ReLU(),
                nn.Conv2d(c, c, 3, padding=1), nn.ReLU(),
            )  # fmt: skip
            self.ray = nn.Linear(3, c)  # the token's ray direction in the world (where it looks)
            self.depth0 = nn.Linear(c, 1)
            self.a_to_b = nn.MultiheadAttention(c, HEADS, batch_first=True)
            self.b_to_a = nn.MultiheadAttention(c, HEADS, batch_first=True)
            self.norm = nn.LayerNorm(c)
            self.head = nn.Sequential(nn.Linear(2 * c, c), nn.ReLU(), nn.Linear(c, 6))
            if cfg.tokens:  # the anchor branch (ANCHOR_PREFIXES): built only when used
                self.point = nn.Sequential(nn.Linear(27, c), nn.ReLU(), nn.Linear(c, c))
                self.pool = nn.Linear(c, c)
                self.rounds = nn.ModuleList(CoRefine(c) for _ in range(cfg.rounds))

        def anchor_tokens(self, positions: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
            return self.point(positional_encoding(positions)) + self.pool(pooled)

        def forward(self, feats: list[torch.Tensor], anchors: torch.Tensor | None) -> list[torch.Tensor]:
            x = feats
            if anchors is not None:
                sizes = [f.shape[0] for f in feats]
                images = torch.cat(feats)  # all context views' tokens together
                for layer in self.rounds:
                    anchors, images = layer(anchors, images)
                x = list(images.split(sizes))
            a, b = (self.norm(xi) for xi in x)
            # bidirectional: each view's tokens query the other's
            a_new = self.b_to_a(a[None], b[None], b[None], need_weights=False)[0][0]
            b_new = self.a_to_b(b[None], a[None], a[None], need_weights=False)[0][0]
            return [self.head(torch.cat([f, m], -1)) for f, m in zip(x, (a_new, b_new), strict=True)]

    return Predictor()


def token_rays(cam: TorchCamera) -> tuple[Any, Any]:
    """World-space origin (3,) and directions (T, 3) of the feature pixels' centres, scaled so that a
    unit step along one is a unit of camera z (a z-depth times the direction is the point)."""
    import torch

    h, w = cam.height // STRIDE, cam.width // STRIDE
    dev = cam.w2c.device
    ys, xs = torch.meshgrid(torch.arange(h, device=dev), torch.arange(w, device=dev), indexing="ij")
    x = (xs.reshape(-1).float() + 0.5) * STRIDE
    y = (ys.reshape(-1).float() + 0.5) * STRIDE
    d_cam = torch.stack([(x - cam.cx) / cam.fx, (y - cam.cy) / cam.fy, torch.ones_like(x)], -1)  # z = 1
    c2w = torch.linalg.inv(cam.w2c)
    return c2w[:3, 3], d_cam @ c2w[:3, :3].T


def farthest_points(points: Any, k: int) -> Any:
    """Indices of ``min(k, N)`` of the (N, 3) ``points`` by farthest-point sampling, deterministic:
    it starts at the point farthest from the cloud's centroid."""
    import torch

    with torch.no_grad():
        p = points.detach()
        k = min(k, p.shape[0])
        idx = torch.empty(k, dtype=torch.long, device=p.device)
        idx[0] = (p - p.mean(0)).norm(dim=1).argmax()
        dist = (p - p[idx[0]]).norm(dim=1)
        for i in range(1, k):
            idx[i] = dist.argmax()
            dist = torch.minimum(dist, (p - p[idx[i]]).norm(dim=1))
    return idx


def project_pool(world: Any, token_maps: list[Any], cams: list[TorchCamera]) -> Any:
    """(K, C): the image tokens where each world point (K, 3) projects, sampled bilinearly per view
    and averaged over the views it lands in front of and inside (zeros where it lands in none)."""
    import torch
    import torch.nn.functional as F

    total = torch.zeros(world.shape[0], token_maps[0].shape[0], device=world.device)
    seen = torch.zeros(world.shape[0], 1, device=world.device)
    for fmap, cam in zip(token_maps, cams, strict=True):
        p = world @ cam.w2c[:3, :3].T + cam.w2c[:3, 3]
        z = p[:, 2:3]
        uv = p[:, :2] / z.clamp_min(1e-6)
        u = cam.fx * uv[:, 0] + cam.cx
        v = cam.fy * uv[:, 1] + cam.cy
        grid = torch.stack([2 * u / cam.width - 1, 2 * v / cam.height - 1], -1).clamp(-2, 2)
        inside = ((z[:, 0] > 1e-6) & (grid.abs() <= 1).all(-1)).float()[:, None]
        sampled = F.grid_sample(fmap[None], grid[None, None], align_corners=False)[0, :, 0].T  # (K, C)
        total = total + inside * sampled
        seen = seen + inside
    return total / seen.clamp_min(1.0)


def predict_gaussians(net: Any, images: list[Any], cams: list[TorchCamera], depth_range: tuple[float, float],
                      center: Any, radius: float) -> dict[str, Any]:
    """Gaussians (means, scales, opacities, colours) of two context views, images (H, W, 3) in [0, 1].
    Its only inputs are the context images, their cameras and the scene's bounds from the cameras.
    With the anchor branch, ``anchors`` holds the anchors' world positions (K, 3)."""
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
    anchors, anchor_world = None, None
    if net.tokens:
        cloud = torch.cat([o + d * z[:, None] for o, d, z in zip(origins, dirs, z0, strict=True)])  # predicted depth
        anchor_world = cloud[farthest_points(cloud, net.n_anchors)]
        maps = [f.T.reshape(-1, cam.height // STRIDE, cam.width // STRIDE) for f, cam in zip(feats, cams, strict=True)]
        anchors = net.anchor_tokens((anchor_world - center) / radius, project_pool(anchor_world, maps, cams))
    outs = net(feats, anchors)
    means, scales, opac, cols = [], [], [], []
    for o, d, z, c, out, cam in zip(origins, dirs, z0, colours, outs, cams, strict=True):
        logit_z = torch.logit(((z - near) / (far - near)).clamp(1e-4, 1 - 1e-4))
        z = near + (far - near) * torch.sigmoid(logit_z + out[:, 0])
        means.append(o + d * z[:, None])
        footprint = STRIDE * z / cam.fx  # a feature pixel's width in the world at depth z
        scales.append((footprint * torch.exp(out[:, 1].clamp(-3, 3)) * 0.5)[:, None].expand(-1, 3))
        opac.append(torch.sigmoid(out[:, 2] + 1.0))
        cols.append(torch.sigmoid(torch.logit(c.clamp(0.02, 0.98)) + out[:, 3:6]))
    out_dict = {"means": torch.cat(means), "scales": torch.cat(scales), "opacities": torch.cat(opac),
                "colours": torch.cat(cols)}
    if anchor_world is not None:
        out_dict["anchors"] = anchor_world
    return out_dict


def render_gaussians(g: dict[str, Any], cam: TorchCamera, rect: tuple[int, int, int, int] | None = None
                     ) -> dict[str, Any]:
    import torch

    n = g["means"].shape[0]
    quats = torch.zeros(n, 4, device=g["means"].device)
    quats[:, 0] = 1.0
    return render(g["means"], g["scales"], quats, g["opacities"], g["colours"], cam, rect=rect)
