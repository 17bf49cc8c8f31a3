"""Image preparation shared by the backends: person crops as arrays.

Renders are RGBA with the silhouette in alpha; like a detector's box, the crop is the alpha bounding
box (a little padded), stretched to the network's input size (ReID crops are resized, not letterboxed)
and composited on a flat grey. Real datasets' JPEGs have no alpha: they are used whole.
"""

from __future__ import annotations

from typing import Any

import numpy as np

INPUT_HW = (64, 32)  # height, width
BACKGROUND = 0.5


def _load(path: str) -> np.ndarray:
    from PIL import Image

    with Image.open(path) as im:
        return np.asarray(im.convert("RGBA"), dtype=np.float32) / 255.0


def person_box(alpha: np.ndarray, pad: int = 2) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the alpha's bounding box, ``pad`` pixels wider (the whole frame
    when the alpha is empty)."""
    ys, xs = np.nonzero(alpha > 0.05)
    if len(ys) == 0:
        return 0, alpha.shape[0], 0, alpha.shape[1]
    return (max(int(ys.min()) - pad, 0), min(int(ys.max()) + pad + 1, alpha.shape[0]),
            max(int(xs.min()) - pad, 0), min(int(xs.max()) + pad + 1, alpha.shape[1]))


def resize_channels(arr: np.ndarray, hw: tuple[int, int]) -> np.ndarray:
    """(H, W, C) -> (hw[0], hw[1], C), each channel resized bilinearly by PIL in its own dtype."""
    from PIL import Image

    chans = [np.asarray(Image.fromarray(arr[..., c]).resize((hw[1], hw[0]), Image.Resampling.BILINEAR)) for c in
             range(arr.shape[-1])]
    return np.stack(chans, axis=-1)


def crop(path: str, visibility: str | None = None, hw: tuple[int, int] = INPUT_HW) -> tuple[np.ndarray, Any]:
    """(image [3, H, W] float32, visibility [H, W] float32 or None) of one person image."""
    rgba = _load(path)
    y0, y1, x0, x1 = person_box(rgba[..., 3])
    rgba = rgba[y0:y1, x0:x1]
    a = rgba[..., 3:4]
    rgb = rgba[..., :3] * a + BACKGROUND * (1.0 - a)
    img = resize_channels(rgb.astype(np.float32), hw).transpose(2, 0, 1)
    vis = None
    if visibility is not None:
        v = _load(visibility)[y0:y1, x0:x1, :1] * a
        vis = resize_channels(v.astype(np.float32), hw)[..., 0]
    return np.ascontiguousarray(img, dtype=np.float32), vis


def full_rgba(path: str) -> np.ndarray:
    return _load(path)
