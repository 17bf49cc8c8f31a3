"""The ReID network and its training loop (torch, CPU): a small CNN with attention pooling, a BN-neck
embedding, ID (cross-entropy, label smoothing) + batch-hard triplet loss, PK batches.

The attention map (one sigmoid channel over the last feature map) pools the features; 3D-VITAL's
VAAS supervises it on rendered views with the visibility map (BCE against the map, downsampled),
so attention learns to rest on surface the source image really showed. Without VAAS the attention
is learnt from the ReID losses alone, which is the baseline's network too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class TrainConfig:
    steps: int = 500
    lr: float = 3e-3
    weight_decay: float = 5e-4
    batch_p: int = 8
    batch_k: int = 4
    width: int = 16
    dim: int = 64
    margin: float = 0.3
    smoothing: float = 0.1
    vaas_weight: float = 1.0
    seed: int = 0
    threads: int = 1


def build_net(cfg: TrainConfig, n_classes: int) -> Any:
    import torch
    from torch import nn

    def block(cin: int, cout: int) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True),
                             nn.Conv2d(cout, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(True))

    w = cfg.width

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body = nn.Sequential(block(3, w), nn.MaxPool2d(2), block(w, 2 * w), nn.MaxPool2d(2),
                                      block(2 * w, 4 * w))  # 64x32 -> 16x8
            self.att = nn.Conv2d(4 * w, 1, 1)
            self.proj = nn.Linear(4 * w, cfg.dim)
            self.neck = nn.BatchNorm1d(cfg.dim)
            self.neck.bias.requires_grad_(False)
            self.cls = nn.Linear(cfg.dim, n_classes, bias=False)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            f = self.body(x)
            a = torch.sigmoid(self.att(f))
            pooled = (f * a).sum((2, 3)) / a.sum((2, 3)).clamp_min(1e-6)
            feat = self.proj(pooled)
            emb = self.neck(feat)
            return feat, emb, self.cls(emb), a[:, 0]

    return Net()


def batch_hard_triplet(feat: Any, labels: Any, margin: float) -> Any:
    import torch

    d = torch.cdist(feat, feat)
    same = labels[:, None] == labels[None, :]
    hardest_pos = (d * same).max(1).values
    hardest_neg = (d + 1e6 * same).min(1).values
    return torch.relu(hardest_pos - hardest_neg + margin).mean()


def descend(loss: Any, opt: Any, sched: Any, what: str) -> float:
    """One optimiser and schedule step on ``loss``; a loss that is not finite stops the fit in one line
    (naming ``what``) rather than training on NaNs."""
    import torch

    if not torch.isfinite(loss):
        raise ValueError(f"{what} became non-finite")
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
    return float(loss.detach())


def _augment(x: np.ndarray, vis: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if rng.random() < 0.5:
        x, vis = x[:, :, ::-1], vis[:, ::-1]
    dy, dx = rng.integers(-3, 4), rng.integers(-2, 3)
    x = np.roll(x, (dy, dx), axis=(1, 2))
    vis = np.roll(vis, (dy, dx), axis=(0, 1))
    return np.ascontiguousarray(x), np.ascontiguousarray(vis)


def train(cfg: TrainConfig, images: np.ndarray, labels: np.ndarray, vis: np.ndarray, supervised: np.ndarray,
          tick: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Train on images [n,3,64,32]; ``vis`` [n,64,32] and ``supervised`` [n] mark where VAAS applies."""
    import time

    import torch
    import torch.nn.functional as F

    torch.manual_seed(cfg.seed)
    torch.set_num_threads(cfg.threads)
    rng = np.random.default_rng(cfg.seed)
    classes = np.unique(labels)
    remap = {c: i for i, c in enumerate(classes)}
    y = np.asarray([remap[c] for c in labels])
    by_class = [np.flatnonzero(y == i) for i in range(len(classes))]
    net = build_net(cfg, len(classes))
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=cfg.lr,
                           weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=cfg.lr, total_steps=cfg.steps, pct_start=0.1)
    mean = images.mean(axis=(0, 2, 3), keepdims=True)
    std = images.std(axis=(0, 2, 3), keepdims=True) + 1e-6
    t0 = time.perf_counter()
    losses: list[float] = []
    net.train()
    p = min(cfg.batch_p, len(classes))
    for _step in range(cfg.steps):
        chosen = rng.choice(len(classes), size=p, replace=False)
        idx = np.concatenate([rng.choice(by_class[c], size=cfg.batch_k, replace=len(by_class[c]) < cfg.batch_k)
                              for c in chosen])
        xs, vs = zip(*(_augment((images[i] - mean[0]) / std[0], vis[i], rng) for i in idx), strict=True)
        x = torch.from_numpy(np.stack(xs))
        v = torch.from_numpy(np.stack(vs))
        lab = torch.from_numpy(y[idx])
        feat, _emb, logits, att = net(x)
        loss = F.cross_entropy(logits, lab, label_smoothing=cfg.smoothing) + batch_hard_triplet(feat, lab, cfg.margin)
        sup = torch.from_numpy(supervised[idx])
        if cfg.vaas_weight > 0 and bool(sup.any()):
            target = F.avg_pool2d(v[:, None], 4)[:, 0]
            bce = F.binary_cross_entropy(att.clamp(1e-5, 1 - 1e-5), target, reduction="none").mean((1, 2))
            loss = loss + cfg.vaas_weight * (bce * sup).sum() / sup.sum()
        losses.append(descend(loss, opt, sched, "the training loss"))
        if tick is not None:
            tick()
    state = {"weights": {k: t.detach().clone() for k, t in net.state_dict().items()}, "mean": mean, "std": std,
             "n_classes": len(classes)}
    record = {"fit_seconds": round(time.perf_counter() - t0, 2), "steps": cfg.steps,
              "final_loss": round(float(np.mean(losses[-20:])), 4), "train_images": int(len(images))}
    return state, record


def embed(cfg: TrainConfig, state: dict[str, Any], images: np.ndarray) -> np.ndarray:
    """BN-neck embeddings [n, dim] (mean of the image and its mirror, as ReID test code commonly does)."""
    import torch

    torch.set_num_threads(cfg.threads)
    net = build_net(cfg, state["n_classes"])
    net.load_state_dict(state["weights"])
    net.eval()
    x = torch.from_numpy(((images - state["mean"]) / state["std"]).astype(np.float32))
    out = []
    with torch.no_grad():
        for lo in range(0, len(x), 256):
            xb = x[lo:lo + 256]
            e = net(xb)[1] + net(torch.flip(xb, dims=[3]))[1]
            out.append(e / 2)
    return torch.cat(out).numpy().astype(np.float64)
