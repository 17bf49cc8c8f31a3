"""The agent's three tools, with the released argument rules, segment caps and clamping.

- ``search_video(query, modality, max_results)``: cosine search over the video's index; modality a
  list of ``audio``/``visual`` (a bare string is taken as a one-item list; default both),
  ``max_results`` 1..20 per modality (default 5). Hits already returned earlier in the same
  request are dropped (the reference does this to keep the context short).
- ``refine_video(start_time, end_time, modality, query)``: a closer look at one segment by a
  specialist. Bounds are repaired as released: swapped when reversed, a zero-length segment becomes
  5 s around its time, then capped from its start at 60 s (visual) or 300 s (audio); a start past
  the end of the video moves to 10 s before the end, the end is clamped to the duration, an audio
  segment is at least 2 s; a video of at most 60 s is always looked at whole. Visual: frames of
  the segment go to the vision model with the query (or a general description request). Audio: the
  clip goes to the audio model when one is given (``audio=SPEC``); otherwise the speech
  recogniser's transcript and the audio events of the segment are the answer.
- ``verify_claim(start_time, end_time, claim)``: an unprompted description of the segment (the
  claim is not shown to the vision model, so it cannot be led), for object-existence checks.

``start``/``end`` are accepted as aliases of ``start_time``/``end_time``.
"""

from __future__ import annotations

import asyncio
import json
import math
import wave
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.client import ModelClient
from harness.tasks.longshot import media
from harness.types import GenerationConfig, Message, Part, Request, Usage, stable_hash

from .index import Chunk, Embed
from .preprocess import Prepared

TOOL_NAMES = ("search_video", "refine_video", "verify_claim")
MAX_RESULTS = 20
DEFAULT_RESULTS = 5
VISUAL_CAP_S = 60.0
AUDIO_CAP_S = 300.0
DEFAULT_SEGMENT_S = 5.0
MIN_AUDIO_S = 2.0
SHORT_VIDEO_S = 60.0
VISUAL_PROMPT = ("Describe in detail everything visible in these frames of a video segment: objects, people, "
                 "actions, scenes, text and anything else relevant.")
VERIFY_PROMPT = ("Describe everything visible in these frames in detail: every object, the people and their "
                 "clothing, actions, the setting, and any text or symbols.")


def _audio_prompt(query: str | None) -> str:
    if query:
        return (f"Listen to this audio and answer: {query}\n"
                "Describe every sound: speech, music, background noise, instruments.")
    return "Describe every sound in this audio: speech (transcribe it), music, instruments, background noise."


TOOL_SCHEMAS: list[dict[str, Any]] = [
    {"name": "search_video",
     "description": "Semantic search over the video's speech transcript, audio events and frame captions; "
                    "returns matching moments with timestamps in seconds.",
     "parameters": {"type": "object", "required": ["query"], "properties": {
         "query": {"type": "string", "description": "what to look for"},
         "modality": {"type": "array", "items": {"type": "string", "enum": ["audio", "visual"]},
                      "default": ["audio", "visual"], "description": "modalities to search"},
         "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "default": DEFAULT_RESULTS,
                         "description": "results per modality"}}}},
    {"name": "refine_video",
     "description": "Analyse one segment in detail. audio: speech, music, sounds; visual: objects, people, "
                    "actions, scenes. At most 60 s per visual segment.",
     "parameters": {"type": "object", "required": ["start_time", "end_time", "modality"], "properties": {
         "start_time": {"type": "number", "minimum": 0, "description": "segment start, seconds"},
         "end_time": {"type": "number", "minimum": 0, "description": "segment end, seconds"},
         "modality": {"type": "string", "enum": ["audio", "visual"]},
         "query": {"type": "string", "description": "the question, or a focused version of it"}}}},
    {"name": "verify_claim",
     "description": "Check whether an object is really present in a segment through an unbiased scene "
                    "description. Only for object-existence questions; call it at most once.",
     "parameters": {"type": "object", "required": ["start_time", "end_time", "claim"], "properties": {
         "start_time": {"type": "number", "minimum": 0},
         "end_time": {"type": "number", "minimum": 0},
         "claim": {"type": "string", "description": "the object or entity to check for"}}}},
]


class ToolArgumentError(ValueError):
    """Arguments a tool cannot run with; the controller gets the message as the tool's error."""


