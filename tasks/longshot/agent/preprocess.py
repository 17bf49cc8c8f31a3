"""Preprocess a video once: transcript, audio events, frame captions, embeddings and index (cached).

Each stage is cached on disk beside the longshot media cache, under
``$HARNESS_CACHE_DIR/media/<video key>/agent-<stage>-<settings hash>/``, so a video asked 10+
questions is processed once per setting, across runs and processes; a changed vision model redoes
the captions and the index but not the speech recognition. Stage timings are stored with each stage
(the benchmark reads them back).

- speech: :mod:`.asr` over the 16 kHz mono track (none for a video without audio);
- audio events: :mod:`.events` over the same track;
- frames: one frame every ``caption_every`` seconds (at most ``max_captions``), each captioned by
  the vision model through its :class:`~harness.client.ModelClient`. The reference embeds frames
  with SigLIP instead; no image encoder ships offline, so visual search here runs over captions
  (a user can still point ``vision=`` at any VLM). Without a vision model there is no visual index.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.client import ModelClient
from harness.tasks.longshot import media
from harness.types import GenerationConfig, Message, Part, Request, Usage, stable_hash

from . import asr, events
from .index import EMBEDDER, Chunk, Embed, VectorIndex

STAGE_VERSION = "1"
CAPTION_PROMPT = ("Describe this video frame in one or two sentences: the setting, people, objects, actions and "
                  "any visible text.")


@dataclass(slots=True)
class PrepConfig:
    asr_path: str | None
    asr_threads: int = 1
    asr_window: float = asr.DEFAULT_WINDOW_S
    language: str | None = None
    caption_every: float = 10.0
    max_captions: int = 256
    frame_side: int = 448
    event_window: float = 5.0


@dataclass(slots=True)
class Prepared:
    video: Path
    info: media.VideoInfo
    index: VectorIndex
    wav: Path | None
    transcript: list[dict[str, Any]]
    audio_events: list[dict[str, Any]]
    meta: dict[str, Any] = field(default_factory=dict)  # stage timings, cache hits, failures, notes
    usage: Usage = field(default_factory=Usage)  # captioning calls made for this call (0 when cached)


def _stage_dir(video: Path, stage: str, settings: dict[str, Any]) -> Path:
    tag = stable_hash({"stage": stage, "v": STAGE_VERSION, **settings})[:12]
    return media.cache_root() / media.video_key(video) / f"agent-{stage}-{tag}"


def _read(folder: Path) -> dict[str, Any] | None:
    path = folder / "stage.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _write(folder: Path, data: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f)
    os.replace(tmp, folder / "stage.json")  # atomic: a concurrent reader sees all or nothing


def _speech(video: Path, wav: Path | None, cfg: PrepConfig) -> tuple[dict[str, Any], bool]:
    settings = {"asr": str(Path(cfg.asr_path).resolve()) if cfg.asr_path else None, "window": cfg.asr_window,
                "language": cfg.language}
    folder = _stage_dir(video, "asr", settings)
    found = _read(folder)
    if found is not None:
        return found, True
    t0 = time.perf_counter()
    if wav is None:
        data: dict[str, Any] = {"segments": [], "failures": [], "note": "no audio track"}
    elif cfg.asr_path is None:
        data = {"segments": [], "failures": [], "note": "speech recognition off (asr=none)"}
    else:
        model = asr.load_model(cfg.asr_path, cfg.asr_threads)
        data = asr.transcribe(model, wav, window_s=cfg.asr_window, language=cfg.language)
    data["seconds"] = round(time.perf_counter() - t0, 4)
    data["model"] = settings["asr"]
    _write(folder, data)
    return data, False


def _events(video: Path, wav: Path | None, speech: dict[str, Any], speech_key: str,
            cfg: PrepConfig) -> tuple[dict[str, Any], bool]:
    folder = _stage_dir(video, "events", {"speech": speech_key, "window": cfg.event_window})
    found = _read(folder)
    if found is not None:
        return found, True
    t0 = time.perf_counter()
    found_events: list[dict[str, Any]] = []
    if wav is not None:
        spans = [(s["start"], s["end"]) for s in speech["segments"]]
        found_events = events.detect(asr.read_wav(wav), asr.SAMPLE_RATE, spans, cfg.event_window)
    data = {"events": found_events, "seconds": round(time.perf_counter() - t0, 4)}
    _write(folder, data)
    return data, False


async def _captions(video: Path, info: media.VideoInfo, vision: ModelClient | None,
                    cfg: PrepConfig) -> tuple[dict[str, Any], bool, Usage]:
    if vision is None:
        empty = {"captions": [], "failures": [], "note": "no vision model: no visual index", "seconds": 0.0}
        return empty, True, Usage()
    settings = {"vision": vision.spec, "every": cfg.caption_every, "max": cfg.max_captions, "side": cfg.frame_side,
                "prompt": CAPTION_PROMPT}
    folder = _stage_dir(video, "captions", settings)
    found = _read(folder)
    if found is not None:
        return found, True, Usage()
    t0 = time.perf_counter()
    frames = await asyncio.to_thread(media.sampled_frames, video, fps=1.0 / cfg.caption_every,
                                     max_frames=cfg.max_captions, max_side=cfg.frame_side)
    gen = GenerationConfig(temperature=0.0, max_tokens=256)
    requests = [Request([Message("user", [Part("image", path=f.path, options={"timestamp": round(f.time, 3)}),
                                          Part("text", CAPTION_PROMPT)])], gen) for f in frames.frames]
    outs = await vision.generate(requests)
    usage = Usage()
    step = info.duration / max(1, len(frames.frames)) if len(frames.frames) * cfg.caption_every > info.duration \
        else cfg.caption_every
    captions, failures = [], []
    for f, out in zip(frames.frames, outs, strict=True):
        usage = usage + out.usage
        span = (round(max(0.0, f.time - step / 2), 3), round(min(info.duration or f.time, f.time + step / 2), 3))
        if out.error or not out.text.strip():
            failures.append({"time": round(f.time, 3), "error": out.error or "empty caption"})
            continue
        captions.append({"time": round(f.time, 3), "start": span[0], "end": max(span[1], span[0]),
                         "frame": int(round(f.time * (info.fps or 0))), "text": out.text.strip()})
    data = {"captions": captions, "failures": failures, "seconds": round(time.perf_counter() - t0, 4),
            "vision": vision.spec}
    if captions or not failures:  # a run whose every caption failed is not kept: the next one retries
        _write(folder, data)
    return data, False, usage


def _chunks(speech: dict[str, Any], audio_events: list[dict[str, Any]], captions: list[dict[str, Any]]) -> list[Chunk]:
    chunks = [Chunk("audio", "speech", s["start"], s["end"], s["text"]) for s in speech["segments"]]
    chunks += [Chunk("audio", "event", e["start"], e["end"], e["text"]) for e in audio_events]
    chunks += [Chunk("visual", "caption", c["start"], c["end"], c["text"], c["frame"]) for c in captions]
    return chunks


def _index(video: Path, keys: dict[str, Any], chunks: list[Chunk], embed: Embed) -> tuple[VectorIndex, float, bool]:
    folder = _stage_dir(video, "index", {**keys, "embedder": EMBEDDER})
    marker = folder / "stage.json"
    if marker.is_file():
        return VectorIndex.load(folder), float(json.loads(marker.read_text())["seconds"]), True
    t0 = time.perf_counter()
    index = VectorIndex.build(chunks, embed)
    seconds = round(time.perf_counter() - t0, 4)
    index.save(folder)
    _write(folder, {"seconds": seconds, "chunks": len(chunks)})
    return index, seconds, False


async def prepare(video: Path, cfg: PrepConfig, vision: ModelClient | None, embed: Embed) -> Prepared:
    """Everything the tools search, from the cache where it is already there."""
    info = await asyncio.to_thread(media.probe, video)
    wav = await asyncio.to_thread(media.extract_audio, video, sample_rate=asr.SAMPLE_RATE) if info.has_audio else None
    speech, speech_hit = await asyncio.to_thread(_speech, video, wav, cfg)
    speech_key = stable_hash(speech)[:16]
    ev, ev_hit = await asyncio.to_thread(_events, video, wav, speech, speech_key, cfg)
    caps, cap_hit, usage = await _captions(video, info, vision, cfg)
    chunks = _chunks(speech, ev["events"], caps["captions"])
    keys = {"speech": speech_key, "events": stable_hash(ev["events"])[:16],
            "captions": stable_hash(caps["captions"])[:16]}
    index, embed_s, index_hit = await asyncio.to_thread(_index, video, keys, chunks, embed)
    notes = [n for n in (speech.get("note"), caps.get("note")) if n]
    meta = {
        "video_seconds": round(info.duration, 3), "has_audio": wav is not None,
        "cached": {"asr": speech_hit, "events": ev_hit, "captions": cap_hit, "index": index_hit},
        "seconds": {"asr": speech.get("seconds", 0.0), "events": ev.get("seconds", 0.0),
                    "frames": caps.get("seconds", 0.0), "embed": embed_s},
        "chunks": {"speech": len(speech["segments"]), "events": len(ev["events"]), "captions": len(caps["captions"])},
        "asr_failures": speech.get("failures", []), "caption_failures": caps.get("failures", []), "notes": notes,
    }
    return Prepared(video, info, index, wav, speech["segments"], ev["events"], meta, usage)


class PrepCache:
    """Prepared videos of this process, one preparation per video at a time (concurrent samples of
    one video wait for the first instead of transcribing it twice)."""

    def __init__(self) -> None:
        self._done: dict[str, Prepared] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    async def get(self, video: Path, make: Callable[[], Awaitable[Prepared]]) -> tuple[Prepared, bool]:
        key = media.video_key(video)
        # a lock belongs to one event loop: tests and tools may drive one backend from several
        lock = self._locks.setdefault(f"{id(asyncio.get_running_loop())}:{key}", asyncio.Lock())
        async with lock:
            if key in self._done:
                return self._done[key], True
            prepared = await make()
            self._done[key] = prepared
            return prepared, False
