"""Geometry metrics on point clouds: Chamfer distance, F-score, connected parts, floating parts.

numpy + scipy only: the same file runs on the host (scoring) and inside the Blender worker (which
copies it into its sandbox to split meshes into parts), so it must not import harness.

Chamfer follows 3DCodeBench's ``metrics/shape_chamfer.py``:
  * each cloud is sampled from the mesh surface (8192 points, trimesh, in the worker; the GLB is
    loaded with ``force="mesh"`` so scene meshes are concatenated),
  * normalised on its own: centred on its centroid and divided by its largest point radius,
  * CD = mean_r min_g ||r - g||^2 + mean_g min_r ||g - r||^2 (squared distances, both directions),
  * the reported ``chamfer`` is the minimum over rotations of the candidate by 0/90/180/270 degrees
    about the loaded cloud's **Z** axis (the reference's choice; for Blender's Y-up GLB export that is
    a horizontal axis, but we keep it for comparable numbers); ``chamfer_noyaw`` is the plain value.
Aggregation, as ``shape_chamfer.py``'s ``agg``: the conditional mean over samples with a CD, and the
penalised mean over *all* samples where one without a CD (generation, execution or mesh failure)
counts as 1.5 x the worst CD of the run (:func:`penalized_values`).
F-score (not in the reference code; our addition) uses the same normalisation and the rotation
chosen by Chamfer: precision = share of candidate points within ``threshold`` of the reference,
recall the converse, F = 2PR / (P + R).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

YAWS_DEG = (0.0, 90.0, 180.0, 270.0)
DEFAULT_FSCORE_THRESHOLD = 0.05  # in units of the normalised cloud's radius (choice, documented)


def normalise_cloud(points: np.ndarray) -> np.ndarray:
    """Centre on the centroid and scale so the farthest point is at radius 1."""
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3 or len(pts) == 0:
        raise ValueError(f"expected an (N, 3) point cloud with N > 0, got shape {pts.shape}")
    centred = pts - pts.mean(axis=0)
    radius = float(np.linalg.norm(centred, axis=1).max())
    return centred / radius if radius >= 1e-9 else centred  # the reference leaves a point-like cloud unscaled


def yaw_matrix(deg: float, up_axis: int = 1) -> np.ndarray:
    """Rotation by ``deg`` about the coordinate axis ``up_axis`` (0=x, 1=y, 2=z)."""
    c, s = np.cos(np.radians(deg)), np.sin(np.radians(deg))
    a, b = [i for i in range(3) if i != up_axis]
    rot = np.eye(3)
    rot[a, a], rot[a, b], rot[b, a], rot[b, b] = c, -s, s, c
    return rot


def chamfer_pair(pred: np.ndarray, ref: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """Squared-distance Chamfer of two clouds as given (no normalisation), with per-point distances."""
    d_pred, _ = cKDTree(ref).query(pred, k=1)
    d_ref, _ = cKDTree(pred).query(ref, k=1)
    return float(np.mean(d_pred**2) + np.mean(d_ref**2)), d_pred, d_ref


@dataclass(slots=True)
class ShapeScores:
    chamfer: float  # yaw-min
    chamfer_noyaw: float
    fscore: float
    precision: float
    recall: float
    yaw_deg: float


def shape_scores(
    pred: np.ndarray, ref: np.ndarray, *, threshold: float = DEFAULT_FSCORE_THRESHOLD, up_axis: int = 2
) -> ShapeScores:
    """Chamfer (yaw-min) and F-score at ``threshold`` after per-cloud normalisation."""
    p, r = normalise_cloud(pred), normalise_cloud(ref)
    best: tuple[float, float, np.ndarray, np.ndarray] | None = None
    noyaw = 0.0
    for yaw in YAWS_DEG:
        cd, d_pred, d_ref = chamfer_pair(p @ yaw_matrix(yaw, up_axis).T, r)
        if yaw == 0.0:
            noyaw = cd
        if best is None or cd < best[0]:
            best = (cd, yaw, d_pred, d_ref)
    assert best is not None
    cd, yaw, d_pred, d_ref = best
    precision = float(np.mean(d_pred < threshold))
    recall = float(np.mean(d_ref < threshold))
    f = 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0
    return ShapeScores(cd, noyaw, f, precision, recall, yaw)


PENALTY_FACTOR = 1.5


def penalized_values(cds: list[float | None], factor: float = PENALTY_FACTOR) -> list[float] | None:
    """One value per sample: its CD, or ``factor`` x the worst CD among the samples that have one
    when it has none (failed). ``None`` when no sample has a CD (the reference reports no mean then)."""
    ok = [c for c in cds if c is not None]
    if not ok:
        return None
    penalty = factor * max(ok)
    return [penalty if c is None else c for c in cds]


def contact_groups(parts: list[np.ndarray], tolerance: float) -> list[list[int]]:
    """Group parts (each an (N, 3) sample of one connected component's surface) whose surfaces come
    within ``tolerance`` of each other, transitively. Returns groups of part indices, largest first."""
    n = len(parts)
    parent = list(range(n))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    trees = [cKDTree(p) for p in parts]
    lows = [p.min(axis=0) - tolerance for p in parts]
    highs = [p.max(axis=0) + tolerance for p in parts]
    for i in range(n):
        for j in range(i + 1, n):
            if np.any(lows[i] > highs[j]) or np.any(lows[j] > highs[i]):
                continue  # bounding boxes (grown by the tolerance) do not even overlap
            dist, _ = trees[j].query(parts[i], k=1, distance_upper_bound=tolerance)
            if np.isfinite(dist).any():
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(n):
        groups.setdefault(find(i), []).append(i)
    return sorted(groups.values(), key=lambda g: (-sum(len(parts[i]) for i in g), g[0]))


def floating_parts(parts: list[np.ndarray], areas: list[float], tolerance: float, up_axis: int = 1) -> list[int]:
    """Indices of parts that float: not in the contact group that rests lowest (the one standing on
    the ground; ties within ``tolerance`` go to the larger surface area).

    A part touching another part (within ``tolerance``) is attached even when it is a separate mesh
    island, so a table whose legs are separate objects meeting the top has no floating parts; a lamp
    shade hovering above its pole has one. (Our definition; the paper names floating parts as a
    failure mode without publishing a check.)
    """
    if len(parts) <= 1:
        return []
    groups = contact_groups(parts, tolerance)
    lows = [min(float(parts[i][:, up_axis].min()) for i in g) for g in groups]
    floor = min(lows)
    grounded = [g for g, low in zip(groups, lows, strict=True) if low <= floor + tolerance]
    main = max(grounded, key=lambda g: sum(areas[i] for i in g))
    return sorted(i for g in groups if g is not main for i in g)