@dataclass(slots=True)
class ToolResult:
    payload: dict[str, Any]  # what the controller is shown ({"success": ..., "result"/"error": ...})
    segments: list[dict[str, Any]] = field(default_factory=list)  # evidence windows touched
    specialist: dict[str, Any] | None = None  # the specialist's prompt and reply, when one was asked
    usage: Usage = field(default_factory=Usage)


def _number(args: dict[str, Any], key: str) -> float | None:
    alias = {"start_time": "start", "end_time": "end"}[key]
    value = args.get(key, args.get(alias))
    if value is None:
        return None
    if isinstance(value, bool):
        raise ToolArgumentError(f"{key} must be a number of seconds, got {value!r}")
    try:
        out = float(value)
    except (TypeError, ValueError):
        raise ToolArgumentError(f"{key} must be a number of seconds, got {value!r}") from None
    if not math.isfinite(out):
        raise ToolArgumentError(f"{key} must be a finite number, got {value!r}")
    return out


def search_args(args: dict[str, Any]) -> tuple[str, list[str], int]:
    query = args.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ToolArgumentError("missing required argument 'query' for search_video")
    modality = args.get("modality", ["audio", "visual"])
    if isinstance(modality, str):
        modality = [modality]
    if not isinstance(modality, list) or not modality or any(m not in ("audio", "visual") for m in modality):
        raise ToolArgumentError(f"modality must be a list of 'audio'/'visual', got {modality!r}")
    k = args.get("max_results", DEFAULT_RESULTS)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_RESULTS:
        raise ToolArgumentError(f"max_results must be an integer in [1, {MAX_RESULTS}], got {k!r}")
    return query.strip(), list(dict.fromkeys(modality)), k


def refine_window(args: dict[str, Any], duration: float) -> tuple[float, float, str]:
    """(start, end, modality) after the released repairs, caps and clamping (see the module doc)."""
    start, end, modality = _number(args, "start_time"), _number(args, "end_time"), args.get("modality")
    missing = [k for k, v in (("start_time", start), ("end_time", end), ("modality", modality)) if v is None]
    if missing:
        raise ToolArgumentError(f"missing required argument(s) {missing} for refine_video")
    assert start is not None and end is not None
    if modality not in ("audio", "visual"):
        raise ToolArgumentError(f"modality must be 'audio' or 'visual', got {modality!r}")
    if end < start:
        start, end = end, start
    if end == start:
        start = max(0.0, start - DEFAULT_SEGMENT_S / 2)
        end = start + DEFAULT_SEGMENT_S
    if start < 0:
        raise ToolArgumentError(f"start_time must be >= 0, got {start:g}")
    cap = AUDIO_CAP_S if modality == "audio" else VISUAL_CAP_S
    if end - start > cap:
        end = start + cap
    start, end = clamp_to_video(start, end, duration)
    if modality == "audio" and end - start < MIN_AUDIO_S and duration > 0:
        end = min(start + MIN_AUDIO_S, duration)
        if end - start < MIN_AUDIO_S:
            start = max(0.0, end - MIN_AUDIO_S)
    if 0 < duration <= SHORT_VIDEO_S:
        start, end = 0.0, duration
    return round(start, 3), round(end, 3), str(modality)


def clamp_to_video(start: float, end: float, duration: float) -> tuple[float, float]:
    if duration <= 0:
        return start, end
    if start >= duration:
        start = max(duration - 10.0, 0.0)
    end = min(end, duration)
    if end <= start:
        start, end = max(duration - 10.0, 0.0), duration
    return start, end


def verify_args(args: dict[str, Any], duration: float) -> tuple[float, float, str]:
    start, end, claim = _number(args, "start_time"), _number(args, "end_time"), args.get("claim")
    missing = [k for k, v in (("start_time", start), ("end_time", end), ("claim", claim)) if v is None]
    if missing:
        raise ToolArgumentError(f"missing required argument(s) {missing} for verify_claim")
    assert start is not None and end is not None
    if start < 0 or end <= 0:
        raise ToolArgumentError("verify_claim needs start_time >= 0 and end_time > 0")
    if not isinstance(claim, str) or not claim.strip():
        raise ToolArgumentError("claim must be a non-empty string")
    if end < start:
        start, end = end, start
    start, end = clamp_to_video(start, end, duration)
    if 0 < duration <= SHORT_VIDEO_S:
        start, end = 0.0, duration
    return round(start, 3), round(end, 3), claim.strip()


