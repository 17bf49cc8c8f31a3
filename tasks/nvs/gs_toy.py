"""A toy scene without Blender: a few coloured Gaussians rendered by ``gs_raster`` into a
NeRF-synthetic folder (``transforms_{train,test}.json``, RGBA PNGs, z-depth ``.npy`` named by
``depth_file_path``, ``points.npy`` = the Gaussians' centres). Used by the tests and to try the
tasks on a machine without the bpy venv: ``harness eval -t nvs_folder -T path=DIR``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

FOV_X = math.radians(40.0)


def look_at_c2w(position: Any) -> Any:
    """Camera-to-world (OpenGL: -Z forward, +Y up) for a camera at ``position`` looking at the origin."""
    import numpy as np

    pos = np.asarray(position, dtype=np.float64)
    forward = -pos / np.linalg.norm(pos)
    up = np.array([0.0, 0.0, 1.0])
    right = np.cross(forward, up)
    right /= np.linalg.norm(right)
    true_up = np.cross(right, forward)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, true_up, -forward, pos
    return m


def write_toy_scene(folder: str | Path, *, size: int = 32, n_train: int = 8, n_test: int = 2, n_gaussians: int = 24,
                    seed: int = 0) -> Path:
    import numpy as np
    import torch
    from PIL import Image

    from harness.tasks.nvs.gs_raster import render, torch_camera
    from harness.tasks.nvs.scenes import Camera

    root = Path(folder)
    rng = np.random.default_rng(seed)
    means = torch.tensor(rng.uniform(-0.6, 0.6, (n_gaussians, 3)), dtype=torch.float32)
    scales = torch.tensor(rng.uniform(0.08, 0.18, (n_gaussians, 3)), dtype=torch.float32)
    quats = torch.tensor(rng.normal(size=(n_gaussians, 4)), dtype=torch.float32)
    opac = torch.full((n_gaussians,), 0.95)
    cols = torch.tensor(rng.uniform(0.05, 0.95, (n_gaussians, 3)), dtype=torch.float32)
    focal = 0.5 * size / math.tan(0.5 * FOV_X)
    for split, n in (("train", n_train), ("test", n_test)):
        (root / split).mkdir(parents=True, exist_ok=True)
        frames = []
        for k in range(n):
            az = 2 * math.pi * (k + (0.5 if split == "test" else 0.0)) / n
            el = math.radians(25 + 20 * ((k * 7) % 3) / 2)
            pos = 3.0 * np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
            c2w = look_at_c2w(pos)
            cam = Camera.from_dict({"c2w": c2w.tolist(), "fx": focal, "fy": focal, "cx": size / 2, "cy": size / 2,
                                    "width": size, "height": size})
            with torch.no_grad():
                out = render(means, scales, quats, opac, cols, torch_camera(cam), background=0.0)
            alpha = out["alpha"].numpy()
            rgb = out["rgb"].numpy() / np.maximum(alpha, 1e-6)[..., None]  # un-premultiply for RGBA
            rgba = np.concatenate([rgb.clip(0, 1), alpha[..., None]], -1)
            Image.fromarray((rgba * 255 + 0.5).astype(np.uint8), "RGBA").save(root / split / f"r_{k}.png")
            depth = np.where(alpha > 0.5, out["depth"].numpy() / np.maximum(alpha, 1e-6), 0.0).astype(np.float32)
            np.save(root / split / f"r_{k}_depth.npy", depth)
            frames.append({"file_path": f"./{split}/r_{k}", "transform_matrix": c2w.tolist(),
                           "depth_file_path": f"{split}/r_{k}_depth.npy"})
        (root / f"transforms_{split}.json").write_text(json.dumps({"camera_angle_x": FOV_X, "frames": frames}))
    np.save(root / "points.npy", means.numpy())
    return root
