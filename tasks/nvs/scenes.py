"""The nvs_synthetic scenes: rendered with Blender on first use, cached by content hash, read back.

A scene is rendered by ``blender/render_nvs.py`` with the bpy venv's Python (``HARNESS_BPY_PYTHON``,
default ``$HARNESS_CACHE_DIR/venvs/bpy/bin/python``) inside ``harness.sandbox`` and written in the
NeRF-synthetic layout under ``$HARNESS_CACHE_DIR/nvs/scenes/<scene>-<hash>/``; the hash covers the
script's text and every render setting, so changing either renders again. Cameras and images use
the layout's conventions: ``transform_matrix`` is camera-to-world with the camera looking down -Z
(+Y up); images are RGBA over a transparent background, composited on white when read.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.types import stable_hash

HERE = Path(__file__).parent
SCRIPT = HERE / "blender" / "render_nvs.py"
SCENES = ("textured", "repetitive", "thin")  # the task's default set
TEST_SCENES = ("plane",)  # a single plane z = 0: geometry checks
RENDER_TIMEOUT_S = 600.0


class SceneError(ValueError):
    """A scene that cannot be rendered or read (one line, shown to the user)."""


@dataclass(frozen=True)
class Camera:
    """A pinhole camera: ``c2w`` is 4x4 camera-to-world in the OpenGL/Blender convention (-Z forward)."""

    c2w: tuple[tuple[float, ...], ...]
    fx: float
    fy: float
    cx: float
    cy: float
    width: int
    height: int

    def to_dict(self) -> dict[str, Any]:
        return {"c2w": [list(r) for r in self.c2w], "fx": self.fx, "fy": self.fy, "cx": self.cx, "cy": self.cy,
                "width": self.width, "height": self.height}

    @staticmethod
    def from_dict(d: dict[str, Any]) -> Camera:
        c2w = d["c2w"]
        if len(c2w) < 3 or any(len(r) != 4 for r in c2w):
            raise SceneError("a camera's c2w must be a 3x4 or 4x4 matrix")
        rows = [tuple(float(v) for v in r) for r in c2w[:3]] + [(0.0, 0.0, 0.0, 1.0)]
        w, h = int(d["width"]), int(d["height"])
        if w <= 0 or h <= 0:
            raise SceneError(f"a camera's size must be positive, got {w}x{h}")
        return Camera(tuple(rows), float(d["fx"]), float(d["fy"]), float(d["cx"]), float(d["cy"]), w, h)

    @property
    def center(self) -> tuple[float, float, float]:
        return (self.c2w[0][3], self.c2w[1][3], self.c2w[2][3])


@dataclass(frozen=True)
class View:
    name: str  # e.g. "test/r_3"
    image: str  # PNG path
    camera: Camera
    depth: str | None = None  # .npy z-depth, 0 where nothing was hit


@dataclass
class Scene:
    name: str
    root: str
    train: list[View]
    test: list[View]
    points: str | None = None  # .npy (N, 3) surface samples
    content_hash: str = ""
    meta: dict[str, Any] = field(default_factory=dict)


def cache_root() -> Path:
    base = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return base / "nvs" / "scenes"


def bpy_python() -> str:
    """The Blender venv's interpreter (``harness.blender``), or SceneError saying how to make one."""
    from harness.blender import BlenderMissing
    from harness.blender import bpy_python as core_bpy_python

    try:
        return core_bpy_python()
    except BlenderMissing as exc:
        raise SceneError(str(exc)) from None


def scene_job(name: str, size: int, n_train: int, n_test: int, samples: int, points: int, seed: int = 0
              ) -> dict[str, Any]:
    if name not in SCENES + TEST_SCENES:
        raise SceneError(f"unknown scene {name!r}; choose from {', '.join(SCENES + TEST_SCENES)}")
    if not 16 <= size <= 512:
        raise SceneError(f"size must be between 16 and 512 pixels, got {size}")
    if n_train < 2 or n_test < 1:
        raise SceneError(f"a scene needs at least 2 train views and 1 test view, got {n_train} and {n_test}")
    if size % 4:
        raise SceneError(f"size must be a multiple of 4 pixels, got {size}")
    # the cameras are part of the scene: drawn from the scene's name and the task's seed
    return {"scene": name, "size": size, "n_train": n_train, "n_test": n_test, "samples": samples,
            "seed": sum(ord(c) for c in name) + 1000 * seed, "points": points}


def scene_key(job: dict[str, Any]) -> str:
    return stable_hash({"job": job, "script": SCRIPT.read_text()})[:16]


