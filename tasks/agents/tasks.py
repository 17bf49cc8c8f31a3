"""Crafter episode tasks: ``crafter`` (free play, Crafter's score) and ``crafter_instruct`` (stated goals).

Options (``-T``): ``episodes`` (per goal for crafter_instruct), ``max_steps`` (Crafter's own episode
length is 10000), ``seed`` (episode i plays world ``seed + i``), ``image`` (send the frame; false
makes the task text-only), ``keep_frames`` (every step's PNG, not only the thumbnail strip),
``step_timeout`` / ``episode_timeout`` (seconds), and for the fit-then-predict backends the train
split: ``demos`` (a file from ``harness agents record``) or ``demo_episodes`` / ``demo_seed`` /
``corrupt`` (recorded in-process). ``goals`` (crafter_instruct): a comma list of goal names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.agents.env import ACHIEVEMENTS, CRAFTER_VERSION
from harness.tasks.agents.episode import EpisodeConfig, first_request, play
from harness.tasks.agents.game import GOALS
from harness.types import Message, Metric, MetricInfo, Output, Sample, Score, higher, lower, neutral, stable_hash

VERSION = "1"
DEMO_SEED = 100_000  # demonstration worlds start here: far from any test seed a user is likely to pick


# the values arrive as their annotated types (the registry converts -T options, harness.option_types):
# only the ranges, which the annotations do not state, are checked here
def _ranged(key: str, number: int, lo: int, hi: int) -> int:
    if not lo <= number <= hi:
        raise ValueError(f"-T {key} must be in [{lo}, {hi}], got {number}")
    return number


def _ranged_float(key: str, number: float, lo: float, hi: float) -> float:
    if not lo <= number <= hi:
        raise ValueError(f"-T {key} must be in [{lo:g}, {hi:g}], got {number:g}")
    return number


def _reject_unknown(options: dict[str, Any], known: tuple[str, ...]) -> None:
    if options:
        import difflib

        key = sorted(options)[0]
        close = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(known)})"
        raise ValueError(f"unknown option -T {key}{hint}")


KNOWN = ("episodes", "max_steps", "seed", "image", "keep_frames", "step_timeout", "episode_timeout", "demos",
         "demo_episodes", "demo_seed", "corrupt", "goals")


@dataclass(frozen=True)
class _Options:
    """The options both tasks take, read and range-checked once."""

    episodes: int
    seed: int
    cfg: EpisodeConfig
    demos: str | None
    demo_episodes: int
    demo_seed: int
    corrupt: float


def _common(episodes: int, max_steps: int, seed: int, image: bool, keep_frames: bool, step_timeout: float,
            episode_timeout: float, demos: str | None, demo_episodes: int, demo_seed: int, corrupt: float) -> _Options:
    cfg = EpisodeConfig(max_steps=_ranged("max_steps", max_steps, 1, 100_000), image=image, keep_frames=keep_frames,
                        step_timeout=_ranged_float("step_timeout", step_timeout, 0.001, 86_400.0),
                        episode_timeout=_ranged_float("episode_timeout", episode_timeout, 0.001, 864_000.0))
    return _Options(episodes=_ranged("episodes", episodes, 1, 100_000), seed=_ranged("seed", seed, 0, 2**31 - 200_000),
                    cfg=cfg, demos=str(demos) if demos else None,
                    demo_episodes=_ranged("demo_episodes", demo_episodes, 1, 10_000),
                    demo_seed=_ranged("demo_seed", demo_seed, 0, 2**31 - 100_000),
                    corrupt=_ranged_float("corrupt", corrupt, 0.0, 1.0))


def _train_split(opts: _Options, goals: list[str | None], max_steps: int) -> tuple[Callable[[], list[Sample]], str]:
    from harness.tasks.agents import demos

    path, n, demo_seed, corrupt = opts.demos, opts.demo_episodes, opts.demo_seed, opts.corrupt
    if path:
        def load_file() -> list[Sample]:
            return demos.as_samples(demos.read(str(path)))
        return load_file, f"file:{path}"

    def record() -> list[Sample]:
        return demos.as_samples(demos.record(goals, n, demo_seed, max_steps, corrupt))
    return record, f"record:{n}:{demo_seed}:{corrupt}"


def _placeholder(sample_id: str, seed: int, **meta: Any) -> Sample:
    return Sample(id=sample_id, messages=[Message.text("user", "crafter episode")], metadata={"seed": seed, **meta})


def _episode_values(traj: dict[str, Any]) -> dict[str, float]:
    steps = max(traj["length"], 1)
    return {"reward": float(traj["reward"]), "length": float(traj["length"]),
            "illegal_actions": float(len(traj["illegal_steps"])), "illegal_rate": len(traj["illegal_steps"]) / steps,
            "model_errors": float(traj["n_model_errors"]), "seconds_per_step": traj["seconds"] / steps}


def _details(traj: dict[str, Any]) -> dict[str, Any]:
    media = [{"type": "image", "path": traj["strip"]}] if traj.get("strip") else []
    return {**traj, "media": media}


async def _score_episode(sample: Sample, output: Output, ctx: ScoreContext,
                         cfg: EpisodeConfig) -> tuple[dict[str, Any], Score | None]:
    if ctx.model is None:
        return {}, Score.not_scored("no model to play the episode (score through a run)")
    traj = await play(sample, output, ctx.model, cfg, ctx.run_id)
    if traj["env_error"]:
        return traj, Score.not_scored(f"environment: {traj['env_error']}", **_details(traj))
    return traj, None


_EPISODE_METRICS = {
    "reward": higher("reward", scale="raw"), "length": neutral("episode length", scale="raw"),
    "illegal_actions": lower("illegal actions per episode", scale="raw"),
    "illegal_rate": lower("illegal action rate", scale="fraction"),
    "model_errors": lower("model errors per episode", scale="raw"),
    "seconds_per_step": lower("wall seconds per step (concurrent episodes share the loop)", scale="raw"),
}


@task("crafter", description="Crafter free play: 22 achievements, Crafter score (geometric mean of success rates)",
      family="agents")
def crafter_task(episodes: int = 10, max_steps: int = 10_000, seed: int = 0, image: bool = True,
                 keep_frames: bool = False, step_timeout: float = 60.0, episode_timeout: float = 1800.0,
                 demos: str | None = None, demo_episodes: int = 8, demo_seed: int = DEMO_SEED, corrupt: float = 0.0,
                 **unknown: Any) -> Task:
    """Options: ``episodes``: episodes to play; ``max_steps``: steps per episode (Crafter's own
    length is 10000); ``seed``: episode i plays world seed + i; ``image``: send
    the frame (false: text only); ``keep_frames``: every step's PNG, not only the thumbnail strip;
    ``step_timeout``: seconds per step; ``episode_timeout``: seconds per episode; ``demos``: the train
    split's file (from `harness agents record`); ``demo_episodes``: demonstrations recorded in-process
    without one; ``demo_seed``: their first world; ``corrupt``: share of their steps corrupted"""
    _reject_unknown(unknown, KNOWN)  # here, not by Python: the refusal names the closest option
    opts = _common(episodes, max_steps, seed, image, keep_frames, step_timeout, episode_timeout, demos,
                   demo_episodes, demo_seed, corrupt)
    episodes, seed, cfg = opts.episodes, opts.seed, opts.cfg
    train, train_key = _train_split(opts, [None], min(cfg.max_steps, 1000))
    samples = [_placeholder(f"crafter-s{seed + i}", seed + i) for i in range(episodes)]

    async def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        traj, failed = await _score_episode(sample, output, ctx, cfg)
        if failed is not None:
            return failed
        values = {f"achievement_{a}": float(v) for a, v in traj["achievements"].items()}
        values.update(_episode_values(traj))
        unlocked = [a for a, v in traj["achievements"].items() if v]
        return Score(values=values, answer=f"{len(unlocked)} achievements",
                     explanation=f"{traj['length']} steps, reward {traj['reward']:g}", details=_details(traj))

    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        from harness.tasks.agents.metrics import crafter_metrics

        episodes_ = [r.scores for r in records if r.error is None and r.unscored is None]
        out = crafter_metrics(episodes_)
        out.append(Metric("errors", float(sum(r.error is not None for r in records)), n=len(records)))
        out.append(Metric("unscored", float(sum(r.error is None and r.unscored is not None for r in records)),
                          n=len(records)))
        return out

    metrics: dict[str, MetricInfo] = {"score": higher("Crafter score", scale="percent"),
                                      "success_rate": higher("achievement success rate", scale="percent"),
                                      **_EPISODE_METRICS}
    for a in ACHIEVEMENTS:
        metrics[f"achievement_{a}"] = higher(a.replace("_", " "))
    return Task(version=VERSION, load=lambda: list(samples), score=score,
                prompt=lambda s: first_request(s, cfg), primary_metric="score", metrics=metrics,
                aggregate=aggregate, train=train, modalities=frozenset({"text", "image"} if cfg.image else {"text"}),
                content_hash=stable_hash(["crafter", VERSION, CRAFTER_VERSION, episodes, seed, cfg.max_steps,
                                          cfg.image, train_key]))


@task("crafter_instruct", description="Crafter with a stated goal per episode (collect wood, place a table, ...): "
      "success rate per goal", family="agents")
def crafter_instruct_task(goals: str = ",".join(GOALS), episodes: int = 10, max_steps: int = 150, seed: int = 0,
                          image: bool = True, keep_frames: bool = False, step_timeout: float = 60.0,
                          episode_timeout: float = 1800.0, demos: str | None = None, demo_episodes: int = 8,
                          demo_seed: int = DEMO_SEED, corrupt: float = 0.0, **unknown: Any) -> Task:
    """Options: ``goals``: a comma list of goal names; ``episodes``: episodes to play per goal;
    ``max_steps``: steps per episode; ``seed``: episode i plays world seed + i; ``image``: send the
    frame (false: text only); ``keep_frames``: every step's PNG, not only the thumbnail strip;
    ``step_timeout``: seconds per step; ``episode_timeout``: seconds per episode; ``demos``: the train
    split's file (from `harness agents record`); ``demo_episodes``: demonstrations recorded in-process
    without one; ``demo_seed``: their first world; ``corrupt``: share of their steps corrupted"""
    raw_goals = str(goals)
    names = [g.strip() for g in raw_goals.split(",") if g.strip()]
    bad = [g for g in names if g not in GOALS]
    if bad or not names:
        raise ValueError(f"unknown goal {bad[0] if bad else raw_goals!r}; choose from {', '.join(GOALS)}")
    _reject_unknown(unknown, KNOWN)
    opts = _common(episodes, max_steps, seed, image, keep_frames, step_timeout, episode_timeout, demos,
                   demo_episodes, demo_seed, corrupt)
    episodes, seed, cfg = opts.episodes, opts.seed, opts.cfg
    train, train_key = _train_split(opts, list(names), cfg.max_steps)
    samples = [_placeholder(f"{g}-s{seed + i}", seed + i, goal=g, goal_text=GOALS[g])
               for g in names for i in range(episodes)]

    async def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        traj, failed = await _score_episode(sample, output, ctx, cfg)
        if failed is not None:
            return failed
        goal = sample.metadata["goal"]
        ok = bool(traj["achievements"].get(goal))
        values = {"success": float(ok), **_episode_values(traj)}
        if ok:
            values["steps_to_success"] = float(next(t for t, name in traj["unlocks"] if name == goal))
        return Score(values=values, answer="success" if ok else "failure",
                     explanation=f"{GOALS[goal]}: {'done' if ok else 'not done'} in {traj['length']} steps",
                     details=_details(traj))

    metrics = {"success": higher("goal success rate"), "steps_to_success": lower("steps to success", scale="raw"),
               **_EPISODE_METRICS}
    return Task(version=VERSION, load=lambda: list(samples), score=score, prompt=lambda s: first_request(s, cfg),
                primary_metric="success", metrics=metrics, breakdowns=("goal",), train=train,
                modalities=frozenset({"text", "image"} if cfg.image else {"text"}),
                content_hash=stable_hash(["crafter_instruct", VERSION, CRAFTER_VERSION, names, episodes, seed,
                                          cfg.max_steps, cfg.image, train_key]))
