"""Parity of the nvs image, depth and surface metrics with literal re-implementations of the released code.

References, re-implemented below from reading them (not copied):

- graphdeco-inria/gaussian-splatting @ 15d64e67814605c4d5b24a326aad29da74898acc:
  ``utils/image_utils.py`` (``psnr``) and ``utils/loss_utils.py`` (``gaussian``, ``create_window``, ``_ssim``),
  used on [0, 1] renders by ``metrics.py``.
- dcharatan/pixelsplat @ 2331f53458b8efa3975ec3cf1c2e54a6c69b5c9c: ``src/evaluation/metrics.py``
  (``compute_psnr``, ``compute_ssim``: scikit-image ``structural_similarity(win_size=11,
  gaussian_weights=True, channel_axis=0, data_range=1.0)``); ``src/evaluation/metric_computer.py`` feeds it
  images loaded from saved PNGs, i.e. already in [0, 1].
- nianticlabs/monodepth2 @ 77f141057a01e33fa127a350a280bdcfc056f954: ``evaluate_depth.py``
  (``compute_errors`` and the masking / median-scaling / clipping loop of ``evaluate``).
- hbb1/2d-gaussian-splatting @ c15a5aba607b92ed71c4a9cbbfe8dde42dc80c3a: ``scripts/eval_dtu/eval.py``
  (downsampling, bounding-box and ObsMask masking, truncated mean distances both ways, ground plane). Its
  shuffle is unseeded; the re-implementation takes the same seeded generator so the two runs can match.
"""

from __future__ import annotations

from math import exp
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from harness.tasks.nvs import chamfer, depth_metrics, image_metrics
from harness.tasks.nvs.chamfer import chamfer_dtu, downsample, off_surface_fraction
from harness.tasks.nvs.depth_metrics import depth_metrics as depth_errors
from harness.tasks.nvs.depth_metrics import depth_report
from harness.tasks.nvs.image_metrics import psnr, psnr_pixelsplat, ssim, ssim_pixelsplat

# --- literal re-implementations --------------------------------------------------------------------


