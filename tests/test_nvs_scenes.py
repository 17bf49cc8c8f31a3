"""The nvs_synthetic scenes rendered by real Blender (bpy venv, sandboxed): depth agrees with the
camera pose on a known plane, colour coverage agrees with depth, the NeRF-synthetic layout loads,
the cache keys on the settings, and nvs_synthetic runs end to end on a rendered scene."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from requirements import needs

from harness.tasks.nvs.scenes import SceneError, bpy_python, ensure_scene, read_alpha

try:
    bpy_python()
    HAVE_BPY = True
except SceneError:
    HAVE_BPY = False
pytestmark = needs(HAVE_BPY, "the Blender (bpy) venv", "tests/setup.d/50-bpy.sh builds it")

TINY = {"size": 32, "n_train": 3, "n_test": 1, "samples": 4, "points": 2000}


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("nvs-cache")
    old = {k: os.environ.get(k) for k in ("HARNESS_CACHE_DIR", "HARNESS_BPY_PYTHON")}
    os.environ["HARNESS_BPY_PYTHON"] = bpy_python()  # found through the real cache dir, kept
    os.environ["HARNESS_CACHE_DIR"] = str(root)
    yield root
    for key, value in old.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def plane(cache: Path):
    return ensure_scene("plane", **TINY)


def _rays(view) -> tuple[np.ndarray, np.ndarray]:
    """World origin and per-pixel ray directions (H, W, 3) from the view's pose and intrinsics."""
    cam = view.camera
    ys, xs = np.mgrid[0:cam.height, 0:cam.width] + 0.5
    d_cam = np.stack([(xs - cam.cx) / cam.fx, -(ys - cam.cy) / cam.fy, -np.ones_like(xs)], -1)
    c2w = np.asarray(cam.c2w)
    return c2w[:3, 3], d_cam @ c2w[:3, :3].T


def test_plane_depth_agrees_with_the_camera_pose(plane) -> None:
    """The plane is z = 0, |x|, |y| <= 1. Where Blender's depth says hit, the pose puts the point on
    the plane; where it says miss, the pose's ray meets z = 0 outside the square."""
    for view in plane.train + plane.test:
        depth = np.load(view.depth)
        origin, dirs = _rays(view)
        world = origin + dirs * depth[..., None]  # d_cam has z = -1: the z-depth scales it exactly
        hit = depth > 0
        assert hit.mean() > 0.2, view.name
        assert np.abs(world[hit][:, 2]).max() < 1e-4
        assert np.abs(world[hit][:, :2]).max() <= 1.0 + 1e-4
        t = -origin[2] / dirs[~hit][:, 2]  # where the missed rays cross z = 0
        on_plane = origin[:2] + t[:, None] * dirs[~hit][:, :2]
        assert ((t < 0) | (np.abs(on_plane).max(axis=1) > 1.0 - 1e-3)).all()


def test_colour_coverage_matches_depth_and_the_layout_loads(plane) -> None:
    from harness.tasks.nvs.layouts import load_nerf_synthetic

    view = plane.test[0]
    alpha, depth = read_alpha(view.image), np.load(view.depth)
    assert ((alpha > 0.5) == (depth > 0)).mean() > 0.95  # only silhouette pixels may differ
    sv = load_nerf_synthetic(plane.root, ("train", "test"))
    assert sv.splits == ("train",) * 3 + ("test",) and all(p is not None for p in sv.depth_paths)
    fx = sv.intrinsics[0][0, 0]
    assert fx == pytest.approx(0.5 * 32 / math.tan(math.radians(20.0)))
    assert np.load(plane.points).shape == (2000, 3) and np.abs(np.load(plane.points)[:, 2]).max() < 1e-6


def test_the_cache_keys_on_the_settings(plane, cache: Path) -> None:
    stamp = Path(plane.root, "transforms_test.json").stat().st_mtime_ns
    again = ensure_scene("plane", **TINY)
    assert again.root == plane.root and Path(again.root, "transforms_test.json").stat().st_mtime_ns == stamp
    other = ensure_scene("plane", **{**TINY, "n_test": 2})
    assert other.root != plane.root and len(other.test) == 2


def test_nvs_synthetic_end_to_end_on_a_rendered_scene(plane, cache: Path, tmp_path: Path, monkeypatch) -> None:
    from harness.runner import EvalConfig, Runner
    from harness.store.db import open_db

    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    opts = {"scenes": "plane", "size": 32, "train_views": 3, "test_views": 1, "samples": 4}
    cfg = EvalConfig(task="nvs_synthetic", model="gs:sh", task_options=opts,
                     model_settings={"steps": 20, "gaussians": 80, "patch": 16}, progress=False)
    summary = Runner(cfg, session_factory=open_db(f"sqlite:///{tmp_path / 'h.db'}")).run()
    assert summary.n_new == 1 and summary.n_errors == 0 and summary.n_unscored == 0
    top = {m.name: m.value for m in summary.metrics if not m.breakdown_key}
    assert 5 < top["psnr"] < 60 and 0 <= top["floater_fraction"] <= 1 and top["n_gaussians"] <= 80
