"""3D-VITAL's two stages on the lifted training images (the meshes are rendered by the data build).

- CVCF (cross-view consistency filtering): a lifted mesh is re-rendered from its source camera and
  compared with the source image on the source's visible pixels; a mesh whose re-render disagrees
  (silhouette IoU below 1 - ``tau`` or colour error on the overlap) is a failed reconstruction and all
  its novel views are dropped.
- VAAS (visibility-aware attention supervision): every kept novel view carries its per-pixel
  visibility map (surface seen from the source view vs hallucinated); training supervises the
  network's attention with it (``net.train``'s ``supervised`` mask).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from harness.tasks.reid.images import full_rgba


def consistency_error(source: str, reprojection: str) -> float:
    """(1 - silhouette IoU) + mean absolute colour difference on the overlap, in [0, 2]."""
    a, b = full_rgba(source), full_rgba(reprojection)
    if a.shape != b.shape:
        return 2.0
    ma, mb = a[..., 3] > 0.5, b[..., 3] > 0.5
    union = (ma | mb).sum()
    if union == 0:
        return 2.0
    inter = ma & mb
    iou = inter.sum() / union
    colour = float(np.abs(a[..., :3] - b[..., :3])[inter].mean()) if inter.any() else 1.0
    return float(1.0 - iou + colour)


def select_views(train: list[Any], use_cvcf: bool, tau: float) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The novel views to train on (path, visibility, pid) and the filter's record."""
    views: list[dict[str, Any]] = []
    n_corrupt = n_clean = removed_corrupt = removed_clean = 0
    errors: list[float] = []
    for s in train:
        for lift in s.metadata.get("lifts") or []:
            err = consistency_error(s.messages[0].content[0].path, lift["reprojection"])
            errors.append(err)
            rejected = use_cvcf and err > tau
            corrupted = bool(lift.get("corrupted"))
            n_corrupt += corrupted
            n_clean += not corrupted
            removed_corrupt += rejected and corrupted
            removed_clean += rejected and not corrupted
            if not rejected:
                views.extend({"path": n["path"], "visibility": n["visibility"], "pid": s.metadata["pid"]}
                             for n in lift["novel"])
    record: dict[str, Any] = {"lifted_meshes": n_corrupt + n_clean, "corrupted_meshes": n_corrupt,
                              "synthetic_views_used": len(views), "cvcf": use_cvcf, "cvcf_tau": tau}
    if use_cvcf:
        record["cvcf_corrupted_removed"] = removed_corrupt / n_corrupt if n_corrupt else None
        record["cvcf_clean_removed"] = removed_clean / n_clean if n_clean else None
    if errors:
        record["consistency_error_median"] = round(float(np.median(errors)), 4)
    return views, record
