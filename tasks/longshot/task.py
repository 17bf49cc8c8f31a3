"""LongShOTBench task: loader, media per backend, reference conversation protocol, rubric judge.

Options (``-T key=value``):
- ``data_dir``: a directory holding the items (``items.jsonl``/``items.json``/``test.jsonl`` or the
  only ``*.jsonl``/``*.json`` in it) and the videos ``<video_id>.mp4`` anywhere below it;
  ``data_file`` + ``media_dir`` name them separately. Without either, the released dataset is
  loaded with ``datasets.load_dataset(hub, hub_config, split="test")`` (default
  ``MBZUAI/longshot-bench``, config ``postvalid_v2``) and videos are looked up in ``media_dir``.
- ``media_mode``: what the model is given (recorded in the run config; it changes what is measured):
  ``native`` video file + extracted audio track (omni models; the reference's omni setting),
  ``frames`` sampled frames as images (vision-only models), ``frames_audio`` frames + audio track
  (OpenAI-compatible APIs that take audio), ``audio`` the audio track only, ``none`` no media at
  all (a blind, text-only baseline; not a reference setting).
- ``max_frames`` (32), ``fps`` (unset: ``max_frames`` evenly spaced frames), ``max_side`` (448 px),
  ``audio_rate`` (16000 Hz mono): the media pipeline (tasks/longshot/media.py).
- ``judge_failure``: ``unscored`` (default) or ``unmet`` (as the released code) for a criterion
  whose verdict never parses.
- ``prefetch``: threads decoding the next videos in the background (default 2; 0 = off).
Candidate generation: no system prompt, temperature 0.1, top_p 1.0, max_tokens 4096 (reference).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.data import DatasetError, file_hash, load_hub, read_jsonl
from harness.judge import attach
from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.types import (
    GenerationConfig,
    Message,
    Metric,
    Output,
    Part,
    Request,
    Sample,
    Score,
    higher,
    neutral,
    stable_hash,
)

from . import media, rubric
from .items import items_samples
from .prefetch import Prefetcher

HUB_ID = "MBZUAI/longshot-bench"
HUB_CONFIG = "postvalid_v2"
MEDIA_MODES: dict[str, frozenset[str]] = {
    "native": frozenset({"text", "video", "audio"}),
    "frames": frozenset({"text", "image"}),
    "frames_audio": frozenset({"text", "image", "audio"}),
    "audio": frozenset({"text", "audio"}),
    "none": frozenset({"text"}),  # blind baseline: how far the questions alone get a model
}
ITEM_FILES = ("items.jsonl", "items.json", "test.jsonl", "test.json")
PROTOCOL_VERSION = "1"  # bump when prompts, sampling defaults or scoring change


def find_items_file(data_dir: Path) -> Path:
    for name in ITEM_FILES:
        if (data_dir / name).is_file():
            return data_dir / name
    found = sorted(p for p in data_dir.iterdir() if p.suffix in (".jsonl", ".json") and p.is_file())
    if len(found) == 1:
        return found[0]
    raise DatasetError(f"{data_dir}: expected one items file ({', '.join(ITEM_FILES)} or a single *.jsonl)")


def read_items(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """(where, item) pairs from a JSONL file or a JSON list."""
    if path.suffix == ".jsonl":
        return [(f"{path}:{lineno}", row) for lineno, row in read_jsonl(path)]
    import json

    if not path.is_file():
        raise DatasetError(f"{path}: file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON ({exc.msg})") from None
    if isinstance(data, dict):
        data = data.get("items") or data.get("data") or [data]
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of items")
    return [(f"{path}[{i}]", row) for i, row in enumerate(data)]


class VideoIndex:
    """video_id -> path of ``<video_id>.mp4`` anywhere under the media folder (walked once)."""

    def __init__(self, root: Path | None) -> None:
        self.root = root
        self._paths: dict[str, Path] | None = None

    def get(self, video_id: str) -> Path:
        if self.root is None:
            raise FileNotFoundError(f"video {video_id!r}: no media folder given (-T media_dir=...)")
        if self._paths is None:
            found: dict[str, Path] = {}
            for dirpath, _, files in os.walk(self.root):
                for f in files:
                    if f.endswith(".mp4"):
                        found.setdefault(f[:-4], Path(dirpath) / f)
            self._paths = found
        path = self._paths.get(video_id)
        if path is None or not path.is_file():
            raise FileNotFoundError(f"video {video_id!r}: {video_id}.mp4 not found under {self.root}")
        return path


def aggregate(records: list[SampleRecord]) -> list[Metric]:
    from . import scoring  # numpy: imported when a run aggregates, not when tasks are listed

    return scoring.aggregate(records)


def media_parts(video: Path, mode: str, settings: dict[str, Any]) -> list[Part]:
    """The media of the first user turn, in the form the mode's backends take."""
    parts: list[Part] = []
    if mode == "native":
        hints = {k: settings[k] for k in ("max_frames", "fps") if settings.get(k) is not None}
        parts.append(Part("video", path=str(video), options=hints))
    if mode in ("frames", "frames_audio"):
        sampled = media.sampled_frames(video, fps=settings["fps"], max_frames=settings["max_frames"],
                                       max_side=settings["max_side"])
        parts += [Part("image", path=f.path, options={"timestamp": round(f.time, 3)}) for f in sampled.frames]
    if mode in ("native", "frames_audio", "audio"):
        wav = media.extract_audio(video, sample_rate=settings["audio_rate"])
        if wav is not None:  # a silent video: the reference also sends the video alone
            parts.append(Part("audio", path=str(wav), options={"sample_rate": settings["audio_rate"]}))
        elif mode == "audio":
            raise media.MediaError(f"{video}: no audio track, and media_mode=audio sends nothing else")
    return parts


