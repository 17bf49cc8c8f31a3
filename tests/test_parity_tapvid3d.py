"""Parity of ``tapvid3d_metrics`` with the released TAPVid-3D evaluation.

Reference: google-deepmind/tapnet at commit c2cbab81cc06092b5f05bfe2da7bfec54e2079c9,
``tapnet/tapvid3d/evaluation/metrics.py``, ``compute_tapvid3d_metrics`` and
``get_pointwise_threshold_multiplier``. ``ref_compute`` below re-implements it from reading it for one
video (``order='n t'``, per-video metrics; the ``einops`` rearrange to ``'() n t'`` is a leading axis),
for every scaling but ``local_neighborhood``. Inputs are seeded random videos with the edge cases
(nothing visible, nothing predicted visible, exact predictions, ties at a threshold, one track).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from harness.tasks.spa3d.metrics import query_masked_metrics, tapvid3d_metrics

PIXEL_TO_FIXED_METRIC_THRESH = {1: 0.01, 2: 0.04, 4: 0.16, 8: 0.64, 16: 2.56}


def ref_multiplier(gt_tracks: np.ndarray, intrinsics_params: np.ndarray) -> np.ndarray:
    mean_focal_length = np.sqrt(intrinsics_params[..., 0] * intrinsics_params[..., 1])
    return gt_tracks[..., -1] / mean_focal_length[..., np.newaxis, np.newaxis]


def ref_compute(gt_occluded, gt_tracks, pred_occluded, pred_tracks, intrinsics_params, scaling="median",
                query_points=None, use_fixed_metric_threshold=False):  # type: ignore[no-untyped-def]
    gt_occluded, pred_occluded = gt_occluded[None], pred_occluded[None]
    gt_tracks, pred_tracks = gt_tracks[None], pred_tracks[None]
    if query_points is not None:
        query_points = query_points[None]
    summing_axis = (-2, -1)
    evaluation_weights = np.ones(gt_occluded.shape)
    metrics = {}
    pred_norms = np.sqrt(np.maximum(1e-12, np.sum(np.square(pred_tracks), axis=-1)))
    gt_norms = np.sqrt(np.maximum(1e-12, np.sum(np.square(gt_tracks), axis=-1)))
    if scaling == "reproduce_2d":
        scale_factor = gt_tracks[..., -1:] / pred_tracks[..., -1:]
    elif scaling == "per_trajectory":
        query_frame = np.round(query_points[..., 0]).astype(np.int32)[..., np.newaxis]

        def do_take(x):  # type: ignore[no-untyped-def]
            took = np.take_along_axis(x, query_frame, axis=-1)
            return np.maximum(took, 1e-12)[..., np.newaxis]

        scale_factor = do_take(gt_tracks[..., -1]) / do_take(pred_tracks[..., -1])
    else:
        either_occluded = np.logical_or(gt_occluded, pred_occluded)
        nan_mat = np.full(pred_norms.shape, np.nan)
        pred_norms = np.where(either_occluded, nan_mat, pred_norms)
        gt_norms = np.where(either_occluded, nan_mat, gt_norms)
        if scaling == "median":
            scale_factor = (np.nanmedian(gt_norms, axis=(-2, -1), keepdims=True)
                            / np.nanmedian(pred_norms, axis=(-2, -1), keepdims=True))
        elif scaling == "mean":
            scale_factor = (np.nanmean(gt_norms, axis=(-2, -1), keepdims=True)
                            / np.nanmean(pred_norms, axis=(-2, -1), keepdims=True))
        elif scaling == "none":
            scale_factor = 1.0
        elif scaling == "median_on_queries":
            range_n_pts = np.arange(pred_norms.shape[-2])
            query_frame = np.round(query_points[..., 0]).astype(np.int32).squeeze()
            pred_norms = pred_norms[:, range_n_pts, query_frame][..., None]
            gt_norms = gt_norms[:, range_n_pts, query_frame][..., None]
            scale_factor = (np.nanmedian(gt_norms, axis=(-2, -1), keepdims=True)
                            / np.nanmedian(pred_norms, axis=(-2, -1), keepdims=True))
        else:
            raise ValueError("Unknown scaling:" + scaling)
    pred_tracks = pred_tracks * scale_factor
    metrics["occlusion_accuracy"] = (np.sum(np.equal(pred_occluded, gt_occluded) * evaluation_weights,
                                            axis=summing_axis) / np.sum(evaluation_weights, axis=summing_axis))
    visible = np.logical_not(gt_occluded)
    pred_visible = np.logical_not(pred_occluded)
    all_frac_within, all_jaccard = [], []
    for thresh in [1, 2, 4, 8, 16]:
        if use_fixed_metric_threshold:
            pointwise_thresh = PIXEL_TO_FIXED_METRIC_THRESH[thresh]
        else:
            pointwise_thresh = thresh * ref_multiplier(gt_tracks, intrinsics_params)
        within_dist = np.sum(np.square(pred_tracks - gt_tracks), axis=-1) < np.square(pointwise_thresh)
        is_correct = np.logical_and(within_dist, visible)
        count_correct = np.sum(is_correct * evaluation_weights, axis=summing_axis)
        count_visible_points = np.sum(visible * evaluation_weights, axis=summing_axis)
        frac_correct = count_correct / count_visible_points
        metrics["pts_within_" + str(thresh)] = frac_correct
        all_frac_within.append(frac_correct)
        true_positives = np.sum((is_correct & pred_visible) * evaluation_weights, axis=summing_axis)
        gt_positives = np.sum(visible * evaluation_weights, axis=summing_axis)
        false_positives = (~visible) & pred_visible
        false_positives = false_positives | ((~within_dist) & pred_visible)
        false_positives = np.sum(false_positives * evaluation_weights, axis=summing_axis)
        jaccard = true_positives / (gt_positives + false_positives)
        metrics["jaccard_" + str(thresh)] = jaccard
        all_jaccard.append(jaccard)
    metrics["average_jaccard"] = np.mean(np.stack(all_jaccard, axis=-2), axis=-2)
    metrics["average_pts_within_thresh"] = np.mean(np.stack(all_frac_within, axis=-2), axis=-2)
    return {k: float(np.asarray(v).reshape(-1)[0]) for k, v in metrics.items()}


def video(rng: np.random.Generator, case: int) -> dict:
    n, t = int(rng.integers(1, 7)), int(rng.integers(1, 9))
    gt = rng.normal(size=(n, t, 3)) * rng.choice([0.1, 1.0, 5.0])
    gt[..., 2] = np.abs(gt[..., 2]) + rng.choice([0.5, 2.0, 20.0])
    noise = rng.normal(size=gt.shape) * rng.choice([0.0, 0.003, 0.02, 0.1, 1.0])
    pred = gt * rng.choice([1.0, 1.0, 0.5, 3.0]) + noise
    gt_vis = rng.random((n, t)) < rng.choice([0.0, 0.5, 0.9, 1.0])
    pred_vis = gt_vis ^ (rng.random((n, t)) < rng.choice([0.0, 0.2]))
    if case % 17 == 0:
        pred_vis[:] = False
    if case % 19 == 0:  # ties: an error of exactly 1 px at z = 2, f = 2 (strict < in the reference)
        gt[..., 2] = 2.0
        pred = gt.copy()
        pred[..., 0] += 1.0
    fx = float(rng.choice([2.0, 256.0, 500.0]))
    intr = np.array([fx, fx * rng.choice([1.0, 1.5]), 0.0, 0.0])
    query = rng.integers(0, t, size=n)
    return dict(gt=gt, gt_vis=gt_vis, pred=pred, pred_vis=pred_vis, intr=intr, query=query)


SCALINGS = ["median", "mean", "none", "reproduce_2d", "per_trajectory", "median_on_queries"]


@pytest.mark.parametrize("case", range(300))
def test_tapvid3d_metrics_equal_the_reference(case: int) -> None:
    rng = np.random.default_rng(case)
    v = video(rng, case)
    scaling = SCALINGS[case % len(SCALINGS)]
    fixed = case % 5 == 4
    query_points = np.stack([v["query"], np.zeros(len(v["query"])), np.zeros(len(v["query"]))], axis=-1)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        ref = ref_compute(~v["gt_vis"], v["gt"], ~v["pred_vis"], v["pred"], v["intr"], scaling=scaling,
                          query_points=query_points, use_fixed_metric_threshold=fixed)
    ours = tapvid3d_metrics(v["gt"], v["gt_vis"], v["pred"], v["pred_vis"], v["intr"], scaling=scaling,
                            query_frames=v["query"], fixed_metric=fixed)
    assert set(ours) == set(ref)
    for key, value in ref.items():
        assert ours[key] == pytest.approx(value, rel=1e-12, abs=1e-12, nan_ok=True), (key, scaling)


def test_every_frame_counts_and_an_all_invisible_video_is_nan() -> None:
    gt = np.zeros((1, 3, 3))
    gt[..., 2] = 2.0
    pred = gt.copy()
    pred[0, 1:, 0] += 5.0  # only the first (query) frame is right
    vis = np.ones((1, 3), bool)
    intr = np.array([2.0, 2.0, 0.0, 0.0])
    exact = tapvid3d_metrics(gt, vis, pred, vis, intr, scaling="none")
    assert exact["jaccard_1"] == pytest.approx(1 / 5)  # TP 1 of 3 visible, 2 false positives
    assert query_masked_metrics(gt, vis, pred, vis, np.array([0]), intr)["jaccard_1"] == 0.0
    hidden = tapvid3d_metrics(gt, np.zeros((1, 3), bool), pred, np.zeros((1, 3), bool), intr)
    assert np.isnan(hidden["average_jaccard"]) and np.isnan(hidden["pts_within_1"])


def test_median_scaling_forgives_a_global_scale_error() -> None:
    rng = np.random.default_rng(0)
    gt = rng.normal(size=(4, 5, 3))
    gt[..., 2] += 10.0
    vis = np.ones((4, 5), bool)
    intr = np.array([256.0, 256.0, 0.0, 0.0])
    assert tapvid3d_metrics(gt, vis, 2.0 * gt, vis, intr)["average_jaccard"] == pytest.approx(1.0)
    assert tapvid3d_metrics(gt, vis, 2.0 * gt, vis, intr, scaling="none")["average_jaccard"] < 0.1
    with pytest.raises(ValueError, match="unknown scaling"):
        tapvid3d_metrics(gt, vis, gt, vis, intr, scaling="local")
