"""The scripted expert: subgoal planning from Crafter's recipes plus breadth-first navigation on the
9x7 map of the text observation.

It is stateless (every decision comes from one observation), so it runs as a backend
(``crafter:scripted``) and records demonstrations. It is the demonstrator only: the VLA backends
learn from its recorded episodes and never import this module. Exploration when nothing useful is
in view heads in a direction that changes every few steps, drawn from the step number and a seed,
so the agent does not stall.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass

from harness.tasks.agents.env import ACTIONS, VIEW_H, VIEW_W
from harness.tasks.agents.game import GOAL_ACHIEVEMENT, MOVES, WALKABLE
from harness.tasks.agents.observation import Observation

# recipes of crafter 1.8.3 (data.yaml), what the planner needs of them
COLLECT = {"wood": ("tree", None), "sapling": ("grass", None), "drink": ("water", None),
           "stone": ("stone", "wood_pickaxe"), "coal": ("coal", "wood_pickaxe"), "iron": ("iron", "stone_pickaxe"),
           "diamond": ("diamond", "iron_pickaxe")}  # fmt: skip
PLACE = {"stone": ({"stone": 1}, {"grass", "sand", "path", "water", "lava"}),
         "table": ({"wood": 1}, {"grass", "sand", "path"}),
         "furnace": ({"stone": 1}, {"grass", "sand", "path"}), "plant": ({"sapling": 1}, {"grass"})}  # fmt: skip
MAKE = {"wood_pickaxe": ({"wood": 1}, ("table",)), "stone_pickaxe": ({"wood": 1, "stone": 1}, ("table",)),
        "iron_pickaxe": ({"wood": 1, "coal": 1, "iron": 1}, ("table", "furnace")),
        "wood_sword": ({"wood": 1}, ("table",)), "stone_sword": ({"wood": 1, "stone": 1}, ("table",)),
        "iron_sword": ({"wood": 1, "coal": 1, "iron": 1}, ("table", "furnace"))}  # fmt: skip
# the free-play curriculum: what the expert works on, in order, once it is fed, watered and rested
CURRICULUM = ("collect_wood", "place_table", "make_wood_pickaxe", "make_wood_sword", "collect_sapling",
              "place_plant", "collect_stone", "place_stone", "make_stone_pickaxe", "make_stone_sword",
              "collect_coal", "place_furnace", "collect_iron", "make_iron_pickaxe", "make_iron_sword",
              "collect_diamond")  # fmt: skip


def _load_recipes() -> None:
    """Take the place/make amounts from the installed crafter (they differ between its releases)."""
    try:
        from crafter import constants
    except ImportError:
        return
    for name, info in constants.place.items():
        if name in PLACE:
            PLACE[name] = (dict(info["uses"]), set(info["where"]))
    for name, info in constants.make.items():
        if name in MAKE:
            MAKE[name] = (dict(info["uses"]), tuple(info["nearby"]))


_load_recipes()


@dataclass(frozen=True, slots=True)
class Primitive:
    """One subgoal: ``kind`` in collect | place | make | eat | attack | sleep | explore, and its target
    (a tile name for collect/eat/attack, an item for place/make)."""

    kind: str
    target: str = ""

    @property
    def name(self) -> str:
        return f"{self.kind} {self.target}".strip()


PRIMITIVES: tuple[Primitive, ...] = (
    *(Primitive("collect", t) for t in ("tree", "grass", "water", "stone", "coal", "iron", "diamond")),
    *(Primitive("place", t) for t in PLACE), *(Primitive("make", t) for t in MAKE),
    Primitive("eat", "cow"), Primitive("attack", "zombie"), Primitive("sleep"), Primitive("explore"),
)  # fmt: skip


def near(obs: Observation, tile: str) -> bool:
    """Whether a tile is in the 3x3 around the player (Crafter's crafting neighbourhood)."""
    cy, cx = VIEW_H // 2, VIEW_W // 2
    return any(obs.grid[cy + dy][cx + dx] == tile for dy in (-1, 0, 1) for dx in (-1, 0, 1)) if obs.grid else False


def _ensure(item: str, amount: int, obs: Observation, depth: int = 0) -> Primitive | None:
    """The primitive that brings ``item`` to ``amount``, or None when there is enough."""
    if obs.count(item) >= amount or depth > 6:
        return None
    if item in MAKE:
        return _make(item, obs, depth + 1)
    tile, tool = COLLECT.get(item, (item, None))
    if tool is not None and obs.count(tool) < 1:
        return _make(tool, obs, depth + 1)
    return Primitive("collect", tile)


def _make(item: str, obs: Observation, depth: int) -> Primitive:
    uses, stations = MAKE[item]
    needed = dict(uses)
    for station in stations:  # a station not in view is built first: its cost adds to the bill
        if not _station_seen(obs, station):
            for need, n in PLACE[station][0].items():
                needed[need] = needed.get(need, 0) + n
    for need, n in needed.items():
        if (p := _ensure(need, n, obs, depth)) is not None:
            return p
    for station in stations:
        if not near(obs, station):
            return Primitive("goto", station) if _station_seen(obs, station) else _place(station, obs, depth)
    return Primitive("make", item)


def _station_seen(obs: Observation, tile: str) -> bool:
    return any(tile in row for row in obs.grid)


def _place(item: str, obs: Observation, depth: int = 0) -> Primitive:
    uses, _where = PLACE[item]
    for need, n in uses.items():
        if (p := _ensure(need, n, obs, depth + 1)) is not None:
            return p
    return Primitive("place", item)


def primitive_for(achievement: str, obs: Observation) -> Primitive:
    """The next subgoal primitive towards an achievement."""
    kind, _, target = achievement.partition("_")
    if achievement == "eat_cow":
        return Primitive("eat", "cow")
    if achievement == "defeat_zombie":
        return Primitive("attack", "zombie")
    if achievement == "wake_up":
        return Primitive("sleep")
    if kind == "collect":
        return _ensure(target, obs.count(target) + 1, obs) or Primitive("collect", COLLECT.get(target, (target,))[0])
    if kind == "place" and target in PLACE:
        return _place(target, obs)
    if kind == "make" and target in MAKE:
        return _make(target, obs, 0)
    return Primitive("explore")


def free_play_goal(obs: Observation, unlocked: set[str]) -> str:
    """What the expert works on without an instruction: needs first, then the curriculum."""
    if obs.status.get("energy", 9) <= 2:
        return "wake_up"
    if obs.status.get("drink", 9) <= 4 and _station_seen(obs, "water"):
        return "collect_drink"
    if obs.status.get("food", 9) <= 4 and _station_seen(obs, "cow"):
        return "eat_cow"
    for goal in CURRICULUM:
        if goal not in unlocked:
            return goal
    return "collect_diamond"


# ---- acting on a primitive -------------------------------------------------------------------------
def _centre() -> tuple[int, int]:
    return VIEW_W // 2, VIEW_H // 2


def _tile(obs: Observation, x: int, y: int) -> str:
    if 0 <= y < len(obs.grid) and 0 <= x < len(obs.grid[y]):
        return obs.grid[y][x]
    return "unknown"


def path_to(obs: Observation, targets: set[str]) -> str | None:
    """The first move of a shortest walk to a tile next to one of ``targets``; 'here' when the
    player is already next to one (then :func:`face` picks the direction)."""
    start = _centre()
    seen = {start}
    queue: deque[tuple[tuple[int, int], str | None]] = deque([(start, None)])
    while queue:
        (x, y), first = queue.popleft()
        for dx, dy in MOVES.values():
            nx, ny = x + dx, y + dy
            if _tile(obs, nx, ny) in targets:
                return first or "here"
        for d, (dx, dy) in MOVES.items():
            nxt = (x + dx, y + dy)
            if nxt not in seen and _tile(obs, *nxt) in WALKABLE:
                seen.add(nxt)
                queue.append((nxt, first or d))
    return None


def face(obs: Observation, targets: set[str]) -> str | None:
    cx, cy = _centre()
    if obs.facing in targets:
        return obs.direction
    for d, (dx, dy) in MOVES.items():
        if _tile(obs, cx + dx, cy + dy) in targets:
            return d
    return None


def explore(obs: Observation, seed: int) -> str:
    """A heading that changes every 12 steps; a blocked heading gives way to an open one."""
    rng = random.Random(seed * 100_003 + obs.step // 12)
    order = list(MOVES)
    rng.shuffle(order)
    cx, cy = _centre()
    for d in order:
        dx, dy = MOVES[d]
        if _tile(obs, cx + dx, cy + dy) in WALKABLE:
            return "move_" + d
    return "move_" + order[0]


def act(prim: Primitive, obs: Observation, seed: int = 0) -> str:
    """The action that carries a primitive out from this observation."""
    if prim.kind == "sleep":
        return "sleep"
    if prim.kind == "make":
        return f"make_{prim.target}"
    if prim.kind == "place":
        where = PLACE[prim.target][1]
        if obs.facing in where:
            return f"place_{prim.target}"
        cx, cy = _centre()
        for d, (dx, dy) in MOVES.items():
            if _tile(obs, cx + dx, cy + dy) in where:
                return "move_" + d  # turns towards it (or steps onto it; the next tile then serves)
        return explore(obs, seed)
    targets = {"collect": {prim.target}, "eat": {"cow"}, "attack": {"zombie"}, "goto": {prim.target}}.get(prim.kind)
    if not targets:
        return explore(obs, seed)
    if prim.kind == "goto" and near(obs, prim.target):
        return "noop"
    first = path_to(obs, targets)
    if first is None:
        return explore(obs, seed)
    if first != "here":
        return "move_" + first
    heading = face(obs, targets)
    if heading is None:
        return explore(obs, seed)
    if prim.kind == "goto":
        return "move_" + heading
    return "do" if obs.direction == heading and obs.facing in targets else "move_" + heading


def expert_action(obs: Observation, seed: int = 0) -> tuple[str, Primitive]:
    """The scripted expert's action and the primitive it serves (a goal in the observation wins)."""
    cx, cy = _centre()
    if any(_tile(obs, cx + dx, cy + dy) == "zombie" for dx, dy in MOVES.values()):
        prim = Primitive("attack", "zombie")  # a zombie next to us: fight it off before anything else
    else:
        if obs.goal:
            achievement = GOAL_ACHIEVEMENT.get(obs.goal, obs.goal.strip().replace(" ", "_"))
        else:
            achievement = free_play_goal(obs, obs.unlocked)
        prim = primitive_for(achievement, obs)
    action = act(prim, obs, seed)
    assert action in ACTIONS, action
    return action, prim

