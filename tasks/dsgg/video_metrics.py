"""Video relation metrics over whole trajectories / masks, vectorised with numpy; usable on its own.

- VidVRD (xdshang/VidVRD-helper ``evaluation/visual_relation_detection.py``): relation detection mAP
  and R@50/100 with trajectory vIoU >= 0.5, relation tagging P@1/5/10 (:func:`evaluate_vidvrd`).
- PVSG (OpenPVSG ``utils/rel_metrics.py`` and its test script): R@K / mR@K with temporal vIoU over
  mask-IoU hit frames, plus the weak (vIoU >= 0.1) and soft (vIoU-weighted) variants
  (:func:`pvsg_viou`, :func:`evaluate_pvsg`).

The per-frame Action Genome protocol lives in :mod:`harness.tasks.dsgg.metrics`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

# ----------------------------------------------------------------------------------------------
# VidVRD (VidVRD-helper)


def viou(traj_a: np.ndarray, dur_a: Sequence[int], traj_b: np.ndarray, dur_b: Sequence[int]) -> float:
    """Voluminal IoU of two box trajectories over durations [start, end) (one box per frame),
    ``+1`` pixel convention: overlap volume over the union of both whole trajectories' volumes."""
    a = np.asarray(traj_a, dtype=float).reshape(-1, 4)
    b = np.asarray(traj_b, dtype=float).reshape(-1, 4)
    start, end = max(dur_a[0], dur_b[0]), min(dur_a[1], dur_b[1])
    vol = lambda t: float(((t[:, 2] - t[:, 0] + 1) * (t[:, 3] - t[:, 1] + 1)).sum())  # noqa: E731
    if start >= end:
        return 0.0
    sa = a[start - dur_a[0]:end - dur_a[0]]
    sb = b[start - dur_b[0]:end - dur_b[0]]
    iw = np.maximum(0, np.minimum(sa[:, 2], sb[:, 2]) - np.maximum(sa[:, 0], sb[:, 0]) + 1)
    ih = np.maximum(0, np.minimum(sa[:, 3], sb[:, 3]) - np.maximum(sa[:, 1], sb[:, 1]) + 1)
    overlap = float((iw * ih).sum())
    return overlap / (vol(a) + vol(b) - overlap)


def voc_ap(rec: np.ndarray, prec: np.ndarray) -> float:
    """VOC area under the precision envelope (VidVRD-helper ``voc_ap``, non-07 variant)."""
    mrec = np.concatenate(([0.0], rec, [1.0]))
    mpre = np.concatenate(([0.0], prec, [0.0]))
    mpre = np.maximum.accumulate(mpre[::-1])[::-1]
    i = np.nonzero(mrec[1:] != mrec[:-1])[0]
    return float(np.sum((mrec[i + 1] - mrec[i]) * mpre[i + 1]))


def _sorted_by_score(relations: Sequence[dict]) -> list[dict]:
    # Python's sorted(..., reverse=True) keeps tied items in input order, as the reference does
    return sorted(relations, key=lambda r: r["score"], reverse=True)


