"""The nvs scorer's depth protocol against monodepth2's evaluation loop (the literal re-implementation
``_md2_eval`` in tests/test_nvs_metrics.py; nianticlabs/monodepth2 @ 77f141057a01e33fa127a350a280bdcfc056f954,
``evaluate_depth.py``): by default every pixel with a true depth counts, an unrendered one (depth 0)
clipped to the minimum depth, as the reference does; ``-T depth_mask=rendered`` keeps only the rendered
pixels, the named non-reference reading."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from requirements import require

require("torch", "the nvs backends are torch")
require("scipy", "the Chamfer distance uses scipy's KD-tree")

from test_nvs_metrics import _md2_eval  # noqa: E402

from harness.runner import build_task  # noqa: E402
from harness.tasks.nvs.gs_toy import write_toy_scene  # noqa: E402
from harness.types import Output  # noqa: E402

MIN_DEPTH = 1e-3


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_toy_scene(tmp_path_factory.mktemp("toy") / "blobs", size=32, n_train=6, n_test=2)


def _prediction(sample, tmp_path: Path, depth: np.ndarray) -> Output:
    image = tmp_path / "pred.png"
    shutil.copyfile(sample.target["image"], image)
    np.save(tmp_path / "pred_depth.npy", depth.astype(np.float32))
    return Output(prediction={"image": str(image), "depth": str(tmp_path / "pred_depth.npy")})


def _md2(gt: np.ndarray, pred: np.ndarray, median: bool, extra_mask: np.ndarray | None = None) -> dict[str, float]:
    keys = ("abs_rel", "sq_rel", "rmse", "rmse_log", "delta1", "delta2", "delta3")
    big = float(np.nanmax(gt)) * 10 + 1  # no upper cut-off: every finite true depth is below it
    values = _md2_eval(gt.astype(np.float64), pred.astype(np.float64), median, MIN_DEPTH, big, extra_mask)
    return dict(zip(keys, (float(v) for v in values), strict=True))


@pytest.mark.parametrize("hole", ["quarter", "none", "speckle"])
def test_depth_follows_monodepth2_by_default_and_the_rendered_mask_on_request(toy: Path, tmp_path: Path,
                                                                               hole: str) -> None:
    rng = np.random.default_rng(3)
    default = build_task("nvs_folder", {"path": str(toy)})
    rendered = build_task("nvs_folder", {"path": str(toy), "depth_mask": "rendered"})
    sample = list(default.load())[0]
    gt = np.load(sample.target["depth"]).astype(np.float64)
    pred = gt * rng.uniform(0.9, 1.15, gt.shape)  # a close render
    covered = np.argwhere(gt > MIN_DEPTH)
    if hole == "quarter":  # a quarter of the object left unrendered
        drop = covered[: len(covered) // 4]
        pred[drop[:, 0], drop[:, 1]] = 0.0
    elif hole == "speckle":
        drop = covered[rng.random(len(covered)) < 0.1]
        pred[drop[:, 0], drop[:, 1]] = 0.0
    pred = pred.astype(np.float32)
    ref_all = _md2(gt, pred.astype(np.float64), False)
    ref_all_med = _md2(gt, pred.astype(np.float64), True)
    ref_rendered = _md2(gt, pred.astype(np.float64), False, extra_mask=pred > 0)
    ours = default.score(sample, _prediction(sample, tmp_path, pred), None).values
    ours_rendered = rendered.score(sample, _prediction(sample, tmp_path, pred), None).values
    for key in ("abs_rel", "rmse", "delta1"):  # the keys the scorer stores (scorer.DEPTH_KEYS)
        value = ref_all[key]
        assert ours[f"depth_{key}"] == pytest.approx(value, rel=1e-6, abs=1e-9), key
        assert ours[f"depth_{key}_med"] == pytest.approx(ref_all_med[key], rel=1e-6, abs=1e-9), key
        assert ours_rendered[f"depth_{key}"] == pytest.approx(ref_rendered[key], rel=1e-6, abs=1e-9), key
    if hole == "quarter":  # the holes cost what they should: the two readings differ a lot
        assert ours["depth_abs_rel"] > 3 * ours_rendered["depth_abs_rel"]
        assert ours["depth_delta1"] <= 0.76 < ours_rendered["depth_delta1"]
    if hole == "none":
        assert ours["depth_abs_rel"] == pytest.approx(ours_rendered["depth_abs_rel"])


def test_an_unknown_depth_mask_is_one_line(toy: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown -T depth_mask 'some'; choose one of all, rendered$"):
        build_task("nvs_folder", {"path": str(toy), "depth_mask": "some"})
