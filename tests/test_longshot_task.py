"""LongShOTBench end to end on a generated fixture set: loading, per-turn conversations, media per
mode, the rubric judge (scripted), released scoring checked against hand-computed values, and the
CLI into SQLite.

The scripted judge is a Model-protocol backend registered here (``longshot_script:rules``): it reads
the criterion ``The response mentions 'WORD'.`` and the Model Response out of the reference judge
prompt and answers ``{"criteria_met": WORD in response}``; a criterion tagged GARBLE never gets
JSON, one tagged FLAKY gets JSON only on a retry. With ``builtin:echo`` as the candidate the reply is
the turn's question, so every verdict is known in advance (see synth.fixture_items).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from openai_server import last_user_text, scripted_server  # noqa: F401  (fixture)
from sqlalchemy import func, select
from typer.testing import CliRunner

from harness.data import DatasetError
from harness.errors import UserError
from harness.registry import model
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.store.schema import JudgementRow, MetricRow, SampleResultRow
from harness.task import SampleRecord
from harness.tasks.longshot import media, rubric, scoring, synth
from harness.tasks.longshot.task import longshot
from harness.types import Output, Request, Usage


def decide(prompt: str, seed: int | None) -> str:
    """The scripted judge's reply to one reference judge prompt (seed set = a retry)."""
    response = prompt.split("Model Response:\n", 1)[1].split("\n\nEvaluation Criterion:\n", 1)[0]
    criterion = prompt.split("Evaluation Criterion:\n", 1)[1].split("\n\nInstructions:", 1)[0]
    word = re.search(r"'([^']+)'", criterion).group(1)  # type: ignore[union-attr]
    if "GARBLE" in criterion or ("FLAKY" in criterion and seed is None):
        return "Yes, I believe the criterion is met."
    return json.dumps({"criteria_met": word.lower() in response.lower()})


@dataclass
class ScriptedJudge:
    spec: str = "longshot_script:rules"
    batch_size: int = 1
    concurrency: int = 8
    modalities: frozenset[str] = frozenset({"text"})
    cacheable: bool = True
    prompts: list[str] = field(default_factory=list)

    def reply(self, request: Request) -> str:
        prompt = request.messages[-1].text_content
        self.prompts.append(prompt)
        return decide(prompt, request.config.seed)

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return [Output(text=self.reply(r), usage=Usage(calls=1)) for r in requests]


@model("longshot_script", description="Scripted rubric judge for the LongShOTBench tests")
def _scripted(path: str | None, **settings: object) -> ScriptedJudge:
    return ScriptedJudge()


# hand-computed from synth.fixture_items with echo replies (percent):
#  s1 entity_recognition: red 5 + blue 3 met, green 1 missed, penalty 'car' met -> 8/9 (pen. 3/9)
#  s2 speech_transcription -> audio_understanding: t1 hello 5/8, t2 tone 5/6 -> 10/14
#  s3 causal_reasoning: 'because' (after one retry) 3/6;  s4: missing video;  s5: judge never parses
ENTITY, AUDIO, CAUSAL = 800 / 9, 1000 / 14, 50.0
EXPECTED = {
    ("overall", "", ""): ((ENTITY + AUDIO) / 2 + CAUSAL) / 2,
    ("overall_penalized", "", ""): ((300 / 9 + AUDIO) / 2 + CAUSAL) / 2,
    ("accuracy", "task", "entity_recognition"): ENTITY,
    ("accuracy", "task", "audio_understanding"): AUDIO,
    ("accuracy", "task", "causal_reasoning"): CAUSAL,
    ("accuracy_penalized", "task", "entity_recognition"): 300 / 9,
    ("accuracy", "category", "Core Perception Tasks"): (ENTITY + AUDIO) / 2,
    ("accuracy", "category", "Reasoning Tasks"): CAUSAL,
    ("accuracy", "modality", "visual"): 100 * 21 / 29,  # s1 + s2 (turn 2 is visual) + s3
    ("accuracy", "modality", "speech"): AUDIO,
    ("accuracy", "modality", "audio"): AUDIO,
    ("accuracy", "duration", "short"): ENTITY,
    ("accuracy", "duration", "medium"): AUDIO,
    ("accuracy", "duration", "long"): CAUSAL,
    ("errors", "", ""): 1,
    ("unscored", "", ""): 1,
    ("items", "", ""): 3,
}


