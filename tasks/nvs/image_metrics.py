"""Image quality of a rendered view against its ground truth, under the two protocols NVS papers report.

graphdeco (3D Gaussian Splatting, ``utils/image_utils.py`` and ``utils/loss_utils.py``):

- ``psnr``: 20 log10(1 / sqrt(MSE)) over all pixels and channels, no clipping; +inf for identical images.
- ``ssim``: an 11x11 Gaussian window (sigma 1.5) applied as a 2D convolution with zero padding, so the
  border pixels count too; the SSIM map's mean over every pixel and channel.

pixelSplat / MVSplat (``src/evaluation/metrics.py``):

- ``psnr_pixelsplat``: both images clipped to [0, 1], then -10 log10(MSE).
- ``ssim_pixelsplat``: scikit-image's ``structural_similarity(win_size=11, gaussian_weights=True,
  data_range=1.0)`` per channel: Gaussian filtering (sigma 1.5, truncated at 3.5 sigma) with reflected
  borders, the sample-covariance factor N/(N-1) with N = 121, and the mean over the map less a 5-pixel
  border; channels averaged. Computed here with scipy directly (the same filter, in float64), on images
  clipped to [0, 1] as that protocol's saved PNGs are.

Scales: PSNR in dB (higher is better); SSIM a fraction in [-1, 1] (higher is better).
Inputs: float arrays HxWx3, nominally in [0, 1]; bad shapes, non-float dtypes and NaN/inf raise ValueError.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

__all__ = ["check_pair", "psnr", "psnr_pixelsplat", "ssim", "ssim_pixelsplat"]

_C1 = 0.01**2  # (K1 * data_range)^2 with data_range 1
_C2 = 0.03**2
_WINDOW = 11
_SIGMA = 1.5


def check_pair(pred: np.ndarray, gt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Both images as float64 HxWx3 arrays, or a one-line ValueError saying what is wrong."""
    out = []
    for name, image in (("prediction", pred), ("ground truth", gt)):
        array = np.asarray(image)
        if not np.issubdtype(array.dtype, np.floating):
            raise ValueError(f"{name} must be a float image in [0, 1], got dtype {array.dtype}")
        if array.ndim != 3 or array.shape[2] != 3 or array.shape[0] == 0 or array.shape[1] == 0:
            raise ValueError(f"{name} must be an HxWx3 image, got shape {array.shape}")
        if not np.isfinite(array).all():
            raise ValueError(f"{name} has NaN or infinite pixels")
        out.append(array.astype(np.float64, copy=False))
    if out[0].shape != out[1].shape:
        raise ValueError(f"image sizes differ: prediction {out[0].shape} vs ground truth {out[1].shape}")
    return out[0], out[1]


def _psnr_from_mse(mse: float) -> float:
    return math.inf if mse == 0 else -10.0 * math.log10(mse)


def psnr(pred: np.ndarray, gt: np.ndarray) -> float:
    """PSNR in dB as graphdeco's gaussian-splatting computes it (no clipping)."""
    a, b = check_pair(pred, gt)
    return _psnr_from_mse(float(np.mean((a - b) ** 2)))


def psnr_pixelsplat(pred: np.ndarray, gt: np.ndarray) -> float:
    """PSNR in dB under the pixelSplat / MVSplat protocol (both images clipped to [0, 1])."""
    a, b = check_pair(pred, gt)
    return _psnr_from_mse(float(np.mean((np.clip(a, 0, 1) - np.clip(b, 0, 1)) ** 2)))


def _gaussian_taps() -> np.ndarray:
    x = np.arange(_WINDOW) - _WINDOW // 2
    taps = np.exp(-(x**2) / (2 * _SIGMA**2))
    return taps / taps.sum()


def ssim(pred: np.ndarray, gt: np.ndarray) -> float:
    """SSIM as graphdeco's gaussian-splatting computes it (zero-padded 11x11 Gaussian, whole-map mean)."""
    from scipy.ndimage import correlate1d

    a, b = check_pair(pred, gt)
    taps = _gaussian_taps()

    def blur(x: np.ndarray) -> np.ndarray:
        # The 2D window is the outer product of the 1D taps, so two 1D passes equal F.conv2d with it;
        # mode="constant" is conv2d's zero padding of window_size // 2.
        return correlate1d(correlate1d(x, taps, axis=0, mode="constant"), taps, axis=1, mode="constant")

    return _ssim_mean(a, b, blur, cov_norm=1.0, crop=0)


def ssim_pixelsplat(pred: np.ndarray, gt: np.ndarray) -> float:
    """SSIM under the pixelSplat / MVSplat protocol (scikit-image's Gaussian SSIM on [0, 1]-clipped images)."""
    from scipy.ndimage import gaussian_filter

    a, b = check_pair(pred, gt)
    if min(a.shape[:2]) < _WINDOW:
        raise ValueError(f"SSIM (pixelSplat protocol) needs images of at least {_WINDOW}x{_WINDOW} pixels, "
                         f"got {a.shape[0]}x{a.shape[1]}")
    a, b = np.clip(a, 0, 1), np.clip(b, 0, 1)

    def blur(x: np.ndarray) -> np.ndarray:
        # sigma 0 on the channel axis: each channel is filtered on its own, as the per-channel loop does
        return gaussian_filter(x, sigma=(_SIGMA, _SIGMA, 0.0), truncate=3.5, mode="reflect")

    n = _WINDOW * _WINDOW
    return _ssim_mean(a, b, blur, cov_norm=n / (n - 1), crop=(_WINDOW - 1) // 2)


def _ssim_mean(a: np.ndarray, b: np.ndarray, blur: Callable[[np.ndarray], np.ndarray], cov_norm: float,
               crop: int) -> float:
    mu_a, mu_b = blur(a), blur(b)
    var_a = cov_norm * (blur(a * a) - mu_a * mu_a)
    var_b = cov_norm * (blur(b * b) - mu_b * mu_b)
    cov = cov_norm * (blur(a * b) - mu_a * mu_b)
    ssim_map = ((2 * mu_a * mu_b + _C1) * (2 * cov + _C2)) / ((mu_a**2 + mu_b**2 + _C1) * (var_a + var_b + _C2))
    if crop:
        ssim_map = ssim_map[crop:-crop, crop:-crop]
    # per-channel means averaged equal the overall mean (every channel has the same pixel count)
    return float(ssim_map.mean())
