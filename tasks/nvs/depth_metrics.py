"""Depth error of a rendered depth map against the true one, as monocular-depth work reports it.

The definitions and the order of operations follow monodepth2's ``evaluate_depth.py`` (``compute_errors``
and its evaluation loop): keep pixels whose true depth is valid (finite, above ``min_depth``, below
``max_depth`` when given, inside ``mask``); for the median-scaled variant multiply the prediction by
median(true) / median(predicted) over those pixels; clip the prediction to [min_depth, max_depth]; then

- ``abs_rel`` = mean(|d - d*| / d*)                 (lower is better, raw)
- ``sq_rel``  = mean((d - d*)^2 / d*)               (lower is better, raw)
- ``rmse``    = sqrt(mean((d - d*)^2))              (lower is better, scene units)
- ``rmse_log``= sqrt(mean((log d - log d*)^2))      (lower is better, raw)
- ``delta1``, ``delta2``, ``delta3`` = fraction with max(d/d*, d*/d) < 1.25, 1.25^2, 1.25^3 (higher is better)

The metric variant (``median_scaling=False``) compares depths as rendered, which is right when the
method's scale is the scene's (posed training views). ``depth_report`` gives both, the median-scaled
keys suffixed ``_med``.
"""

from __future__ import annotations

import numpy as np

from harness.types import MetricInfo, higher, lower

__all__ = ["METRICS", "depth_metrics", "depth_report"]

_KEYS = ("abs_rel", "sq_rel", "rmse", "rmse_log", "delta1", "delta2", "delta3")
_BASE: dict[str, MetricInfo] = {
    "abs_rel": lower("AbsRel"), "sq_rel": lower("SqRel"), "rmse": lower("depth RMSE"),
    "rmse_log": lower("RMSE log"), "delta1": higher("δ<1.25"), "delta2": higher("δ<1.25²"),
    "delta3": higher("δ<1.25³"),
}
METRICS: dict[str, MetricInfo] = {
    **_BASE,
    **{f"{k}_med": MetricInfo(v.direction, v.scale, f"{v.display} (median-scaled)") for k, v in _BASE.items()},
}


def _valid_mask(gt: np.ndarray, mask: np.ndarray | None, min_depth: float, max_depth: float | None) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        valid = np.isfinite(gt) & (gt > min_depth)
        if max_depth is not None:
            valid &= gt < max_depth
    if mask is not None:
        m = np.asarray(mask)
        if m.shape != gt.shape:
            raise ValueError(f"depth mask shape {m.shape} differs from the depth map's {gt.shape}")
        valid &= m.astype(bool)
    return valid


def depth_metrics(pred: np.ndarray, gt: np.ndarray, *, mask: np.ndarray | None = None,
                  median_scaling: bool = False, min_depth: float = 1e-3,
                  max_depth: float | None = None) -> dict[str, float]:
    """The errors above over the valid pixels of one HxW depth map (see the module docstring).

    Raises ValueError (one line) for mismatched shapes, no valid pixel, or a NaN/inf prediction where
    the true depth is valid."""
    p = np.asarray(pred, dtype=np.float64)
    g = np.asarray(gt, dtype=np.float64)
    if p.ndim == 3 and p.shape[-1] == 1:
        p = p[..., 0]
    if g.ndim == 3 and g.shape[-1] == 1:
        g = g[..., 0]
    if p.ndim != 2 or p.shape != g.shape:
        raise ValueError(f"depth maps must be HxW and the same size, got prediction {np.shape(pred)} "
                         f"vs ground truth {np.shape(gt)}")
    if max_depth is not None and max_depth <= min_depth:
        raise ValueError(f"max_depth ({max_depth}) must exceed min_depth ({min_depth})")
    valid = _valid_mask(g, mask, min_depth, max_depth)
    if not valid.any():
        raise ValueError("no pixel has a valid ground-truth depth")
    p, g = p[valid], g[valid]
    if not np.isfinite(p).all():
        raise ValueError("predicted depth has NaN or infinite values where the true depth is valid")
    scale = 1.0
    if median_scaling:
        median_pred = float(np.median(p))
        if median_pred <= 0:
            raise ValueError("median scaling needs a positive median predicted depth")
        scale = float(np.median(g)) / median_pred
        p = p * scale
    # Clipping after scaling, as the reference does, keeps log and ratios finite for zero/negative depths.
    p = np.clip(p, min_depth, max_depth if max_depth is not None else np.inf)
    ratio = np.maximum(g / p, p / g)
    diff = g - p
    out = {
        "abs_rel": float(np.mean(np.abs(diff) / g)),
        "sq_rel": float(np.mean(diff**2 / g)),
        "rmse": float(np.sqrt(np.mean(diff**2))),
        "rmse_log": float(np.sqrt(np.mean((np.log(g) - np.log(p)) ** 2))),
        "delta1": float(np.mean(ratio < 1.25)),
        "delta2": float(np.mean(ratio < 1.25**2)),
        "delta3": float(np.mean(ratio < 1.25**3)),
    }
    out["scale"] = scale
    out["n_valid"] = float(valid.sum())
    return out


def depth_report(pred: np.ndarray, gt: np.ndarray, *, mask: np.ndarray | None = None, min_depth: float = 1e-3,
                 max_depth: float | None = None) -> dict[str, float]:
    """Metric and median-scaled errors in one dict (keys of ``METRICS``)."""
    metric = depth_metrics(pred, gt, mask=mask, min_depth=min_depth, max_depth=max_depth)
    scaled = depth_metrics(pred, gt, mask=mask, median_scaling=True, min_depth=min_depth, max_depth=max_depth)
    return {**{k: metric[k] for k in _KEYS}, **{f"{k}_med": scaled[k] for k in _KEYS}}
