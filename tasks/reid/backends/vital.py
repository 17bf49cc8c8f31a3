"""3D-VITAL's stages on the training images, all at fit time and from the image alone.

- Lifting: each training image goes through the single-view lifting model (``lifting.py``), whose
  predicted body parameters build the mesh and whose predicted camera is the source camera; Blender
  renders the mesh from that camera (the re-projection) and from ``novel`` elevated cameras, each
  with the visibility map of the predicted source camera (``lift_render.py``).
- CVCF (cross-view consistency filtering): the re-projection is compared with the source image
  (``consistency.py``); a mesh whose error exceeds ``tau`` is a failed reconstruction and all its
  novel views are dropped.
- VAAS (visibility-aware attention supervision): every kept novel view carries its visibility map;
  training supervises the network's attention with it (``net.train``'s ``supervised`` mask).

The image's pixels are all a lift sees; the sample's identity is only the ReID label of its views.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from harness.tasks.reid.consistency import consistency_error
from harness.tasks.reid.figures import NOVEL_ELEVATION, camera
from harness.tasks.reid.lift_quality import compact
from harness.tasks.reid.lift_render import render_lifts
from harness.tasks.reid.lifting import Lifter

__all__ = ["consistency_error", "lift_images", "select_views"]


def lift_images(paths: list[str], lifter: Lifter, novel: int, seed: int, folder: Path | None = None
                ) -> list[dict[str, Any]]:
    """Per image: its predicted parameters (compact), re-projection and novel views (paths)."""
    preds = lifter.lift(paths)
    rng = np.random.default_rng(seed)  # the novel cameras: the same for a given seed and image order
    lifts = [{"name": f"l{i:05d}", "params": p, "source_cam": c,
              "novel": [camera(rng, NOVEL_ELEVATION) for _ in range(novel)]} for i, (p, c) in enumerate(preds)]
    renders = render_lifts(lifts, folder=folder)
    return [{"source": src, "pred": compact(p, c), "reprojection": r["reprojection"], "novel": r["novel"]}
            for src, (p, c), r in zip(paths, preds, renders, strict=True)]


def select_views(lifts: list[dict[str, Any]], pids: list[Any], use_cvcf: bool, tau: float
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The novel views to train on (path, visibility, pid) and the filter's record, with one entry
    per lift (image name, prediction, consistency error, kept) for whoever holds the truth."""
    views: list[dict[str, Any]] = []
    entries: list[dict[str, Any]] = []
    for lift, pid in zip(lifts, pids, strict=True):
        err = consistency_error(lift["source"], lift["reprojection"])
        kept = not (use_cvcf and err > tau)
        if kept:
            views.extend({"path": n["path"], "visibility": n["visibility"], "pid": pid} for n in lift["novel"])
        entries.append({"image": Path(lift["source"]).name, "pred": lift["pred"], "error": round(err, 4),
                        "kept": kept})
    errors = [e["error"] for e in entries]
    record: dict[str, Any] = {"lifted_meshes": len(lifts), "synthetic_views_used": len(views), "cvcf": use_cvcf,
                              "cvcf_tau": tau, "cvcf_removed": sum(not e["kept"] for e in entries), "lifts": entries}
    if errors:
        record["consistency_error_median"] = round(float(np.median(errors)), 4)
    return views, record