def vidvrd_detection(gt: Sequence[dict], pred: Sequence[dict], viou_threshold: float = 0.5
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Greedy detection matching of one video: predictions in score order each take the unmatched GT
    with the same triplet and the largest min(vIoU_sub, vIoU_obj) >= threshold (first on ties).
    Returns (precision, recall, hit scores: the score for a hit, -inf for a miss) in score order."""
    pred = _sorted_by_score(pred)
    hit_scores = np.full(len(pred), -np.inf)
    detected = np.zeros(len(gt), dtype=bool)
    by_triplet: dict[tuple, list[int]] = {}
    for g, r in enumerate(gt):
        by_triplet.setdefault(tuple(r["triplet"]), []).append(g)
    for i, r in enumerate(pred):
        best, best_g = -np.inf, -1
        for g in by_triplet.get(tuple(r["triplet"]), ()):
            if detected[g]:
                continue
            ov = min(viou(r["sub_traj"], r["duration"], gt[g]["sub_traj"], gt[g]["duration"]),
                     viou(r["obj_traj"], r["duration"], gt[g]["obj_traj"], gt[g]["duration"]))
            if ov >= viou_threshold and ov > best:
                best, best_g = ov, g
        if best_g >= 0:
            hit_scores[i] = r["score"]
            detected[best_g] = True
    tp = np.isfinite(hit_scores)
    cum_tp = np.cumsum(tp).astype(np.float32)
    cum_fp = np.cumsum(~tp).astype(np.float32)
    eps = np.finfo(np.float32).eps
    return cum_tp / np.maximum(cum_tp + cum_fp, eps), cum_tp / np.maximum(len(gt), eps), hit_scores


def vidvrd_tagging_precision(gt: Sequence[dict], pred: Sequence[dict]) -> np.ndarray:
    """Tagging precision curve of one video: distinct predicted triplets in score order, a hit when the
    triplet occurs in the GT (trajectories ignored)."""
    gt_triplets = {tuple(r["triplet"]) for r in gt}
    seen: dict[tuple, None] = {}
    for r in _sorted_by_score(pred):
        seen.setdefault(tuple(r["triplet"]), None)
    tp = np.array([t in gt_triplets for t in seen], dtype=bool)
    cum_tp = np.cumsum(tp).astype(np.float32)
    cum_fp = np.cumsum(~tp).astype(np.float32)
    return cum_tp / np.maximum(cum_tp + cum_fp, np.finfo(np.float32).eps)


@dataclass
class VidVRDResult:
    mean_ap: float
    recall: dict[int, float]
    tagging_precision: dict[int, float]
    video_ap: dict[str, float]


def evaluate_vidvrd(groundtruth: dict[str, Sequence[dict]], prediction: dict[str, Sequence[dict]],
                    viou_threshold: float = 0.5, det_nreturns: Sequence[int] = (50, 100),
                    tag_nreturns: Sequence[int] = (1, 5, 10)) -> VidVRDResult:
    """VidVRD relation detection and tagging (VidVRD-helper ``evaluate``).

    Relations: ``{"triplet": [s, p, o], "score": x, "duration": [start, end), "sub_traj": [[box], ...],
    "obj_traj": [...]}``. mAP = mean over videos with GT of VOC AP; R@N = hits among each video's top N
    pooled over videos / all GT relations; tagging P@N = mean over videos of the precision at
    min(N, number of distinct predicted triplets) (0 when nothing is predicted)."""
    video_ap: dict[str, float] = {}
    hits_at = {n: 0 for n in det_nreturns}
    prec_at: dict[int, list[float]] = {n: [] for n in tag_nreturns}
    n_gt = 0
    for vid, gt in groundtruth.items():
        if not gt:
            continue
        n_gt += len(gt)
        pred = prediction.get(vid, [])
        prec, rec, scores = vidvrd_detection(gt, pred, viou_threshold)
        video_ap[vid] = voc_ap(rec, prec)
        tp = np.isfinite(scores)
        for n in det_nreturns:
            hits_at[n] += int(tp[:n].sum())
        tag = vidvrd_tagging_precision(gt, pred)
        for n in tag_nreturns:
            cut = min(n, tag.size)
            prec_at[n].append(float(tag[cut - 1]) if cut > 0 else 0.0)
    eps = float(np.finfo(np.float32).eps)
    return VidVRDResult(
        mean_ap=float(np.mean(list(video_ap.values()))) if video_ap else float("nan"),
        recall={n: float(np.float32(hits_at[n]) / max(n_gt, eps)) for n in det_nreturns},
        tagging_precision={n: float(np.mean(v)) if v else float("nan") for n, v in prec_at.items()},
        video_ap=video_ap,
    )


# ----------------------------------------------------------------------------------------------
# PVSG (OpenPVSG)


def mask_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per-frame IoU of two (T, H, W) boolean mask stacks (0 where both are empty)."""
    a = np.asarray(a, dtype=bool)
    b = np.asarray(b, dtype=bool)
    axes = tuple(range(1, a.ndim))
    inter = np.logical_and(a, b).sum(axis=axes)
    union = np.logical_or(a, b).sum(axis=axes)
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)


def pvsg_viou(gt_span: np.ndarray, gt_present: np.ndarray, pred_span: np.ndarray, sub_iou: np.ndarray,
              obj_iou: np.ndarray, mask_threshold: float = 0.5) -> tuple[float, float]:
    """Temporal vIoU of one predicted relation against one GT relation (OpenPVSG ``calculate_viou``).

    Per frame (arrays of the video's length T): ``gt_span`` the GT relation's frames (its [start, end]
    ranges, inclusive), ``gt_present`` both GT masks non-empty, ``pred_span`` the predicted relation span,
    ``sub_iou``/``obj_iou`` the mask IoU of the predicted subject/object tube (0 where it has no mask).
    GT frames = span & present; hit frames = GT-span frames with both mask IoU >= 0.5.
    vIoU = |hit & pred_span| / |GT frames| (hits lie inside the GT frames, so the union is the GT);
    the reference's ``iou_weak`` drops the pred-span condition: |hit| / |GT frames|."""
    gt_real = np.asarray(gt_span, bool) & np.asarray(gt_present, bool)
    hit = np.asarray(gt_span, bool) & (np.asarray(sub_iou) >= mask_threshold) & (np.asarray(obj_iou) >= mask_threshold)
    real = hit & np.asarray(pred_span, bool)

    def iou(x: np.ndarray) -> float:
        inter = float((x & gt_real).sum())
        union = float(x.sum() + gt_real.sum() - inter)
        return inter / union if union > 0 else 0.0

    return iou(real), iou(hit)


