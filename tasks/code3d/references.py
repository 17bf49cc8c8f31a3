"""Reference geometry and views: reference scripts run through the same executor, cached on disk.

Cache key: the script's text, the render settings, the sample count and the worker/geometry code,
so changing any of them re-renders. Cache root: ``$HARNESS_CACHE_DIR/code3d/refs`` (reference data
is never placed where the sandboxed model code could read it: Chamfer is computed on the host).
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from harness.tasks.code3d.data import Item
from harness.tasks.code3d.executor import HERE, BlenderPool
from harness.types import stable_hash

_LOCK = threading.Lock()
# Infinigen-distilled factories can be slow; the reference harness gives a Blender run 240 s.
REFERENCE_TIMEOUT_S = 240.0


@dataclass
class Reference:
    points: str | None  # .npy surface samples of the reference mesh
    thumbs: str | None  # .npy (4, S, S, 4) thumbnails of the reference views
    renders: list[str]  # PNG views (rendered by us, or the benchmark's own)
    analysis: dict
    error: str | None = None
    views: str | None = None  # full-size views as .npy (only when the pool makes them)


def cache_root() -> Path:
    base = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return base / "code3d" / "refs"


def reference_key(item: Item, pool: BlenderPool) -> str:
    code_hash = stable_hash([(HERE / n).read_text() for n in ("worker.py", "geometry.py")])
    return stable_hash({
        "script": item.script, "images": item.reference_images, "render": pool.render.to_dict(),
        "points": pool.points, "thumb": pool.thumb_size, "code": code_hash, "full": pool.full_views,
    })[:24]  # fmt: skip


def prepare_reference(item: Item, pool: BlenderPool) -> Reference:
    """Run (or load from cache) the reference for ``item``. Thread-safe; blocking."""
    folder = cache_root() / reference_key(item, pool)
    meta = folder / "reference.json"
    with _LOCK:
        if meta.is_file():
            data = json.loads(meta.read_text())
            return Reference(**data)
        folder.mkdir(parents=True, exist_ok=True)
        points = thumbs = error = views = None
        renders: list[str] = []
        analysis: dict = {}
        if item.script:
            result = pool.execute_sync(
                item.script, folder, exec_timeout_s=max(pool.exec_timeout_s, REFERENCE_TIMEOUT_S)
            )
            if result.ok:
                points, thumbs, renders, analysis = result.points, result.thumbs, result.renders, result.analysis
                views = result.views_npy
            else:
                error = f"reference script {item.script_path} failed: {result.status} {result.error}"
        if item.reference_images:  # the benchmark's own views win over ours for image metrics
            thumbs = str(pool.thumbnails_sync(item.reference_images, folder / "given_thumbs.npy"))
            renders = list(item.reference_images)
            given_views = folder / "given_thumbs_views.npy"
            views = str(given_views) if given_views.is_file() else None
        ref = Reference(points, thumbs, renders, analysis, error, views)
        meta.write_text(json.dumps(ref.__dict__))
        return ref
