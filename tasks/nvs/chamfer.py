"""Surface Chamfer distance as the DTU evaluation used by 2D Gaussian Splatting computes it.

The steps of that script (``scripts/eval_dtu/eval.py``, itself adapted from DTUeval-python), on point
arrays instead of mesh files:

1. shuffle the predicted points (seeded here; the script's shuffle is unseeded) and thin them greedily
   so that no two kept points are closer than ``downsample_density``;
2. optionally keep only points inside the bounding box grown by ``patch`` (the script's box is
   [lo - patch, hi + 2 patch)) and, with an observation mask grid, only points in observed cells;
3. accuracy: mean distance from each kept predicted point to the nearest true point, over the
   distances below ``max_dist`` (truncation: far outliers are dropped, not clipped);
4. completeness: the same from the true points (those above ``ground_plane`` when one is given) to the
   box-filtered predicted points;
5. overall = (accuracy + completeness) / 2.

All three are distances in the points' units, lower is better. DTU's defaults (0.2, 20, 60) are in
millimetres; choose values in your scene's units.
"""

from __future__ import annotations

import numpy as np

from harness.types import MetricInfo, lower

__all__ = ["METRICS", "chamfer_dtu", "downsample", "off_surface_fraction"]

METRICS: dict[str, MetricInfo] = {
    "accuracy": lower("Chamfer accuracy"), "completeness": lower("Chamfer completeness"),
    "chamfer": lower("Chamfer distance"), "floater_fraction": lower("floater fraction", "fraction"),
}


def _points(name: str, points: np.ndarray) -> np.ndarray:
    array = np.asarray(points, dtype=np.float64)
    if array.ndim != 2 or array.shape[1] != 3:
        raise ValueError(f"{name} must be an Nx3 array of points, got shape {np.shape(points)}")
    if len(array) == 0:
        raise ValueError(f"{name} has no points")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} has NaN or infinite coordinates")
    return array


def downsample(points: np.ndarray, density: float, seed: int = 0) -> np.ndarray:
    """Shuffled greedy thinning: visit points in a seeded random order, keep one, drop its neighbours
    within ``density``."""
    from scipy.spatial import cKDTree

    pts = _points("points", points).copy()
    np.random.default_rng(seed).shuffle(pts, axis=0)
    if density <= 0:
        return pts
    neighbours = cKDTree(pts).query_ball_point(pts, r=density)
    keep = np.ones(len(pts), dtype=bool)
    for i, idx in enumerate(neighbours):
        if keep[i]:
            keep[idx] = False
            keep[i] = True
    return pts[keep]


def _truncated_mean(distances: np.ndarray, max_dist: float, what: str) -> float:
    close = distances[distances < max_dist]
    if close.size == 0:
        raise ValueError(f"no {what} distance is below max_dist={max_dist}: the surfaces do not overlap")
    return float(close.mean())


def chamfer_dtu(pred: np.ndarray, gt: np.ndarray, *, downsample_density: float = 0.2, max_dist: float = 20.0,
                bbox: tuple[np.ndarray, np.ndarray] | None = None, patch: float = 60.0,
                obs_mask: np.ndarray | None = None, obs_res: float = 1.0,
                ground_plane: np.ndarray | None = None, seed: int = 0) -> dict[str, float]:
    """Accuracy, completeness and their mean (``chamfer``) between predicted and true surface points."""
    from scipy.spatial import cKDTree

    gt_pts = _points("ground-truth points", gt)
    data = downsample(pred, downsample_density, seed)
    if bbox is not None:
        lo = np.asarray(bbox[0], dtype=np.float64).reshape(1, 3)
        hi = np.asarray(bbox[1], dtype=np.float64).reshape(1, 3)
        data_in = data[((data >= lo - patch) & (data < hi + 2 * patch)).all(axis=1)]
    else:
        if obs_mask is not None:
            raise ValueError("an observation mask needs the bounding box it is gridded in (bbox)")
        lo, data_in = np.zeros((1, 3)), data
    data_obs = data_in
    if obs_mask is not None:
        grid = np.asarray(obs_mask).astype(bool)
        if grid.ndim != 3:
            raise ValueError(f"obs_mask must be a 3D grid, got shape {grid.shape}")
        cells = np.around((data_in - lo) / obs_res).astype(np.int64)
        inside = ((cells >= 0) & (cells < np.asarray(grid.shape)[None])).all(axis=1)
        cells = cells[inside]
        data_obs = data_in[inside][grid[cells[:, 0], cells[:, 1], cells[:, 2]]]
    if len(data_obs) == 0 or len(data_in) == 0:
        raise ValueError("no predicted point is left inside the evaluation region")
    accuracy = _truncated_mean(cKDTree(gt_pts).query(data_obs, k=1)[0], max_dist, "prediction-to-surface")
    surface = gt_pts
    if ground_plane is not None:
        plane = np.asarray(ground_plane, dtype=np.float64).reshape(4)
        surface = gt_pts[gt_pts @ plane[:3] + plane[3] > 0]
        if len(surface) == 0:
            raise ValueError("no ground-truth point lies above the ground plane")
    completeness = _truncated_mean(cKDTree(data_in).query(surface, k=1)[0], max_dist, "surface-to-prediction")
    return {"accuracy": accuracy, "completeness": completeness, "chamfer": (accuracy + completeness) / 2}


def off_surface_fraction(points: np.ndarray, surface: np.ndarray, threshold: float) -> float:
    """Fraction of ``points`` (e.g. Gaussian centres) farther than ``threshold`` from the true surface
    samples: the floater fraction. Lower is better."""
    from scipy.spatial import cKDTree

    if threshold <= 0:
        raise ValueError(f"threshold must be positive, got {threshold}")
    dist = cKDTree(_points("surface points", surface)).query(_points("points", points), k=1)[0]
    return float(np.mean(dist > threshold))
