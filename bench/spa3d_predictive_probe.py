"""3DSPA design probe: a *predictive* interaction network over tracks instead of reconstruction.

Question (issue 13): does a model that must predict the future (so it cannot copy a violation it
sees) detect pass-through, which a reconstruction score misses? Each query track's next H frames are
predicted from the last W frames of itself and of S support tracks (pairwise messages on relative
positions, visibility and object-identity similarity, mean/max pooled; an Interaction-Network-style
prior that is known to learn collisions at object level). Surprise per video = mean / max over cut
times of the future L1 (positions) and visibility cross-entropy, z-scored against held-out realistic
videos like the default scorer. Baseline: the rule table printed for each surprise channel.

Measured (3000 steps, 1000 scenes, 25 pairs/violation, seed 3000; README): teleport 1.00 and
gravity_flip 0.92 by position, vanish 0.96 by visibility, but pass_through 0.02 by position: the
network extrapolates ballistically and never learns the bounce, so the collision-free twin is the
*more* predictable one. Not adopted.

    OMP_NUM_THREADS=1 python bench/spa3d_predictive_probe.py --steps 3000 --videos 1000
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

FRAMES = 32


@dataclass
class ProbeConfig:
    window: int = 4  # observed frames before the cut
    horizon: int = 4  # predicted frames after it
    support: int = 64
    queries: int = 16
    width: int = 96


def build_network(cfg: ProbeConfig):
    import torch
    from torch import nn

    w, win, hor = cfg.width, cfg.window, cfg.horizon

    class InteractionPredictor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            # message per (query, support) pair: support motion relative to the query's last position,
            # its visibility, the query's own motion, and object-identity similarity
            self.message = nn.Sequential(nn.Linear(win * 7 + 1, w), nn.GELU(), nn.Linear(w, w), nn.GELU(),
                                         nn.Linear(w, w))
            self.own = nn.Sequential(nn.Linear(win * 4, w), nn.GELU())
            self.out = nn.Sequential(nn.Linear(3 * w, 2 * w), nn.GELU(), nn.Linear(2 * w, w), nn.GELU(),
                                     nn.Linear(w, hor * 4))

        def forward(self, q_win, q_vis, s_win, s_vis, similarity):
            anchor = q_win[:, :, -1:, :]  # [B, Q, 1, 3] the query's last observed position
            rel = s_win[:, None] - anchor[:, :, None]  # [B, Q, S, W, 3]
            own = q_win - anchor  # [B, Q, W, 3]
            sv = s_vis[:, None].expand(-1, q_win.shape[1], -1, -1).float()
            own_per_pair = own[:, :, None].expand(-1, -1, rel.shape[2], -1, -1).flatten(3)
            pair = torch.cat([(rel * sv[..., None]).flatten(3), sv, own_per_pair, similarity[..., None]], -1)
            m = self.message(pair)
            h = torch.cat([self.own(torch.cat([own.flatten(2), q_vis.float()], -1)), m.mean(2), m.max(2).values], -1)
            o = self.out(h).view(*q_win.shape[:2], hor, 4)
            return anchor + o[..., :3].cumsum(2) * 0.1, o[..., 3]  # displacements integrated over the horizon

    return InteractionPredictor()


def normalised(video) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions normalised by the video's visible points (a probe shortcut), visibility, unit features."""
    pts = video.tracks_3d[video.visible]
    centre = pts.mean(0)
    scale = np.sqrt(np.mean(np.sum((pts - centre) ** 2, -1)))
    feats = video.features[:, 0] if video.features is not None else np.zeros((video.num_points, 1), np.float32)
    feats = feats / np.maximum(np.linalg.norm(feats, axis=-1, keepdims=True), 1e-6)
    return ((video.tracks_3d - centre) / scale).astype(np.float32), video.visible, feats.astype(np.float32)


def window_item(arrays, cut: int, rng, cfg: ProbeConfig, all_queries: bool = False, support: int | None = None):
    pos, vis, feats = arrays
    candidates = np.flatnonzero(vis[:, cut - 1])  # queries must be visible at the last observed frame
    if len(candidates) == 0:
        return None
    q = candidates if all_queries else rng.choice(candidates, size=cfg.queries, replace=len(candidates) < cfg.queries)
    n_support = support or cfg.support
    s = rng.choice(len(pos), size=n_support, replace=len(pos) < n_support)
    past, future = slice(cut - cfg.window, cut), slice(cut, cut + cfg.horizon)
    return (pos[q, past], vis[q, past], pos[s, past], vis[s, past], pos[q, future], vis[q, future],
            feats[q] @ feats[s].T)


