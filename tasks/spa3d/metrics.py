"""Track metrics: the TAPVid-3D protocol exactly, and 3DSPA's query-masked variant of it.

:func:`tapvid3d_metrics` is the TAPVid-3D evaluation of one video (tapnet/tapvid3d/evaluation/
metrics.py ``compute_tapvid3d_metrics``, per video, reimplemented):
- *every* frame is evaluated (the query frame included);
- the prediction is first rescaled to the ground truth's global scale: ``median`` (default) of the
  point norms where both are visible, ``mean``, ``per_trajectory`` (depth on each track's query
  frame), ``median_on_queries``, ``reproduce_2d`` (every point to the ground-truth depth) or ``none``;
- a prediction is within threshold d (pixels) when its squared 3D distance to the ground truth is
  below ``(d * z_gt / sqrt(fx * fy))**2``, or below the fixed metric thresholds
  {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56} m on request;
- jaccard_d = TP / (gt visible + FP) with TP = within & both visible, FP = predicted visible where
  the point is occluded or not within; average_jaccard is the mean over d in {1, 2, 4, 8, 16};
- divisions by zero give NaN as in the reference: a video with no visible ground-truth point has NaN
  pts_within (and NaN Jaccard unless something is predicted visible, which makes it 0).

:func:`query_masked_metrics` is what the 3DSPA realism score uses. The reconstruction model is *given*
each query track's point on its query frame, so that frame is a copy of the input, not a prediction:
scoring it would reward every model equally and shrink the gap between realistic and unrealistic
videos. It therefore evaluates only the frames after each query frame. It applies no rescaling either:
the autoencoder reconstructs in the input's own coordinates, so a scale error is an error (TAPVid-3D
rescales because monocular trackers have an unknown depth scale). Empty denominators give 0, and it
adds a plain 3D error. Its numbers are not TAPVid-3D numbers.
"""

from __future__ import annotations

import warnings

import numpy as np

THRESHOLDS_PX = (1, 2, 4, 8, 16)
FIXED_METRIC_THRESH = {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56}
SCALINGS = ("median", "mean", "none", "reproduce_2d", "per_trajectory", "median_on_queries")


def evaluation_mask(query_frames: np.ndarray, num_frames: int) -> np.ndarray:
    """[N, T] True on frames strictly after each track's query frame."""
    return np.arange(num_frames)[None, :] > np.asarray(query_frames)[:, None]


def first_visible_frames(visible: np.ndarray) -> np.ndarray:
    """Index of each track's first visible frame (0 for never-visible tracks)."""
    return np.argmax(np.asarray(visible, dtype=bool), axis=1)


def _focal(intrinsics: np.ndarray | None) -> float:
    if intrinsics is None:
        raise ValueError("depth-adaptive thresholds need intrinsics [fx, fy, cx, cy]")
    return float(np.sqrt(intrinsics[0] * intrinsics[1]))


def _scale_factor(gt: np.ndarray, gt_vis: np.ndarray, pred: np.ndarray, pred_vis: np.ndarray, scaling: str,
                  query_frames: np.ndarray | None) -> np.ndarray | float:
    if scaling == "none":
        return 1.0
    if scaling == "reproduce_2d":
        return gt[..., -1:] / pred[..., -1:]
    if scaling in ("per_trajectory", "median_on_queries"):
        if query_frames is None:
            raise ValueError(f"scaling {scaling!r} needs each track's query frame")
        q = np.round(np.asarray(query_frames, dtype=np.float64)).astype(np.int64)[:, None]
    if scaling == "per_trajectory":
        depth = [np.maximum(np.take_along_axis(x[..., -1], q, axis=-1), 1e-12) for x in (gt, pred)]
        return (depth[0] / depth[1])[..., None]
    # the global scalings compare point norms where both prediction and ground truth are visible
    both = gt_vis & pred_vis
    gt_norms = np.where(both, np.sqrt(np.maximum(1e-12, np.sum(gt**2, axis=-1))), np.nan)
    pred_norms = np.where(both, np.sqrt(np.maximum(1e-12, np.sum(pred**2, axis=-1))), np.nan)
    if scaling == "median_on_queries":
        gt_norms, pred_norms = (np.take_along_axis(x, q, axis=-1) for x in (gt_norms, pred_norms))
    if scaling not in ("median", "mean", "median_on_queries"):
        raise ValueError(f"unknown scaling {scaling!r}; expected one of {', '.join(SCALINGS)}")
    # an all-NaN slice (nothing visible in both) gives a NaN scale, as numpy does in the reference
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        reduce = np.nanmean if scaling == "mean" else np.nanmedian
        return float(reduce(gt_norms) / reduce(pred_norms))


