"""The ``dsgg`` task: video MLLMs predict Temporal Relation Sets top-down (reason, then locate).

``-T dataset=action-genome|vidvrd|pvsg`` ``-T data_dir=...`` (official annotation files; without it,
Action Genome falls back to the synthetic fixture) ``-T setting=predcls|sgdet`` (predcls: the objects are
named in the prompt and relations are grounded to their annotated boxes; sgdet: the model's own boxes)
``-T parse_errors=unscored|zero`` (a reply without a parsable relation list: unscored and counted, or
scored as an empty set).
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.data import DatasetError
from harness.registry import task
from harness.task import ScoreContext, Task
from harness.tasks.dsgg import data as D
from harness.tasks.dsgg.trs import ParseError, build_prompt, parse_reply
from harness.tasks.dsgg.vocab import AG_TRIVIAL, ag_objects, ag_predicates
from harness.types import GenerationConfig, Message, Output, Part, Request, Sample, Score, higher, lower, neutral

if TYPE_CHECKING:
    import numpy as np

    from harness.tasks.dsgg.scoring import Vocab

# numpy and the metrics load on first use (scoring), so discovering tasks stays fast
VERSION = "1"
AG_GROUPS = [(0, 3), (3, 9), (9, 26)]  # attention, spatial, contacting predicate index ranges
SETTINGS = ("predcls", "sgdet")


def length_bin(n_frames: int) -> str:
    return "short (<8 frames)" if n_frames < 8 else "medium (8-23)" if n_frames < 24 else "long (24+)"


def load_videos(dataset: str, data_dir: str | None, split: str) -> list[dict[str, Any]]:
    if dataset not in D.DATASETS:
        raise DatasetError(f"unknown dataset {dataset!r}; choose one of {', '.join(D.DATASETS)}")
    if data_dir is None:
        if dataset != "action-genome":
            raise DatasetError(f"dataset {dataset!r} needs -T data_dir=<annotation folder> (no offline copy)")
        return D.synthetic_videos(24 if split == "train" else 12, split=split)
    loader = {"action-genome": D.load_action_genome, "vidvrd": D.load_vidvrd, "pvsg": D.load_pvsg}[dataset]
    return loader(data_dir, split)


def make_vocab(dataset: str, videos: list[dict[str, Any]]) -> Vocab:
    from harness.tasks.dsgg.scoring import Vocab

    if dataset == "action-genome":
        return Vocab(list(ag_objects()), list(ag_predicates()), AG_TRIVIAL, AG_GROUPS)
    cats = sorted({c for v in videos for c in v["objects"].values()})
    preds = sorted({r[2] for v in videos for r in v["relations"]})
    return Vocab(cats, preds)


def to_sample(video: dict[str, Any], vocab: Vocab, setting: str) -> Sample:
    parts = []
    if video.get("video"):
        parts.append(Part("video", path=video["video"], options={"max_frames": 32}))
    parts.append(Part("text", build_prompt(video, vocab.predicates, vocab.categories, setting)))
    return Sample(id=video["video_id"], messages=[Message("user", parts)], target=video,
                  metadata={"n_frames": video["n_frames"], "length": length_bin(video["n_frames"]),
                            "dataset": video["dataset"]})


@task("dsgg", description="Dynamic scene graphs (Action Genome / VidVRD / PVSG): R@K beside precision, "
      "redundancy and informativeness", family="dsgg")
def dsgg(dataset: str = "action-genome", data_dir: str | None = None, split: str = "test",
         train_split: str = "train", setting: str = "predcls", parse_errors: str = "unscored",
         max_tokens: int = 2048) -> Task:
    if setting not in SETTINGS:
        raise DatasetError(f"setting must be one of {SETTINGS}, got {setting!r}")
    if parse_errors not in ("unscored", "zero"):
        raise DatasetError(f"parse_errors must be 'unscored' or 'zero', got {parse_errors!r}")

    @cache
    def videos() -> list[dict[str, Any]]:
        return load_videos(dataset, data_dir, split)

    @cache
    def train_videos() -> list[dict[str, Any]]:
        try:
            return load_videos(dataset, data_dir, train_split)
        except DatasetError:
            return []

    @cache
    def vocab() -> Vocab:
        return make_vocab(dataset, videos() + train_videos())

    @cache
    def weights() -> np.ndarray:
        import numpy as np

        from harness.tasks.dsgg.set_metrics import informativeness_weights

        # informativeness: -log predicate frequency in the training split (the test split if none)
        source = train_videos() or videos()
        counts = np.zeros(len(vocab().predicates))
        for v in source:
            for r in v["relations"]:
                if r[2] in vocab().pred_id:
                    counts[vocab().pred_id[r[2]]] += 1
        return informativeness_weights(counts)

    def load() -> list[Sample]:
        return [to_sample(v, vocab(), setting) for v in videos()]

    def train() -> list[Sample]:
        return [to_sample(v, vocab(), setting) for v in train_videos()]

    def prompt(sample: Sample) -> Request:
        return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=max_tokens))

    def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
        from harness.tasks.dsgg.scoring import score_video
        from harness.tasks.dsgg.sttran_format import PredictionError, parse_prediction, score_sttran

        video = sample.target
        pred = output.prediction
        if isinstance(pred, dict) and pred.get("format") == "sttran":
            try:
                parsed = parse_prediction(pred, video["n_frames"])
            except PredictionError as exc:
                return Score.not_scored(f"bad STTran-format prediction: {exc}")
            # a prediction that parsed is valid input: an exception from here on is a scorer bug and surfaces
            values, details = score_sttran(video, parsed, vocab(), weights())
            return Score(values=values, details=details, explanation="scored STTran-format prediction")
        dropped: list[str] = []
        parse_error = None
        try:
            text = json.dumps(pred) if isinstance(pred, dict | list) else output.text
            trs, dropped = parse_reply(text, vocab().predicates, video["n_frames"])
        except ParseError as exc:
            if parse_errors == "unscored":
                return Score.not_scored(f"parse error: {exc}", parse_error=str(exc))
            trs, parse_error = [], str(exc)
        values, details = score_video(video, trs, vocab(), weights(), setting)
        details["parse_error"] = parse_error
        details["dropped"] = dropped[:20]
        details["n_dropped"] = len(dropped)
        details["trs"] = trs[:200]
        return Score(values=values, details=details, answer=f"{len(trs)} relations",
                     explanation=f"{len(trs)} relations parsed, {len(dropped)} dropped")

    content = hashlib.sha256(json.dumps([dataset, split, setting, VERSION, str(data_dir),
                                         _stat(data_dir)]).encode()).hexdigest()
    return Task(
        metrics={
            **{f"{r}@{k}{c}": higher(f"{r}@{k} ({g} graph constraint)") for r in ("R", "mR") for k in (10, 20, 50, 100)
               for c, g in (("", "with"), ("_no", "no"), ("_semi", "semi"))},
            "precision": higher("set precision"), "recall": higher("set recall"), "f1": higher("set F1"),
            "redundancy": lower("redundancy (duplicates / predictions)", "fraction"),
            "temporal_redundancy": lower("temporal redundancy", "fraction"),
            "informative_recall": higher("informativeness-weighted recall"),
            "trivial_rate": lower("predictions with a trivial predicate", "fraction"),
            "triplet_precision": higher("triplet precision"), "triplet_recall": higher("triplet recall"),
            "triplet_f1": higher("triplet F1"), "vidvrd_mAP": higher("VidVRD relation mAP"),
            "vidvrd_R@50": higher("VidVRD R@50"), "vidvrd_R@100": higher("VidVRD R@100"),
            **{f"vidvrd_tagging_P@{k}": higher(f"VidVRD tagging P@{k}") for k in (1, 5, 10)},
            **{f"pvsg_{m}@{k}": higher(f"PVSG {m.replace('_', ' ')}@{k}") for k in (20, 50, 100)
               for m in ("recall", "mean_recall", "weak_recall", "weak_mean_recall", "soft_recall",
                         "soft_mean_recall")},
            "parse_errors": lower("unparseable replies (count)"), "dropped_relations": neutral("relations dropped"),
        },
        name="dsgg", version=VERSION, load=load, prompt=prompt, score=score,
        description=f"DSGG {dataset} ({setting}): Temporal Relation Sets, R@K / mR@K beside precision, F1, "
                    "redundancy and informativeness-weighted recall",
        family="dsgg", modalities=frozenset({"text", "video"}), primary_metric="R@20",
        breakdowns=("length",), aggregate=aggregate, content_hash=content,
        options={"dataset": dataset, "setting": setting, "split": split}, train=train,
    )


def aggregate(records: list[Any]) -> list[Any]:
    from harness.tasks.dsgg.aggregate import aggregate as pooled

    return pooled(records)


def _stat(data_dir: str | None) -> list[Any]:
    """Size and mtime of the annotation files (cheap content identity without hashing large pickles)."""
    if data_dir is None:
        return []
    root = Path(data_dir)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.suffix in (".pkl", ".json"))
    return [(str(p.relative_to(root)) if p != root else p.name, p.stat().st_size, int(p.stat().st_mtime))
            for p in files[:5000]]