def _gd_gaussian(window_size: int, sigma: float) -> torch.Tensor:
    gauss = torch.Tensor([exp(-(x - window_size // 2) ** 2 / float(2 * sigma**2)) for x in range(window_size)])
    return gauss / gauss.sum()


def _gd_ssim(img1: torch.Tensor, img2: torch.Tensor, window_size: int = 11) -> torch.Tensor:
    channel = img1.size(-3)
    one_d = _gd_gaussian(window_size, 1.5).unsqueeze(1)
    window = one_d.mm(one_d.t()).float().unsqueeze(0).unsqueeze(0).expand(channel, 1, window_size, window_size)
    window = window.contiguous().type_as(img1)
    pad = window_size // 2
    mu1 = F.conv2d(img1, window, padding=pad, groups=channel)
    mu2 = F.conv2d(img2, window, padding=pad, groups=channel)
    mu1_sq, mu2_sq, mu1_mu2 = mu1.pow(2), mu2.pow(2), mu1 * mu2
    sigma1_sq = F.conv2d(img1 * img1, window, padding=pad, groups=channel) - mu1_sq
    sigma2_sq = F.conv2d(img2 * img2, window, padding=pad, groups=channel) - mu2_sq
    sigma12 = F.conv2d(img1 * img2, window, padding=pad, groups=channel) - mu1_mu2
    c1, c2 = 0.01**2, 0.03**2
    ssim_map = ((2 * mu1_mu2 + c1) * (2 * sigma12 + c2)) / ((mu1_sq + mu2_sq + c1) * (sigma1_sq + sigma2_sq + c2))
    return ssim_map.mean()


def _gd_psnr(img1: torch.Tensor, img2: torch.Tensor) -> torch.Tensor:
    mse = ((img1 - img2) ** 2).view(img1.shape[0], -1).mean(1, keepdim=True)
    return 20 * torch.log10(1.0 / torch.sqrt(mse))


def _chw(image: np.ndarray, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))).to(dtype)[None]


def _ps_psnr(gt: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
    gt, pred = gt.clip(min=0, max=1), pred.clip(min=0, max=1)
    mse = ((gt - pred) ** 2).mean(dim=(1, 2, 3))
    return -10 * mse.log10()


def _ps_ssim(gt: torch.Tensor, pred: torch.Tensor) -> float:
    from skimage.metrics import structural_similarity

    values = [structural_similarity(g.detach().cpu().numpy(), h.detach().cpu().numpy(), win_size=11,
                                    gaussian_weights=True, channel_axis=0, data_range=1.0)
              for g, h in zip(gt, pred, strict=True)]
    return float(values[0])


def _md2_compute_errors(gt: np.ndarray, pred: np.ndarray) -> tuple[float, ...]:
    thresh = np.maximum((gt / pred), (pred / gt))
    a1 = (thresh < 1.25).mean()
    a2 = (thresh < 1.25**2).mean()
    a3 = (thresh < 1.25**3).mean()
    rmse = np.sqrt(((gt - pred) ** 2).mean())
    rmse_log = np.sqrt(((np.log(gt) - np.log(pred)) ** 2).mean())
    abs_rel = np.mean(np.abs(gt - pred) / gt)
    sq_rel = np.mean(((gt - pred) ** 2) / gt)
    return abs_rel, sq_rel, rmse, rmse_log, a1, a2, a3


def _md2_eval(gt_depth: np.ndarray, pred_depth: np.ndarray, median: bool, min_d: float, max_d: float,
              extra_mask: np.ndarray | None = None) -> tuple[float, ...]:
    mask = np.logical_and(gt_depth > min_d, gt_depth < max_d)
    if extra_mask is not None:
        mask = np.logical_and(mask, extra_mask)
    pred_depth, gt_depth = pred_depth[mask], gt_depth[mask]
    if median:
        pred_depth = pred_depth * (np.median(gt_depth) / np.median(pred_depth))
    pred_depth[pred_depth < min_d] = min_d
    pred_depth[pred_depth > max_d] = max_d
    return _md2_compute_errors(gt_depth, pred_depth)


def _dtu_eval(data_pcd: np.ndarray, stl: np.ndarray, thresh: float, max_dist: float, seed: int,
              bb: np.ndarray | None, patch: float, obs_mask: np.ndarray | None, res: float,
              ground_plane: np.ndarray | None) -> tuple[float, float, float]:
    import sklearn.neighbors as skln

    data_pcd = data_pcd.copy()
    np.random.default_rng(seed).shuffle(data_pcd, axis=0)
    nn_engine = skln.NearestNeighbors(n_neighbors=1, radius=thresh, algorithm="kd_tree", n_jobs=1)
    nn_engine.fit(data_pcd)
    rnn_idxs = nn_engine.radius_neighbors(data_pcd, radius=thresh, return_distance=False)
    mask = np.ones(data_pcd.shape[0], dtype=np.bool_)
    for curr, idxs in enumerate(rnn_idxs):
        if mask[curr]:
            mask[idxs] = 0
            mask[curr] = 1
    data_down = data_pcd[mask]
    if bb is not None:
        bb = bb.astype(np.float32)
        inbound = ((data_down >= bb[:1] - patch) & (data_down < bb[1:] + patch * 2)).sum(axis=-1) == 3
        data_in = data_down[inbound]
    else:
        data_in = data_down
    if obs_mask is not None and bb is not None:
        data_grid = np.around((data_in - bb[:1]) / res).astype(np.int32)
        grid_inbound = ((data_grid >= 0) & (data_grid < np.expand_dims(obs_mask.shape, 0))).sum(axis=-1) == 3
        data_grid_in = data_grid[grid_inbound]
        in_obs = obs_mask[data_grid_in[:, 0], data_grid_in[:, 1], data_grid_in[:, 2]].astype(np.bool_)
        data_in_obs = data_in[grid_inbound][in_obs]
    else:
        data_in_obs = data_in
    nn_engine.fit(stl)
    dist_d2s, _ = nn_engine.kneighbors(data_in_obs, n_neighbors=1, return_distance=True)
    mean_d2s = dist_d2s[dist_d2s < max_dist].mean()
    if ground_plane is not None:
        stl_hom = np.concatenate([stl, np.ones_like(stl[:, :1])], -1)
        stl_above = stl[(ground_plane.reshape((1, 4)) * stl_hom).sum(-1) > 0]
    else:
        stl_above = stl
    nn_engine.fit(data_in)
    dist_s2d, _ = nn_engine.kneighbors(stl_above, n_neighbors=1, return_distance=True)
    mean_s2d = dist_s2d[dist_s2d < max_dist].mean()
    return float(mean_d2s), float(mean_s2d), float((mean_d2s + mean_s2d) / 2)


# --- generated images ------------------------------------------------------------------------------


def _pairs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(7)
    h, w = 37, 52  # not square, not a multiple of the window
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    smooth = np.stack([xx, yy, 0.5 * (xx + yy)], axis=-1)
    noise = rng.uniform(0, 1, (h, w, 3))
    out = {
        "random": (rng.uniform(0, 1, (h, w, 3)), noise),
        "smooth_vs_noisy": (np.clip(smooth + rng.normal(0, 0.05, smooth.shape), 0, 1), smooth),
        "constant_vs_constant": (np.full((h, w, 3), 0.3), np.full((h, w, 3), 0.7)),
        "constant_vs_texture": (np.full((h, w, 3), 0.5), noise),
        # renders overshoot [0, 1] before clipping: graphdeco does not clip, pixelSplat does
        "out_of_range": (smooth * 1.4 - 0.2, smooth),
        "tiny": (rng.uniform(0, 1, (12, 11, 3)), rng.uniform(0, 1, (12, 11, 3))),
    }
    return out


PAIRS = _pairs()


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_graphdeco_psnr_and_ssim_match_the_reference(case: str) -> None:
    pred, gt = PAIRS[case]
    ref_psnr = float(_gd_psnr(_chw(pred), _chw(gt)).item())
    ref_ssim = float(_gd_ssim(_chw(pred), _chw(gt)).item())
    assert psnr(pred, gt) == pytest.approx(ref_psnr, abs=1e-9)
    # the reference builds its window in float32 (torch.Tensor), which near-constant borders amplify
    assert ssim(pred, gt) == pytest.approx(ref_ssim, abs=2e-5)
    # and in the float32 the reference runs in on a GPU, where E[x^2] - E[x]^2 on flat regions cancels
    # to ~1e-5 relative; this module computes in float64
    assert ssim(pred, gt) == pytest.approx(float(_gd_ssim(_chw(pred, torch.float32), _chw(gt, torch.float32))),
                                           abs=1e-4)


@pytest.mark.parametrize("case", sorted(PAIRS))
def test_pixelsplat_psnr_and_ssim_match_the_reference(case: str) -> None:
    pred, gt = PAIRS[case]
    # metric_computer loads the saved PNGs (values in [0, 1]) and the batch's tensors in float32
    ref_gt = _chw(np.clip(gt, 0, 1), torch.float32)
    ref_pred = _chw(np.clip(pred, 0, 1), torch.float32)
    assert psnr_pixelsplat(pred, gt) == pytest.approx(float(_ps_psnr(_chw(gt), _chw(pred)).item()), abs=1e-9)
    assert ssim_pixelsplat(pred, gt) == pytest.approx(_ps_ssim(ref_gt, ref_pred), abs=2e-5)
    # float64 through scikit-image: the same filter, so agreement to rounding
    assert ssim_pixelsplat(pred, gt) == pytest.approx(
        _ps_ssim(_chw(np.clip(gt, 0, 1)), _chw(np.clip(pred, 0, 1))), abs=1e-10)


def test_protocols_differ_where_they_should() -> None:
    pred, gt = PAIRS["out_of_range"]
    assert psnr(pred, gt) < psnr_pixelsplat(pred, gt)  # clipping removes part of the overshoot error
    pred, gt = PAIRS["smooth_vs_noisy"]
    assert ssim(pred, gt) != pytest.approx(ssim_pixelsplat(pred, gt), abs=1e-4)  # zero pad vs reflect + crop


def test_known_values_and_identity() -> None:
    gt = PAIRS["random"][1]
    assert psnr(np.clip(gt, 0, 0.9) * 0 + 0.6, np.full_like(gt, 0.5)) == pytest.approx(20.0)
    assert psnr(gt, gt) == float("inf") and psnr_pixelsplat(gt, gt) == float("inf")
    assert ssim(gt, gt) == pytest.approx(1.0) and ssim_pixelsplat(gt, gt) == pytest.approx(1.0)
    noisy = [np.clip(gt + np.random.default_rng(1).normal(0, s, gt.shape), 0, 1) for s in (0.02, 0.1, 0.3)]
    for metric in (psnr, ssim, psnr_pixelsplat, ssim_pixelsplat):
        values = [metric(n, gt) for n in noisy]
        assert values[0] > values[1] > values[2], metric.__name__


@pytest.mark.parametrize("metric", [psnr, ssim, psnr_pixelsplat, ssim_pixelsplat])
def test_bad_inputs_are_one_line_value_errors(metric: object) -> None:
    assert callable(metric)
    good = np.zeros((16, 16, 3))
    nan = good.copy()
    nan[3, 4, 1] = np.nan
    cases = {
        "image sizes differ": (good, np.zeros((16, 17, 3))),
        "NaN": (nan, good),
        "dtype uint8": (good.astype(np.uint8), good),
        "HxWx3": (np.zeros((16, 16)), np.zeros((16, 16))),
    }
    for fragment, (a, b) in cases.items():
        with pytest.raises(ValueError, match=fragment) as err:
            metric(a, b)
        assert "\n" not in str(err.value)


def test_pixelsplat_ssim_needs_the_window_to_fit() -> None:
    small = np.zeros((10, 30, 3))
    with pytest.raises(ValueError, match="at least 11x11"):
        ssim_pixelsplat(small, small)
    assert ssim(small, small) == pytest.approx(1.0)  # graphdeco's zero padding takes any size


def test_metric_declarations() -> None:
    assert depth_metrics.METRICS["abs_rel"].direction == "lower"
    assert depth_metrics.METRICS["delta1_med"].direction == "higher"
    assert depth_metrics.METRICS["delta1"].scale == "fraction"
    assert chamfer.METRICS["chamfer"].direction == "lower"
    assert set(image_metrics.__all__) >= {"psnr", "ssim", "psnr_pixelsplat", "ssim_pixelsplat"}


# --- depth -----------------------------------------------------------------------------------------


def _depth_case(seed: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    gt = rng.uniform(0.5, 8.0, (24, 31))
    gt[0, :5] = 0.0  # no return
    gt[1, :3] = np.nan  # background
    gt[2, :2] = np.inf
    gt[3, :4] = 12.0  # beyond max_depth below
    pred = gt * rng.uniform(0.7, 1.4, gt.shape) * 1.8  # off by a global scale too
    pred[np.isnan(pred) | np.isinf(pred)] = 3.0
    pred[5, :3] = 0.0  # a hole in the render: clipped to min_depth
    pred[6, :2] = 25.0  # beyond max_depth: clipped
    mask = np.ones(gt.shape, dtype=bool)
    mask[10:14, 10:20] = False
    return pred, gt, mask


@pytest.mark.parametrize("median", [False, True])
def test_depth_metrics_match_monodepth2(median: bool) -> None:
    pred, gt, mask = _depth_case()
    mine = depth_errors(pred, gt, mask=mask, median_scaling=median, min_depth=1e-3, max_depth=10.0)
    with np.errstate(invalid="ignore"):
        ref = _md2_eval(gt.copy(), pred.copy(), median, 1e-3, 10.0, mask)
    keys = ("abs_rel", "sq_rel", "rmse", "rmse_log", "delta1", "delta2", "delta3")
    for key, value in zip(keys, ref, strict=True):
        assert mine[key] == pytest.approx(float(value), rel=1e-12, abs=1e-12), key
    assert mine["n_valid"] == float((np.nan_to_num(gt) > 1e-3).sum() - (gt >= 10).sum() - (~mask).sum())


def test_depth_median_scaling_is_scale_invariant_and_metric_is_not() -> None:
    pred, gt, _ = _depth_case()
    a, b = depth_report(pred, gt, max_depth=10.0), depth_report(pred * 3.0, gt, max_depth=10.0)
    for key in ("abs_rel_med", "rmse_med", "delta1_med"):
        assert a[key] == pytest.approx(b[key], rel=1e-9), key
    assert a["abs_rel"] != pytest.approx(b["abs_rel"], rel=1e-3)
    exact = depth_report(np.nan_to_num(gt, nan=1.0, posinf=1.0), gt, max_depth=10.0)
    assert exact["abs_rel"] == 0.0 and exact["rmse"] == 0.0 and exact["delta1"] == 1.0


def test_depth_bad_inputs() -> None:
    pred, gt, _ = _depth_case()
    cases: dict[str, tuple[np.ndarray, np.ndarray, dict[str, Any]]] = {
        "same size": (pred[:, :-1], gt, {}),
        "no pixel has a valid": (pred, np.zeros_like(gt), {}),
        "NaN or infinite": (np.where(gt > 4, np.nan, pred), gt, {}),
        "mask shape": (pred, gt, {"mask": np.ones((3, 3), bool)}),
    }
    for fragment, (p, g, kw) in cases.items():
        with pytest.raises(ValueError, match=fragment) as err:
            depth_errors(p, g, **kw)
        assert "\n" not in str(err.value)


# --- Chamfer ---------------------------------------------------------------------------------------


def _surface(n: int, rng: np.random.Generator, radius: float = 10.0) -> np.ndarray:
    v = rng.normal(size=(n, 3))
    return radius * v / np.linalg.norm(v, axis=1, keepdims=True)


def test_chamfer_matches_the_dtu_script() -> None:
    rng = np.random.default_rng(11)
    stl = _surface(3000, rng)
    data = np.concatenate([_surface(2500, rng) * 1.02 + rng.normal(0, 0.1, (2500, 3)),
                           rng.uniform(-60, 60, (40, 3))])  # floaters, some beyond max_dist
    bb = np.array([[-11.0, -11.0, -11.0], [11.0, 11.0, 11.0]])
    obs = rng.uniform(size=(23, 23, 23)) > 0.2
    plane = np.array([0.0, 0.0, 1.0, 3.0])  # keep z > -3
    for kwargs in ({}, {"bb": bb}, {"bb": bb, "obs_mask": obs}, {"bb": bb, "obs_mask": obs, "ground_plane": plane}):
        bbox = (kwargs["bb"][0], kwargs["bb"][1]) if "bb" in kwargs else None
        ref = _dtu_eval(data, stl, thresh=0.5, max_dist=5.0, seed=4, bb=kwargs.get("bb"), patch=2.0,
                        obs_mask=kwargs.get("obs_mask"), res=1.0, ground_plane=kwargs.get("ground_plane"))
        mine = chamfer_dtu(data, stl, downsample_density=0.5, max_dist=5.0, bbox=bbox, patch=2.0,
                           obs_mask=kwargs.get("obs_mask"), obs_res=1.0, ground_plane=kwargs.get("ground_plane"),
                           seed=4)
        assert (mine["accuracy"], mine["completeness"], mine["chamfer"]) == pytest.approx(ref, rel=1e-12), kwargs


def test_chamfer_properties() -> None:
    rng = np.random.default_rng(5)
    stl = _surface(2000, rng)
    same = chamfer_dtu(stl, stl, downsample_density=0.0, max_dist=5.0)
    assert same["chamfer"] == 0.0
    shifted = chamfer_dtu(stl * 1.05, stl, downsample_density=0.0, max_dist=5.0)  # 0.5 units outward
    assert 0.4 < shifted["accuracy"] < 0.55 and 0.4 < shifted["completeness"] < 0.55
    thinned = downsample(stl, 1.0, seed=0)
    assert len(thinned) < len(stl)
    from scipy.spatial import cKDTree

    d, _ = cKDTree(thinned).query(thinned, k=2)
    assert d[:, 1].min() > 1.0  # no two kept points within the density radius
    floaters = np.concatenate([stl[:90], rng.uniform(30, 40, (10, 3))])
    assert off_surface_fraction(floaters, stl, threshold=1.0) == pytest.approx(0.1)


def test_chamfer_bad_inputs() -> None:
    pts = np.zeros((5, 3))
    cases: dict[str, tuple[np.ndarray, np.ndarray, dict[str, Any]]] = {
        "Nx3": (np.zeros((5, 2)), pts, {}),
        "no points": (np.zeros((0, 3)), pts, {}),
        "NaN": (np.full((5, 3), np.nan), pts, {}),
        "do not overlap": (pts + 100.0, pts, {"max_dist": 1.0}),
        "bounding box": (pts, pts, {"obs_mask": np.ones((2, 2, 2), bool)}),
    }
    for fragment, (p, g, kw) in cases.items():
        with pytest.raises(ValueError, match=fragment) as err:
            chamfer_dtu(p, g, **kw)
        assert "\n" not in str(err.value)
