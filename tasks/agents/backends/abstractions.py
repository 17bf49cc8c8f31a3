"""3A-VLA's two abstractions and their agreement, computed from one text observation.

- **Intention abstraction (IA)**: the instruction condensed to the subgoal primitive it calls for now
  (``collect tree``, ``place table``, ``make wood_pickaxe``...), from the instruction and the
  inventory by Crafter's recipes (:func:`harness.tasks.agents.expert.primitive_for`); a one-hot.
- **Environment semantics abstraction (ESA)**: the 9x7 semantic view structured into a
  spatial-functional affordance map: walkable / obstacle / danger / station tiles, the tiles that
  afford the current primitive, and a walking-distance field to them (channels x 7 x 9).
- **Alignment** (for AAR): how well a demonstrated action agrees with what the two abstractions
  together afford: a move that shortens the walk to the intention's target, ``do`` on a target,
  the place/make the intention names. It is continuous in [0, 1]; AAR turns it into loss weights.

This is our reconstruction from the paper's abstract (no code was released when it was written): the
abstractions are computed, not learned, and the agreement is a fixed compatibility score.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from harness.tasks.agents.env import ACTIONS, VIEW_H, VIEW_W
from harness.tasks.agents.expert import (
    GOAL_ACHIEVEMENT,
    MAKE,
    MOVES,
    PLACE,
    PRIMITIVES,
    WALKABLE,
    Primitive,
    free_play_goal,
    primitive_for,
)
from harness.tasks.agents.observation import Observation

IA_NAMES: tuple[str, ...] = (*(p.name for p in PRIMITIVES), "goto table", "goto furnace")
ESA_CHANNELS = 7
INVENTORY_ITEMS = ("health", "food", "drink", "energy", "sapling", "wood", "stone", "coal", "iron", "diamond",
                   "wood_pickaxe", "stone_pickaxe", "iron_pickaxe", "wood_sword", "stone_sword", "iron_sword")
DANGER = {"lava", "zombie", "skeleton", "arrow"}
FLOOR = 0.1  # the weight left to a demonstration step the abstractions disagree with entirely


def intention(obs: Observation) -> Primitive:
    goal = obs.goal
    achievement = GOAL_ACHIEVEMENT.get(goal, goal.replace(" ", "_")) if goal else free_play_goal(obs, obs.unlocked)
    return primitive_for(achievement, obs)


def targets_of(prim: Primitive) -> set[str]:
    if prim.kind in ("collect", "goto"):
        return {prim.target}
    if prim.kind == "eat":
        return {"cow"}
    if prim.kind == "attack":
        return {"zombie"}
    if prim.kind == "place":
        return set(PLACE[prim.target][1]) if prim.target in PLACE else set()
    return set()


def distance_field(obs: Observation, targets: set[str]) -> list[list[float]]:
    """Walking steps from each tile to a tile next to a target (inf where none is reachable)."""
    inf = float("inf")
    dist = [[inf] * VIEW_W for _ in range(VIEW_H)]
    queue: deque[tuple[int, int]] = deque()
    for y in range(VIEW_H):
        for x in range(VIEW_W):
            if obs.grid and any(0 <= y + dy < VIEW_H and 0 <= x + dx < VIEW_W and obs.grid[y + dy][x + dx] in targets
                                for dx, dy in MOVES.values()):
                dist[y][x] = 0.0
                queue.append((x, y))
    while queue:
        x, y = queue.popleft()
        for dx, dy in MOVES.values():
            nx, ny = x + dx, y + dy
            if 0 <= nx < VIEW_W and 0 <= ny < VIEW_H and dist[ny][nx] == inf and \
                    (obs.grid[ny][nx] in WALKABLE or obs.grid[ny][nx] == "player"):
                dist[ny][nx] = dist[y][x] + 1
                queue.append((nx, ny))
    return dist


def esa_map(obs: Observation, prim: Primitive) -> Any:
    """(channels, 7, 9) float32 affordance map."""
    import numpy as np

    out = np.zeros((ESA_CHANNELS, VIEW_H, VIEW_W), np.float32)
    if not obs.grid:
        return out
    targets = targets_of(prim)
    dist = distance_field(obs, targets) if targets else None
    for y, row in enumerate(obs.grid):
        for x, name in enumerate(row):
            out[0, y, x] = name in WALKABLE
            out[1, y, x] = name not in WALKABLE and name not in ("player", "unknown")
            out[2, y, x] = name in DANGER
            out[3, y, x] = name in ("table", "furnace")
            out[4, y, x] = name in targets
            d = dist[y][x] if dist is not None else float("inf")
            out[5, y, x] = 1.0 / (1.0 + d) if d != float("inf") else 0.0
            out[6, y, x] = name == "player"
    return out


def inventory_vector(obs: Observation) -> list[float]:
    facing = [float(obs.direction == d) for d in MOVES]
    return [obs.count(k) / 9.0 for k in INVENTORY_ITEMS] + facing


def ia_vector(prim: Primitive) -> list[float]:
    vec = [0.0] * len(IA_NAMES)
    if prim.name in IA_NAMES:
        vec[IA_NAMES.index(prim.name)] = 1.0
    return vec


def alignment(obs: Observation, prim: Primitive, action: int) -> float:
    """How well an action agrees with the intention on the affordance map, in [0, 1]."""
    name = ACTIONS[action]
    targets = targets_of(prim)
    cx, cy = VIEW_W // 2, VIEW_H // 2
    if name.startswith("move_"):
        if not obs.grid:
            return 0.5
        dx, dy = MOVES[name[len("move_"):]]
        nxt = obs.grid[cy + dy][cx + dx]
        if prim.kind in ("make", "sleep"):
            return 0.2
        if prim.kind == "place":
            return 0.6 if obs.facing not in targets and nxt in targets else 0.2
        if not targets or prim.kind == "explore":
            return 0.5 if nxt in WALKABLE else 0.2
        if nxt in targets:  # turning to face the target
            return 1.0 if obs.facing not in targets else 0.3
        dist = distance_field(obs, targets)
        here, there = dist[cy][cx], dist[cy + dy][cx + dx] if nxt in WALKABLE else float("inf")
        if here == float("inf"):
            return 0.5 if nxt in WALKABLE else 0.2  # target out of reach: any open move explores
        return 1.0 if there < here else 0.15
    if name == "do":
        if prim.kind in ("collect", "eat", "attack") and obs.facing in targets:
            return 1.0
        return 0.3 if obs.facing in ("tree", "grass", "cow", "water", "zombie") else 0.1
    if name == "sleep":
        return 1.0 if prim.kind == "sleep" else 0.05
    if name.startswith("place_"):
        return 1.0 if prim.kind == "place" and prim.target == name[len("place_"):] else 0.05
    if name.startswith("make_"):
        item = name[len("make_"):]
        return 1.0 if prim.kind == "make" and prim.target == item and item in MAKE else 0.05
    return 0.1  # noop


def aar_weights(scores: list[float]) -> list[float]:
    """AAR: loss weight per step from its alignment, FLOOR..1, rescaled to mean 1."""
    raw = [FLOOR + (1.0 - FLOOR) * s for s in scores]
    mean = sum(raw) / len(raw) if raw else 1.0
    return [w / mean for w in raw]
