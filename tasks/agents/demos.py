"""Demonstrations: scripted-expert episodes, recorded as seeds and actions (a seed fixes the world,
so replaying the actions rebuilds every frame and observation; a file stays small).

``corrupt`` replaces that share of the expert's actions with misleading ones (an action other than
the expert's, drawn with the episode's seed); the corrupted action is what is executed and recorded,
as a careless demonstrator's would be, and ``corrupted`` marks the steps (for analysis only: the
backends never read it). Replaying (:func:`replay_steps`) needs only the environment, not the expert:
it also reports what each step unlocked and where the player stood, which the learned backends turn
into hindsight labels. A file is JSON lines: a header ``{"format": ..., "crafter": ...}``, then one
episode per line. A file of another format or Crafter version is refused with a one-line error.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.tasks.agents.env import ACTIONS, CRAFTER_VERSION, CrafterWorld
from harness.tasks.agents.game import GOALS
from harness.tasks.agents.observation import describe, parse_observation
from harness.types import Message, Sample

FORMAT = "harness-crafter-demos/1"


class DemoError(UserError, ValueError):
    """A demonstration file that cannot be used (one line)."""


def record_episode(seed: int, goal: str | None, max_steps: int, corrupt: float) -> dict[str, Any]:
    # imported here: replaying and loading demonstrations must work where the expert is absent
    from harness.tasks.agents.expert import expert_action

    world = CrafterWorld(seed, max_steps)
    rng = random.Random(seed * 7919 + 17)
    actions, expert, corrupted = [], [], []
    goal_text = GOALS.get(goal) if goal else None
    while world.t < max_steps:
        obs = parse_observation(describe(world, max_steps=max_steps, goal=goal_text))
        name, _prim = expert_action(obs, seed)
        a = ACTIONS.index(name)
        bad = rng.random() < corrupt
        played = rng.choice([i for i in range(len(ACTIONS)) if i != a]) if bad else a
        actions.append(played)
        expert.append(a)
        corrupted.append(int(bad))
        if world.step(played).done or (goal and goal in world.unlocked):
            break
    return {"seed": seed, "goal": goal, "max_steps": max_steps, "actions": actions, "expert_actions": expert,
            "corrupted": corrupted, "unlocked": list(world.unlocked)}


def record(goals: Sequence[str | None], episodes: int, seed: int, max_steps: int,
           corrupt: float) -> list[dict[str, Any]]:
    """``episodes`` demonstrations per goal, on seeds ``seed, seed+1, ...`` (one world per episode)."""
    out = []
    k = 0
    for goal in goals:
        for _ in range(episodes):
            out.append(record_episode(seed + k, goal, max_steps, corrupt))
            k += 1
    return out


def write(path: Path, demos: list[dict[str, Any]], **header: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps({"format": FORMAT, "crafter": CRAFTER_VERSION, **header})]
    lines += [json.dumps(d, separators=(",", ":")) for d in demos]
    path.write_text("\n".join(lines) + "\n")


def read(path: str | Path) -> list[dict[str, Any]]:
    p = Path(path)
    try:
        lines = [line for line in p.read_text().splitlines() if line.strip()]
        head = json.loads(lines[0]) if lines else {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DemoError(f"cannot read demonstrations {p}: {type(exc).__name__}") from None
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        found = head.get("format") if isinstance(head, dict) else None
        raise DemoError(f"{p} is not a {FORMAT} file (format {found!r}); "
                        "record it again with `harness agents record`")
    if head.get("crafter") != CRAFTER_VERSION:
        raise DemoError(f"{p} was recorded with crafter {head.get('crafter')}, this is {CRAFTER_VERSION}: "
                        "worlds differ between versions; record it again")
    demos = []
    for i, line in enumerate(lines[1:], start=2):
        try:
            d = json.loads(line)
            if not all(k in d for k in ("seed", "actions", "max_steps")):
                raise KeyError("seed/actions/max_steps")
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise DemoError(f"{p}:{i}: not a demonstration ({type(exc).__name__}: {exc})") from None
        demos.append(d)
    return demos


def as_samples(demos: list[dict[str, Any]]) -> list[Sample]:
    """The task's train split: one sample per demonstration (the backends replay it)."""
    return [Sample(id=f"demo-{d.get('goal') or 'free'}-s{d['seed']}", messages=[Message.text("user", "demo")],
                   metadata={"demo": d}) for d in demos]


@dataclass(frozen=True, slots=True)
class DemoStep:
    """One replayed step: what the agent saw, what was played, and what the environment reported.

    ``pos`` / ``facing``: the player's world position and facing before the action; ``unlocked``: the
    achievements this step unlocked for the first time; ``achieved``: whether it raised any
    achievement counter (a wood collected again counts, a blow that does not kill the cow does not).
    """

    frame: Any
    text: str
    action: int
    pos: tuple[int, int]
    facing: tuple[int, int]
    unlocked: tuple[str, ...]
    achieved: bool


def replay_steps(demo: dict[str, Any]) -> Iterator[DemoStep]:
    """Every step of a demonstration, rebuilt by playing its actions in its seeded world."""
    goal = demo.get("goal")
    max_steps = int(demo["max_steps"])
    world = CrafterWorld(int(demo["seed"]), max_steps)
    goal_text = GOALS.get(goal) if goal else None
    for a in demo["actions"]:
        if not 0 <= int(a) < len(ACTIONS):
            raise DemoError(f"demonstration seed {demo['seed']}: action {a} out of range")
        frame, text = world.frame.copy(), describe(world, max_steps=max_steps, goal=goal_text)
        pos, facing = world.pose()
        before = world.achievements()
        result = world.step(int(a))
        after = world.achievements()
        yield DemoStep(frame, text, int(a), pos, facing, tuple(result.unlocked),
                       any(after[k] > before.get(k, 0) for k in after))
        if result.done:
            break


def replay(demo: dict[str, Any]) -> Iterator[tuple[Any, str, int]]:
    """(frame, observation text, action) for every step of a demonstration."""
    for step in replay_steps(demo):
        yield step.frame, step.text, step.action
