"""Speed of the vectorised Action Genome evaluator against a per-frame Python loop.

The baseline (``loop_evaluate``, below) mirrors STTran's ``evaluate_from_dict`` / ``evaluate_recall`` /
``_compute_pred_matches`` frame by frame (with TEMPURA's per-predicate hit counting), written from the
protocol description. Both score the same synthetic Action Genome-sized test set (default: 1,700 videos,
50k frames, 10 subject-object pairs per frame = 780 scored (row, predicate) entries per frame); the
script checks R@K / mR@K agree and prints the speed ratio.

    python bench/dsgg_metrics.py                 # full size (a few minutes for the loop)
    python bench/dsgg_metrics.py --frames 5000   # quicker
"""

from __future__ import annotations

import argparse
import time

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


def synthetic(n_frames: int, pairs_per_frame: int, n_videos: int, seed: int = 0
              ) -> tuple[AGGroundTruth, AGPrediction, np.ndarray]:
    """Frames with one person and ``pairs_per_frame`` objects; GT relations on a few pairs, predictions
    with jittered boxes, random labels (SGDet-like) and random distributions."""
    rng = np.random.default_rng(seed)
    n_obj = pairs_per_frame + 1
    base = rng.uniform(0, 400, size=(n_frames, n_obj, 2))
    size = rng.uniform(20, 200, size=(n_frames, n_obj, 2))
    boxes = np.concatenate([base, base + size], axis=2)  # GT boxes (F, n_obj, 4)
    classes = rng.integers(2, 37, size=(n_frames, n_obj))
    classes[:, 0] = 1
    # GT: 1-4 related objects per frame, each with attention + 1-2 spatial + 1-2 contacting
    fr, sub, prd, obj, sb, ob = [], [], [], [], [], []
    for f in range(n_frames):
        for o in range(1, 1 + int(rng.integers(1, 5))):
            rels = [(0, o, ATTENTION[0] + rng.integers(0, 3))]
            rels += [(o, 0, SPATIAL[0] + s) for s in rng.choice(6, rng.integers(1, 3), replace=False)]
            rels += [(0, o, CONTACTING[0] + c) for c in rng.choice(17, rng.integers(1, 3), replace=False)]
            for s, t, p in rels:
                fr.append(f), sub.append(classes[f, s]), prd.append(p), obj.append(classes[f, t])
                sb.append(boxes[f, s]), ob.append(boxes[f, t])
    gt = AGGroundTruth(np.array(fr), np.array(sub), np.array(prd), np.array(obj), np.array(sb), np.array(ob),
                       n_frames)
    jitter = rng.normal(0, 12, size=boxes.shape)
    pboxes = (boxes + jitter).reshape(-1, 4)
    plabels = np.where(rng.random(classes.shape) < 0.8, classes, rng.integers(2, 37, classes.shape)).reshape(-1)
    plabels.reshape(n_frames, n_obj)[:, 0] = 1
    oscores = rng.uniform(0.3, 1.0, size=n_frames * n_obj)
    person = np.arange(n_frames) * n_obj
    pair_idx = np.stack([np.repeat(person, pairs_per_frame),
                         (person[:, None] + np.arange(1, n_obj)[None]).reshape(-1)], 1)
    pair_frame = np.repeat(np.arange(n_frames), pairs_per_frame)
    n_pairs = pair_idx.shape[0]
    att = rng.dirichlet(np.ones(3), size=n_pairs)
    spa = rng.uniform(0, 1, size=(n_pairs, 6)) ** 3
    con = rng.uniform(0, 1, size=(n_pairs, 17)) ** 3
    pred = AGPrediction(pboxes, plabels, oscores, pair_idx, pair_frame, att, spa, con)
    video = np.sort(rng.integers(0, n_videos, n_frames))
    return gt, pred, video


# ------------------------------------------------------------------------------------------------
# the baseline: per-frame Python loop mirroring the reference evaluator


