"""Parity of the 3DCodeBench Chamfer distance and its aggregation with the released code.

Reference: llada60/3dcodebench (a copy of gaoypeng/3dcodebench) at commit
bcb2f5a553f3c9f6bb4e240bd60b734ab783e96e, ``metrics/shape_chamfer.py``: ``normalize_unit_sphere``,
``chamfer_squared``, ``yaw_rotated``, ``chamfer_with_yaw`` and ``main``'s penalty and ``agg``
(conditional mean over OK instances; penalised mean over every instance, a non-OK one counting as
1.5 x the worst OK CD). The ``ref_*`` functions re-implement them from reading them. Surface sampling
(trimesh, in the Blender worker) is not re-run here: both sides get the same point clouds.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from harness.task import SampleRecord
from harness.tasks.code3d.geometry import penalized_values, shape_scores
from harness.tasks.code3d.task import _build


# ---- literal re-implementation of the reference -------------------------------------------------
def ref_normalize_unit_sphere(pts: np.ndarray) -> np.ndarray:
    pts = pts - pts.mean(0, keepdims=True)
    r = np.linalg.norm(pts, axis=1).max()
    if r < 1e-9:
        return pts
    return pts / r


def ref_chamfer_squared(a: np.ndarray, b: np.ndarray) -> float:
    tree_b = cKDTree(b)
    da, _ = tree_b.query(a, k=1)
    tree_a = cKDTree(a)
    db, _ = tree_a.query(b, k=1)
    return float((da**2).mean() + (db**2).mean())


def ref_yaw_rotated(pts: np.ndarray, deg: float) -> np.ndarray:
    if deg == 0:
        return pts
    th = np.deg2rad(deg)
    c, s = np.cos(th), np.sin(th)
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], dtype=pts.dtype)
    return pts @ rot.T


def ref_chamfer_with_yaw(ref_pts: np.ndarray, gen_pts: np.ndarray) -> tuple[float, float]:
    cd0 = ref_chamfer_squared(ref_pts, gen_pts)
    cd_yaw = [cd0]
    for deg in (90, 180, 270):
        cd_yaw.append(ref_chamfer_squared(ref_pts, ref_yaw_rotated(gen_pts, deg)))
    return cd0, float(min(cd_yaw))


def ref_agg(per_instance: list[dict], field: str) -> dict[str, float | None]:
    ok_rows = [r for r in per_instance if r["status"] == "OK"]
    if not ok_rows:
        return {"conditional_mean": None, "penalized_mean": None}
    penalty = 1.5 * max(r[field] for r in ok_rows)
    cond = float(np.mean([r[field] for r in ok_rows]))
    pen = [r[field] if r["status"] == "OK" else penalty for r in per_instance]
    return {"conditional_mean": cond, "penalized_mean": float(np.mean(pen))}


# ---- clouds and runs -----------------------------------------------------------------------------
def cloud(rng: np.random.Generator, case: int) -> np.ndarray:
    n = int(rng.integers(1, 60))
    pts = rng.normal(size=(n, 3)) * rng.uniform(0.1, 5.0, size=3) + rng.normal(size=3) * 10
    if case % 13 == 0:
        pts[:] = pts[0]  # a point-like cloud: the reference leaves it centred, unscaled
    if case % 17 == 0:
        pts = np.concatenate([pts, pts])  # duplicated points
    return pts


@pytest.mark.parametrize("case", range(200))
def test_chamfer_equals_the_reference(case: int) -> None:
    rng = np.random.default_rng(case)
    ref, gen = cloud(rng, case), cloud(rng, case + 1)
    if case % 5 == 0:  # a yawed, rescaled copy: the yaw-min must find it
        gen = ref_yaw_rotated(ref, float(rng.choice([90, 180, 270]))) * 3.0 + 1.0
    cd0, cd_min = ref_chamfer_with_yaw(ref_normalize_unit_sphere(ref), ref_normalize_unit_sphere(gen))
    ours = shape_scores(gen, ref)
    assert ours.chamfer_noyaw == pytest.approx(cd0, rel=1e-9, abs=1e-12)
    assert ours.chamfer == pytest.approx(cd_min, rel=1e-9, abs=1e-12)


STATUSES = ("OK", "OK", "OK", "ERR_EXEC", "NO_GEN_GLB")


@pytest.mark.parametrize("case", range(100))
def test_penalized_mean_equals_the_reference(case: int) -> None:
    rng = np.random.default_rng(10_000 + case)
    n = int(rng.integers(1, 12))
    statuses = [STATUSES[i] for i in rng.integers(0, len(STATUSES), n)]
    if case % 10 == 0:
        statuses = ["ERR_EXEC"] * n  # no successes: no mean at all
    cds = [float(v) for v in np.round(rng.uniform(0, 0.2, n), 2)]  # rounded: ties for the worst CD
    per_instance = [{"status": s, "cd": c if s == "OK" else None} for s, c in zip(statuses, cds, strict=True)]
    ref = ref_agg(per_instance, "cd")
    values = penalized_values([r["cd"] for r in per_instance])
    if ref["penalized_mean"] is None:
        assert values is None
        return
    assert values is not None and float(np.mean(values)) == pytest.approx(ref["penalized_mean"], rel=1e-12)
    # through the task's aggregation: a failed execution is scored without a CD, a failed generation
    # is stored with an error; both are penalised, an unscored (broken data) sample is left out
    records = []
    for i, r in enumerate(per_instance):
        if r["status"] == "OK":
            records.append(SampleRecord(str(i), 0, {"executable": 1.0, "chamfer": r["cd"]}, None, None, {}))
        elif r["status"] == "ERR_EXEC":
            records.append(SampleRecord(str(i), 0, {"executable": 0.0}, None, None, {}))
        else:
            records.append(SampleRecord(str(i), 0, {}, None, "model error: HTTP 500 after 3 retries", {}))
    records.append(SampleRecord("broken", 0, {}, "reference script failed", None, {}))
    task = _build("text")
    if not any(r.error is None for r in records):
        return  # only generation failures and broken data: nothing was scored, no aggregate metrics
    got = {(m.name, m.breakdown_key): m for m in task.aggregate(records)}
    assert got[("chamfer_penalized", "")].value == pytest.approx(ref["penalized_mean"], rel=1e-12)
    assert got[("chamfer_penalized", "")].n == n
    assert got[("executable", "")].value == pytest.approx(statuses.count("OK") / n)
