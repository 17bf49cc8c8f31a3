"""The networks and their training. torch is imported here only.

Every variant's policy sees the same observation: a small CNN on the 64x64 frame, the hashed
instruction embedding, the state vector and a conv encoder of the one-hot semantic map.
``vla:3a`` adds three learned heads (:class:`Abstractions`):

- the **IA head**: instruction, state and map -> a distribution over the next achievement
  (trained on the hindsight intention labels);
- the **ESA head**: per tile of the 9x7 map, from its one-hot class, its offset from the player and
  the predicted intention broadcast over the map -> a heatmap over the 63 tiles plus ``nowhere``
  (trained on the hindsight affordance labels);
- the **AAR prior**: the two predictions and the facing direction only -> an action distribution
  (trained on the demonstrated actions, every step weighted 1).

The policy takes the IA distribution and the ESA heatmap (as a map channel) as inputs. They are
*detached*: the heads learn only from their hindsight losses, so they stay what they are named
(the next achievement, the next interaction tile) instead of drifting into whatever features help
the action loss. In training the policy reads the heads' predictions on their own training steps,
which they fit almost perfectly, while on new worlds they are right less often; cross-fitting them
(heads fitted on half of the demonstrations feeding the other half) did worse on validation worlds,
so it is not done. One loss: weighted action cross-entropy + IA cross-entropy + ESA cross-entropy +
prior cross-entropy. AAR: after ``warmup`` epochs (fewer when there are fewer epochs) and then at
the start of every epoch, each step's policy weight is set from the probability the prior gives its
demonstrated action (:func:`abstractions.aar_weights`: floor 0.1, mean 1); ``vla:3a-no-aar`` trains
the very same model with every weight 1.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from harness.tasks.agents.backends.abstractions import (
    ESA_CLASSES,
    FACING_AT,
    IA_CLASSES,
    STATE_DIM,
    TILE_CLASSES,
    aar_weights,
)
from harness.tasks.agents.env import ACTIONS, VIEW_H, VIEW_W
from harness.tasks.agents.game import MOVES

TEXT_DIM = 64
TILES = VIEW_H * VIEW_W


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
    warmup: int = 5


def _coords() -> torch.Tensor:
    """(2, 7, 9): each tile's offset from the player, scaled to [-1, 1] (the map is egocentric)."""
    ys = (torch.arange(VIEW_H, dtype=torch.float32) - VIEW_H // 2) / (VIEW_H // 2)
    xs = (torch.arange(VIEW_W, dtype=torch.float32) - VIEW_W // 2) / (VIEW_W // 2)
    return torch.stack([xs.expand(VIEW_H, VIEW_W), ys[:, None].expand(VIEW_H, VIEW_W)])


def _one_hot_map(tiles: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    onehot = nn.functional.one_hot(tiles, TILE_CLASSES).permute(0, 3, 1, 2).float()
    return torch.cat([onehot, coords.expand(len(tiles), -1, -1, -1)], dim=1)


class MapEncoder(nn.Module):
    def __init__(self, channels: int, width: int, out: int) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(channels, width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.Flatten(),
                                 nn.Linear(width * TILES, out), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out


class Abstractions(nn.Module):
    """The IA head, the ESA head and the abstraction-conditioned action prior (for AAR)."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.ia_map = MapEncoder(TILE_CLASSES + 2, 16, hidden)
        self.ia = nn.Sequential(nn.Linear(hidden + TEXT_DIM + STATE_DIM, hidden), nn.ReLU(),
                                nn.Linear(hidden, len(IA_CLASSES)))
        width = 32
        self.esa = nn.Sequential(nn.Conv2d(TILE_CLASSES + 2 + len(IA_CLASSES), width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(width, width, 3, padding=1), nn.ReLU())
        self.esa_tile = nn.Conv2d(width, 1, 1)
        self.esa_nowhere = nn.Linear(width, 1)
        self.prior = nn.Sequential(nn.Linear(len(IA_CLASSES) + ESA_CLASSES + len(MOVES), 64), nn.ReLU(),
                                   nn.Linear(64, len(ACTIONS)))

    def forward(self, text: torch.Tensor, state: torch.Tensor, grid: torch.Tensor) -> dict[str, torch.Tensor]:
        """Logits of the three heads, and the (detached) IA and ESA distributions the policy reads."""
        ia_logits = self.ia(torch.cat([self.ia_map(grid), text, state], dim=1))
        ia_p = torch.softmax(ia_logits, dim=1).detach()
        h = self.esa(torch.cat([grid, ia_p[:, :, None, None].expand(-1, -1, VIEW_H, VIEW_W)], dim=1))
        esa_logits = torch.cat([self.esa_tile(h).flatten(1), self.esa_nowhere(h.mean(dim=(2, 3)))], dim=1)
        esa_p = torch.softmax(esa_logits, dim=1).detach()
        facing = state[:, FACING_AT:FACING_AT + len(MOVES)]
        prior_logits = self.prior(torch.cat([ia_p, esa_p, facing], dim=1))
        return {"ia": ia_logits, "esa": esa_logits, "prior": prior_logits, "ia_p": ia_p, "esa_p": esa_p}


class Policy(nn.Module):
    def __init__(self, abstractions: bool, hidden: int) -> None:
        super().__init__()
        self.register_buffer("coords", _coords(), persistent=False)
        self.abstractions = Abstractions(hidden) if abstractions else None
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 16, 5, stride=2, padding=2), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Flatten(), nn.Linear(32 * 8 * 8, hidden), nn.ReLU())
        self.text = nn.Linear(TEXT_DIM, 32)
        self.state = nn.Linear(STATE_DIM, 32)
        # 3a's map encoder reads one more channel: the ESA heatmap over the tiles
        self.map = MapEncoder(TILE_CLASSES + 2 + int(abstractions), 32, hidden)
        extra = (len(IA_CLASSES) + 1) if abstractions else 0  # the IA distribution and P(nowhere)
        self.head = nn.Sequential(nn.Linear(2 * hidden + 64 + extra, hidden), nn.ReLU(),
                                  nn.Linear(hidden, len(ACTIONS)))

    def forward(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        coords: torch.Tensor = self.coords  # type: ignore[assignment]
        grid = _one_hot_map(batch["tiles"], coords)
        frame = batch["frame"].float().permute(0, 3, 1, 2) / 255.0
        parts = [self.cnn(frame), torch.relu(self.text(batch["text"])), torch.relu(self.state(batch["state"]))]
        out: dict[str, torch.Tensor] = {}
        if self.abstractions is not None:
            out = self.abstractions(batch["text"], batch["state"], grid)
            heat = out["esa_p"][:, :TILES].reshape(-1, 1, VIEW_H, VIEW_W)
            grid = torch.cat([grid, heat], dim=1)
            parts += [out["ia_p"], out["esa_p"][:, TILES:]]
        parts.insert(1, self.map(grid))
        out["action"] = self.head(torch.cat(parts, dim=1))
        return out


def tensors(rows: dict[str, list[Any]]) -> dict[str, torch.Tensor]:
    return {"frame": torch.from_numpy(np.stack(rows["frame"]).astype(np.uint8)),  # as floats only per batch
            "text": torch.tensor(rows["text"], dtype=torch.float32),
            "state": torch.tensor(rows["state"], dtype=torch.float32),
            "tiles": torch.from_numpy(np.stack(rows["tiles"]).astype(np.int64))}


@torch.no_grad()
def _prior_agreement(net: Policy, data: dict[str, torch.Tensor], y: torch.Tensor, batch: int) -> torch.Tensor:
    """The probability the abstraction-conditioned prior gives each demonstrated action."""
    assert net.abstractions is not None
    coords: torch.Tensor = net.coords  # type: ignore[assignment]
    out = []
    for i in range(0, len(y), batch * 8):
        sl = slice(i, i + batch * 8)
        heads = net.abstractions(data["text"][sl], data["state"][sl], _one_hot_map(data["tiles"][sl], coords))
        out.append(torch.softmax(heads["prior"], dim=1).gather(1, y[sl, None])[:, 0])
    return torch.cat(out)


def train(rows: dict[str, list[Any]], actions: list[int], labels: dict[str, list[int]] | None, aar: bool,
          cfg: TrainConfig) -> tuple[Policy, dict[str, Any]]:
    """Fit a policy (with the abstraction heads when ``labels`` holds their hindsight labels);
    returns it and a record: per-epoch losses, the final AAR weights and the heads' train accuracy."""
    torch.manual_seed(cfg.seed)
    net = Policy(labels is not None, cfg.hidden)
    data = tensors(rows)
    y = torch.tensor(actions, dtype=torch.long)
    targets = {k: torch.tensor(v, dtype=torch.long) for k, v in (labels or {}).items()}
    n = len(actions)
    w = torch.ones(n)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(cfg.seed)
    ce = nn.functional.cross_entropy
    warmup = min(cfg.warmup, cfg.epochs - 1)
    losses: list[float] = []
    for epoch in range(cfg.epochs):
        if aar and epoch >= warmup:
            net.eval()
            w = torch.tensor(aar_weights(_prior_agreement(net, data, y, cfg.batch).tolist()))
            net.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for i in range(0, n, cfg.batch):
            idx = perm[i:i + cfg.batch]
            out = net({k: v[idx] for k, v in data.items()})
            loss = (ce(out["action"], y[idx], reduction="none") * w[idx]).sum() / w[idx].sum()
            if targets:
                loss = loss + ce(out["ia"], targets["ia"][idx]) + ce(out["esa"], targets["esa"][idx]) \
                    + ce(out["prior"], y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        losses.append(total / n)
    net.eval()
    record: dict[str, Any] = {"losses": losses, "weights": w.tolist()}
    if targets:
        record["agreement"] = _prior_agreement(net, data, y, cfg.batch).tolist()
        with torch.no_grad():
            coords: torch.Tensor = net.coords  # type: ignore[assignment]
            assert net.abstractions is not None
            heads = net.abstractions(data["text"], data["state"], _one_hot_map(data["tiles"], coords))
        record["ia_accuracy"] = float((heads["ia"].argmax(1) == targets["ia"]).float().mean())
        record["esa_accuracy"] = float((heads["esa"].argmax(1) == targets["esa"]).float().mean())
    return net, record


@torch.no_grad()
def predict(net: Policy, rows: dict[str, list[Any]]) -> dict[str, np.ndarray]:
    """Action probabilities, and for 3a the most likely intention and affordance class per row."""
    out = net(tensors(rows))
    pred = {"probs": torch.softmax(out["action"], dim=1).numpy()}
    if "ia_p" in out:
        pred["intention"] = out["ia_p"].argmax(1).numpy()
        pred["affordance"] = out["esa_p"].argmax(1).numpy()
    return pred
