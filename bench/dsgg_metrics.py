"""Speed of the vectorised Action Genome evaluator against a per-frame Python loop.

The baseline (``loop_evaluate``, below) mirrors STTran's ``evaluate_from_dict`` / ``evaluate_recall`` /
``_compute_pred_matches`` frame by frame (with TEMPURA's per-predicate hit counting), written from the
protocol description, and structured like it (one video per call, per-frame masks over the video's
pairs, ``intersect_2d``, ``reduce(np.union1d, ...)``). Both score the same synthetic Action Genome-sized
test set (default: 1,700 videos, 50k frames, 1-19 subject-object pairs per frame, mean 10 = ~780 scored
(row, predicate) entries per frame); the script checks R@K / mR@K agree and prints the speed ratio in
CPU seconds (and wall seconds, which on a shared machine mostly measure the neighbours).

    OMP_NUM_THREADS=1 python bench/dsgg_metrics.py                 # full size (~15 min: the loop)
    OMP_NUM_THREADS=1 python bench/dsgg_metrics.py --frames 5000   # quicker
"""

from __future__ import annotations

import argparse
import time
from functools import reduce

import numpy as np

from harness.tasks.dsgg.metrics import (
    ATTENTION,
    CONTACTING,
    K_VALUES,
    N_PREDICATES,
    SPATIAL,
    AGGroundTruth,
    AGPrediction,
    evaluate_ag,
)


def synthetic(n_frames: int, pairs_per_frame: int, n_videos: int, seed: int = 0, vary: bool = True
              ) -> tuple[AGGroundTruth, AGPrediction, np.ndarray]:
    """Frames with one person and P objects (P uniform in 1..2*pairs_per_frame-1 with ``vary``, so frames
    with fewer than 4 pairs take the zero-padded no-constraint path), GT relations on up to 4 of them,
    predictions with jittered boxes, mostly right labels (SGDet-like) and random distributions."""
    rng = np.random.default_rng(seed)
    n_pairs = (rng.integers(1, 2 * pairs_per_frame, size=n_frames) if vary
               else np.full(n_frames, pairs_per_frame))
    n_obj = n_pairs + 1
    first = np.r_[0, np.cumsum(n_obj)[:-1]]  # index of each frame's person box
    total = int(n_obj.sum())
    base = rng.uniform(0, 400, size=(total, 2))
    boxes = np.concatenate([base, base + rng.uniform(20, 200, size=(total, 2))], axis=1)
    classes = rng.integers(2, 37, size=total)
    classes[first] = 1
    fr, sub, prd, obj, sb, ob = [], [], [], [], [], []
    for f in range(n_frames):
        person = first[f]
        for o in range(1, 1 + min(int(rng.integers(1, 5)), int(n_pairs[f]))):
            k = person + o
            rels = [(person, k, ATTENTION[0] + rng.integers(0, 3))]
            rels += [(k, person, SPATIAL[0] + s) for s in rng.choice(6, rng.integers(1, 3), replace=False)]
            rels += [(person, k, CONTACTING[0] + c) for c in rng.choice(17, rng.integers(1, 3), replace=False)]
            for s, t, p in rels:
                fr.append(f), sub.append(classes[s]), prd.append(p), obj.append(classes[t])
                sb.append(boxes[s]), ob.append(boxes[t])
    gt = AGGroundTruth(np.array(fr), np.array(sub), np.array(prd), np.array(obj), np.array(sb), np.array(ob),
                       n_frames)
    pboxes = boxes + rng.normal(0, 12, size=boxes.shape)
    plabels = np.where(rng.random(total) < 0.8, classes, rng.integers(2, 37, total))
    plabels[first] = 1
    oscores = rng.uniform(0.3, 1.0, size=total)
    pair_frame = np.repeat(np.arange(n_frames), n_pairs)
    within = np.arange(int(n_pairs.sum())) - np.repeat(np.r_[0, np.cumsum(n_pairs)[:-1]], n_pairs)
    pair_idx = np.stack([first[pair_frame], first[pair_frame] + 1 + within], 1)
    n = pair_idx.shape[0]
    att = rng.dirichlet(np.ones(3), size=n)
    spa = rng.uniform(0, 1, size=(n, 6)) ** 3
    con = rng.uniform(0, 1, size=(n, 17)) ** 3
    pred = AGPrediction(pboxes, plabels, oscores, pair_idx, pair_frame, att, spa, con)
    video = np.sort(rng.integers(0, n_videos, n_frames))
    return gt, pred, video


