"""Pooled DSGG metrics over a run, with seeded bootstrap CIs over videos, and breakdown rows.

The reference evaluators pool over the data set (R@K: mean over *frames*; mR@K: per-predicate hits and
counts summed over the data set; VidVRD R@N: hits over all GT), so per-video means would not reproduce
their numbers. Each video's ``Score.details`` holds additive counts; the value is computed on their sums,
and the 95% interval is a percentile bootstrap resampling whole videos (``harness.stats.BOOTSTRAP_ROUNDS``
rounds, seed 0), the same scheme ``harness.stats.mean_ci`` uses for means.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from harness.stats import BOOTSTRAP_ROUNDS, bootstrap_cis, mean_ci
from harness.task import SampleRecord
from harness.tasks.dsgg.metrics import K_VALUES
from harness.tasks.dsgg.set_metrics import SetCounts
from harness.types import Metric

SUFFIX = {"with": "", "no": "_no", "semi": "_semi"}
BREAKDOWNS = ("length",)


def _dense(sparse: dict[str, float], size: int) -> np.ndarray:
    out = np.zeros(size)
    for i, v in sparse.items():
        out[int(i)] = v
    return out


def _bootstrap(stats: dict[str, np.ndarray], fn: Callable[[dict[str, np.ndarray]], dict[str, float]],
               seed: int = 0) -> dict[str, tuple[float, float, float]]:
    """value of ``fn`` on the summed stats plus a percentile interval over resampled videos."""
    n = next(iter(stats.values())).shape[0]

    def per_resample(counts: np.ndarray) -> dict[str, np.ndarray]:
        # every resample's summed stats at once: (rounds, n) counts of each video times its stats
        rounds = counts.shape[0]
        sums = {k: (counts @ a.reshape(n, -1)).reshape((rounds, *a.shape[1:])) for k, a in stats.items()}
        boots: dict[str, list[float]] = defaultdict(list)
        for b in range(rounds):
            for k, v in fn({name: s[b] for name, s in sums.items()}).items():
                boots[k].append(v)
        return {k: np.asarray(v, dtype=float) for k, v in boots.items()}

    value = fn({k: a.sum(0) for k, a in stats.items()})
    est = bootstrap_cis(n, per_resample, seed=seed, rounds=BOOTSTRAP_ROUNDS, batched=True, resample="counts",
                        value=value)
    return {k: (e.value, e.ci_low, e.ci_high) for k, e in est.items()}


def _recall_stats(recs: list[SampleRecord], constraint: str, n_pred: int) -> dict[str, np.ndarray] | None:
    ds = [r.details.get("recall", {}).get(constraint) for r in recs]
    if not ds or any(d is None for d in ds):
        return None
    return {
        "num": np.array([[d["frame_recall_sum"][str(k)] for k in K_VALUES] for d in ds]),
        "frames": np.array([float(d["frames"]) for d in ds]),
        "hits": np.array([[_dense(d["hits"][str(k)], n_pred) for k in K_VALUES] for d in ds]),
        "counts": np.array([_dense(d["counts"], n_pred) for d in ds]),
    }


def _recall_fn(suffix: str) -> Callable[[dict[str, np.ndarray]], dict[str, float]]:
    def fn(s: dict[str, np.ndarray]) -> dict[str, float]:
        out = {}
        for j, k in enumerate(K_VALUES):
            out[f"R@{k}{suffix}"] = float(s["num"][j] / s["frames"]) if s["frames"] else float("nan")
            # TEMPURA: mean over every predicate of hits / (count + 1e-10); absent predicates add 0
            out[f"mR@{k}{suffix}"] = float(np.mean(s["hits"][j] / (s["counts"] + 1e-10)))
        return out

    return fn


def _set_fn(prefix: str, keep: tuple[str, ...] | None = None) -> Callable[[dict[str, np.ndarray]], dict[str, float]]:
    fields = list(SetCounts.__dataclass_fields__)

    def fn(s: dict[str, np.ndarray]) -> dict[str, float]:
        m = SetCounts(**dict(zip(fields, s["c"].tolist(), strict=True))).metrics()
        return {f"{prefix}{k}": v for k, v in m.items() if keep is None or k in keep}

    return fn


def _pvsg_fn(s: dict[str, np.ndarray]) -> dict[str, float]:
    from harness.tasks.dsgg.scoring import PVSG_KS
    from harness.tasks.dsgg.video_metrics import evaluate_pvsg

    video = {name: s[name] for name in ("hit", "weak", "soft", "soft_weak")}
    video["total"] = s["total"]
    res = evaluate_pvsg([video], PVSG_KS, s["total"].shape[0])
    out = {}
    for k in PVSG_KS:
        for name in ("recall", "mean_recall", "weak_recall", "weak_mean_recall", "soft_recall", "soft_mean_recall"):
            out[f"pvsg_{name}@{k}"] = getattr(res, name)[k]
    return out


def pooled(recs: list[SampleRecord], key: str = "", value: str = "", seed: int = 0) -> list[Metric]:
    if not recs:
        return []
    n = len({r.sample_id for r in recs})
    rows: dict[str, tuple[float, float, float]] = {}
    # mR averages over the whole predicate vocabulary (26 for Action Genome), absent predicates included
    n_pred = max(int(r.details.get("n_predicates", 0)) for r in recs)
    n_pred = max(n_pred, 1 + max((int(i) for r in recs for d in r.details.get("recall", {}).values()
                                  for i in d.get("counts", {})), default=0))
    for constraint, suffix in SUFFIX.items():
        stats = _recall_stats(recs, constraint, n_pred)
        if stats is not None:
            rows.update(_bootstrap(stats, _recall_fn(suffix), seed))
    fields = list(SetCounts.__dataclass_fields__)
    if all("set" in r.details for r in recs):
        c = np.array([[SetCounts.from_dict(r.details["set"]).to_dict()[f] for f in fields] for r in recs])
        rows.update(_bootstrap({"c": c}, _set_fn(""), seed))
    if all("set_labels" in r.details for r in recs):
        c = np.array([[SetCounts.from_dict(r.details["set_labels"]).to_dict()[f] for f in fields] for r in recs])
        rows.update(_bootstrap({"c": c}, _set_fn("triplet_", ("precision", "recall", "f1")), seed))
    if all("vidvrd" in r.details for r in recs):
        vd = [r.details["vidvrd"] for r in recs]
        est = mean_ci([d["ap"] for d in vd if d["n_gt"]], seed=seed)
        rows["vidvrd_mAP"] = (est.value, est.ci_low, est.ci_high)
        stats = {"hits": np.array([[d["hits"]["50"], d["hits"]["100"]] for d in vd], dtype=float),
                 "gt": np.array([float(d["n_gt"]) for d in vd])}
        rows.update(_bootstrap(stats, lambda s: {"vidvrd_R@50": float(s["hits"][0] / s["gt"]) if s["gt"] else 0.0,
                                                 "vidvrd_R@100": float(s["hits"][1] / s["gt"]) if s["gt"] else 0.0},
                               seed))
        for k in ("1", "5", "10"):
            est = mean_ci([d["tagging"][k] for d in vd if d["n_gt"]], seed=seed)
            rows[f"vidvrd_tagging_P@{k}"] = (est.value, est.ci_low, est.ci_high)
    if all("pvsg" in r.details for r in recs):
        stats = {name: np.array([r.details["pvsg"][name] for r in recs], dtype=float)
                 for name in ("hit", "weak", "soft", "soft_weak", "total")}
        rows.update(_bootstrap(stats, _pvsg_fn, seed))
    return [Metric(name, v, lo, hi, n, key, value) for name, (v, lo, hi) in rows.items() if v == v]


def aggregate(records: list[SampleRecord], seed: int = 0) -> list[Metric]:
    ok = [r for r in records if r.error is None and r.unscored is None]
    metrics = pooled(ok, seed=seed)
    n = len(records)
    parse_errors = sum(1 for r in records if r.error is None and (
        (r.unscored or "").startswith("parse error") or r.details.get("parse_error")))
    metrics += [
        Metric("errors", float(sum(r.error is not None for r in records)), n=n),
        Metric("unscored", float(sum(r.error is None and r.unscored is not None for r in records)), n=n),
        Metric("parse_errors", float(parse_errors), n=n),
        Metric("dropped_relations", float(sum(r.details.get("n_dropped", 0) for r in ok)), n=n),
    ]
    for key in BREAKDOWNS:
        groups: dict[str, list[SampleRecord]] = defaultdict(list)
        for r in ok:
            if r.metadata.get(key) is not None:
                groups[str(r.metadata[key])].append(r)
        for val, group in sorted(groups.items()):
            metrics += pooled(group, key, val, seed)
    return metrics


def summary(metrics: list[Metric]) -> dict[str, Any]:
    """{name: value} of the overall rows (for the precision-recall view and tests)."""
    return {m.name: m.value for m in metrics if not m.breakdown_key}
