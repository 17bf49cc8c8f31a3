"""TAPVid-3D track metrics for one video, used as the 3DSPA reconstruction score.

Follows the TAPVid-3D evaluation (tapnet/tapvid3d/evaluation/metrics.py), reimplemented:
- evaluation points are the frames *after* each track's query frame (query mode "first");
- a prediction is within threshold d (pixels) when its 3D distance to the ground truth is below
  ``d * z_gt / sqrt(fx * fy)`` (the pixel threshold back-projected at the ground-truth depth), or
  below the fixed metric thresholds {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56} m on request;
- jaccard_d = TP / (gt visible + FP) with TP = within & both visible, FP = predicted visible where
  the point is occluded or not within; average_jaccard is the mean over d in {1, 2, 4, 8, 16};
- occlusion_accuracy = agreement of predicted and true visibility.
No depth rescaling is applied: the autoencoder reconstructs in the input's own coordinates (the
TAPVid-3D "median" / "reproduce_2d" scalings exist for trackers whose depth scale is unknown).
Counts are pooled over all evaluation points of the video (TAPVid computes them per video too).
"""

from __future__ import annotations

import numpy as np

THRESHOLDS_PX = (1, 2, 4, 8, 16)
FIXED_METRIC_THRESH = {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56}


def evaluation_mask(query_frames: np.ndarray, num_frames: int) -> np.ndarray:
    """[N, T] True on frames strictly after each track's query frame."""
    return np.arange(num_frames)[None, :] > np.asarray(query_frames)[:, None]


def first_visible_frames(visible: np.ndarray) -> np.ndarray:
    """Index of each track's first visible frame (0 for never-visible tracks)."""
    return np.argmax(np.asarray(visible, dtype=bool), axis=1)


def tapvid3d_metrics(
    gt_tracks: np.ndarray,
    gt_visible: np.ndarray,
    pred_tracks: np.ndarray,
    pred_visible: np.ndarray,
    query_frames: np.ndarray,
    intrinsics: np.ndarray | None = None,
    fixed_metric: bool = False,
) -> dict[str, float]:
    """Metrics over [N, T, 3] tracks and [N, T] visibility; keys as TAPVid-3D plus ``error``.

    ``error`` is the plain mean 3D distance over visible evaluation points (input units) and
    ``error_rel`` the same divided by the RMS spread of the visible ground truth (scale-free)."""
    gt_tracks = np.asarray(gt_tracks, dtype=np.float64)
    pred_tracks = np.asarray(pred_tracks, dtype=np.float64)
    gt_vis = np.asarray(gt_visible, dtype=bool)
    pred_vis = np.asarray(pred_visible, dtype=bool)
    n, t = gt_vis.shape
    evaluate = evaluation_mask(query_frames, t)
    sq_dist = np.sum(np.square(pred_tracks - gt_tracks), axis=-1)
    if not fixed_metric:
        if intrinsics is None:
            raise ValueError("depth-adaptive thresholds need intrinsics [fx, fy, cx, cy]")
        focal = float(np.sqrt(intrinsics[0] * intrinsics[1]))
        multiplier = gt_tracks[..., 2] / focal
    out: dict[str, float] = {}
    visible_eval = gt_vis & evaluate
    n_visible = int(visible_eval.sum())
    out["occlusion_accuracy"] = float(np.sum((pred_vis == gt_vis) & evaluate) / max(int(evaluate.sum()), 1))
    jaccards, withins = [], []
    for px in THRESHOLDS_PX:
        thresh = FIXED_METRIC_THRESH[px] if fixed_metric else px * multiplier
        within = sq_dist < np.square(thresh)
        true_pos = int(np.sum(within & pred_vis & visible_eval))
        false_pos = int(np.sum(((~gt_vis) | (~within)) & pred_vis & evaluate))
        frac_within = int(np.sum(within & visible_eval)) / max(n_visible, 1)
        jaccard = true_pos / max(n_visible + false_pos, 1)
        out[f"pts_within_{px}"] = frac_within
        out[f"jaccard_{px}"] = jaccard
        withins.append(frac_within)
        jaccards.append(jaccard)
    out["average_pts_within_thresh"] = float(np.mean(withins))
    out["average_jaccard"] = float(np.mean(jaccards))
    dist = np.sqrt(sq_dist[visible_eval])
    out["error"] = float(dist.mean()) if dist.size else float("nan")
    spread = gt_tracks[gt_vis] - gt_tracks[gt_vis].mean(axis=0)
    rms = float(np.sqrt(np.mean(np.sum(spread**2, axis=-1)))) if spread.size else 0.0
    out["error_rel"] = out["error"] / rms if rms > 0 else float("nan")
    out["num_eval_points"] = float(n_visible)
    del n
    return out
