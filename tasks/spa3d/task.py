"""3DSPA tasks: physics-violation detection on matched pairs, correlation with human ratings
(VideoPhy-2 CSV format) and track reconstruction metrics.

The model under test is the realism scorer itself: ``spa3d:fit`` (train the autoencoder on the
task's train split of realistic tracks, then score) or ``spa3d:/path/to/checkpoint.pt`` (see
backend.py). Each sample's user message carries the files to score as media parts
(``points`` for ``.npz`` tracks, ``video`` for videos); the model returns one metrics dict per file
in ``Output.prediction["scores"]`` and the task compares them.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.data import DatasetError, read_jsonl
from harness.registry import task
from harness.stored_paths import stored_path
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
    lower,
    neutral,
)

HERE = Path(__file__).parent
VIDEOPHY2_EXAMPLE = HERE / "data" / "videophy2" / "output_pc.csv"
TRAIN_SEED, TEST_SEED = 1, 1000
PAIRS_FIELDS = ("realistic", "violated")


def cache_dir() -> Path:
    return Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness")) / "spa3d"


def media_part(path: Path) -> Part:
    return Part("points" if path.suffix.lower() == ".npz" else "video", path=str(path))


def prompt(sample: Sample) -> Request:
    return Request(sample.messages, GenerationConfig(temperature=0.0, max_tokens=1), sample_id=sample.id)


def _scores(output: Output, expected: int) -> list[dict[str, float]] | str:
    pred = output.prediction if isinstance(output.prediction, dict) else {}
    scores = pred.get("scores")
    if not isinstance(scores, list) or len(scores) != expected:
        return f"expected {expected} realism score(s) in prediction['scores'], got {scores!r:.80}"
    if any(not isinstance(s, dict) or "realism" not in s for s in scores):
        return "a score has no 'realism' value"
    return scores


# ---------------------------------------------------------------- synthetic data on disk


def synthetic_pairs_manifest(n_per_violation: int, seed: int) -> Path:
    from harness.tasks.spa3d import synth

    directory = cache_dir() / f"pairs-v1-s{seed}-n{n_per_violation}"
    manifest = directory / "pairs.jsonl"
    if not manifest.exists():
        synth.write_pairs(directory, synth.pair_set(n_per_violation, seed))
    return manifest


def synthetic_realistic_dir(n: int, seed: int) -> Path:
    from harness.tasks.spa3d import synth
    from harness.tasks.spa3d.tracks import save_tracks

    directory = cache_dir() / f"real-v1-s{seed}-n{n}"
    done = directory / ".complete"
    if not done.exists():
        for i, tracks in enumerate(synth.realistic_set(n, seed)):
            save_tracks(directory / f"{i:05d}.npz", tracks)
        done.write_text("ok\n")
    return directory


def track_samples(directory: Path) -> list[Sample]:
    files = sorted(directory.glob("*.npz"))
    if not files:
        raise DatasetError(f"{directory}: no .npz track files")
    return [Sample(id=f.stem, messages=[Message("user", [media_part(f)])], metadata={"file": f.name}) for f in files]


def train_split(train_dir: str | None, n_train: int) -> Callable[[], list[Sample]]:
    def load() -> list[Sample]:
        return track_samples(Path(train_dir) if train_dir else synthetic_realistic_dir(n_train, TRAIN_SEED))

    return load


# ---------------------------------------------------------------- pairs: physics-violation detection


def load_pairs(manifest: Path) -> list[Sample]:
    samples = []
    for lineno, row in read_jsonl(manifest):
        where = f"{manifest}:{lineno}"
        paths = []
        for key in PAIRS_FIELDS:
            if not isinstance(row.get(key), str):
                raise DatasetError(f"{where}: missing field {key!r} (a track or video path)")
            paths.append(Path(stored_path(manifest.parent / row[key])))
        samples.append(Sample(
            id=str(row.get("id", lineno)),
            messages=[Message("user", [media_part(p) for p in paths])],
            target=0,  # the first part is the realistic one
            metadata={"violation": str(row.get("violation", "unknown"))},
        ))
    return samples


def score_pair(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    scores = _scores(output, 2)
    if isinstance(scores, str):
        return Score.not_scored(scores)
    real, bad = scores
    if any(s["realism"] != s["realism"] for s in scores):  # NaN: nothing to compare
        return Score.not_scored("a realism score is NaN")
    # ties count half, so a constant scorer sits at chance (0.5)
    correct = 1.0 if real["realism"] > bad["realism"] else 0.5 if real["realism"] == bad["realism"] else 0.0
    err_correct = 1.0 if real["error"] < bad["error"] else 0.5 if real["error"] == bad["error"] else 0.0
    return Score(
        values={"accuracy": correct, "accuracy_error": err_correct, "realism_realistic": real["realism"],
                "realism_violated": bad["realism"], "margin": real["realism"] - bad["realism"]},
        explanation=f"realism realistic={real['realism']:.4f} violated={bad['realism']:.4f}",
        details={"realistic": real, "violated": bad},
    )


def auroc(positives: list[float], negatives: list[float]) -> float:
    """P(score of a realistic video > score of a violating one), ties half (Mann-Whitney U / n1 n2)."""
    import numpy as np

    p, n = np.asarray(positives, dtype=float)[:, None], np.asarray(negatives, dtype=float)[None, :]
    return float(np.mean((p > n) + 0.5 * (p == n)))


def pairs_aggregate(task_ref: list[Task]) -> Callable[[list[SampleRecord]], list[Metric]]:
    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        import numpy as np

        from harness.aggregate import default_aggregate, per_sample_means
        from harness.stats import bootstrap_ci

        metrics = default_aggregate(task_ref[0], records)
        means = per_sample_means(records)
        ids = sorted(set(means.get("realism_realistic", {})) & set(means.get("realism_violated", {})))
        if ids:
            # pairs are the sampling units (epochs already averaged per pair): both videos resampled together
            pairs = np.column_stack([[means["realism_realistic"][i] for i in ids],
                                     [means["realism_violated"][i] for i in ids]])
            est = bootstrap_ci(pairs, lambda p: auroc(list(p[:, 0]), list(p[:, 1])), seed=0, rounds=1000)
            metrics.append(Metric("auroc", est.value, est.ci_low, est.ci_high, len(ids)))
        return metrics

    return aggregate


@task("spa3d_pairs", description="3DSPA: realistic vs physics-violating twin (accuracy, AUROC)", family="spa3d")
def spa3d_pairs(manifest: str | None = None, train_dir: str | None = None, n_per_violation: int = 25,
                n_train: int = 300, seed: int = TEST_SEED) -> Task:
    """``manifest``: JSONL rows {id, realistic, violated, violation} with paths relative to it (default:
    synthetic held-out pairs generated into the cache); ``train_dir``: realistic ``.npz`` tracks for
    ``spa3d:fit`` (default: synthetic realistic scenes)."""
    path = Path(manifest) if manifest else None
    ref: list[Task] = []

    def load() -> list[Sample]:
        return load_pairs(path or synthetic_pairs_manifest(n_per_violation, seed))

    t = Task(
        name="spa3d_pairs",
        metrics={"accuracy": higher("realistic video scored more realistic (ties half)"),
                 "accuracy_error": higher("realistic video has the lower 3D error (ties half)"),
                 "auroc": higher("AUROC realistic vs violating"), "margin": higher("realism margin", "raw"),
                 "realism_realistic": neutral("realism of the realistic video"),
                 "realism_violated": neutral("realism of the violating video")},
        version="1", load=load, prompt=prompt, score=score_pair,
        description="3DSPA physics-violation detection on matched pairs", family="spa3d",
        modalities=frozenset({"points", "video"}), primary_metric="accuracy", breakdowns=("violation",),
        aggregate=None, content_hash=f"manifest:{path}" if path else f"synthetic-v1:{seed}:{n_per_violation}",
        train=train_split(train_dir, n_train),
        options={"manifest": manifest, "n_per_violation": n_per_violation, "seed": seed},
    )
    ref.append(t)
    t.aggregate = pairs_aggregate(ref)
    return t


# ---------------------------------------------------------------- human ratings (VideoPhy-2 format)


def load_ratings(ratings_file: Path, media_dir: Path, column: str) -> list[Sample]:
    """VideoPhy-2 CSV: ``,caption,videopath,score`` (or VideoPhy-1 ``videopath,caption,sa,pc``).
    ``videopath`` is resolved under ``media_dir`` (its basename too); a ``.npz`` with the video's
    name next to it is used as precomputed tracks by the scorer."""
    if not ratings_file.exists():
        raise DatasetError(f"{ratings_file}: file not found")
    samples = []
    with ratings_file.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        for lineno, row in enumerate(reader, 2):
            where = f"{ratings_file}:{lineno}"
            for key in ("videopath", column):
                if not row.get(key):
                    raise DatasetError(f"{where}: missing field {key!r}")
            try:
                rating = float(row[column])
            except ValueError:
                raise DatasetError(f"{where}: field {column!r} is not a number: {row[column]!r}") from None
            rel = Path(row["videopath"])
            path = media_dir / rel if (media_dir / rel).exists() else media_dir / rel.name
            samples.append(Sample(
                id=row.get("") or str(lineno - 2), messages=[Message("user", [media_part(path)])], target=rating,
                metadata={"caption": row.get("caption", ""), "videopath": row["videopath"]},
            ))
    return samples


def score_single(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    scores = _scores(output, 1)
    if isinstance(scores, str):
        return Score.not_scored(scores)
    values = {k: float(v) for k, v in scores[0].items() if k != "num_eval_points"}
    if sample.target is not None:
        values["human"] = float(sample.target)
    return Score(values=values, explanation=f"realism={values['realism']:.4f} AJ={values['average_jaccard']:.4f}")


def correlation_metrics(x: list[float], y: list[float], seed: int = 0, rounds: int = 1000) -> list[Metric]:
    """Spearman and Pearson with percentile-bootstrap 95% CIs over videos (none when undefined)."""
    import numpy as np
    from scipy import stats

    from harness.stats import bootstrap_ci

    xa, ya = np.asarray(x, float), np.asarray(y, float)
    out = []
    for name, fn in (("spearman", stats.spearmanr), ("pearson", stats.pearsonr)):
        if len(xa) < 3 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
            continue  # undefined (too few videos or a constant side): no row rather than a NaN
        value = float(fn(xa, ya)[0])

        def corr(v: np.ndarray, fn: Any = fn) -> float:  # a constant resample has no correlation: left out
            if np.all(v[:, 0] == v[0, 0]) or np.all(v[:, 1] == v[0, 1]):
                return math.nan
            return float(fn(v[:, 0], v[:, 1])[0])

        est = bootstrap_ci(np.column_stack([xa, ya]), corr, seed=seed, rounds=rounds, value=value)
        lo, hi = (None, None) if math.isnan(est.ci_low) else (est.ci_low, est.ci_high)
        out.append(Metric(name, value, lo, hi, len(xa)))
    return out


def ratings_aggregate(task_ref: list[Task]) -> Callable[[list[SampleRecord]], list[Metric]]:
    def aggregate(records: list[SampleRecord]) -> list[Metric]:
        from harness.aggregate import default_aggregate, per_sample_means

        metrics = default_aggregate(task_ref[0], records)
        means = per_sample_means(records)
        ids = sorted(set(means.get("realism", {})) & set(means.get("human", {})))
        metrics += correlation_metrics([means["realism"][i] for i in ids], [means["human"][i] for i in ids])
        return metrics

    return aggregate


@task("spa3d_ratings", description="3DSPA: correlation with human ratings (VideoPhy-2 CSV)", family="spa3d")
def spa3d_ratings(ratings_file: str | None = None, media_dir: str | None = None, column: str = "score",
                  train_dir: str | None = None, n_train: int = 300) -> Task:
    """``ratings_file``: VideoPhy-2 format CSV (default: the shipped example, whose .mp4 files are not
    shipped, so each sample records a per-sample error unless ``media_dir`` has them)."""
    path = Path(ratings_file) if ratings_file else VIDEOPHY2_EXAMPLE
    media = Path(media_dir) if media_dir else path.parent
    ref: list[Task] = []
    t = Task(
        name="spa3d_ratings",
        metrics={"spearman": higher("Spearman with human ratings", "raw"),
                 "pearson": higher("Pearson with human ratings", "raw"),
            # per-video reconstruction quality of the scorer (TAPVid-3D metrics) and what it reports
            **{f"{m}_{px}": higher(f"{m.replace('_', ' ')} at {px} px") for m in ("pts_within", "jaccard")
               for px in (1, 2, 4, 8, 16)},
            "average_jaccard": higher("average Jaccard"), "average_pts_within_thresh": higher("average pts within"),
            "occlusion_accuracy": higher("occlusion accuracy"), "error": lower("3D error"),
            "error_rel": lower("3D error / track RMS"),
            # properties of the videos, not of the scorer's quality: shown, never ranked
            "realism": neutral("realism score"), "human": neutral("human rating"), "calibrated": neutral("calibrated"),
            "position_surprise": neutral("position surprise"), "visibility_surprise": neutral("visibility surprise"),
        },
        version="1", load=lambda: load_ratings(path, media, column), prompt=prompt,
        score=score_single, description="3DSPA realism vs human ratings (Spearman / Pearson)", family="spa3d",
        modalities=frozenset({"points", "video"}), primary_metric="spearman", content_hash=f"ratings:{path}:{column}",
        train=train_split(train_dir, n_train), options={"ratings_file": str(path), "column": column},
    )
    ref.append(t)
    t.aggregate = ratings_aggregate(ref)
    return t


# ---------------------------------------------------------------- reconstruction metrics


@task("spa3d_recon", description="3DSPA: track reconstruction metrics (AJ, pts within, occlusion acc)",
      family="spa3d")
def spa3d_recon(track_dir: str | None = None, train_dir: str | None = None, n_test: int = 50, n_train: int = 300,
                seed: int = TEST_SEED) -> Task:
    """``track_dir``: ``.npz`` track files to reconstruct (default: held-out synthetic realistic scenes)."""
    def load() -> list[Sample]:
        return track_samples(Path(track_dir) if track_dir else synthetic_realistic_dir(n_test, seed))

    return Task(
        name="spa3d_recon",
        metrics={
            # per-video reconstruction quality of the scorer (TAPVid-3D metrics) and what it reports
            **{f"{m}_{px}": higher(f"{m.replace('_', ' ')} at {px} px") for m in ("pts_within", "jaccard")
               for px in (1, 2, 4, 8, 16)},
            "average_jaccard": higher("average Jaccard"), "average_pts_within_thresh": higher("average pts within"),
            "occlusion_accuracy": higher("occlusion accuracy"), "error": lower("3D error"),
            "error_rel": lower("3D error / track RMS"),
            # properties of the videos, not of the scorer's quality: shown, never ranked
            "realism": neutral("realism score"), "human": neutral("human rating"), "calibrated": neutral("calibrated"),
            "position_surprise": neutral("position surprise"), "visibility_surprise": neutral("visibility surprise"),
        },
        version="1", load=load, prompt=prompt, score=score_single,
        description="3DSPA query-track reconstruction (TAPVid-3D metrics)", family="spa3d",
        modalities=frozenset({"points", "video"}), primary_metric="average_jaccard",
        content_hash=f"tracks:{track_dir}" if track_dir else f"synthetic-v1:{seed}:{n_test}",
        train=train_split(train_dir, n_train), options={"track_dir": track_dir},
    )
