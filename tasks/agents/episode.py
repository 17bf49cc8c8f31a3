"""The interactive loop: one sample is one Crafter episode, played inside the task's async scorer.

The runner's own request for a sample is the episode's first step: :func:`first_request` resets the
world and shows the model its first frame, and the reply the runner gets back is the first action.
The scorer then rebuilds the same world (a seed fixes it; the first frame's digest is checked), plays
that action and every later one through ``ctx.model`` (the run's settings and accounting apply;
``cache=False``, so a stochastic model really plays each step), and adds every step's usage to the
sample's. A reply that names no action plays ``noop`` and counts in ``illegal_actions``; a failed
or timed-out model call does the same and counts in ``model_errors``; five failures in a row, or the
episode's wall-clock limit, end the episode early (``truncated`` says why), so an episode never hangs.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.client import add_usage
from harness.stored_paths import stored_path
from harness.tasks.agents.env import ACHIEVEMENTS, ACTIONS, CrafterWorld, EnvError, save_png, save_strip
from harness.tasks.agents.observation import describe, parse_action
from harness.types import GenerationConfig, Message, Output, Part, Request, Sample

INTRO = ("You are playing Crafter, a 2D open-world survival game seen from above (the image is the current "
         "frame, the inventory is drawn at its bottom). Choose the next action.")
MAX_CONSECUTIVE_ERRORS = 5
STRIP_FRAMES = 16


@dataclass(slots=True)
class EpisodeConfig:
    max_steps: int
    image: bool = True
    keep_frames: bool = False
    step_timeout: float = 60.0
    episode_timeout: float = 1800.0
    max_tokens: int = 32


def artifacts_root() -> Path:
    return Path(os.environ.get("HARNESS_ARTIFACTS", "artifacts")) / "agents"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:120] or "sample"


def step_request(world: CrafterWorld, sample: Sample, cfg: EpisodeConfig, frame_path: Path | None) -> Request:
    text = INTRO + "\n\n" + describe(world, max_steps=cfg.max_steps, goal=sample.metadata.get("goal_text"))
    parts: list[Part] = []
    if cfg.image and frame_path is not None:
        parts.append(Part("image", path=save_png(world.frame, frame_path)))
    parts.append(Part("text", text))
    return Request([Message("user", parts)], GenerationConfig(temperature=0.0, max_tokens=cfg.max_tokens),
                   sample_id=sample.id)


def first_request(sample: Sample, cfg: EpisodeConfig) -> Request:
    """The runner's request for a sample: the reset frame (stored once per world, shared by runs)."""
    world = CrafterWorld(int(sample.metadata["seed"]), cfg.max_steps)
    path = artifacts_root() / "reset" / f"seed{world.seed}-{world.frame_digest()}.png"
    return step_request(world, sample, cfg, path)


async def play(sample: Sample, first: Output, model: Any, cfg: EpisodeConfig, run_id: int | None) -> dict[str, Any]:
    """Play the episode; returns the trajectory record (the scorer turns it into values and details)."""
    seed = int(sample.metadata["seed"])
    goal = sample.metadata.get("goal")
    world = await asyncio.to_thread(CrafterWorld, seed, cfg.max_steps)
    base = artifacts_root() / _safe(f"run{run_id}" if run_id is not None else "adhoc") / _safe(sample.id) / \
        uuid.uuid4().hex[:8]  # epochs of one sample each get their own folder
    every = max(1, cfg.max_steps // STRIP_FRAMES)
    thumbs = [world.frame]
    actions: list[int] = []
    rewards: list[float] = []
    unlocks: list[list[Any]] = []
    illegal: list[int] = []
    errors: list[str] = []
    followups: list[Output] = []
    reply, truncated, env_error, consecutive = first, None, None, 0
    t0 = time.perf_counter()
    while world.t < cfg.max_steps:
        if reply.error is not None:
            errors.append(reply.error.splitlines()[0][:200] if reply.error.strip() else "model error")
            consecutive += 1
        else:
            consecutive = 0
        action = parse_action(reply.text) if reply.error is None else None
        if action is None:
            illegal.append(world.t)
            action = 0
        try:
            result = world.step(action)
        except EnvError as exc:
            env_error = str(exc)
            break
        actions.append(action)
        rewards.append(round(result.reward, 3))
        unlocks += [[world.t, name] for name in result.unlocked]
        if world.t % every == 0:
            thumbs.append(world.frame)
        if result.done or (goal and goal in world.unlocked):
            break
        if consecutive >= MAX_CONSECUTIVE_ERRORS:
            truncated = f"{consecutive} model errors in a row"
            break
        if time.perf_counter() - t0 > cfg.episode_timeout:
            truncated = f"episode time limit ({cfg.episode_timeout:g}s)"
            break
        frame = base / ("frames" / Path(f"{world.t:05d}.png") if cfg.keep_frames else Path("frame.png"))
        request = step_request(world, sample, cfg, frame)
        try:
            (reply,) = await asyncio.wait_for(model.generate([request], cache=False), cfg.step_timeout)
        except TimeoutError:
            reply = Output(error=f"step timeout ({cfg.step_timeout:g}s)")
        followups.append(reply)
    elapsed = time.perf_counter() - t0
    add_usage(first, followups)
    if thumbs[-1] is not world.frame:
        thumbs.append(world.frame)
    strip = save_strip(thumbs[-(STRIP_FRAMES + 1):], base / "strip.png", scale=1)
    unlocked = set(world.unlocked)
    return {
        "seed": seed, "goal": goal, "length": len(actions), "reward": round(world.total_reward, 3),
        "actions": [ACTIONS[a] for a in actions], "rewards": rewards, "unlocks": unlocks,
        "achievements": {a: int(a in unlocked) for a in ACHIEVEMENTS}, "illegal_steps": illegal,
        "model_errors": errors[:20], "n_model_errors": len(errors), "truncated": truncated, "env_error": env_error,
        "seconds": round(elapsed, 3), "strip": strip, "frames_dir": stored_path(base) if cfg.keep_frames else None,
    }  # fmt: skip