# ------------------------------------------------------------------------------------------------
# the baseline: per-frame Python loop mirroring the reference evaluator


def _bbox_overlaps(boxes: np.ndarray, query: np.ndarray) -> np.ndarray:
    """(N, K) IoU with the +1 convention (what STTran's Cython ``bbox_overlaps`` computes)."""
    iw = np.minimum(boxes[:, None, 2], query[None, :, 2]) - np.maximum(boxes[:, None, 0], query[None, :, 0]) + 1
    ih = np.minimum(boxes[:, None, 3], query[None, :, 3]) - np.maximum(boxes[:, None, 1], query[None, :, 1]) + 1
    inter = np.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    area_b = (boxes[:, 2] - boxes[:, 0] + 1) * (boxes[:, 3] - boxes[:, 1] + 1)
    area_q = (query[:, 2] - query[:, 0] + 1) * (query[:, 3] - query[:, 1] + 1)
    return inter / (area_b[:, None] + area_q[None, :] - inter)


def loop_evaluate(gt: AGGroundTruth, pred: AGPrediction, constraint: str = "with", iou_threshold: float = 0.5,
                  semi_threshold: float = 0.9, ks: tuple[int, ...] = K_VALUES, video: np.ndarray | None = None
                  ) -> tuple[dict, dict]:
    """STTran's evaluator structure: per video, per frame select that frame's pairs with a mask over the
    video's pairs (``pred['im_idx'] == idx``), build the 3P x 26 score rows, pick triplets under the
    constraint, sort by score (``argsort()[::-1]``), match with ``intersect_2d`` + per-GT box overlaps,
    then per K ``reduce(np.union1d, pred_to_gt[:k])`` and TEMPURA's per-predicate hit/count update."""
    recall = {k: [] for k in ks}
    hit = {k: np.zeros(N_PREDICATES) for k in ks}
    count = {k: np.zeros(N_PREDICATES) for k in ks}
    video = np.zeros(gt.n_frames, dtype=np.int64) if video is None else video
    gt_order = np.argsort(gt.frame, kind="stable")
    gt_bounds = np.searchsorted(gt.frame[gt_order], np.arange(gt.n_frames + 1))
    pair_order = np.argsort(pred.pair_frame, kind="stable")
    pf_sorted = pred.pair_frame[pair_order]
    v_bounds = np.searchsorted(video, np.arange(int(video.max()) + 2))
    for v in range(len(v_bounds) - 1):
        f0, f1 = v_bounds[v], v_bounds[v + 1]
        if f0 == f1:
            continue
        lo, hi = np.searchsorted(pf_sorted, [f0, f1])
        vp = pair_order[lo:hi]  # the video's pairs (STTran evaluates one video per call)
        im_idx = pred.pair_frame[vp] - f0
        for idx in range(f1 - f0):
            gi = gt_order[gt_bounds[f0 + idx]:gt_bounds[f0 + idx + 1]]
            if gi.size == 0:
                continue
            pairs = pred.pair_idx[vp][im_idx == idx]
            n = pairs.shape[0]
            rels = np.concatenate((pairs, pairs[:, ::-1], pairs), axis=0)
            s1 = np.concatenate((pred.attention[vp][im_idx == idx], np.zeros((n, 6)), np.zeros((n, 17))), axis=1)
            s2 = np.concatenate((np.zeros((n, 3)), pred.spatial[vp][im_idx == idx], np.zeros((n, 17))), axis=1)
            s3 = np.concatenate((np.zeros((n, 3)), np.zeros((n, 6)), pred.contacting[vp][im_idx == idx]), axis=1)
            scores = np.concatenate((s1, s2, s3), axis=0)
            if constraint == "semi":
                pr, ps = [], []
                for i, j in enumerate(rels):
                    if scores[i, 0] + scores[i, 1] > 0:
                        pr.append(np.append(j, scores[i].argmax())), ps.append(scores[i].max())
                    elif scores[i, 3] + scores[i, 4] > 0 or scores[i, 9] + scores[i, 10] > 0:
                        for k in np.where(scores[i] > semi_threshold)[0]:
                            pr.append(np.append(j, k)), ps.append(scores[i, k])
                pred_rels, pred_scores = np.array(pr, dtype=np.int64).reshape(-1, 3), np.array(ps)
            elif constraint == "no":
                overall = pred.obj_scores[rels].prod(1)[:, None] * scores
                flat = np.argsort(-overall.ravel(), kind="stable")[:100]
                r, c = np.unravel_index(flat, overall.shape)
                pred_rels = np.column_stack((rels[r], c))
                pred_scores = scores[r, c]
            else:
                pred_rels = np.column_stack((rels, scores.argmax(1)))
                pred_scores = scores.max(1)
            pred_to_gt: list[list[int]] = [[]]
            if pred_rels.size:
                total = np.column_stack((pred.obj_scores[pred_rels[:, 0]], pred.obj_scores[pred_rels[:, 1]],
                                         pred_scores)).prod(1)
                order = np.argsort(total, kind="stable")[::-1]
                pred_rels = pred_rels[order]
                gt_trip = np.column_stack((gt.sub_cls[gi], gt.pred[gi], gt.obj_cls[gi]))
                p_trip = np.column_stack((pred.labels[pred_rels[:, 0]], pred_rels[:, 2],
                                          pred.labels[pred_rels[:, 1]]))
                keeps = (gt_trip[..., None] == p_trip.T[None, ...]).all(1)  # intersect_2d
                pred_to_gt = [[] for _ in range(len(pred_rels))]
                for g in np.where(keeps.any(1))[0]:
                    kept = np.where(keeps[g])[0]
                    sub_iou = _bbox_overlaps(gt.sub_box[gi[g]][None], pred.boxes[pred_rels[kept, 0]])[0]
                    obj_iou = _bbox_overlaps(gt.obj_box[gi[g]][None], pred.boxes[pred_rels[kept, 1]])[0]
                    for i in kept[(sub_iou >= iou_threshold) & (obj_iou >= iou_threshold)]:
                        pred_to_gt[i].append(int(g))
            gt_pred = gt.pred[gi]
            for k in ks:
                match = reduce(np.union1d, pred_to_gt[:k])
                recall[k].append(float(len(match)) / float(gi.size))
                for p in np.unique(gt_pred):
                    of_class = np.where(gt_pred == p)[0]
                    hit[k][p] += len([i for i in match if i in of_class])
                    count[k][p] += len(of_class)
    r = {k: float(np.mean(v)) for k, v in recall.items()}
    mr = {k: float(np.mean(hit[k] / (count[k] + 1e-10))) for k in ks}
    return r, mr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=50_000)
    ap.add_argument("--videos", type=int, default=1_700)
    ap.add_argument("--pairs", type=int, default=10, help="subject-object pairs per frame")
    args = ap.parse_args()
    gt, pred, video = synthetic(args.frames, args.pairs, args.videos)
    print(f"{args.frames} frames, {args.videos} videos, {len(pred.pair_frame)} pairs, "
          f"{len(pred.pair_frame) * 3 * N_PREDICATES / args.frames:.0f} scored entries/frame, {len(gt.frame)} GT")
    # CPU seconds of this (single-threaded) process: on a shared machine wall time mostly measures the
    # neighbours; both are printed
    for constraint in ("with", "no", "semi"):
        w0, c0 = time.perf_counter(), time.process_time()
        vec = evaluate_ag(gt, pred, constraint)
        w_vec, t_vec = time.perf_counter() - w0, time.process_time() - c0
        w0, c0 = time.perf_counter(), time.process_time()
        loop_r, loop_mr = loop_evaluate(gt, pred, constraint, video=video)
        w_loop, t_loop = time.perf_counter() - w0, time.process_time() - c0
        same = all(abs(vec.recall[k] - loop_r[k]) < 1e-12 and abs(vec.mean_recall[k] - loop_mr[k]) < 1e-12
                   for k in K_VALUES)
        print(f"{constraint:>5} constraint: vectorised {t_vec:7.2f} CPU s ({w_vec:.2f} wall)  per-frame loop "
              f"{t_loop:7.2f} CPU s ({w_loop:.2f} wall)  ratio {t_loop / t_vec:5.1f}x CPU, {w_loop / w_vec:5.1f}x wall "
              f"(baseline: per-frame loop)  same results: {same}  R@20={vec.recall[20]:.4f} "
              f"mR@20={vec.mean_recall[20]:.4f}")
        if not same:
            print("   vectorised", vec.recall, vec.mean_recall, "\n   loop", loop_r, loop_mr)


if __name__ == "__main__":
    main()
