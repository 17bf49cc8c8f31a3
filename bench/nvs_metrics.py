"""Time the nvs image metrics on rendered-vs-true image pairs (default: 100 pairs at 512x512).

Each metric runs over the same pairs; the table gives mean milliseconds per pair (CPU time and wall
time) and, for SSIM, the ratio against scikit-image's ``structural_similarity`` called the way the
pixelSplat evaluation calls it (the baseline, timed in the same run), after checking they agree. LPIPS
is timed on CPU torch with the threads OMP_NUM_THREADS allows; pass ``--lpips-pairs`` to time it on fewer
pairs when the machine is shared.

    OMP_NUM_THREADS=1 python bench/nvs_metrics.py
    OMP_NUM_THREADS=1 python bench/nvs_metrics.py --pairs 20 --size 256 --lpips-pairs 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from harness.tasks.nvs.image_metrics import psnr, psnr_pixelsplat, ssim, ssim_pixelsplat
from harness.tasks.nvs.lpips import lpips_distance, lpips_model


def pairs(n: int, size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Smooth 'scenes' with texture and a noisy, slightly shifted 'render' of each."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size] / size
    out = []
    for _ in range(n):
        f = rng.uniform(2, 12, 3)
        gt = 0.5 + 0.25 * np.stack([np.sin(f[0] * xx + f[1] * yy), np.cos(f[1] * xx), np.sin(f[2] * yy)], -1)
        gt = np.clip(gt + rng.normal(0, 0.03, gt.shape), 0, 1)
        pred = np.roll(gt, int(rng.integers(0, 3)), axis=1) + rng.normal(0, rng.uniform(0.01, 0.1), gt.shape)
        out.append((pred, gt))
    return out


def skimage_ssim(pred: np.ndarray, gt: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return float(structural_similarity(np.clip(gt, 0, 1).transpose(2, 0, 1), np.clip(pred, 0, 1).transpose(2, 0, 1),
                                       win_size=11, gaussian_weights=True, channel_axis=0, data_range=1.0))


def timed(fn: Callable[[np.ndarray, np.ndarray], float], data: list[tuple[np.ndarray, np.ndarray]]
          ) -> tuple[float, float, list[float]]:
    """Mean CPU and wall milliseconds per pair, and the values."""
    c0, w0 = time.process_time(), time.perf_counter()
    values = [fn(p, g) for p, g in data]
    return ((time.process_time() - c0) * 1e3 / len(data), (time.perf_counter() - w0) * 1e3 / len(data), values)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--lpips-pairs", type=int, default=None, help="pairs for LPIPS (default: --pairs)")
    args = ap.parse_args()
    data = pairs(args.pairs, args.size)
    lp_data = data[: args.lpips_pairs or args.pairs]
    for net in ("alex", "vgg"):
        lpips_model(net)  # weights loaded once, outside the timing
    rows: list[tuple[str, int, float, float, float]] = []
    results = {}
    metrics: list[tuple[str, Callable[[np.ndarray, np.ndarray], float], list[tuple[np.ndarray, np.ndarray]]]] = [
        ("psnr (graphdeco)", psnr, data),
        ("psnr_pixelsplat", psnr_pixelsplat, data),
        ("ssim (graphdeco)", ssim, data),
        ("ssim_pixelsplat", ssim_pixelsplat, data),
        ("baseline: skimage SSIM", skimage_ssim, data),
        ("lpips alex", lambda p, g: lpips_distance(p, g, "alex"), lp_data),
        ("lpips vgg", lambda p, g: lpips_distance(p, g, "vgg"), lp_data),
    ]
    for name, fn, d in metrics:
        cpu, wall, values = timed(fn, d)
        results[name] = (cpu, values)
        rows.append((name, len(d), cpu, wall, float(np.mean(values))))
    gap = max(abs(a - b) for a, b in zip(results["ssim_pixelsplat"][1], results["baseline: skimage SSIM"][1],
                                         strict=True))
    base = results["baseline: skimage SSIM"][0]
    print(f"{args.pairs} pairs at {args.size}x{args.size} (LPIPS on {len(lp_data)}); ms per pair")
    print(f"{'metric':<24}{'pairs':>6}{'cpu ms':>10}{'wall ms':>10}{'mean value':>12}{'cpu vs skimage':>16}")
    for name, n, cpu, wall, mean in rows:
        print(f"{name:<24}{n:>6}{cpu:>10.1f}{wall:>10.1f}{mean:>12.4f}{cpu / base:>15.2f}x")
    print(f"ssim_pixelsplat vs scikit-image: max |difference| {gap:.2e} over {args.pairs} pairs")


if __name__ == "__main__":
    main()