USER_CACHE = os.environ.get("HARNESS_CACHE_DIR")  # before the autouse fixture points it at tmp


@pytest.fixture(scope="module")
def fixture_dir(tmp_path_factory):
    return synth.build_fixture(tmp_path_factory.mktemp("longshot_fixture"))


@pytest.fixture(autouse=True)
def media_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    media._MEMO.clear()


def by_id(task):
    return {s.id: s for s in task.load()}


def test_one_sample_per_turn_with_every_item_field(fixture_dir):
    samples = by_id(longshot(data_dir=str(fixture_dir)))
    assert sorted(samples) == ["s1#t1", "s2#t1", "s2#t2", "s3#t1", "s4#t1", "s5#t1"]
    t2 = samples["s2#t2"]
    assert t2.target == "A steady tone plays."
    meta = t2.metadata
    assert meta["sample_type"] == "multi_turn" and meta["task"] == "speech_transcription"
    assert meta["canonical_task"] == "audio_understanding" and meta["category"] == "Core Perception Tasks"
    assert meta["modality"] == ["audio", "speech", "visual"]  # the item's union, as released
    assert meta["turn_modalities"] == ["audio_environment", "visual"]
    assert meta["duration_bin"] == "medium" and meta["key_segments"] == [{"start": 0.0, "end": 2.0}]
    assert [c["name"] for c in meta["criteria"]] == ["mentions_tone", "mentions_beep", "contradiction"]
    assert len(meta["conversations"]) == 4 and meta["scenario"] == "fixture"


def test_conversation_per_turn_feeds_reference_answers_and_media_first_turn_only(fixture_dir):
    task = longshot(data_dir=str(fixture_dir), media_mode="native")
    samples = by_id(task)
    r1 = task.prompt(samples["s2#t1"])
    assert [m.role for m in r1.messages] == ["user"]
    assert [p.type for p in r1.messages[0].content] == ["video", "audio", "text"]
    assert r1.messages[0].content[0].path.endswith("nested/vid_speech.mp4")
    r2 = task.prompt(samples["s2#t2"])
    assert [m.role for m in r2.messages] == ["user", "assistant", "user"]
    assert r2.messages[1].text_content == "The speaker says hello world."  # reference, not the model's
    assert [p.type for p in r2.messages[2].content] == ["text"]  # no media after the first turn
    assert r2.messages[2].text_content == "And what sound plays? tone"
    assert (r2.config.temperature, r2.config.top_p, r2.config.max_tokens) == (0.1, 1.0, 4096)
    assert not any(m.role == "system" for m in r2.messages)


def test_media_modes_give_each_backend_what_it_takes(fixture_dir):
    s1 = by_id(longshot(data_dir=str(fixture_dir)))["s1#t1"]
    frames = longshot(data_dir=str(fixture_dir), media_mode="frames", max_frames=4)
    parts = frames.prompt(s1).messages[0].content
    assert [p.type for p in parts] == ["image"] * 4 + ["text"]
    assert [p.options["timestamp"] for p in parts[:4]] == pytest.approx([0.75, 2.25, 3.75, 5.25], abs=0.0501)
    assert frames.modalities == {"text", "image"}
    fa = longshot(data_dir=str(fixture_dir), media_mode="frames_audio", max_frames=2)
    assert [p.type for p in fa.prompt(s1).messages[0].content] == ["image", "image", "audio", "text"]
    audio = longshot(data_dir=str(fixture_dir), media_mode="audio")
    assert [p.type for p in audio.prompt(s1).messages[0].content] == ["audio", "text"]
    s3 = by_id(audio)["s3#t1"]  # the silent video
    with pytest.raises(media.MediaError, match="no audio track"):
        audio.prompt(s3)
    native = longshot(data_dir=str(fixture_dir))
    assert [p.type for p in native.prompt(by_id(native)["s3#t1"]).messages[0].content] == ["video", "text"]
    # the media setting is part of what is measured: it changes the task's content hash
    assert len({frames.content_hash, fa.content_hash, audio.content_hash, native.content_hash}) == 4
    with pytest.raises(UserError, match="media_mode"):
        longshot(data_dir=str(fixture_dir), media_mode="telepathy")