def tapvid3d_metrics(
    gt_tracks: np.ndarray,
    gt_visible: np.ndarray,
    pred_tracks: np.ndarray,
    pred_visible: np.ndarray,
    intrinsics: np.ndarray | None = None,
    *,
    scaling: str = "median",
    query_frames: np.ndarray | None = None,
    fixed_metric: bool = False,
) -> dict[str, float]:
    """TAPVid-3D metrics of one video from [N, T, 3] tracks and [N, T] visibility (see the module doc).

    ``query_frames`` [N] are needed only by the ``per_trajectory`` / ``median_on_queries`` scalings."""
    gt = np.asarray(gt_tracks, dtype=np.float64)
    pred = np.asarray(pred_tracks, dtype=np.float64)
    gt_vis = np.asarray(gt_visible, dtype=bool)
    pred_vis = np.asarray(pred_visible, dtype=bool)
    if scaling not in SCALINGS:
        raise ValueError(f"unknown scaling {scaling!r}; expected one of {', '.join(SCALINGS)}")
    multiplier = None if fixed_metric else gt[..., -1] / _focal(intrinsics)
    with np.errstate(all="ignore"):
        pred = pred * _scale_factor(gt, gt_vis, pred, pred_vis, scaling, query_frames)
        sq_dist = np.sum(np.square(pred - gt), axis=-1)
        out: dict[str, float] = {"occlusion_accuracy": float(np.mean(pred_vis == gt_vis)) if gt_vis.size
                                 else float("nan")}
        n_visible = float(gt_vis.sum())
        jaccards, withins = [], []
        for px in THRESHOLDS_PX:
            thresh = FIXED_METRIC_THRESH[px] if multiplier is None else px * multiplier
            within = sq_dist < np.square(thresh)
            correct = within & gt_vis
            frac = np.float64(correct.sum()) / n_visible
            false_pos = np.float64(np.sum(((~gt_vis) | (~within)) & pred_vis))
            jaccard = np.float64(np.sum(correct & pred_vis)) / (n_visible + false_pos)
            out[f"pts_within_{px}"] = float(frac)
            out[f"jaccard_{px}"] = float(jaccard)
            withins.append(frac)
            jaccards.append(jaccard)
    out["average_jaccard"] = float(np.mean(jaccards))
    out["average_pts_within_thresh"] = float(np.mean(withins))
    return out


def query_masked_metrics(
    gt_tracks: np.ndarray,
    gt_visible: np.ndarray,
    pred_tracks: np.ndarray,
    pred_visible: np.ndarray,
    query_frames: np.ndarray,
    intrinsics: np.ndarray | None = None,
    fixed_metric: bool = False,
) -> dict[str, float]:
    """3DSPA's variant (module doc): frames after each query frame only, no rescaling, pooled counts,
    TAPVid-3D key names plus ``error`` (mean 3D distance over visible evaluation points, input units),
    ``error_rel`` (that over the RMS spread of the visible ground truth) and ``num_eval_points``."""
    gt_tracks = np.asarray(gt_tracks, dtype=np.float64)
    pred_tracks = np.asarray(pred_tracks, dtype=np.float64)
    gt_vis = np.asarray(gt_visible, dtype=bool)
    pred_vis = np.asarray(pred_visible, dtype=bool)
    evaluate = evaluation_mask(query_frames, gt_vis.shape[1])
    sq_dist = np.sum(np.square(pred_tracks - gt_tracks), axis=-1)
    multiplier = None if fixed_metric else gt_tracks[..., 2] / _focal(intrinsics)
    out: dict[str, float] = {}
    visible_eval = gt_vis & evaluate
    n_visible = int(visible_eval.sum())
    out["occlusion_accuracy"] = float(np.sum((pred_vis == gt_vis) & evaluate) / max(int(evaluate.sum()), 1))
    jaccards, withins = [], []
    for px in THRESHOLDS_PX:
        thresh = FIXED_METRIC_THRESH[px] if multiplier is None else px * multiplier
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
    return out