class ToolBox:
    """Runs the tools of one request against one prepared video."""

    def __init__(self, prepared: Prepared, embed: Embed, *, vision: ModelClient | None = None,
                 audio: ModelClient | None = None, refine_frames: int = 8, frame_side: int = 448) -> None:
        self.prep = prepared
        self.embed = embed
        self.vision = vision
        self.audio = audio
        self.refine_frames = refine_frames
        self.frame_side = frame_side
        self.seen: set[tuple[str, float, float]] = set()

    @property
    def duration(self) -> float:
        return float(self.prep.info.duration)

    async def run(self, name: str, args: Any) -> ToolResult:
        if name not in TOOL_NAMES:
            return ToolResult({"success": False, "error": f"unknown tool {name!r}; the tools are "
                                                          f"{', '.join(TOOL_NAMES)}"})
        if not isinstance(args, dict):
            return ToolResult({"success": False, "error": f"{name}: arguments must be a JSON object"})
        try:
            if name == "search_video":
                return await self.search(*search_args(args))
            if name == "refine_video":
                query = args.get("query")
                return await self.refine(*refine_window(args, self.duration), str(query) if query else None)
            return await self.verify(*verify_args(args, self.duration))
        except ToolArgumentError as exc:
            return ToolResult({"success": False, "error": f"{name}: {exc}"})

    # ---- search -------------------------------------------------------------------------------
    async def search(self, query: str, modality: list[str], k: int) -> ToolResult:
        vector = (await asyncio.to_thread(self.embed, [query]))[0]
        results: dict[str, list[dict[str, Any]]] = {}
        notes: list[str] = []
        segments = []
        for m in modality:
            if self.prep.index.size(m) == 0:
                notes.append("this video has no audio track" if m == "audio" and not self.prep.meta["has_audio"]
                             else f"nothing indexed for {m}" + (" (no vision model)" if m == "visual" else ""))
            hits = []
            for chunk, score in self.prep.index.search(vector, m, k):
                key = (m, chunk.start, chunk.end)
                if key in self.seen:  # already shown in this request
                    continue
                self.seen.add(key)
                hits.append(self._hit(chunk, score))
                segments.append({"start": chunk.start, "end": chunk.end, "modality": m, "source": chunk.source,
                                 "via": "search_video", "score": round(score, 3)})
            results[m] = hits
        result: dict[str, Any] = {"query": query, "results": results,
                                  "total_results": sum(len(v) for v in results.values())}
        if notes:
            result["notes"] = notes
        return ToolResult({"success": True, "result": result}, segments)

    @staticmethod
    def _hit(chunk: Chunk, score: float) -> dict[str, Any]:
        if chunk.modality == "audio":
            return {"text": chunk.text, "score": round(score, 3), "start_sec": round(chunk.start, 2),
                    "end_sec": round(chunk.end, 2), "source": chunk.source}
        return {"caption": chunk.text, "score": round(score, 3),
                "timestamp_sec": round((chunk.start + chunk.end) / 2, 2), "start_sec": round(chunk.start, 2),
                "end_sec": round(chunk.end, 2), "frame_number": chunk.frame}

    # ---- refine / verify ----------------------------------------------------------------------
    async def refine(self, start: float, end: float, modality: str, query: str | None) -> ToolResult:
        segment = {"start": start, "end": end, "modality": modality, "via": "refine_video"}
        if modality == "visual":
            return await self._look(start, end, query or VISUAL_PROMPT, query, segment, "description")
        if self.prep.wav is None:
            return ToolResult({"success": False, "error": "this video has no audio track"}, [segment])
        if self.audio is not None:
            clip = await asyncio.to_thread(self._clip, start, end)
            prompt = _audio_prompt(query)
            request = Request([Message("user", [Part("audio", path=str(clip), options={"sample_rate": 16000}),
                                                Part("text", prompt)])],
                              GenerationConfig(temperature=0.0, max_tokens=1024))
            (out,) = await self.audio.generate([request])
            record = {"role": "audio", "spec": self.audio.spec, "prompt": prompt, "reply": out.text[:4000],
                      "usage": out.usage.to_dict(), "error": out.error}
            if out.error:
                return ToolResult({"success": False, "error": f"audio model: {out.error}"}, [segment], record,
                                  out.usage)
            return ToolResult({"success": True, "result": {"transcription": out.text, "start_time": start,
                                                           "end_time": end, "duration": round(end - start, 3)}},
                              [segment], record, out.usage)
        speech = self.prep.index.within(start, end, "audio")
        lines = [f"[{c.start:.1f}-{c.end:.1f}s] {c.text}" for c in speech if c.source == "speech"]
        sounds = [f"[{c.start:.1f}-{c.end:.1f}s] {c.text}" for c in speech if c.source == "event"]
        text = "\n".join(lines) if lines else "(no speech recognised in this segment)"
        result = {"transcription": text, "audio_events": sounds, "start_time": start, "end_time": end,
                  "duration": round(end - start, 3), "source": "speech recogniser transcript and audio events"}
        return ToolResult({"success": True, "result": result}, [segment])

    async def verify(self, start: float, end: float, claim: str) -> ToolResult:
        segment = {"start": start, "end": end, "modality": "visual", "via": "verify_claim"}
        res = await self._look(start, end, VERIFY_PROMPT, None, segment, "description")
        inner = res.payload.get("result") or {}
        res.payload = {"success": res.payload["success"],
                       "result": {"claim": claim, "description": inner.get("description", res.payload.get("error", "")),
                                  "start_time": start, "end_time": end}}
        return res

    async def _look(self, start: float, end: float, prompt: str, query: str | None, segment: dict[str, Any],
                    key: str) -> ToolResult:
        if self.vision is None:
            return ToolResult({"success": False, "error": "no vision model configured (vision=SPEC)"}, [segment])
        frames = await asyncio.to_thread(self._frames, start, end)
        parts = [Part("image", path=p, options={"timestamp": t}) for t, p in frames]
        header = f"Frames from {start:.1f}s to {end:.1f}s of the video, in time order.\n\n"
        request = Request([Message("user", [*parts, Part("text", header + prompt)])],
                          GenerationConfig(temperature=0.0, max_tokens=2048))
        (out,) = await self.vision.generate([request])
        record = {"role": "vision", "spec": self.vision.spec, "prompt": header + prompt,
                  "frames": [t for t, _ in frames], "reply": out.text[:4000], "usage": out.usage.to_dict(),
                  "error": out.error}
        if out.error:
            return ToolResult({"success": False, "error": f"vision model: {out.error}"}, [segment], record, out.usage)
        result = {key: out.text, "query": query, "start_time": start, "end_time": end,
                  "duration": round(end - start, 3)}
        return ToolResult({"success": True, "result": result}, [segment], record, out.usage)

    def _segment_dir(self, kind: str, start: float, end: float, extra: Any) -> Path:
        tag = stable_hash([kind, start, end, extra])[:12]
        return media.cache_root() / media.video_key(self.prep.video) / "agent-segments" / tag

    def _frames(self, start: float, end: float) -> list[tuple[float, str]]:
        """``refine_frames`` frames at the centres of equal parts of [start, end] (cached JPEGs)."""
        n = max(1, self.refine_frames)
        folder = self._segment_dir("frames", start, end, [n, self.frame_side])
        index = folder / "frames.json"
        if index.is_file():
            return [(t, str(folder / name)) for t, name in json.loads(index.read_text())]
        step = (end - start) / n
        times = [start + step * (i + 0.5) for i in range(n)]
        decoded = media.decode_at(self.prep.video, times)
        w, h = media._scaled_size(self.prep.info.width, self.prep.info.height, self.frame_side)
        encoder = media.JpegEncoder(w, h)
        folder.mkdir(parents=True, exist_ok=True)
        out = []
        for i, (ft, frame) in enumerate(decoded):
            name = f"{i:03d}.jpg"
            (folder / name).write_bytes(encoder.encode(frame))
            out.append((round(ft, 3), name))
        index.write_text(json.dumps(out))
        return [(t, str(folder / name)) for t, name in out]

    def _clip(self, start: float, end: float) -> Path:
        """The [start, end] stretch of the 16 kHz track as its own WAV (cached)."""
        assert self.prep.wav is not None
        folder = self._segment_dir("audio", start, end, None)
        path = folder / "clip.wav"
        if path.is_file():
            return path
        folder.mkdir(parents=True, exist_ok=True)
        with wave.open(str(self.prep.wav), "rb") as src:
            rate = src.getframerate()
            src.setpos(min(src.getnframes(), int(start * rate)))
            data = src.readframes(max(0, int((end - start) * rate)))
            params = src.getparams()
        with wave.open(str(path), "wb") as dst:
            dst.setparams(params)
            dst.writeframes(data)
        return path
