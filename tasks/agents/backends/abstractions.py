"""What the VLA backends observe, and the hindsight labels 3A-VLA's two abstractions learn from.

Inputs (every variant, ``vla:bc`` included): the frame, the instruction embedding, a state vector
(inventory, facing direction, achievements unlocked so far, all from the text observation) and the
9x7 semantic map as tile-class indices (one-hot in the network).

Labels come from replaying the demonstration in its seeded world (:func:`demos.replay_steps`: the
environment reports every unlock and the player's pose), never from the demonstrator's code:

- **Intention (IA)**: for step k, the first achievement the demonstration unlocks at or after step
  k (``none`` when it unlocks nothing more). A head learns to predict it from the observation.
- **Environment semantics (ESA)**: for step k, the tile the demonstration acts on next: the faced
  tile of the next ``do`` / ``place_*`` / ``make_*`` step that raised an achievement counter,
  written in step k's 9x7 view (``nowhere`` when that tile is outside the view, or there is no such
  step). A per-tile head learns this spatial-functional affordance heatmap.
- **AAR** (:func:`aar_weights`) turns the model's own agreement of each demonstrated action with its
  learned abstractions into loss weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.tasks.agents.env import ACHIEVEMENTS, ACTIONS, SEMANTIC_NAMES, VIEW_H, VIEW_W
from harness.tasks.agents.game import INVENTORY_ITEMS, MOVES, TILE_ACTION_PREFIXES
from harness.tasks.agents.observation import Observation

if TYPE_CHECKING:
    from harness.tasks.agents.demos import DemoStep

IA_CLASSES: tuple[str, ...] = (*ACHIEVEMENTS, "none")
NOWHERE = VIEW_W * VIEW_H  # the ESA class after the 63 tiles (row-major, rows top to bottom)
ESA_CLASSES = NOWHERE + 1
TILE_CLASSES = len(SEMANTIC_NAMES)
# the state vector's layout: inventory counts / 9, then the facing direction one-hot, then unlocked
FACING_AT = len(INVENTORY_ITEMS)
STATE_DIM = len(INVENTORY_ITEMS) + len(MOVES) + len(ACHIEVEMENTS)
FLOOR = 0.1  # the weight left to a demonstration step the abstractions disagree with entirely
_TILE_INDEX = {name: i for i, name in enumerate(SEMANTIC_NAMES)}


def state_vector(obs: Observation) -> list[float]:
    facing = [float(obs.direction == d) for d in MOVES]
    return [obs.count(k) / 9.0 for k in INVENTORY_ITEMS] + facing + [float(a in obs.unlocked) for a in ACHIEVEMENTS]


def tile_indices(obs: Observation) -> Any:
    """(7, 9) int64 tile classes of the semantic map (all ``unknown`` when the text has no map)."""
    import numpy as np

    out = np.zeros((VIEW_H, VIEW_W), np.int64)
    for y, row in enumerate(obs.grid[:VIEW_H]):
        for x, name in enumerate(row[:VIEW_W]):
            out[y, x] = _TILE_INDEX.get(name, 0)
    return out


def intention_labels(steps: Sequence[DemoStep]) -> list[int]:
    """Hindsight IA label per step: the index in IA_CLASSES of the next unlock at or after it."""
    labels = [0] * len(steps)
    nxt = IA_CLASSES.index("none")
    for k in range(len(steps) - 1, -1, -1):
        if steps[k].unlocked:
            nxt = IA_CLASSES.index(steps[k].unlocked[0])
        labels[k] = nxt
    return labels


def acts_on_tile(step: DemoStep) -> bool:
    name = ACTIONS[step.action]
    return step.achieved and name.startswith(TILE_ACTION_PREFIXES)


def affordance_labels(steps: Sequence[DemoStep]) -> list[int]:
    """Hindsight ESA label per step: the view tile (y * 9 + x) of the next achieving interaction, or NOWHERE."""
    labels = [NOWHERE] * len(steps)
    target: tuple[int, int] | None = None  # world (x, y) of the next interaction's tile
    for k in range(len(steps) - 1, -1, -1):
        s = steps[k]
        if acts_on_tile(s):
            target = (s.pos[0] + s.facing[0], s.pos[1] + s.facing[1])
        if target is not None:
            x = target[0] - s.pos[0] + VIEW_W // 2
            y = target[1] - s.pos[1] + VIEW_H // 2
            if 0 <= x < VIEW_W and 0 <= y < VIEW_H:
                labels[k] = y * VIEW_W + x
    return labels


def aar_weights(agreement: Sequence[float]) -> list[float]:
    """AAR: a step's loss weight from its agreement in [0, 1], FLOOR..1, rescaled to mean 1."""
    raw = [FLOOR + (1.0 - FLOOR) * min(max(a, 0.0), 1.0) for a in agreement]
    mean = sum(raw) / len(raw) if raw else 1.0
    return [w / mean for w in raw]