def _iou_one_to_many(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    out = np.zeros(len(boxes))
    area = (box[2] - box[0] + 1) * (box[3] - box[1] + 1)
    for n, b in enumerate(boxes):
        iw = min(b[2], box[2]) - max(b[0], box[0]) + 1
        if iw > 0:
            ih = min(b[3], box[3]) - max(b[1], box[1]) + 1
            if ih > 0:
                ua = (b[2] - b[0] + 1) * (b[3] - b[1] + 1) + area - iw * ih
                out[n] = iw * ih / ua
    return out


def loop_evaluate(gt: AGGroundTruth, pred: AGPrediction, constraint: str = "with", iou_threshold: float = 0.5,
                  semi_threshold: float = 0.9, ks: tuple[int, ...] = K_VALUES) -> tuple[dict, dict]:
    recall = {k: [] for k in ks}
    hit = {k: np.zeros(N_PREDICATES) for k in ks}
    count = {k: np.zeros(N_PREDICATES) for k in ks}
    gt_by_frame: dict[int, list[int]] = {}
    for i, f in enumerate(gt.frame.tolist()):
        gt_by_frame.setdefault(f, []).append(i)
    pairs_by_frame: dict[int, list[int]] = {}
    for i, f in enumerate(pred.pair_frame.tolist()):
        pairs_by_frame.setdefault(f, []).append(i)
    for f in range(gt.n_frames):
        gi = gt_by_frame.get(f)
        if not gi:
            continue
        pi = pairs_by_frame.get(f, [])
        pairs = pred.pair_idx[pi]
        rels = np.concatenate([pairs, pairs[:, ::-1], pairs], 0)
        n = len(pi)
        scores = np.zeros((3 * n, N_PREDICATES))
        scores[:n, ATTENTION[0]:ATTENTION[1]] = pred.attention[pi]
        scores[n:2 * n, SPATIAL[0]:SPATIAL[1]] = pred.spatial[pi]
        scores[2 * n:, CONTACTING[0]:CONTACTING[1]] = pred.contacting[pi]
        if constraint == "semi":
            pr, ps = [], []
            for i, j in enumerate(rels):
                if scores[i, 0] + scores[i, 1] > 0:
                    pr.append([*j, scores[i].argmax()]), ps.append(scores[i].max())
                elif scores[i, 3] + scores[i, 4] > 0 or scores[i, 9] + scores[i, 10] > 0:
                    for k in np.where(scores[i] > semi_threshold)[0]:
                        pr.append([*j, k]), ps.append(scores[i, k])
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
        total = pred.obj_scores[pred_rels[:, 0]] * pred.obj_scores[pred_rels[:, 1]] * pred_scores \
            if len(pred_rels) else np.zeros(0)
        order = np.argsort(total, kind="stable")[::-1]
        pred_rels = pred_rels[order]
        matched: set[int] = set()
        gt_trip = np.column_stack((gt.sub_cls[gi], gt.pred[gi], gt.obj_cls[gi]))
        p_trip = np.column_stack((pred.labels[pred_rels[:, 0]], pred_rels[:, 2], pred.labels[pred_rels[:, 1]])) \
            if len(pred_rels) else np.zeros((0, 3), dtype=np.int64)
        first: dict[int, int] = {}
        for local, g in enumerate(gi):
            keep = np.where((p_trip == gt_trip[local]).all(1))[0]
            if keep.size == 0:
                continue
            si = _iou_one_to_many(gt.sub_box[g], pred.boxes[pred_rels[keep, 0]])
            oi = _iou_one_to_many(gt.obj_box[g], pred.boxes[pred_rels[keep, 1]])
            ok = keep[(si >= iou_threshold) & (oi >= iou_threshold)]
            if ok.size:
                first[local] = int(ok.min())
        for k in ks:
            matched = {g for g, r in first.items() if r < k}
            recall[k].append(len(matched) / len(gi))
            for local, g in enumerate(gi):
                count[k][gt.pred[g]] += 1
                if local in matched:
                    hit[k][gt.pred[g]] += 1
    r = {k: float(np.mean(v)) for k, v in recall.items()}
    mr = {k: float(np.mean(hit[k] / (count[k] + 1e-10))) for k in ks}
    return r, mr


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--frames", type=int, default=50_000)
    ap.add_argument("--videos", type=int, default=1_700)
    ap.add_argument("--pairs", type=int, default=10, help="subject-object pairs per frame")
    ap.add_argument("--loop-frames", type=int, default=0,
                    help="time the loop on this many frames and extrapolate (0 = all frames)")
    args = ap.parse_args()
    gt, pred, _ = synthetic(args.frames, args.pairs, args.videos)
    print(f"{args.frames} frames, {args.videos} videos, {len(pred.pair_frame)} pairs, "
          f"{len(pred.pair_frame) * 3 * N_PREDICATES / args.frames:.0f} scored entries/frame, {len(gt.frame)} GT")
    for constraint in ("with", "no", "semi"):
        t0 = time.perf_counter()
        vec = evaluate_ag(gt, pred, constraint)
        t_vec = time.perf_counter() - t0
        t0 = time.perf_counter()
        loop_r, loop_mr = loop_evaluate(gt, pred, constraint)
        t_loop = time.perf_counter() - t0
        same = all(abs(vec.recall[k] - loop_r[k]) < 1e-12 and abs(vec.mean_recall[k] - loop_mr[k]) < 1e-12
                   for k in K_VALUES)
        print(f"{constraint:>5} constraint: vectorised {t_vec:7.2f}s  per-frame loop {t_loop:7.2f}s  "
              f"ratio {t_loop / t_vec:5.1f}x (baseline: per-frame loop)  same results: {same}  "
              f"R@20={vec.recall[20]:.4f} mR@20={vec.mean_recall[20]:.4f}")
        if not same:
            print("   vectorised", vec.recall, vec.mean_recall, "\n   loop", loop_r, loop_mr)


if __name__ == "__main__":
    main()
