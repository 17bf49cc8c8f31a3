"""Image similarity between a candidate's four renders and the reference views.

The reference scores cosine similarity of SigLIP-2 / DINOv2-L / DINOv3-L embeddings. No such model
can be loaded here (no hub access, and no PyPI package ships those weights), so this module computes
a documented, model-free fallback on small RGBA thumbnails (64 px, made by the Blender worker):

* ``silhouette_iou``: IoU of the alpha masks (alpha > 0.5): shape and pose agreement per view;
* ``ssim``: mean SSIM (Wang et al. 2004; 7x7 uniform window, K1=0.01, K2=0.03, data range 1) of the
  luminance composited over white.

Both are reported view-paired (view i with view i, as the reference's "paired" mean) and
Hungarian-matched over the 4x4 view grid (the reference's second variant, which forgives a yaw
offset). Failed samples score 0 in the penalised means. These numbers are NOT comparable with the
paper's embedding similarities; they are named ``img_iou_*`` and ``img_ssim_*`` to say so.
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import uniform_filter
from scipy.optimize import linear_sum_assignment

_K1, _K2, _WIN = 0.01, 0.03, 7


def _luminance_on_white(rgba: np.ndarray) -> np.ndarray:
    img = rgba.astype(np.float64) / 255.0
    alpha = img[..., 3:4]
    rgb = img[..., :3] * alpha + (1 - alpha)
    return rgb @ np.array([0.299, 0.587, 0.114])


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two grey images in [0, 1] (equal shape)."""
    c1, c2 = _K1**2, _K2**2
    mu_a, mu_b = uniform_filter(a, _WIN), uniform_filter(b, _WIN)
    var_a = uniform_filter(a * a, _WIN) - mu_a**2
    var_b = uniform_filter(b * b, _WIN) - mu_b**2
    cov = uniform_filter(a * b, _WIN) - mu_a * mu_b
    num = (2 * mu_a * mu_b + c1) * (2 * cov + c2)
    den = (mu_a**2 + mu_b**2 + c1) * (var_a + var_b + c2)
    return float(np.mean(num / den))


def silhouette_iou(a: np.ndarray, b: np.ndarray) -> float:
    ma, mb = a[..., 3] > 127, b[..., 3] > 127
    union = np.logical_or(ma, mb).sum()
    return float(np.logical_and(ma, mb).sum() / union) if union else 1.0


def view_similarity(pred: np.ndarray, ref: np.ndarray) -> dict[str, float]:
    """pred, ref: (V, S, S, 4) uint8 thumbnails (same S). Paired and Hungarian-matched means."""
    if pred.shape != ref.shape or pred.ndim != 4 or pred.shape[-1] != 4:
        raise ValueError(f"thumbnail shapes differ or are not (V, S, S, 4): {pred.shape} vs {ref.shape}")
    n = len(pred)
    grey_p = [_luminance_on_white(v) for v in pred]
    grey_r = [_luminance_on_white(v) for v in ref]
    iou = np.array([[silhouette_iou(pred[i], ref[j]) for j in range(n)] for i in range(n)])
    sim = np.array([[ssim(grey_p[i], grey_r[j]) for j in range(n)] for i in range(n)])
    out = {"img_iou_paired": float(np.mean(np.diag(iou))), "img_ssim_paired": float(np.mean(np.diag(sim)))}
    for name, grid in (("img_iou_matched", iou), ("img_ssim_matched", sim)):
        rows, cols = linear_sum_assignment(-grid)
        out[name] = float(grid[rows, cols].mean())
    return out
