"""What every nvs backend shares: reading views out of samples and requests, the fit cache key, and
writing a rendered view (PNG image + depth .npy) where the run page can show it.

Fits are cached by :mod:`harness.fit_cache` under ``$HARNESS_CACHE_DIR/nvs/fits`` (:data:`FITS`), keyed
on the backend, its config, the train samples (and the bytes of their images), the views fitted and
the seed; a cache file is read as data only, and one that is refused or unusable is refitted.

A sample's first part carries ``options["nvs"]``: ``scene`` (the scene's content key), ``camera``
(:class:`harness.tasks.nvs.scenes.Camera` as a dict) and, for train views only, ``image``. Held-out
requests carry no image: a backend renders from its fit of that scene.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from harness import fit_cache
from harness.backend_settings import Setting
from harness.stored_paths import stored_path
from harness.tasks.nvs.scenes import Camera, SceneError
from harness.types import Message, Output, Sample, stable_hash


class ViewError(ValueError):
    """A sample or request without a usable view description (one line)."""


@dataclass(frozen=True)
class ViewSpec:
    scene: str
    name: str
    camera: Camera
    image: str | None = None


def view_of(messages: Sequence[Message], name: str = "") -> ViewSpec:
    for m in messages:
        for p in m.content:
            nvs = (p.options or {}).get("nvs")
            if isinstance(nvs, dict):
                try:
                    cam = Camera.from_dict(nvs["camera"])
                except (KeyError, TypeError, ValueError) as exc:
                    raise ViewError(f"view {name or '?'} has a malformed camera ({exc})") from None
                return ViewSpec(str(nvs.get("scene", "")), str(nvs.get("view", name)), cam, nvs.get("image"))
    raise ViewError(f"view {name or '?'} has no camera (options['nvs'] on its first part)")


def train_views(train: Sequence[Sample]) -> dict[str, list[ViewSpec]]:
    """Train views grouped by scene; every train view must name its image."""
    out: dict[str, list[ViewSpec]] = {}
    for s in train:
        v = view_of(s.messages, s.id)
        if not v.image:
            raise ViewError(f"train view {s.id!r} has no image")
        out.setdefault(v.scene, []).append(v)
    if not out:
        raise ViewError("the task has no train views to fit")
    return out


def load_images(views: Sequence[ViewSpec]) -> Any:
    """(V, H, W, 3) float32 tensor, white background; one size for all views."""
    import numpy as np
    import torch

    from harness.tasks.nvs.scenes import read_rgb

    arrays = []
    for v in views:
        img = read_rgb(v.image or "")
        if img.shape[:2] != (v.camera.height, v.camera.width):
            raise ViewError(f"train view {v.name}: image is {img.shape[1]}x{img.shape[0]}, camera says "
                            f"{v.camera.width}x{v.camera.height}")
        arrays.append(img)
    if len({a.shape for a in arrays}) > 1:
        raise ViewError("train views of one scene have different image sizes")
    return torch.from_numpy(np.stack(arrays))


FITS = "nvs/fits"  # harness.fit_cache folder of the nvs fits (where they always were)


def views_fit_key(backend: str, config: dict[str, Any], samples: Sequence[Sample], views: Sequence[ViewSpec]) -> str:
    """The fit cache key of fitting ``backend`` with ``config`` on ``views`` (taken from ``samples``):
    the images' bytes are in it, so a scene re-rendered in place refits."""
    task_hash = fit_cache.samples_hash(samples, files=[v.image for v in views])
    fitted = [(v.scene, v.name, v.camera.to_dict(), v.image) for v in views]
    return fit_cache.fit_key(backend=backend, settings=config, task_hash=task_hash, train=stable_hash(fitted),
                             seed=int(config.get("seed", 0)), extra={"v": 1})


def scene_samples(train: Sequence[Sample], scene: str) -> list[Sample]:
    """The train samples of one scene (a per-scene fit is keyed on those alone)."""
    return [s for s in train if view_of(s.messages, s.id).scene == scene]


def artifacts_dir(spec: str) -> Path:
    base = Path(stored_path(os.environ.get("HARNESS_ARTIFACTS", "artifacts")))
    return base / "nvs" / stable_hash(spec)[:12]


def write_render(folder: Path, name: str, rgb: Any, depth: Any, alpha: Any) -> dict[str, Any]:
    """Save one rendered view; refuse non-finite renders (the caller turns that into an error row).
    Depth is the alpha-normalised expected depth, 0 where less than half the pixel is covered."""
    import numpy as np
    from PIL import Image

    rgb, depth, alpha = (np.asarray(a, dtype=np.float32) for a in (rgb, depth, alpha))
    if not (np.isfinite(rgb).all() and np.isfinite(depth).all() and np.isfinite(alpha).all()):
        raise ValueError(f"render of {name} has non-finite values (NaN or inf)")
    safe = name.replace("/", "_")
    folder.mkdir(parents=True, exist_ok=True)
    image = folder / f"{safe}.png"
    Image.fromarray((rgb.clip(0, 1) * 255 + 0.5).astype(np.uint8)).save(image)
    surface = np.where(alpha > 0.5, depth / np.maximum(alpha, 1e-6), 0.0).astype(np.float32)
    depth_path = folder / f"{safe}_depth.npy"
    np.save(depth_path, surface)
    return {"image": str(image), "depth": str(depth_path)}


def write_gaussians(folder: Path, scene: str, means: Any, opacities: Any) -> str:
    """(N, 4) xyz + opacity of a fit's Gaussians: the scorer's floater fraction reads it."""
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"gaussians_{stable_hash(scene)[:10]}.npy"
    np.save(path, np.concatenate([np.asarray(means), np.asarray(opacities)[:, None]], 1).astype(np.float32))
    return str(path)


def error_outputs(message: str, n: int) -> list[Output]:
    return [Output(error=message) for _ in range(n)]


def between(tp: type[int] | type[float], low: float, high: float, default: Any, doc: str) -> Setting:
    """A setting of type ``tp`` (int or float) bounded to [low, high], refused as "... between LOW and HIGH"."""
    bounds = Field(ge=low, le=high)
    if tp is int:
        return Setting(Annotated[int, bounds], default, doc, expect=f"an integer between {int(low)} and {int(high)}")
    return Setting(Annotated[float, bounds], default, doc, expect=f"a number between {low:g} and {high:g}")


__all__ = ["FITS", "SceneError", "ViewError", "ViewSpec", "view_of", "train_views", "load_images", "views_fit_key",
           "scene_samples", "artifacts_dir", "write_render", "write_gaussians", "error_outputs", "between"]
