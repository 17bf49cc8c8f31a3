"""The Crafter episode loop and its bad inputs: illegal replies, slow or failing models, an
environment that crashes or cannot reset, bad options, demonstration files of another version;
the observation text round trip and the reference agents."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import pytest

from harness.client import ModelClient
from harness.runner import build_task
from harness.task import ScoreContext
from harness.tasks.agents import demos
from harness.tasks.agents.env import ACTIONS, CrafterWorld, EnvError
from harness.tasks.agents.observation import describe, parse_action, parse_observation
from harness.types import Output, Usage


@dataclass
class Slow:
    spec: str = "test:slow"
    batch_size: int = 1
    concurrency: int = 1
    cacheable: bool = False
    modalities: frozenset = field(default_factory=lambda: frozenset({"text", "image"}))
    delay: float = 0.0
    calls: int = 0

    async def generate(self, requests):
        self.calls += 1
        if self.calls > 1:  # the first step answers at once, the rest hang
            await asyncio.sleep(self.delay)
        return [Output(text="move_left", usage=Usage(input_tokens=3, calls=1)) for _ in requests]


def play(task_name, model, **options):
    task = build_task(task_name, {"episodes": 1, **options})
    sample = task.load()[0]
    client = ModelClient(model)

    async def go():
        (first,) = await client.generate([task.prompt(sample)])
        return first, await task.score(sample, first, ScoreContext(model=client))

    return asyncio.run(go())


def test_observation_text_round_trips_the_world(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    world = CrafterWorld(3, 50)
    for a in ("move_left", "do", "move_up", "do"):
        world.step(ACTIONS.index(a))
    obs = parse_observation(describe(world, max_steps=50, goal="collect wood"))
    assert (obs.step, obs.max_steps, obs.goal) == (4, 50, "collect wood")
    assert obs.grid == world.local_grid() and obs.grid[3][4] == "player"
    assert obs.inventory == {k: v for k, v in world.inventory().items() if v > 0 or k in ("health", "food", "drink",
                                                                                         "energy")}
    assert (obs.direction, obs.facing) == world.facing()


def test_parse_action_takes_names_indices_and_refuses_the_rest():
    assert parse_action("do") == ACTIONS.index("do")
    assert parse_action("I will Move_Up now") == ACTIONS.index("move_up")
    assert parse_action("place table") == ACTIONS.index("place_table")
    assert parse_action("7") == 7
    assert parse_action("dance") is None and parse_action("") is None and parse_action("99") is None


def test_an_unparseable_reply_plays_noop_and_counts_as_illegal(tmp_path, monkeypatch):
    from harness.models.builtin import builtin

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    first, score = play("crafter", builtin("constant", text="dance"), max_steps=20)
    assert score.unscored is None
    assert score.values["length"] == 20 and score.values["illegal_actions"] == 20
    assert set(score.details["actions"]) == {"noop"} and score.details["illegal_steps"] == list(range(20))
    assert first.usage.calls == 20  # every step's call is in the sample's usage
    assert score.details["media"] and (tmp_path / "agents").exists()


def test_a_hanging_model_times_out_per_step_and_ends_the_episode(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    _, score = play("crafter", Slow(delay=30.0), max_steps=40, step_timeout=0.05)
    assert score.values["model_errors"] == 5 and "in a row" in score.details["truncated"]
    assert score.values["length"] == 6  # the first action, then five timed-out steps played as noop
    assert score.details["model_errors"][0].startswith("step timeout")


def test_the_episode_time_limit_holds(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    _, score = play("crafter", Slow(delay=0.02), max_steps=1000, episode_timeout=0.3)
    assert "time limit" in score.details["truncated"] and score.values["length"] < 1000


def test_an_environment_crash_is_an_unscored_episode(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    real = CrafterWorld.step

    def flaky(self, action):
        if self.t == 3:
            raise EnvError("crafter step 4 failed: RuntimeError: boom")
        return real(self, action)

    monkeypatch.setattr(CrafterWorld, "step", flaky)
    _, score = play("crafter", Slow(), max_steps=10)
    assert score.unscored == "environment: crafter step 4 failed: RuntimeError: boom"
    assert score.details["length"] == 3


def test_a_world_that_cannot_reset_is_a_one_line_error(monkeypatch):
    import crafter

    def broken(self):
        raise ValueError("no world")

    monkeypatch.setattr(crafter.Env, "reset", broken)
    with pytest.raises(EnvError, match=r"^crafter could not reset seed 5: ValueError: no world$"):
        CrafterWorld(5, 10)


@pytest.mark.parametrize(("options", "message"), [
    ({"episodes": 0}, "-T episodes must be in"), ({"max_steps": "x"}, "-T max_steps must be an integer"),
    ({"image": "maybe"}, "-T image must be true or false"), ({"max_step": 3}, "did you mean 'max_steps'"),
    ({"corrupt": 2}, "-T corrupt must be in"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(ValueError, match=message):
        build_task("crafter", options)
    with pytest.raises(ValueError, match="unknown goal 'fly'"):
        build_task("crafter_instruct", {"goals": "collect_wood,fly"})


def test_the_scripted_expert_reaches_its_goals_and_random_is_reproducible(tmp_path, monkeypatch):
    from harness.tasks.agents.backends.builtin import crafter_agent

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path))
    for goal in ("place_table", "make_wood_pickaxe"):
        _, score = play("crafter_instruct", crafter_agent("scripted"), goals=goal, max_steps=50)
        assert score.values["success"] == 1.0 and score.values["illegal_actions"] == 0
    _, a = play("crafter", crafter_agent("random"), max_steps=30)
    _, b = play("crafter", crafter_agent("random"), max_steps=30)
    _, c = play("crafter", crafter_agent("random"), max_steps=30, seed=9)
    assert a.details["actions"] == b.details["actions"] != c.details["actions"]
    assert len(set(a.details["actions"])) > 5


def test_demonstrations_record_corrupt_and_refuse_other_versions(tmp_path):
    rec = demos.record(["collect_wood"], 2, 100, 40, corrupt=0.3)
    marks = [m for d in rec for m in d["corrupted"]]
    assert 0.1 < sum(marks) / len(marks) < 0.5
    clean = demos.record(["collect_wood"], 1, 100, 40, corrupt=0.0)[0]
    assert clean["actions"] == clean["expert_actions"] and "collect_wood" in clean["unlocked"]
    path = tmp_path / "d.jsonl"
    demos.write(path, rec)
    assert [d["actions"] for d in demos.read(path)] == [d["actions"] for d in rec]
    frames = list(demos.replay(rec[0]))
    assert len(frames) == len(rec[0]["actions"]) and frames[0][1].startswith("Step 0/40. Goal: collect wood.")
    head, *rest = path.read_text().splitlines()
    path.write_text("\n".join([json.dumps({**json.loads(head), "crafter": "1.0.0"}), *rest]))
    with pytest.raises(demos.DemoError, match="recorded with crafter 1.0.0"):
        demos.read(path)
    path.write_text("not json\n")
    with pytest.raises(demos.DemoError, match="cannot read demonstrations"):
        demos.read(path)