@task("longshot", description="LongShOTBench: long omni-modal video QA, rubric-weighted judge scoring (3,401 QA)",
      family="longshot")
def longshot(data_dir: str | None = None, data_file: str | None = None, media_dir: str | None = None,
             hub: str = HUB_ID, hub_config: str = HUB_CONFIG, split: str = "test", media_mode: str = "native",
             max_frames: int = 32, fps: float | None = None, max_side: int = 448, audio_rate: int = 16000,
             max_tokens: int = 4096, judge_failure: str = "unscored", prefetch: int = 2) -> Task:
    from harness.errors import UserError  # the CLI reports it as a one-line error

    if media_mode not in MEDIA_MODES:
        raise UserError(f"longshot: media_mode must be one of {', '.join(MEDIA_MODES)}, got {media_mode!r}")
    if judge_failure not in ("unscored", "unmet"):
        raise UserError(f"longshot: judge_failure must be 'unscored' or 'unmet', got {judge_failure!r}")
    if int(max_frames) < 1 or (fps is not None and float(fps) <= 0):
        raise UserError("longshot: max_frames must be at least 1 and fps positive")
    items_path: Path | None = None
    if data_dir:
        root = Path(data_dir)
        if not root.is_dir():
            raise DatasetError(f"{root}: data_dir is not a directory")
        items_path = Path(data_file) if data_file else find_items_file(root)
        media_root: Path | None = Path(media_dir) if media_dir else root
    elif data_file:
        items_path = Path(data_file)
        media_root = Path(media_dir) if media_dir else items_path.parent
    else:
        media_root = Path(media_dir) if media_dir else None
    settings = {"media_mode": media_mode, "max_frames": int(max_frames), "fps": float(fps) if fps else None,
                "max_side": int(max_side), "audio_rate": int(audio_rate), "max_tokens": int(max_tokens),
                "judge_failure": judge_failure, "protocol": PROTOCOL_VERSION}
    videos = VideoIndex(media_root)
    gen = GenerationConfig(temperature=0.1, top_p=1.0, max_tokens=int(max_tokens))
    prefetcher = Prefetcher(lambda vid: media_parts(videos.get(vid), media_mode, settings),
                            workers=int(prefetch), window=2 * max(1, int(prefetch)))

    def load() -> list[Sample]:
        samples = _load()
        prefetcher.set_order([str(s.metadata["video_id"]) for s in samples if "_load_error" not in s.metadata])
        return samples

    def _load() -> list[Sample]:
        if items_path is not None:
            rows = read_items(items_path)
        else:
            try:
                hub_rows = load_hub(hub, hub_config, split)
            except Exception as exc:  # offline, unknown id/config, auth: one clear line, not a traceback
                first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                raise DatasetError(f"cannot load {hub} (config {hub_config}, split {split}) with datasets: "
                                   f"{first}; for a local copy pass -T data_dir=DIR") from None
            rows = [(f"{hub}/{hub_config}[{i}]", dict(r)) for i, r in enumerate(hub_rows)]
        return items_samples(rows)

    def prompt(sample: Sample) -> Request:
        error = sample.metadata.get("_load_error")
        if error:
            raise DatasetError(error)
        if media_mode == "none":
            return Request([Message(m.role, list(m.content)) for m in sample.messages], gen)
        prefetcher.wait_for(str(sample.metadata["video_id"]))  # and start on the next videos
        video = videos.get(str(sample.metadata["video_id"]))
        messages = [Message(m.role, list(m.content)) for m in sample.messages]
        # media go to the first user turn only, before its text (reference build_turn_tasks)
        messages[0] = Message("user", media_parts(video, media_mode, settings) + messages[0].content)
        return Request(messages, gen)

    async def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        response = rubric.strip_think(output.text or "")
        marks = await rubric.judge_criteria(ctx, list(sample.metadata["criteria"]), str(sample.target), response)
        turn = rubric.tally(marks, unmet_on_failure=judge_failure == "unmet")
        details: dict[str, Any] = {"criteria": [m.to_dict() for m in marks]}
        met = [m.name for m in marks if m.met and not m.is_penalty]
        missed = [m.name for m in marks if m.met is False and not m.is_penalty]
        penalties = [m.name for m in marks if m.met and m.is_penalty]
        failed = [m.name for m in marks if m.met is None]
        explanation = (f"earned {turn.earned:g}/{turn.possible:g}; met: {', '.join(met) or '-'}; "
                       f"missed: {', '.join(missed) or '-'}; penalties met: {', '.join(penalties) or '-'}"
                       + (f"; no verdict: {', '.join(failed)}" if failed else ""))
        if failed and judge_failure == "unscored":
            result = Score.not_scored(f"judge gave no parseable verdict for criteria: {', '.join(failed)}", **details)
            result.explanation = explanation
        else:
            values = {"earned": turn.earned, "possible": turn.possible, "penalty_met": turn.penalty_met}
            if turn.score is not None:
                values["score"] = turn.score
                values["score_penalized"] = turn.score_penalized or 0.0
            result = Score(values=values, explanation=explanation, answer=response, details=details)
        return attach(result, *(m.verdict for m in marks))

    if items_path is not None:
        content = file_hash(items_path, extra=stable_hash(settings))
    else:
        content = stable_hash({"hub": hub, "config": hub_config, "split": split, **settings})
    return Task(
        metrics={
            **{f"{m}{v}": higher(f"{m.replace('_', ' ')}{' (penalties subtracted)' if v else ''} (%)", "percent")
               for m in ("overall", "accuracy", "micro_accuracy") for v in ("", "_penalized")},
            "turn_score": higher("mean per-turn score (%)", "percent"), "items": neutral("items scored"),
        },
        name="longshot", version=PROTOCOL_VERSION, load=load, prompt=prompt, score=score,
        description="LongShOTBench: long omni-modal video QA; rubric-weighted LLM-judge scoring",
        family="longshot", modalities=MEDIA_MODES[media_mode], primary_metric="overall",
        aggregate=aggregate, content_hash=content, default_judge=rubric.JUDGE_SPEC,
        needs_judge=True, options=settings,
    )
