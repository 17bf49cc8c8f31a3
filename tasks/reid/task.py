"""``reid_aerial_ground``: single-view aerial-ground person ReID (train on ground views only).

Options (``-T``): ``protocol`` A2G (aerial queries, ground gallery; default) or G2A; ``data`` synth
(default: the Blender-rendered set, built on first use or by ``harness reid build``), agreid or
agreid2 with ``root=DIR``; for synth: ``ids`` (40), ``ground`` (4), ``aerial`` (4), ``seed`` (0),
``workers`` (1); ``distance`` euclidean (default, as torchreid) or cosine.

Each query and gallery image is one sample (an image part; metadata ``pid``, ``camid``, ``role``); the
backend answers an embedding in ``Output.prediction`` (with ``--epochs N``, an image's epochs are averaged
into one embedding, so every image is ranked and counted once). ``aggregate`` builds the query x gallery
distance matrix and scores it with :func:`harness.tasks.reid.metrics.evaluate`: mAP, rank-1/5/10 and
mINP with 95% bootstrap intervals over queries, the counts of valid and skipped queries (a query whose
identity is absent from the gallery), and from the backend's fit record its seconds and synthetic
views. For 3D-VITAL on the synthetic set, the task (which, unlike the backend, may read the manifest's
ground truth) also scores the backend's lifts of the training images: the lifting model's attribute
accuracy and failures (``lift_quality.py``) and which share of the failed and of the good lifts CVCF
removed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.backend_settings import NonNegativeInt, PositiveInt
from harness.registry import task
from harness.task import SampleRecord, ScoreContext, Task
from harness.types import Message, Metric, MetricInfo, Output, Part, Sample, Score, higher, lower, neutral, stable_hash

PROTOCOLS = ("A2G", "G2A")
DATA = ("synth", "agreid", "agreid2")
DISTANCES = ("euclidean", "cosine")
BOOTSTRAP = 200
METRICS: dict[str, MetricInfo] = {
    "mAP": higher("mAP"), "rank1": higher("rank-1"), "rank5": higher("rank-5"), "rank10": higher("rank-10"),
    "mINP": higher("mINP"),
    "valid_queries": neutral("valid queries"), "skipped_queries": lower("queries without a gallery match"),
    "unscored_queries": lower("queries without a usable embedding"),
    "unscored_gallery": lower("gallery images without a usable embedding"),
    "cvcf_corrupted_removed": higher("failed lifts removed by CVCF"),
    "cvcf_clean_removed": lower("good lifts removed by CVCF"),
    "lift_failed": lower("training-image lifts that failed"),
    "lift_attribute_accuracy": higher("lifting model's attribute accuracy on the training images"),
    "lift_azimuth_error": lower("median azimuth error of the lifts (degrees)"),
    "synthetic_views_used": neutral("synthetic training views used"),
    "fit_seconds": neutral("training seconds"),
}


def _synth_rows(cfg: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], Path]:
    from harness.tasks.reid.synth import build, load_manifest

    root = build(cfg)
    man = load_manifest(root)
    train, test = [], []
    for im in man["images"]:
        row = {"path": str(root / im["path"]), "pid": im["pid"], "camid": im["camid"], "view": im["view"],
               "split": im["split"]}
        if im["split"] == "train":
            if im["view"] == "ground":  # the image and its identity label: no camera, no body parameters
                train.append({**row, "role": "train"})
        else:
            test.append({**row, "elevation": im["elevation"]})
    return train, test, root


def _lift_truth(root: Path) -> dict[str, tuple[dict[str, Any], float]]:
    """Ground truth of each training image by file name: (its identity's parameters, camera azimuth)."""
    from harness.tasks.reid.synth import load_manifest

    man = load_manifest(root)
    return {Path(im["path"]).name: (man["identities"][im["pid"]], float(im["azimuth"])) for im in man["images"]
            if im["split"] == "train"}


def lift_metrics(fit: dict[str, Any], truth: dict[str, tuple[dict[str, Any], float]]) -> list[Metric]:
    """The backend's lifts scored against the truth: attribute accuracy, failures, CVCF's removals."""
    from harness.tasks.reid.lift_quality import failed, removal_rates, summarise

    lifts = [lf for lf in fit.get("lifts") or [] if lf.get("image") in truth]
    if not lifts:
        return []
    preds = [lf["pred"] for lf in lifts]
    truths = [truth[lf["image"]][0] for lf in lifts]
    azimuths = [truth[lf["image"]][1] for lf in lifts]
    summary = summarise(preds, truths, azimuths)
    n = len(lifts)
    out = [Metric("lift_failed", summary["failed_share"], n=n),
           Metric("lift_attribute_accuracy", summary["attribute_accuracy"], n=n),
           Metric("lift_azimuth_error", summary["azimuth_error_median"], n=n)]
    if fit.get("cvcf"):
        is_failed = [failed(p, t, a) for p, t, a in zip(preds, truths, azimuths, strict=True)]
        on_failed, on_good = removal_rates(is_failed, [bool(lf["kept"]) for lf in lifts])
        if on_failed is not None:
            out.append(Metric("cvcf_corrupted_removed", on_failed, n=sum(is_failed)))
        if on_good is not None:
            out.append(Metric("cvcf_clean_removed", on_good, n=n - sum(is_failed)))
    return out


def _sample(row: dict[str, Any], prefix: str) -> Sample:
    meta = {k: v for k, v in row.items() if k != "path"}
    part = Part("image", path=row["path"])
    return Sample(id=f"{prefix}{Path(row['path']).stem}", messages=[Message("user", [part])], target=row["pid"],
                  metadata=meta)


def score(sample: Sample, output: Output, ctx: ScoreContext) -> Score:
    emb = output.prediction
    if not isinstance(emb, list) or not emb:
        return Score.not_scored("the backend returned no embedding (a list of numbers)")
    try:
        vec = [float(v) for v in emb]
    except (TypeError, ValueError):
        return Score.not_scored("the embedding is not a list of numbers")
    if not all(math.isfinite(v) for v in vec):
        return Score.not_scored("the embedding has non-finite (NaN/inf) values")
    m = sample.metadata
    return Score(values={}, details={"embedding": vec, "pid": m.get("pid"), "camid": m.get("camid"),
                                     "role": m.get("role")})


def _row_means(resampled: Any) -> Any:
    return resampled.mean(axis=1)


def _images(usable: list[SampleRecord], role: str) -> tuple[list[SampleRecord], Any]:
    """One (record, embedding) per image of ``role``: the mean of its usable epochs' embeddings.

    An image is one sample however many epochs ran: scoring every (image, epoch) record as its own
    query or gallery image would rank an image's copies against each other and count one query
    E times (with --epochs 2, one query whose right match is second gets AP 5/12 instead of 1/2).
    The built-in backends embed deterministically (eval mode, no dropout, fixed mirror averaging), so
    their epochs are copies and the mean is exactly that embedding; a stochastic backend's epochs are
    draws of one descriptor, and their mean is the test-time average ReID code takes of augmented
    views (as ``embed`` does for the mirror), using every epoch that produced an embedding."""
    import numpy as np

    from harness.stats import unit_means

    recs = [r for r in usable if r.metadata.get("role") == role]  # in (sample id, epoch) order
    if not recs:
        return [], np.zeros((0, 0))
    ids, emb = unit_means([r.sample_id for r in recs], [r.details["embedding"] for r in recs])
    first: dict[str, SampleRecord] = {}
    for r in recs:
        first.setdefault(r.sample_id, r)
    return [first[i] for i in ids], emb


def reid_metrics(records: list[SampleRecord], distance: str = "euclidean", seed: int = 0,
                 truth: Callable[[], dict[str, tuple[dict[str, Any], float]]] | None = None) -> list[Metric]:
    """The retrieval metrics of the records, and (with ``truth``: the training images' ground truth,
    read only here on the task side) the scores of a 3D-VITAL backend's lifts."""
    import numpy as np

    from harness.stats import bootstrap_ci, bootstrap_rng
    from harness.tasks.reid.metrics import ReIDInputError, cosine_distances, euclidean_distances, evaluate

    out: list[Metric] = []
    usable = [r for r in records if r.error is None and r.unscored is None and "embedding" in r.details]
    dims = [len(r.details["embedding"]) for r in usable]
    if dims:  # an embedding of another size than most cannot be compared: counted as unusable
        common = max(set(dims), key=dims.count)
        usable = [r for r in usable if len(r.details["embedding"]) == common]
    for role in ("query", "gallery"):  # images, not (image, epoch) records: unusable = no usable epoch
        n_role = len({r.sample_id for r in records if r.metadata.get("role") == role})
        bad = n_role - len({r.sample_id for r in usable if r.metadata.get("role") == role})
        out.append(Metric(f"unscored_{role if role == 'gallery' else 'queries'}", float(bad), n=n_role))
    usable.sort(key=lambda r: (r.sample_id, r.epoch))
    q, qf = _images(usable, "query")
    g, gf = _images(usable, "gallery")
    if not q or not g:
        return out
    for r in q + g:
        if r.metadata.get("camid") is None or r.metadata.get("pid") is None:
            raise ReIDInputError(f"sample {r.sample_id!r} has no camera id or identity")
    dist = euclidean_distances(qf, gf) if distance == "euclidean" else cosine_distances(qf, gf)
    arr = lambda rs, k: np.asarray([r.metadata[k] for r in rs])  # noqa: E731
    try:
        res = evaluate(dist, arr(q, "pid"), arr(g, "pid"), arr(q, "camid"), arr(g, "camid"), max_rank=10)
    except ReIDInputError as exc:
        if "no query identity" not in str(exc):
            raise
        out.append(Metric("skipped_queries", float(len(q)), n=len(q)))
        return out
    # queries are the sampling units; the five intervals draw one after another from one seeded stream
    rng = bootstrap_rng(seed)
    n = res.n_valid

    def interval(per_query: Any, value: float) -> tuple[float, float]:
        est = bootstrap_ci(per_query, _row_means, rng=rng, rounds=BOOTSTRAP, batched=True, value=value)
        return est.ci_low, est.ci_high

    for name, per_query, value in (("mAP", res.ap, res.mAP), ("mINP", res.inp, res.mINP)):
        out.append(Metric(name, value, *interval(per_query, value), n=n))
    for k in (1, 5, 10):
        hits = (res.first < k).astype(np.float64)
        out.append(Metric(f"rank{k}", res.rank(k), *interval(hits, res.rank(k)), n=n))
    out.append(Metric("valid_queries", float(n), n=len(q)))
    out.append(Metric("skipped_queries", float(len(q) - n), n=len(q)))
    fits = [r.details["fit"] for r in records if isinstance(r.details.get("fit"), dict)]
    # one output per generate call carries the per-lift list: take that one where there is one
    fit = next((f for f in fits if f.get("lifts")), fits[0] if fits else {})
    for key in ("synthetic_views_used", "fit_seconds"):
        if fit.get(key) is not None:
            out.append(Metric(key, float(fit[key]), n=1))
    if truth is not None and fit.get("lifts"):
        out += lift_metrics(fit, truth())
    return out


@task("reid_aerial_ground", description="Aerial-ground person ReID trained on ground views only: mAP, rank-1/5/10, "
      "mINP (-T protocol=A2G|G2A data=synth|agreid|agreid2)", family="reid")
def reid_aerial_ground(protocol: str = "A2G", data: str = "synth", root: str | None = None, ids: int = 40,
                       ground: int = 4, aerial: int = 4, seed: NonNegativeInt = 0, workers: PositiveInt = 1,
                       distance: str = "euclidean") -> Task:
    protocol = str(protocol).upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"-T protocol must be A2G or G2A, got {protocol!r}")
    if data not in DATA:
        raise ValueError(f"-T data must be one of {', '.join(DATA)}, got {data!r}")
    if distance not in DISTANCES:
        raise ValueError(f"-T distance must be euclidean or cosine, got {distance!r}")
    options: dict[str, Any] = {"protocol": protocol, "data": data, "distance": distance}
    cfg = None
    if data == "synth":
        from harness.tasks.reid.synth import SynthConfig

        # the values arrive as the annotated types (harness.option_types); the ranges are the config's
        cfg = SynthConfig(ids=ids, ground=ground, aerial=aerial, seed=seed, workers=workers)
        cfg.validate()
        options.update({"ids": cfg.ids, "ground": cfg.ground, "aerial": cfg.aerial, "seed": cfg.seed})
    else:
        from harness.tasks.reid.realdata import dataset_root

        dataset_root(data, root)  # a one-line error now, not at load time
        options["root"] = str(root)
    cache: dict[str, Any] = {}

    def rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        if "rows" not in cache:
            if cfg is not None:
                train, test, cache["root"] = _synth_rows(cfg)
                want_query = "aerial" if protocol == "A2G" else "ground"
                test = [{**r, "role": "query" if r["view"] == want_query else "gallery"} for r in test]
            else:
                from harness.tasks.reid.realdata import load_real

                train, test = load_real(data, root, protocol)
            cache["rows"] = (train, test)
        return cache["rows"]

    def truth() -> dict[str, tuple[dict[str, Any], float]]:
        rows()
        return _lift_truth(cache["root"]) if "root" in cache else {}

    def load() -> list[Sample]:
        return [_sample(r, f"{protocol}-{r['role'][0]}-") for r in rows()[1]]

    def train() -> list[Sample]:
        return [_sample(r, "train-") for r in rows()[0]]

    return Task(version="1", load=load, train=train, score=score, modalities=frozenset({"image"}),
                primary_metric="mAP", metrics=METRICS, options=options,
                aggregate=lambda recs: reid_metrics(recs, distance, truth=truth),
                content_hash=stable_hash({"options": options, "synth": cfg.key() if cfg else None}))
