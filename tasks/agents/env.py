"""Crafter behind one small interface: make a seeded world, step it, describe it in text, save frames.

Everything the agent sees comes from here: the 64x64 RGB frame (saved as a PNG for image parts) and
a text observation built from Crafter's semantic view (the 9x7 tiles the frame shows), the
inventory and the player's facing tile. The text is also what the reference agents and the VLA
backends parse (:mod:`harness.tasks.agents.observation`), so it is the one contract between the
environment and any agent. ``crafter`` is imported inside functions (task discovery stays light).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.stored_paths import stored_path

# Crafter 1.8.3's action list (data.yaml, in order: the index is the environment's action id)
ACTIONS: tuple[str, ...] = (
    "noop", "move_left", "move_right", "move_up", "move_down", "do", "sleep", "place_stone", "place_table",
    "place_furnace", "place_plant", "make_wood_pickaxe", "make_stone_pickaxe", "make_iron_pickaxe",
    "make_wood_sword", "make_stone_sword", "make_iron_sword",
)  # fmt: skip
# the 22 achievements, sorted as Crafter's analysis code sorts its ``achievement_*`` keys
ACHIEVEMENTS: tuple[str, ...] = (
    "collect_coal", "collect_diamond", "collect_drink", "collect_iron", "collect_sapling", "collect_stone",
    "collect_wood", "defeat_skeleton", "defeat_zombie", "eat_cow", "eat_plant", "make_iron_pickaxe",
    "make_iron_sword", "make_stone_pickaxe", "make_stone_sword", "make_wood_pickaxe", "make_wood_sword",
    "place_furnace", "place_plant", "place_stone", "place_table", "wake_up",
)  # fmt: skip
# one character per semantic id (materials 0..12, then Crafter's object classes in SemanticView order)
TILE_CHARS: dict[str, str] = {
    "unknown": "#", "water": "W", "grass": ".", "stone": "S", "path": "_", "sand": ":", "tree": "T", "lava": "L",
    "coal": "C", "iron": "I", "diamond": "D", "table": "B", "furnace": "F", "player": "@", "cow": "c",
    "zombie": "z", "skeleton": "k", "arrow": "a", "plant": "p",
}  # fmt: skip
SEMANTIC_NAMES: tuple[str, ...] = (
    "unknown", "water", "grass", "stone", "path", "sand", "tree", "lava", "coal", "iron", "diamond", "table",
    "furnace", "player", "cow", "zombie", "skeleton", "arrow", "plant",
)  # fmt: skip
VIEW_W, VIEW_H = 9, 7  # the world tiles the 64x64 frame shows (Crafter's 9x9 view less two item rows)
DIRECTIONS: dict[tuple[int, int], str] = {(-1, 0): "left", (1, 0): "right", (0, -1): "up", (0, 1): "down"}
STATUS = ("health", "food", "drink", "energy")
CRAFTER_VERSION = "1.8.3"


class EnvError(RuntimeError):
    """The environment could not be built, reset or stepped (a one-line reason)."""


@dataclass(slots=True)
class StepResult:
    reward: float
    done: bool
    unlocked: list[str]


class _OrderedSet(dict[Any, None]):
    """A set that iterates in insertion order (the part of ``set`` crafter's chunks use)."""

    def add(self, item: Any) -> None:
        self[item] = None

    def remove(self, item: Any) -> None:
        del self[item]


def _order_chunks(world: Any) -> None:
    """Make crafter's creature balancing deterministic. Its world keeps each chunk's objects in a
    ``set``, which iterates in memory-address order, and despawns ``creatures[random index]`` of
    that order: the same seed and actions then play out differently from one process (or one
    replay) to the next, and a replayed demonstration can leave the recorded one. Ordered by when
    each object entered the world (its index in the object list), then by insertion."""
    import collections

    chunks: collections.defaultdict[Any, _OrderedSet] = collections.defaultdict(_OrderedSet)
    for key, objs in world._chunks.items():
        chunks[key] = _OrderedSet((o, None) for o in sorted(objs, key=lambda o: int(world._obj_map[tuple(o.pos)])))
    world._chunks = chunks


class CrafterWorld:
    """One seeded Crafter episode. ``seed`` fixes the world (Crafter seeds episode k of an Env with
    ``hash((seed, k))``; we always play its first episode, so a sample's seed is its world)."""

    def __init__(self, seed: int, max_steps: int) -> None:
        try:
            import crafter
        except ImportError as exc:
            raise EnvError("the crafter package is not installed (pip install 'harness[agents]')") from exc
        try:
            self.env = crafter.Env(seed=int(seed), length=int(max_steps))
            self.frame = self.env.reset()
            _order_chunks(self.env._world)
        except Exception as exc:
            raise EnvError(f"crafter could not reset seed {seed}: {type(exc).__name__}: {exc}") from None
        self.seed = int(seed)
        self.t = 0
        self.total_reward = 0.0
        self.unlocked: list[str] = []

    # ---- state -----------------------------------------------------------------------------------
    @property
    def player(self) -> Any:
        return self.env._player  # crafter keeps the player private; pinned version, read-only use

    def inventory(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.player.inventory.items()}

    def achievements(self) -> dict[str, int]:
        return {k: int(v) for k, v in self.player.achievements.items()}

    def local_grid(self) -> list[list[str]]:
        """The 9x7 tiles around the player as semantic names, rows top to bottom."""
        sem = self.env._sem_view()  # (area_x, area_y) ids
        px, py = (int(v) for v in self.player.pos)
        rows = []
        for dy in range(-(VIEW_H // 2), VIEW_H // 2 + 1):
            row = []
            for dx in range(-(VIEW_W // 2), VIEW_W // 2 + 1):
                x, y = px + dx, py + dy
                inside = 0 <= x < sem.shape[0] and 0 <= y < sem.shape[1]
                idx = int(sem[x, y]) if inside else 0
                row.append(SEMANTIC_NAMES[idx] if 0 <= idx < len(SEMANTIC_NAMES) else "unknown")
            rows.append(row)
        return rows

    def pose(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """The player's world (x, y) and the (dx, dy) it faces (for hindsight labels of a replay)."""
        px, py = (int(v) for v in self.player.pos)
        fx, fy = (int(v) for v in self.player.facing)
        return (px, py), (fx, fy)

    def facing(self) -> tuple[str, str]:
        """(direction, what is on the tile the player faces)."""
        fx, fy = (int(v) for v in self.player.facing)
        grid = self.local_grid()
        return DIRECTIONS.get((fx, fy), "down"), grid[VIEW_H // 2 + fy][VIEW_W // 2 + fx]

    # ---- acting ----------------------------------------------------------------------------------
    def step(self, action: int) -> StepResult:
        before = set(self.unlocked)
        try:
            self.frame, reward, done, _info = self.env.step(int(action))
        except Exception as exc:
            raise EnvError(f"crafter step {self.t + 1} failed: {type(exc).__name__}: {exc}") from None
        self.t += 1
        self.total_reward += float(reward)
        new = sorted(k for k, v in self.player.achievements.items() if v > 0 and k not in before)
        self.unlocked += new
        return StepResult(float(reward), bool(done), new)

    def frame_digest(self) -> str:
        return hashlib.sha256(self.frame.tobytes()).hexdigest()[:16]


def save_png(frame: Any, path: Path) -> str:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.png")
    Image.fromarray(frame).save(tmp, optimize=False, compress_level=1)
    tmp.replace(path)  # a reader never sees half a frame
    return stored_path(path)


def save_strip(frames: list[Any], path: Path, scale: int = 1) -> str | None:
    """Thumbnails side by side in one PNG (the run page shows it)."""
    if not frames:
        return None
    import numpy as np

    strip = np.concatenate(frames, axis=1)
    if scale > 1:
        strip = strip.repeat(scale, axis=0).repeat(scale, axis=1)
    return save_png(strip, path)