def stack(items):
    import torch

    return [torch.from_numpy(np.stack([it[k] for it in items])) for k in range(7)]


def errors(net, batch):
    import torch

    pred, logits = net(batch[0], batch[1], batch[2], batch[3], batch[6])
    vis = batch[5].float()
    l1 = (torch.abs(pred - batch[4]).mean(-1) * vis).sum() / vis.sum().clamp(min=1)
    return l1, torch.nn.functional.binary_cross_entropy_with_logits(logits, vis)


def train(videos, cfg: ProbeConfig, steps: int, batch: int, lr: float):
    import torch

    torch.manual_seed(0)
    net = build_network(cfg)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(0)
    started, history = time.time(), []
    for step in range(steps):
        for group in opt.param_groups:
            group["lr"] = lr * (0.05 + 0.475 * (1 + np.cos(np.pi * step / steps)))
        items = []
        while len(items) < batch:
            video = videos[rng.integers(len(videos))]
            item = window_item(video, int(rng.integers(cfg.window, FRAMES - cfg.horizon + 1)), rng, cfg)
            if item is not None:
                items.append(item)
        l1, bce = errors(net, stack(items))
        opt.zero_grad()
        (l1 + 0.1 * bce).backward()
        opt.step()
        history.append((float(l1.detach()), float(bce.detach())))
        if (step + 1) % 500 == 0:
            h = np.array(history[-500:]).mean(0)
            print(f"step {step + 1}: l1 {h[0]:.4f} bce {h[1]:.3f} ({time.time() - started:.0f} s)", flush=True)
    return net.eval()


def surprise(net, video, cfg: ProbeConfig) -> dict[str, float]:
    import torch

    arrays = normalised(video)
    rng = np.random.default_rng(0)
    per_cut = []
    for cut in range(cfg.window, FRAMES - cfg.horizon + 1):
        item = window_item(arrays, cut, rng, cfg, all_queries=True, support=256)
        if item is None:
            per_cut.append((0.0, 0.0))
            continue
        with torch.no_grad():
            l1, bce = errors(net, stack([item]))
        per_cut.append((float(l1), float(bce)))
    a = np.array(per_cut)
    return {"pos": a[:, 0].mean(), "vis": a[:, 1].mean(), "posmax": a[:, 0].max(), "vismax": a[:, 1].max()}


def main() -> None:
    import torch

    from harness.tasks.spa3d import synth

    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--videos", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--features", type=int, default=8, help="per-object feature channels (0: geometry only)")
    ap.add_argument("--pairs", type=int, default=25)
    ap.add_argument("--pair-seed", type=int, default=3000)
    args = ap.parse_args()
    torch.set_num_threads(1)
    cfg, scene = ProbeConfig(), synth.SceneConfig(feature_dim=args.features)
    net = train([normalised(v) for v in synth.realistic_set(args.videos, seed=1, cfg=scene)], cfg, args.steps,
                args.batch, args.lr)
    calib = [surprise(net, v, cfg) for v in synth.realistic_set(60, seed=77, cfg=scene)]
    mu = {k: np.mean([c[k] for c in calib]) for k in calib[0]}
    sd = {k: np.std([c[k] for c in calib]) for k in calib[0]}

    def z(f: dict, k: str) -> float:
        return (f[k] - mu[k]) / sd[k]

    rows = [(p.violation, surprise(net, p.realistic, cfg), surprise(net, p.violated, cfg))
            for p in synth.pair_set(args.pairs, seed=args.pair_seed, cfg=scene)]
    rules = {k: (lambda f, k=k: f[k]) for k in ("pos", "vis", "posmax", "vismax")}
    rules["zsum"] = lambda f: z(f, "pos") + z(f, "vis")
    rules["zsum_max"] = lambda f: z(f, "posmax") + z(f, "vismax")
    print("pair accuracy (realistic less surprising than its violated twin):")
    for name, rule in rules.items():
        acc: dict[str, list[float]] = {}
        for violation, a, b in rows:
            acc.setdefault(violation, []).append(float(rule(a) < rule(b)) + 0.5 * float(rule(a) == rule(b)))
        means = {k: float(np.mean(v)) for k, v in acc.items()}
        print(f"  {name:9s}", " ".join(f"{k} {v:.2f}" for k, v in means.items()),
              f"| mean {np.mean(list(means.values())):.2f}")


if __name__ == "__main__":
    main()
