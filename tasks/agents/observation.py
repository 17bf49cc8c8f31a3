"""The text observation: written from the world for the model, parsed back by the agents, and the
action parser for replies.

The format is line-based so that an LLM can read it and a scripted agent can parse it exactly::

    Step 12/300. Goal: place a table.
    Status: health 9, food 8, drink 8, energy 9
    Inventory: wood 2, sapling 1
    Achievements: collect_wood
    Facing: tree (up)
    Map (9x7 tiles around you, @ is you, rows top to bottom):
    ..TT.....
    ...
    Legend: ...
    Nearby: tree 1 up; water 3 left 2 down; cow 4 right
    Actions: noop, move_left, ...
    Reply with exactly one action name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from harness.tasks.agents.env import ACTIONS, STATUS, TILE_CHARS, VIEW_H, VIEW_W, CrafterWorld

CHAR_TILES = {v: k for k, v in TILE_CHARS.items()}
LEGEND = ", ".join(f"{c}={n}" for n, c in TILE_CHARS.items())
_NEARBY_SKIP = {"grass", "unknown", "player", "sand", "path"}
_ACTION_RE = re.compile(r"[a-z_]+")


def describe(world: CrafterWorld, *, max_steps: int, goal: str | None = None) -> str:
    """The text observation of the world's current state."""
    inv = world.inventory()
    grid = world.local_grid()
    direction, facing = world.facing()
    items = [f"{k} {v}" for k, v in inv.items() if k not in STATUS and v > 0]
    lines = [f"Step {world.t}/{max_steps}." + (f" Goal: {goal}." if goal else ""),
             "Status: " + ", ".join(f"{k} {inv.get(k, 0)}" for k in STATUS),
             "Inventory: " + (", ".join(items) if items else "empty"),
             "Achievements: " + (", ".join(world.unlocked) if world.unlocked else "none"),
             f"Facing: {facing} ({direction})",
             f"Map ({VIEW_W}x{VIEW_H} tiles around you, @ is you, rows top to bottom):"]
    lines += ["".join(TILE_CHARS.get(name, "#") for name in row) for row in grid]
    lines.append(f"Legend: {LEGEND}")
    lines.append("Nearby: " + (nearby(grid) or "nothing of note"))
    lines.append("Actions: " + ", ".join(ACTIONS))
    lines.append("Reply with exactly one action name.")
    return "\n".join(lines)


def nearby(grid: list[list[str]]) -> str:
    """The nearest tile of each kind, as moves from the player (``tree 1 up``)."""
    cy, cx = VIEW_H // 2, VIEW_W // 2
    best: dict[str, tuple[int, int, int]] = {}
    for y, row in enumerate(grid):
        for x, name in enumerate(row):
            if name in _NEARBY_SKIP:
                continue
            d = abs(x - cx) + abs(y - cy)
            if name not in best or d < best[name][0]:
                best[name] = (d, x - cx, y - cy)
    parts = []
    for name, (_d, dx, dy) in sorted(best.items(), key=lambda kv: kv[1][0]):
        moves = []
        if dx:
            moves.append(f"{abs(dx)} {'left' if dx < 0 else 'right'}")
        if dy:
            moves.append(f"{abs(dy)} {'up' if dy < 0 else 'down'}")
        parts.append(f"{name} {' '.join(moves) or 'here'}")
    return "; ".join(parts)


@dataclass(slots=True)
class Observation:
    """What an agent parses back out of the text."""

    step: int = 0
    max_steps: int = 0
    goal: str | None = None
    status: dict[str, int] = field(default_factory=dict)
    inventory: dict[str, int] = field(default_factory=dict)
    facing: str = "unknown"
    direction: str = "down"
    grid: list[list[str]] = field(default_factory=list)  # semantic names, rows top to bottom
    unlocked: set[str] = field(default_factory=set)

    def count(self, item: str) -> int:
        return self.inventory.get(item, 0)


_STEP = re.compile(r"^Step (\d+)/(\d+)\.(?: Goal: (.+)\.)?$")
_FACING = re.compile(r"^Facing: (\w+) \((\w+)\)$")


def parse_observation(text: str) -> Observation:
    """Parse :func:`describe`'s text (anywhere in a longer message); missing lines keep defaults."""
    obs = Observation()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if m := _STEP.match(line):
            obs.step, obs.max_steps, obs.goal = int(m.group(1)), int(m.group(2)), m.group(3)
        elif line.startswith("Status: "):
            obs.status = _pairs(line[len("Status: "):])
        elif line.startswith("Inventory: "):
            body = line[len("Inventory: "):]
            obs.inventory = {} if body == "empty" else _pairs(body)
        elif line.startswith("Achievements: "):
            body = line[len("Achievements: "):]
            obs.unlocked = set() if body == "none" else {a.strip() for a in body.split(",") if a.strip()}
        elif m := _FACING.match(line):
            obs.facing, obs.direction = m.group(1), m.group(2)
        elif line.startswith("Map ("):
            rows = [r.strip() for r in lines[i + 1:i + 1 + VIEW_H]]
            if len(rows) == VIEW_H and all(len(r) == VIEW_W for r in rows):
                obs.grid = [[CHAR_TILES.get(c, "unknown") for c in r] for r in rows]
    obs.inventory = {**obs.status, **obs.inventory}
    return obs


def _pairs(body: str) -> dict[str, int]:
    out = {}
    for chunk in body.split(","):
        parts = chunk.strip().rsplit(" ", 1)
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            out[parts[0]] = int(parts[1])
    return out


def parse_action(reply: str) -> int | None:
    """The action a reply names: an exact action name (or its index) as the reply, else the last
    action name mentioned in it; None when it names none (the loop then plays noop, counted illegal)."""
    text = (reply or "").strip().lower()
    if text.isdigit() and int(text) < len(ACTIONS):
        return int(text)
    words = _ACTION_RE.findall(text.replace("-", "_").replace(" ", "_") if text in _SPACED else text)
    found = [w for w in words if w in ACTIONS]
    return ACTIONS.index(found[-1]) if found else None


_SPACED = {a.replace("_", " ") for a in ACTIONS}
