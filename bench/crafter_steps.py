"""Crafter environment steps per second: bare ``crafter.Env.step`` vs one step of the harness loop
(text observation, frame PNG, a ModelClient call to ``crafter:random``, action parse, env step).

Same worlds for both, uniform random actions, world resets left out of both timings; one thread
(OMP_NUM_THREADS=1). Prints steps/s of each, the ratio, and the loop's overhead per step in milliseconds.

    python bench/crafter_steps.py [--steps 2000] [--episodes 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")


def bare(steps: int, episodes: int) -> float:
    import random

    import crafter

    rng = random.Random(0)
    total, elapsed = 0, 0.0
    for ep in range(episodes):
        env = crafter.Env(seed=ep, length=steps)
        env.reset()
        t0 = time.perf_counter()
        for _ in range(steps):
            _obs, _r, done, _info = env.step(rng.randrange(17))
            total += 1
            if done:
                break
        elapsed += time.perf_counter() - t0
    return total / elapsed


def harness_loop(steps: int, episodes: int) -> float:
    import asyncio

    from harness.client import ModelClient
    from harness.runner import build_task
    from harness.task import ScoreContext
    from harness.tasks.agents.backends.builtin import crafter_agent

    task = build_task("crafter", {"episodes": episodes, "max_steps": steps})
    client = ModelClient(crafter_agent("random"))
    total, elapsed = 0, 0.0

    async def one(sample):  # type: ignore[no-untyped-def]
        (first,) = await client.generate([task.prompt(sample)])
        score = await task.score(sample, first, ScoreContext(model=client))
        return score.values["length"], score.details["seconds"]  # the loop's own time: no world reset in it

    for sample in task.load():
        length, seconds = asyncio.run(one(sample))
        total += int(length)
        elapsed += seconds
    return total / elapsed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--episodes", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["HARNESS_ARTIFACTS"] = tmp
        b = bare(args.steps, args.episodes)
        h = harness_loop(args.steps, args.episodes)
    print(f"{'path':<34} {'steps/s':>10}")
    print(f"{'crafter.Env.step (bare)':<34} {b:>10.1f}")
    print(f"{'harness loop (crafter:random)':<34} {h:>10.1f}")
    print(f"ratio harness/bare {h / b:.2f}; overhead per step {1000 * (1 / h - 1 / b):.2f} ms")


if __name__ == "__main__":
    main()