def test_missing_video_and_malformed_item_fail_their_sample_only(fixture_dir, tmp_path):
    task = longshot(data_dir=str(fixture_dir))
    with pytest.raises(FileNotFoundError, match="vid_missing.mp4 not found"):
        task.prompt(by_id(task)["s4#t1"])
    bad = tmp_path / "items.jsonl"
    good = (fixture_dir / "items.jsonl").read_text().splitlines()[0]
    bad.write_text(good + "\n" + json.dumps({"sample_id": "broken", "video_id": "v", "conversations": []}) + "\n")
    samples = by_id(longshot(data_file=str(bad), media_dir=str(fixture_dir)))
    assert sorted(samples) == ["broken#t1", "s1#t1"]
    with pytest.raises(ValueError, match="conversations"):
        longshot(data_file=str(bad)).prompt(samples["broken#t1"])


def test_hub_loader_uses_the_reference_dataset_id(fixture_dir, monkeypatch):
    """The released dataset through `datasets`: rows come back with the hub's unified nested schema
    (keys missing from a turn filled with None), which the loader must take as it is."""
    from datasets import Dataset

    import harness.tasks.longshot.task as longshot_task

    calls = []

    def fake_hub(path, name, split):  # the network is out of reach; the rows are real Dataset rows
        calls.append((path, name, split))
        return list(Dataset.from_list(synth.fixture_items()))

    monkeypatch.setattr(longshot_task, "load_hub", fake_hub)
    task = longshot(media_dir=str(fixture_dir / "videos"))
    samples = by_id(task)
    assert calls == [("MBZUAI/longshot-bench", "postvalid_v2", "test")]
    assert sorted(samples) == ["s1#t1", "s2#t1", "s2#t2", "s3#t1", "s4#t1", "s5#t1"]
    assert samples["s2#t2"].metadata["conversations"][1].get("difficulty") is None  # filled by datasets
    request = task.prompt(samples["s2#t2"])
    assert [m.role for m in request.messages] == ["user", "assistant", "user"]
    assert request.messages[0].content[0].path.endswith("vid_speech.mp4")

    def offline(path, name, split):
        raise ConnectionError("Couldn't reach 'MBZUAI/longshot-bench' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(longshot_task, "load_hub", offline)
    with pytest.raises(DatasetError, match=r"cannot load MBZUAI/longshot-bench .*-T data_dir=DIR"):
        longshot().load()


def test_prefetcher_window_is_bounded_and_failures_stay_local():
    from harness.tasks.longshot.prefetch import Prefetcher

    warmed: list[str] = []

    def warm(vid: str) -> None:
        warmed.append(vid)
        if vid == "c":
            raise FileNotFoundError(vid)

    p = Prefetcher(warm, workers=2, window=2)
    p.set_order(list("aabcdefg"))
    p.wait_for("a")
    for f in p.futures.values():
        f.exception(timeout=10)
    assert sorted(warmed) == ["a", "b", "c"]  # a and the next two videos, never the rest
    p.wait_for("c")  # its job failed: waiting does not raise (the prompt reports the error)
    for f in p.futures.values():
        f.exception(timeout=10)
    assert sorted(warmed) == ["a", "b", "c", "d", "e"]
    p.close()


def test_prompting_a_video_decodes_the_next_ones_in_background(fixture_dir):
    task = longshot(data_dir=str(fixture_dir), media_mode="frames", max_frames=2, prefetch=2)
    samples = by_id(task)
    task.prompt(samples["s1#t1"])  # vid_tone; queues vid_speech, vid_silent, vid_missing
    videos = fixture_dir / "videos"
    wanted = [media.cache_root() / media.video_key(p) for p in (videos / "nested" / "vid_speech.mp4",
                                                                 videos / "vid_silent.mp4")]
    deadline = time.monotonic() + 20
    while not all(list(w.glob("frames-*/index.json")) for w in wanted) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(list(w.glob("frames-*/index.json")) for w in wanted)
    with pytest.raises(FileNotFoundError, match="vid_missing"):
        task.prompt(samples["s4#t1"])


def test_judge_parser_is_strict():
    assert rubric.parse_verdict('{"criteria_met": true}') is True
    assert rubric.parse_verdict('<think>hmm</think>\n```json\n{"criteria_met": false}\n```') is False
    for raw in ('{"criteria_met": "false"}', "true", "criteria_met: true", '{"met": true}', ""):
        assert rubric.parse_verdict(raw) is None


def record(sid: str, task: str, earned: float, possible: float, pen: float = 0.0, modality=("visual",),
           bin_: str = "short") -> SampleRecord:
    scores = {"earned": earned, "possible": possible, "penalty_met": pen, "score": earned / possible,
              "score_penalized": max(0.0, earned - pen) / possible}
    return SampleRecord(sid, 0, scores, None, None, {"sample_id": sid.split("#")[0], "canonical_task": task,
                                                     "modality": list(modality), "duration_bin": bin_})


def test_released_arithmetic_micro_tasks_macro_categories():
    recs = [record("a#t1", "entity_recognition", 5, 10), record("b#t1", "entity_recognition", 9, 10),
            record("c#t1", "event_understanding", 1, 4), record("c#t2", "event_understanding", 3, 4),
            record("d#t1", "summarization", 2, 8, pen=5), record("e#t1", "not_a_canonical_task", 1, 1)]
    m = {(x.name, x.breakdown_key, x.breakdown_value): x for x in scoring.aggregate(recs)}
    assert m[("accuracy", "task", "entity_recognition")].value == pytest.approx(70.0)  # 14/20, not mean
    assert m[("accuracy", "task", "event_understanding")].value == pytest.approx(50.0)  # turns re-joined
    assert m[("accuracy", "task", "event_understanding")].n == 1
    assert m[("accuracy", "category", "Core Perception Tasks")].value == pytest.approx(60.0)
    assert m[("accuracy", "category", "Information Tasks")].value == pytest.approx(25.0)
    assert m[("overall", "", "")].value == pytest.approx(42.5)  # uncategorised task left out
    assert m[("accuracy_penalized", "task", "summarization")].value == pytest.approx(0.0)  # floored
    assert m[("accuracy", "task", "not_a_canonical_task")].value == pytest.approx(100.0)
    ov = m[("overall", "", "")]
    assert ov.ci_low < ov.value < ov.ci_high  # a real bootstrap interval over items


def run_fixture(fixture_dir, db_url: str, **options) -> dict:
    cfg = EvalConfig(task="longshot", model="builtin:echo", task_options={"data_dir": str(fixture_dir), **options},
                     judge="longshot_script:rules", db_url=db_url, progress=False)
    summary = Runner(cfg).run()
    return {(x.name, x.breakdown_key, x.breakdown_value): x for x in summary.metrics}


def test_scores_match_hand_computed_values(fixture_dir, sqlite_url):
    metrics = run_fixture(fixture_dir, sqlite_url)
    for key, value in EXPECTED.items():
        assert metrics[key].value == pytest.approx(value), key
    sessions = open_db(sqlite_url)
    with sessions() as s:
        rows = {r.sample_id: r for r in s.scalars(select(SampleResultRow))}
        n_judgements = s.scalar(select(func.count()).select_from(JudgementRow))
    assert rows["s1#t1"].scores == {"earned": 8.0, "possible": 9.0, "penalty_met": 5.0, "score": 8 / 9,
                                    "score_penalized": 3 / 9}
    marks = {c["name"]: c["met"] for c in rows["s1#t1"].details["criteria"]}
    assert marks == {"mentions_red": True, "mentions_blue": True, "mentions_green": False, "hallucination": True}
    assert rows["s4#t1"].error_kind == "input" and "vid_missing" in rows["s4#t1"].error
    assert rows["s5#t1"].unscored and "mentions_grey" in rows["s5#t1"].unscored
    flaky = next(c for c in rows["s3#t1"].details["criteria"] if c["name"] == "mentions_because")
    assert flaky["met"] is True and flaky["attempts"] == 2
    # 4 + 2 + 3 criteria answered first time, FLAKY twice, GARBLE three times (all stored)
    assert n_judgements == 4 + 2 + 3 + 1 + 2 + 3


def test_judge_failure_unmet_reproduces_the_released_code(fixture_dir, sqlite_url):
    metrics = run_fixture(fixture_dir, sqlite_url, judge_failure="unmet")
    assert metrics[("unscored", "", "")].value == 0
    assert metrics[("accuracy", "task", "summarization")].value == pytest.approx(0.0)  # GARBLE -> not met
    assert metrics[("accuracy", "category", "Information Tasks")].value == pytest.approx(0.0)


def test_cli_eval_into_sqlite_with_judge_over_http(fixture_dir, tmp_path, monkeypatch, scripted_server):  # noqa: F811
    """`harness eval --task longshot ... --judge ALIAS` where the alias card points the project's
    openai backend at the scripted local server (the CLI has no judge settings flag)."""
    import harness.modelspec
    from harness.cli import app

    scripted_server.set_reply(lambda body: decide(last_user_text(body), body.get("seed")))
    cards = tmp_path / "aliases"
    cards.mkdir()
    (cards / "scripted-judge.yaml").write_text(
        f'spec: "openai:Qwen/Qwen3-14B"\nsettings: {{base_url: "{scripted_server.base_url}", concurrency: 8}}\n')
    monkeypatch.setattr(harness.modelspec, "ALIAS_DIR", cards)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    args = ["eval", "--task", "longshot", "-T", f"data_dir={fixture_dir}", "-T", "media_mode=frames",
            "-T", "max_frames=4", "--model", "builtin:echo", "--judge", "scripted-judge",
            "--db", db, "--no-progress"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps lines at the terminal width
    assert "6 new" in text and "1 errors" in text and "1 unscored" in text
    assert len(scripted_server.bodies()) == 15
    with open_db(db)() as s:
        overall = s.scalar(select(MetricRow).where(MetricRow.name == "overall", MetricRow.breakdown_key == ""))
        first = s.scalar(select(SampleResultRow).where(SampleResultRow.sample_id == "s1#t1"))
        judged = s.scalars(select(JudgementRow).where(JudgementRow.sample_id == "s1#t1")).all()
    assert overall.value == pytest.approx(EXPECTED[("overall", "", "")])
    assert [p["type"] for p in first.input["messages"][0]["content"]] == ["image"] * 4 + ["text"]
    assert len(judged) == 4 and all(j.judge_spec == "scripted-judge" for j in judged)
    again = CliRunner().invoke(app, args)  # same settings: resumes, nothing new to do
    assert again.exit_code == 0 and "0 new" in " ".join(again.output.split())
    assert len(scripted_server.bodies()) == 15  # no judge call repeated


def test_judge_on_a_local_openai_compatible_server(fixture_dir, sqlite_url, scripted_server):  # noqa: F811
    """The same run with the judge behind HTTP: the wire protocol is the reference's."""
    from harness.modelspec import build_model

    scripted_server.set_reply(lambda body: decide(last_user_text(body), body.get("seed")))
    judge = build_model("openai:Qwen/Qwen3-14B", {"base_url": scripted_server.base_url, "concurrency": 8})

    class HttpJudgeRunner(Runner):
        def prepare_judge(self):  # type: ignore[no-untyped-def]
            return judge, "openai:Qwen/Qwen3-14B@scripted"

    cfg = EvalConfig(task="longshot", model="builtin:echo", task_options={"data_dir": str(fixture_dir)},
                     judge="openai:Qwen/Qwen3-14B@scripted", db_url=sqlite_url, progress=False)
    metrics = {(x.name, x.breakdown_key, x.breakdown_value): x for x in HttpJudgeRunner(cfg).run().metrics}
    for key in (("overall", "", ""), ("overall_penalized", "", ""), ("accuracy", "modality", "visual")):
        assert metrics[key].value == pytest.approx(EXPECTED[key]), key
    bodies = scripted_server.bodies()
    assert len(bodies) == 15  # 12 criteria, one FLAKY retry, two more GARBLE attempts
    for body in bodies:
        assert (body["temperature"], body.get("top_p", 1.0), body["max_tokens"]) == (0.1, 1.0, 4096)
        assert [m["role"] for m in body["messages"]] == ["user"]
        assert last_user_text(body).endswith("multimodal analysis. /no_think")
    # the openai backend sends GenerationConfig.extra: the reference's JSON-schema response format
    assert bodies[0]["response_format"]["json_schema"]["schema"]["required"] == ["criteria_met"]
    s1_red = next(b for b in bodies if "'red'" in last_user_text(b))
    text = last_user_text(s1_red)
    assert "Ground Truth Response:\nThe car is red with blue stripes.\n" in text
    assert "Model Response:\nWhat colour is the car? Mention red and blue.\n" in text


@pytest.mark.slow
def test_tiny_local_model_blind_baseline(fixture_dir, sqlite_url, monkeypatch):
    """A real model (SmolLM2-135M through the hf backend, text only: media_mode=none) answers every
    turn; the scripted judge's verdicts must add up to the stored scores for its actual replies."""
    if USER_CACHE:  # the converted weights live in the user's cache: do not convert them again
        monkeypatch.setenv("HARNESS_CACHE_DIR", USER_CACHE)
    else:
        monkeypatch.delenv("HARNESS_CACHE_DIR")
    cfg = EvalConfig(task="longshot", model="hf:smollm2-135m-instruct",
                     task_options={"data_dir": str(fixture_dir), "media_mode": "none"},
                     model_settings={"max_tokens": 24, "threads": 1}, judge="longshot_script:rules",
                     db_url=sqlite_url, progress=False)
    summary = Runner(cfg).run()
    assert summary.n_errors == 0 and summary.n_unscored == 1  # s5's GARBLE criterion; no video needed
    with open_db(sqlite_url)() as s:
        rows = s.scalars(select(SampleResultRow)).all()
    assert len(rows) == 6
    for row in rows:
        assert row.output.strip() and row.input["messages"][0]["content"][0]["type"] == "text"
        if row.unscored:
            continue
        reply = rubric.strip_think(row.output).lower()
        words = [(re.search(r"'([^']+)'", c["description"]).group(1).lower(), c)  # type: ignore[union-attr]
                 for c in row.input["metadata"]["criteria"]]
        expected = sum(c["weight"] for word, c in words if not c["is_penalty"] and word in reply)
        assert row.scores["earned"] == expected, row.sample_id
    overall = next(m for m in summary.metrics if m.name == "overall" and not m.breakdown_key)
    assert 0.0 <= overall.value <= 100.0
