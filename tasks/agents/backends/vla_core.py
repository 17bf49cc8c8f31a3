"""The policies: a small CNN on the 64x64 frame plus an instruction embedding (BC), and the 3A-VLA
policy that also takes the intention one-hot, the affordance map and the inventory. Training is
action cross-entropy, per-step weighted by AAR for ``vla:3a``. torch is imported here only.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from harness.tasks.agents.backends.abstractions import ESA_CHANNELS, IA_NAMES, INVENTORY_ITEMS
from harness.tasks.agents.env import ACTIONS, VIEW_H, VIEW_W

TEXT_DIM = 64
INV_DIM = len(INVENTORY_ITEMS) + 4


def embed_text(text: str | None) -> list[float]:
    """The instruction embedding: hashed bag of words (no vocabulary to ship; unseen goals still map)."""
    vec = [0.0] * TEXT_DIM
    for word in (text or "free play").lower().split():
        vec[zlib.crc32(word.encode()) % TEXT_DIM] += 1.0
    return vec


@dataclass
class TrainConfig:
    epochs: int = 20
    lr: float = 1e-3
    batch: int = 64
    hidden: int = 128
    seed: int = 0


class Policy(nn.Module):
    def __init__(self, abstractions: bool, hidden: int) -> None:
        super().__init__()
        self.abstractions = abstractions
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 8 * 8, hidden), nn.ReLU())
        self.text = nn.Linear(TEXT_DIM, 32)
        extra = 32
        if abstractions:
            self.esa = nn.Sequential(nn.Conv2d(ESA_CHANNELS, 16, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                     nn.Linear(16 * VIEW_H * VIEW_W, 64), nn.ReLU())
            self.ia = nn.Linear(len(IA_NAMES), 32)
            self.inv = nn.Linear(INV_DIM, 32)
            extra += 64 + 32 + 32
        self.head = nn.Sequential(nn.Linear(hidden + extra, hidden), nn.ReLU(), nn.Linear(hidden, len(ACTIONS)))

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = [self.cnn(batch["frame"]), torch.relu(self.text(batch["text"]))]
        if self.abstractions:
            parts += [self.esa(batch["esa"]), torch.relu(self.ia(batch["ia"])), torch.relu(self.inv(batch["inv"]))]
        return self.head(torch.cat(parts, dim=1))


def tensors(rows: dict[str, list[Any]]) -> dict[str, torch.Tensor]:
    out = {"frame": torch.from_numpy(np.stack(rows["frame"]).astype(np.float32) / 255.0).permute(0, 3, 1, 2),
           "text": torch.tensor(rows["text"], dtype=torch.float32)}
    if "esa" in rows:
        out["esa"] = torch.from_numpy(np.stack(rows["esa"]))
        out["ia"] = torch.tensor(rows["ia"], dtype=torch.float32)
        out["inv"] = torch.tensor(rows["inv"], dtype=torch.float32)
    return out


def train(rows: dict[str, list[Any]], actions: list[int], weights: list[float], abstractions: bool,
          cfg: TrainConfig) -> tuple[Policy, list[float]]:
    torch.manual_seed(cfg.seed)
    net = Policy(abstractions, cfg.hidden)
    data = tensors(rows)
    y = torch.tensor(actions, dtype=torch.long)
    w = torch.tensor(weights, dtype=torch.float32)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    losses = []
    n = len(actions)
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for i in range(0, n, cfg.batch):
            idx = perm[i:i + cfg.batch]
            logits = net({k: v[idx] for k, v in data.items()})
            loss = (nn.functional.cross_entropy(logits, y[idx], reduction="none") * w[idx]).sum() / w[idx].sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / n)
    net.eval()
    return net, losses


@torch.no_grad()
def probabilities(net: Policy, rows: dict[str, list[Any]]) -> np.ndarray:
    return torch.softmax(net(tensors(rows)), dim=1).numpy()