@dataclass
class PVSGResult:
    ks: tuple[int, ...]
    recall: dict[int, float]
    mean_recall: dict[int, float]
    weak_recall: dict[int, float]
    weak_mean_recall: dict[int, float]
    soft_recall: dict[int, float]
    soft_mean_recall: dict[int, float]
    soft_weak_recall: dict[int, float]
    soft_weak_mean_recall: dict[int, float]


def pvsg_counts(gt_keys: np.ndarray, pred_keys: np.ndarray, viou_matrix: np.ndarray, ks: Sequence[int],
                n_predicates: int, strong: float = 0.5, weak: float = 0.1) -> dict[str, np.ndarray]:
    """Per-predicate hit sums of one video (OpenPVSG's evaluation loop).

    ``gt_keys`` (G, 3) and ``pred_keys`` (N, 3) are (subject class, object class, predicate), predictions
    in rank order; ``viou_matrix`` (G, N) the vIoU of each pair (only same-key pairs are read). For each
    GT, predictions are scanned in rank order up to the first one with vIoU >= 0.5 (the hit: counted
    for every K above its rank; soft adds its vIoU). Each same-key prediction on the way with
    vIoU >= 0.1 adds a weak hit (soft weak adds its vIoU) -- like the reference, a GT can collect several
    weak hits, so weak recall is not capped at 1."""
    ks = tuple(ks)
    out: dict[str, np.ndarray] = {name: np.zeros((len(ks), n_predicates))
                                  for name in ("hit", "weak", "soft", "soft_weak")}
    out["total"] = np.bincount(np.asarray(gt_keys, dtype=np.int64).reshape(-1, 3)[:, 2], minlength=n_predicates)
    if len(gt_keys) == 0 or len(pred_keys) == 0:
        return out
    gk = np.asarray(gt_keys, dtype=np.int64)
    pk = np.asarray(pred_keys, dtype=np.int64)
    same = np.all(gk[:, None, :] == pk[None, :, :], axis=2)
    v = np.where(same, np.asarray(viou_matrix, dtype=float), -1.0)
    strong_hit = v >= strong
    n = pk.shape[0]
    first = np.where(strong_hit.any(1), strong_hit.argmax(1), n)  # rank of the hit (n: none)
    rank = np.arange(n)
    scanned = rank[None, :] <= first[:, None]
    weak_hit = (v >= weak) & scanned
    kk = np.asarray(ks)[:, None, None]
    below = rank[None, None, :] < kk  # (K, 1, N)
    pred_of_gt = gk[:, 2]
    for name, w in (("weak", weak_hit * 1.0), ("soft_weak", np.where(weak_hit, v, 0.0))):
        per_gt = (w[None] * below).sum(2)  # (K, G)
        for j in range(len(ks)):
            out[name][j] = np.bincount(pred_of_gt, weights=per_gt[j], minlength=n_predicates)
    has = first < n
    first_v = np.where(has, v[np.arange(len(gk)), np.minimum(first, n - 1)], 0.0)
    for j, k in enumerate(ks):
        got = has & (first < k)
        out["hit"][j] = np.bincount(pred_of_gt, weights=got * 1.0, minlength=n_predicates)
        out["soft"][j] = np.bincount(pred_of_gt, weights=np.where(got, first_v, 0.0), minlength=n_predicates)
    return out


def evaluate_pvsg(videos: Sequence[dict[str, np.ndarray]], ks: Sequence[int] = (20, 50, 100),
                  n_predicates: int = 57) -> PVSGResult:
    """R@K (micro: pooled hits / pooled GT) and mR@K (mean over predicates that have GT) with the weak
    and soft variants (OpenPVSG ``calculate_final_metrics``). ``videos`` are :func:`pvsg_counts` outputs."""
    ks = tuple(ks)
    # Any: each value is the int 0 when ``videos`` is empty (micro/macro then never index it)
    tot: dict[str, Any] = {name: sum(v[name] for v in videos) for name in ("hit", "weak", "soft", "soft_weak")}
    total = cast(np.ndarray, sum(v["total"] for v in videos)).astype(float) if videos else np.zeros(n_predicates)
    valid = total > 0
    all_gt = total.sum()

    def micro(x: np.ndarray) -> dict[int, float]:
        return {k: float(x[j].sum() / all_gt) if all_gt else 0.0 for j, k in enumerate(ks)}

    def macro(x: np.ndarray) -> dict[int, float]:
        return {k: float((x[j][valid] / total[valid]).mean()) if valid.any() else 0.0 for j, k in enumerate(ks)}

    return PVSGResult(ks, micro(tot["hit"]), macro(tot["hit"]), micro(tot["weak"]), macro(tot["weak"]),
                      micro(tot["soft"]), macro(tot["soft"]), micro(tot["soft_weak"]), macro(tot["soft_weak"]))
