"""Score one rendered held-out view against its ground truth.

Image metrics (both protocols, from ``image_metrics`` and ``lpips``), depth metrics (``depth_metrics``:
metric and median-scaled, over the pixels where the true depth is valid), surface Chamfer (``chamfer``:
the view's predicted depth lifted to world points against its true depth lifted the same way), the
number of Gaussians and the floater fraction (Gaussians of opacity >= ``FLOATER_OPACITY`` whose centre
lies farther than ``FLOATER_TOLERANCE`` of the scene's size from the true surface samples). Depth,
Chamfer and floater metrics are left out for scenes that have no true depth or surface.

A prediction that cannot be read (missing file, not an image, another size, NaN) leaves the view
unscored with a one-line reason; the side-by-side picture (rendered | true | rendered depth | true
depth) is written next to the rendered image and shown on the run page.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.task import ScoreContext
from harness.types import MetricInfo, Output, Sample, Score, higher, lower, neutral

FLOATER_OPACITY = 0.05
FLOATER_TOLERANCE = 0.02  # x the diagonal of the true surface's bounding box
CHAMFER_DENSITY = 0.005  # x that diagonal: the DTU script's thinning distance, in scene units here
CHAMFER_TRUNCATE = 0.1  # x that diagonal: distances beyond are outliers, dropped (the script's max_dist)

IMAGE_METRICS: dict[str, MetricInfo] = {
    "psnr": higher("PSNR (dB)", "raw"),
    "ssim": higher("SSIM"),
    "lpips_vgg": lower("LPIPS VGG", "fraction"),
    "lpips_alex": lower("LPIPS AlexNet", "fraction"),
    "psnr_pixelsplat": higher("PSNR, pixelSplat protocol (dB)", "raw"),
    "ssim_pixelsplat": higher("SSIM, pixelSplat protocol"),
    "lpips_pixelsplat": lower("LPIPS VGG, pixelSplat protocol", "fraction"),
}
DEPTH_KEYS = ("abs_rel", "rmse", "delta1", "abs_rel_med", "rmse_med", "delta1_med")
GEOMETRY_METRICS: dict[str, MetricInfo] = {
    "chamfer": lower("Chamfer distance (scene units)"),
    "chamfer_accuracy": lower("Chamfer accuracy"),
    "chamfer_completeness": lower("Chamfer completeness"),
    "floater_fraction": lower("floater fraction", "fraction"),
    "n_gaussians": neutral("Gaussians"),
}


def metric_declarations(depth: bool = True) -> dict[str, MetricInfo]:
    from harness.tasks.nvs.depth_metrics import METRICS as DEPTH

    out = dict(IMAGE_METRICS)
    if depth:
        out.update({f"depth_{k}": DEPTH[k] for k in DEPTH_KEYS})
        out.update(GEOMETRY_METRICS)
    else:
        out["n_gaussians"] = GEOMETRY_METRICS["n_gaussians"]
    return out


class PredictionError(ValueError):
    pass


def _read_prediction(output: Output, shape: tuple[int, ...]) -> tuple[Any, Any]:
    import numpy as np

    from harness.tasks.nvs.scenes import SceneError, read_rgb

    pred = output.prediction
    if not isinstance(pred, dict) or not isinstance(pred.get("image"), str):
        raise PredictionError("the prediction names no rendered image ({'image': PATH, 'depth': PATH})")
    if not Path(pred["image"]).is_file():
        raise PredictionError(f"rendered image {pred['image']} does not exist")
    try:
        rgb = read_rgb(pred["image"])
    except SceneError as exc:
        raise PredictionError(str(exc)) from None
    if rgb.shape != shape:
        raise PredictionError(f"rendered image is {rgb.shape[1]}x{rgb.shape[0]}, the view is {shape[1]}x{shape[0]}")
    depth = None
    if isinstance(pred.get("depth"), str):
        try:
            depth = np.load(pred["depth"], allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise PredictionError(f"rendered depth {pred['depth']} is not a readable .npy ({exc})") from None
        if depth.shape != shape[:2]:
            raise PredictionError(f"rendered depth is {depth.shape}, the view is {shape[:2]}")
        if not np.isfinite(depth).all():
            raise PredictionError("rendered depth has NaN or infinite values")
    return rgb, depth


def lift(depth: Any, camera: Any) -> Any:
    """World points (M, 3) of the pixels with depth > 0; ``camera`` has an OpenGL c2w (-Z forward)."""
    import numpy as np

    h, w = depth.shape
    ys, xs = np.nonzero(depth > 0)
    z = depth[ys, xs]
    d = np.stack([(xs + 0.5 - camera.cx) / camera.fx * z, -(ys + 0.5 - camera.cy) / camera.fy * z, -z], 1)
    c2w = np.asarray(camera.c2w)
    return d @ c2w[:3, :3].T + c2w[:3, 3]


def _side_by_side(pred: Any, gt: Any, pred_depth: Any | None, gt_depth: Any | None, path: Path) -> str | None:
    import numpy as np
    from PIL import Image

    panels = [pred, gt]
    if pred_depth is not None and gt_depth is not None:
        valid = gt_depth[gt_depth > 0]
        lo, hi = (float(valid.min()), float(valid.max())) if valid.size else (0.0, 1.0)
        for d in (pred_depth, gt_depth):
            grey = np.where(d > 0, 1.0 - (d - lo) / max(hi - lo, 1e-6), 0.0).clip(0, 1)
            panels.append(np.repeat(grey[..., None], 3, 2))
    gap = np.ones((pred.shape[0], 2, 3))
    row = np.concatenate([x for p in panels for x in (p, gap)][:-1], 1)
    try:
        Image.fromarray((row.clip(0, 1) * 255 + 0.5).astype(np.uint8)).save(path)
    except OSError:
        return None
    return str(path)


DEPTH_MASKS = ("all", "rendered")


def score_view(sample: Sample, output: Output, ctx: ScoreContext | None = None, *, depth_mask: str = "all") -> Score:
    """``depth_mask="all"`` (the default) scores depth as monodepth2's ``evaluate_depth.py`` does: every
    pixel with a valid true depth counts, and a pixel the method left unrendered (depth 0) is clipped to
    the minimum depth, so holes cost what they should. ``"rendered"`` keeps only the pixels the method
    rendered (depth > 0): an easier, non-reference reading some NVS papers use, kept as a named option."""
    import numpy as np

    from harness.tasks.nvs.image_metrics import psnr, psnr_pixelsplat, ssim, ssim_pixelsplat
    from harness.tasks.nvs.lpips import LpipsWeightsMissing, lpips_distance
    from harness.tasks.nvs.scenes import Camera, read_rgb

    target = sample.target or {}
    gt = read_rgb(target["image"])
    try:
        pred, pred_depth = _read_prediction(output, gt.shape)
    except PredictionError as exc:
        return Score.not_scored(str(exc))
    values: dict[str, float] = {
        "psnr": psnr(pred, gt), "ssim": ssim(pred, gt),
        "psnr_pixelsplat": psnr_pixelsplat(pred, gt), "ssim_pixelsplat": ssim_pixelsplat(pred, gt),
    }  # fmt: skip
    notes: list[str] = []
    try:  # graphdeco feeds [0, 1] images to LPIPS as they are; pixelSplat maps them to [-1, 1] (VGG)
        values["lpips_vgg"] = lpips_distance(pred, gt, "vgg", normalize=False)
        values["lpips_alex"] = lpips_distance(pred, gt, "alex", normalize=False)
        values["lpips_pixelsplat"] = lpips_distance(pred, gt, "vgg", normalize=True)
    except (LpipsWeightsMissing, ValueError) as exc:  # weights not installed, or an image too small
        notes.append(f"lpips: {exc}")
    pd = output.prediction if isinstance(output.prediction, dict) else {}
    if isinstance(pd.get("n_gaussians"), int | float):
        values["n_gaussians"] = float(pd["n_gaussians"])
    gt_depth = np.load(target["depth"]) if target.get("depth") else None
    if gt_depth is not None and pred_depth is not None:
        from harness.tasks.nvs.depth_metrics import depth_report

        try:
            report = depth_report(pred_depth, gt_depth, mask=pred_depth > 0 if depth_mask == "rendered" else None)
            values.update({f"depth_{k}": report[k] for k in DEPTH_KEYS})
        except ValueError as exc:  # e.g. the render covers none of the object
            notes.append(f"depth: {exc}")
        camera = Camera.from_dict(target["camera"])
        _geometry(values, notes, lift(pred_depth, camera), lift(gt_depth, camera), sample.metadata.get("points"),
                  pd.get("gaussians"))
    media = []
    pred_path = Path(pd["image"])
    side = _side_by_side(pred, gt, pred_depth, gt_depth, pred_path.with_name(pred_path.stem + "_vs_gt.png"))
    if side:
        media.append({"type": "image", "path": side})
    return Score(values=values, answer=str(pd["image"]), explanation="; ".join(notes),
                 details={"media": media, "renders": [pd["image"], target["image"]],
                          "scene": sample.metadata.get("scene")})


def _geometry(values: dict[str, float], notes: list[str], pred_pts: Any, gt_pts: Any, surface: str | None,
              gaussians: Any) -> None:
    import numpy as np

    from harness.tasks.nvs.chamfer import chamfer_dtu, off_surface_fraction

    if len(gt_pts) == 0:
        return
    ref = np.load(surface) if surface else gt_pts
    diag = float(np.linalg.norm(ref.max(0) - ref.min(0))) or 1.0
    if len(pred_pts):
        try:
            ch = chamfer_dtu(pred_pts, gt_pts, downsample_density=CHAMFER_DENSITY * diag,
                             max_dist=CHAMFER_TRUNCATE * diag)
            values.update({"chamfer": ch["chamfer"], "chamfer_accuracy": ch["accuracy"],
                           "chamfer_completeness": ch["completeness"]})
        except ValueError as exc:
            notes.append(f"chamfer: {exc}")
    else:
        notes.append("chamfer: the render covers no pixel")
    if surface and isinstance(gaussians, str) and Path(gaussians).is_file():
        g = np.load(gaussians)
        solid = g[g[:, 3] >= FLOATER_OPACITY, :3]
        if len(solid):
            values["floater_fraction"] = off_surface_fraction(solid, ref, FLOATER_TOLERANCE * diag)