def ensure_scene(name: str, *, size: int = 64, n_train: int = 24, n_test: int = 6, samples: int = 32,
                 points: int = 20000, seed: int = 0) -> Scene:
    """The scene, rendering it first when it is not in the cache."""
    job = scene_job(name, size, n_train, n_test, samples, points, seed)
    key = scene_key(job)
    folder = cache_root() / f"{name}-{key}"
    if not (folder / "transforms_test.json").is_file():
        _render(job, folder)
    return load_nerf_synthetic(folder, name=name, content_hash=key)


def _render(job: dict[str, Any], folder: Path) -> None:
    from harness.sandbox import run_sandboxed

    result = run_sandboxed(
        [bpy_python(), "-I", "render_nvs.py"], timeout_s=RENDER_TIMEOUT_S, memory_mb=4096,
        cwd_files={"render_nvs.py": SCRIPT.read_text()}, stdin=json.dumps(job) + "\n",
        env={"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}, nproc=256,
    )  # fmt: skip
    try:
        reply: dict[str, Any] = {}
        for line in result.stdout.splitlines()[::-1]:
            if line.startswith("{"):
                reply = json.loads(line)
                break
        if reply.get("status") != "OK":
            why = reply.get("error") or (result.stderr.strip().splitlines() or [result.status])[-1]
            raise SceneError(f"Blender could not render scene {job['scene']!r}: {why}")
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        shutil.copytree(Path(result.workdir) / "out", tmp, dirs_exist_ok=True)
        try:
            os.replace(tmp, folder)  # atomic: a concurrent run either sees the whole scene or none
        except OSError:  # another process won the race: its copy is the same scene
            shutil.rmtree(tmp, ignore_errors=True)
    finally:
        result.cleanup()


def from_layout(views: Any, train_split: str, test_split: str, *, name: str = "", points: str | None = None,
                content_hash: str = "") -> Scene:
    """A :class:`Scene` from ``harness.tasks.nvs.layouts.SceneViews`` (OpenCV poses, 3x3 intrinsics)."""
    import numpy as np

    flip = np.diag([1.0, -1.0, -1.0, 1.0])  # OpenCV -> OpenGL camera axes (its own inverse)

    def pick(split: str) -> list[View]:
        out = []
        for i, s in enumerate(views.splits):
            if s != split:
                continue
            K, (w, h) = views.intrinsics[i], views.sizes[i]
            c2w = np.asarray(views.c2w[i], dtype=np.float64) @ flip
            cam = Camera(tuple(tuple(float(v) for v in row) for row in c2w), float(K[0, 0]), float(K[1, 1]),
                         float(K[0, 2]), float(K[1, 2]), int(w), int(h))
            image = Path(views.image_paths[i])
            depth = views.depth_paths[i]
            out.append(View(f"{split}/{image.stem}", str(image), cam, str(depth) if depth is not None else None))
        if not out:
            raise SceneError(f"scene {views.scene!r} has no {split!r} views (it has: {', '.join(views.split_names)})")
        return out

    train, test = pick(train_split), pick(test_split)
    digest = content_hash or stable_hash([[v.name, v.camera.to_dict()] for v in train + test])[:16]
    return Scene(name or views.scene, str(views.root), train, test, points, digest)


def load_nerf_synthetic(folder: str | Path, *, name: str = "", content_hash: str = "") -> Scene:
    from harness.tasks.nvs.layouts import load_nerf_synthetic as load

    root = Path(folder)
    points = root / "points.npy"
    return from_layout(load(root, ("train", "test")), "train", "test", name=name,
                       points=str(points) if points.is_file() else None, content_hash=content_hash)


def _read_rgba(path: str | Path) -> Any:
    """HxWx4 float32 in [0, 1]. The size comes from the header and is checked before the pixels are
    decoded (a small PNG can declare 30000x30000 pixels: 14 GB as float RGBA)."""
    import numpy as np
    from PIL import Image, UnidentifiedImageError

    from harness.tasks.nvs.layouts import LayoutError, check_image_size

    try:
        with Image.open(path) as im:
            check_image_size(Path(path), *im.size)
            return np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0
    except LayoutError as exc:
        raise SceneError(str(exc)) from None
    except Image.DecompressionBombError as exc:
        raise SceneError(f"{path}: image is too large ({exc})") from None
    except (OSError, UnidentifiedImageError) as exc:
        raise SceneError(f"{path} is not a readable image ({exc})") from None


def read_rgb(path: str | Path, background: float = 1.0) -> Any:
    """HxWx3 float32 in [0, 1]; an alpha channel is composited over ``background`` (white)."""
    arr = _read_rgba(path)
    rgb, alpha = arr[..., :3], arr[..., 3:]
    return rgb * alpha + background * (1.0 - alpha)


def read_alpha(path: str | Path) -> Any:
    return _read_rgba(path)[..., 3]
