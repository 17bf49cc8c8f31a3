"""Crafter's interface as data: the crafter_instruct goals, the four moves, the walkable materials and
the inventory's items. These are the environment's (and the task's), not any agent's: the scripted
expert and the learned VLA backends both read them from here, so a learned backend never has to
import the expert to know what a goal or a move is.
"""

from __future__ import annotations

# instruction text per achievement (crafter_instruct's goals, in the task's order)
GOALS: dict[str, str] = {
    "collect_wood": "collect wood", "place_table": "place a table", "make_wood_pickaxe": "make a wood pickaxe",
    "make_wood_sword": "make a wood sword", "collect_sapling": "collect a sapling", "place_plant": "place a plant",
    "collect_drink": "drink water", "eat_cow": "eat a cow", "collect_stone": "collect stone",
}  # fmt: skip
GOAL_ACHIEVEMENT: dict[str, str] = {text: ach for ach, text in GOALS.items()}
# what each move action does to the player's (x, y) (it turns the player even when it cannot step)
MOVES: dict[str, tuple[int, int]] = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
WALKABLE = frozenset({"grass", "sand", "path"})  # crafter 1.8.3 data.yaml `walkable`
# the status bars and items of crafter 1.8.3's inventory (data.yaml `items`), in the text's order
INVENTORY_ITEMS: tuple[str, ...] = (
    "health", "food", "drink", "energy", "sapling", "wood", "stone", "coal", "iron", "diamond",
    "wood_pickaxe", "stone_pickaxe", "iron_pickaxe", "wood_sword", "stone_sword", "iron_sword",
)  # fmt: skip
# actions that act on the tile the player faces (or, for make_*, at the station next to it)
TILE_ACTION_PREFIXES = ("do", "place_", "make_")
