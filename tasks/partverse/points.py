"""Point-cloud inputs: the ``points`` part, and the fallback for models that take no point clouds.

A PointLLM cloud is ``<object_id>_8192.npy``: float array (8192, 6) of xyz + rgb (rgb in 0..1).
3D-capable backends get it natively as ``Part("points", path=..., options={"format": "xyz+rgb",
"num_points": N, "pack": <partition pack .npz or absent>})``. Backends that take no ``points``
input get, by the task setting ``points=``:

- ``image``: one rendered view (PNG, orthographic, from the front-right-above direction
  azimuth 45 deg, elevation 30 deg; points drawn far-to-near with their colours, 2 px splats on
  white), cached under ``$HARNESS_CACHE_DIR/partverse/views``;
- ``none``: text only (the point cloud is dropped from the message).
The setting is part of the task options, so it is stored with the run.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

POINTS_MODES = ("native", "image", "none")
VIEW_AZIMUTH_DEG = 45.0
VIEW_ELEVATION_DEG = 30.0


class PointCloudError(ValueError):
    """A point-cloud file is missing or malformed (the message names the file)."""


def load_cloud(path: str | Path) -> np.ndarray:
    path = Path(path)
    if not path.exists():
        raise PointCloudError(f"point cloud {path} not found")
    try:
        cloud = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise PointCloudError(f"point cloud {path}: not a .npy array ({exc})") from None
    if cloud.ndim != 2 or cloud.shape[1] not in (3, 6) or len(cloud) == 0:
        raise PointCloudError(f"point cloud {path}: expected an (N, 3) or (N, 6) array, got {cloud.shape}")
    if not np.isfinite(cloud).all():
        raise PointCloudError(f"point cloud {path}: contains NaN or infinite values")
    return cloud.astype(np.float32, copy=False)


def normalise(xyz: np.ndarray) -> np.ndarray:
    """PointLLM's ``pc_norm`` on the coordinates: centre on the centroid, scale into the unit ball."""
    centred = xyz - xyz.mean(axis=0)
    scale = float(np.sqrt((centred**2).sum(axis=1)).max())
    return centred / scale if scale > 0 else centred


def project(xyz: np.ndarray, azimuth_deg: float = VIEW_AZIMUTH_DEG,
            elevation_deg: float = VIEW_ELEVATION_DEG) -> tuple[np.ndarray, np.ndarray]:
    """Orthographic screen coordinates (u right, v up) and depth (larger = nearer), y-up world."""
    az, el = np.radians(azimuth_deg), np.radians(elevation_deg)
    view = np.array([np.cos(el) * np.sin(az), np.sin(el), np.cos(el) * np.cos(az)])  # towards the camera
    right = np.cross([0.0, 1.0, 0.0], view)
    right /= np.linalg.norm(right)
    up = np.cross(view, right)
    return np.stack([xyz @ right, xyz @ up], axis=1), xyz @ view


def render_view(cloud: np.ndarray, size: int = 512, splat: int = 2) -> np.ndarray:
    """An (size, size, 3) uint8 image of the cloud (see the module docstring for the view)."""
    xyz = normalise(cloud[:, :3].astype(np.float64))
    rgb = cloud[:, 3:6] if cloud.shape[1] >= 6 else np.full((len(cloud), 3), 0.3)
    rgb = np.clip(rgb if rgb.max() > 1.0 + 1e-6 else rgb * 255.0, 0, 255).astype(np.uint8)
    uv, depth = project(xyz)
    margin = splat + 1
    pix = ((uv + 1.0) / 2.0 * (size - 2 * margin) + margin).round().astype(int)
    pix[:, 1] = size - 1 - pix[:, 1]  # image rows grow downwards
    image = np.full((size, size, 3), 255, dtype=np.uint8)
    order = np.argsort(depth)  # far first, near points overwrite
    for dx in range(-splat + 1, splat):
        for dy in range(-splat + 1, splat):
            x = np.clip(pix[order, 0] + dx, 0, size - 1)
            y = np.clip(pix[order, 1] + dy, 0, size - 1)
            image[y, x] = rgb[order]
    return image


def view_cache_dir() -> Path:
    root = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return root / "partverse" / "views"


def rendered_view_path(cloud_path: str | Path, size: int = 512) -> str:
    """Render (once per file content and size) and return the PNG path."""
    from PIL import Image

    data = Path(cloud_path).read_bytes() if Path(cloud_path).exists() else b""
    if not data:
        raise PointCloudError(f"point cloud {cloud_path} not found")
    key = hashlib.sha256(data + f"|{size}|{VIEW_AZIMUTH_DEG}|{VIEW_ELEVATION_DEG}".encode()).hexdigest()[:24]
    out = view_cache_dir() / f"{key}.png"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".tmp{os.getpid()}.png")
        Image.fromarray(render_view(load_cloud(cloud_path), size)).save(tmp)
        tmp.replace(out)
    return str(out)
