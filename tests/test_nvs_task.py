"""The nvs tasks end to end: nvs_folder on a toy scene through the runner (rows stored, metrics
declared, per-scene breakdowns, the side-by-side picture), the scorer on exact and broken predictions,
and one-line errors for bad options."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from requirements import require

require("torch", "the nvs backends are torch")
require("scipy", "the Chamfer distance uses scipy's KD-tree")

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.runner import build_task as get_task  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.nvs.gs_toy import write_toy_scene  # noqa: E402
from harness.tasks.nvs.scorer import lift, score_view  # noqa: E402
from harness.types import Output  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_toy_scene(tmp_path_factory.mktemp("toy") / "blobs", size=32, n_train=6, n_test=2)


def _exact_prediction(sample, tmp_path: Path) -> Output:
    """The ground truth itself, written the way a backend writes a render."""
    import shutil

    image = tmp_path / "pred.png"
    shutil.copyfile(sample.target["image"], image)
    depth = tmp_path / "pred_depth.npy"
    shutil.copyfile(sample.target["depth"], depth)
    g = np.load(sample.metadata["points"])
    gauss = tmp_path / "g.npy"
    np.save(gauss, np.concatenate([g, np.ones((len(g), 1))], 1))
    return Output(prediction={"image": str(image), "depth": str(depth), "gaussians": str(gauss), "n_gaussians": 5})


def test_scorer_on_the_ground_truth_is_perfect_and_writes_the_side_by_side(toy: Path, tmp_path: Path) -> None:
    task = get_task("nvs_folder", {"path": str(toy)})
    sample = list(task.load())[0]
    score = score_view(sample, _exact_prediction(sample, tmp_path))
    v = score.values
    assert v["psnr"] == float("inf") and v["ssim"] == pytest.approx(1.0)
    assert v["lpips_alex"] == pytest.approx(0.0, abs=1e-6) and v["lpips_pixelsplat"] == pytest.approx(0.0, abs=1e-6)
    assert v["depth_abs_rel"] == pytest.approx(0.0) and v["depth_delta1"] == 1.0
    assert v["chamfer"] == pytest.approx(0.0, abs=1e-9)
    assert v["floater_fraction"] == 0.0 and v["n_gaussians"] == 5
    side = Path(score.details["media"][0]["path"])
    from PIL import Image

    with Image.open(side) as im:
        assert im.size == (4 * 32 + 3 * 2, 32)  # rendered | true | rendered depth | true depth
    for name in v:
        assert task.metric_info(name) is not None, name


def test_lifted_depth_lands_on_the_true_surface(toy: Path) -> None:
    """The toy scene's depth, lifted with its own camera, falls on its Gaussians' centres' region:
    camera conventions agree between the loader, the scorer and the rasteriser."""
    from harness.tasks.nvs.scenes import load_nerf_synthetic

    scene = load_nerf_synthetic(toy)
    v = scene.test[0]
    pts = lift(np.load(v.depth), v.camera)
    assert len(pts) > 20
    assert np.abs(pts).max() < 1.0  # the blobs live in [-0.6, 0.6]^3 (plus their extent)
    centres = np.load(scene.points)
    nearest = np.min(np.linalg.norm(pts[:, None] - centres[None], axis=-1), axis=1)
    assert np.median(nearest) < 0.3


@pytest.mark.parametrize("broken,reason", [
    ({"image": "/nonexistent.png"}, "does not exist"),
    ("not a dict", "names no rendered image"),
    ("text", "not a readable image"),
    ("small", "the view is 32x32"),
    ("nan_depth", "NaN or infinite"),
])  # fmt: skip
def test_broken_predictions_are_unscored_with_one_line(toy: Path, tmp_path: Path, broken, reason: str) -> None:
    from PIL import Image

    task = get_task("nvs_folder", {"path": str(toy)})
    sample = list(task.load())[0]
    good = _exact_prediction(sample, tmp_path).prediction
    if broken == "text":
        (tmp_path / "x.png").write_text("hello")
        pred = {**good, "image": str(tmp_path / "x.png")}
    elif broken == "small":
        Image.new("RGB", (16, 16)).save(tmp_path / "s.png")
        pred = {**good, "image": str(tmp_path / "s.png")}
    elif broken == "nan_depth":
        np.save(tmp_path / "d.npy", np.full((32, 32), np.nan, dtype=np.float32))
        pred = {**good, "depth": str(tmp_path / "d.npy")}
    else:
        pred = broken
    score = score_view(sample, Output(prediction=pred))
    assert score.unscored and reason in score.unscored and "\n" not in score.unscored


def test_nvs_folder_end_to_end_stores_rows_and_per_scene_breakdowns(toy: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    url = f"sqlite:///{tmp_path / 'h.db'}"
    cfg = EvalConfig(task="nvs_folder", model="gs:sh", task_options={"path": str(toy)},
                     model_settings={"steps": 40, "gaussians": 80, "patch": 16}, progress=False)
    summary = Runner(cfg, session_factory=open_db(url)).run()
    assert summary.n_new == 2 and summary.n_errors == 0 and summary.n_unscored == 0
    top = {m.name: m for m in summary.metrics if not m.breakdown_key}
    for name in ("psnr", "ssim", "lpips_vgg", "lpips_pixelsplat", "depth_abs_rel", "chamfer", "floater_fraction",
                 "n_gaussians"):
        assert name in top and np.isfinite(top[name].value), name
    assert 5.0 < top["psnr"].value < 60.0
    per_scene = [m for m in summary.metrics if m.breakdown_key == "scene" and m.name == "psnr"]
    assert [m.breakdown_value for m in per_scene] == ["blobs"]
    from sqlalchemy import select

    from harness.store.schema import SampleResultRow

    with open_db(url)() as s:
        rows = s.scalars(select(SampleResultRow)).all()
    assert len(rows) == 2 and all(r.error is None for r in rows)
    assert all(Path(r.details["media"][0]["path"]).is_file() for r in rows)  # the run page's side-by-side
    from harness.leaderboard.media import sample_media

    shown = sample_media(rows[0].input or {}, rows[0].details or {}, rows[0].prediction, [tmp_path / "art"])
    pictures = [m for m in shown if m.kind == "image" and m.url]
    assert any(m.path.endswith("_vs_gt.png") for m in pictures)  # served from the artifacts root


def test_a_fit_that_fails_is_every_views_error_row(toy: Path, tmp_path: Path, monkeypatch) -> None:
    import asyncio

    from harness.types import Request

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    task = get_task("nvs_folder", {"path": str(toy)})
    train = list(task.train())
    train[0].messages[0].content[0].options["nvs"].pop("image")
    model = build_model("gs:sh", {"steps": 2})
    record = model.fit(train)
    assert "has no image" in record["error"] and "\n" not in record["error"]
    test = list(task.load())
    outs = asyncio.run(model.generate([Request(s.messages, sample_id=s.id) for s in test]))
    assert all(o.error == record["error"] for o in outs)


def test_a_corrupt_view_file_is_a_one_line_error(toy: Path, tmp_path: Path) -> None:
    import shutil

    from harness.errors import UserError

    broken = tmp_path / "blobs"
    shutil.copytree(toy, broken)
    (broken / "train" / "r_0.png").write_text("not a png")
    with pytest.raises(UserError) as err:
        list(get_task("nvs_folder", {"path": str(broken)}).load())
    assert "not a readable image" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("options,message", [
    ({}, "needs -T path"),
    ({"path": "/nonexistent/scene"}, "is not a folder"),
    ({"path": ".", "layout": "llff"}, "unknown -T layout"),
    ({"path": ".", "layout": "dl3dv"}, "needs -T index"),
])  # fmt: skip
def test_bad_folder_options_are_one_line_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        get_task("nvs_folder", options)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_folder_without_a_scene_is_a_one_line_error(tmp_path: Path) -> None:
    from harness.errors import UserError

    task = get_task("nvs_folder", {"path": str(tmp_path)})
    with pytest.raises(UserError) as err:
        list(task.load())
    assert "transforms" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("options,message", [
    ({"scenes": "textured,cube"}, "unknown scene 'cube'"),
    ({"size": 30}, "multiple of 4"),
    ({"size": "big"}, "-T size must be an integer"),
    ({"scenes": ""}, "-T scenes is empty"),
    ({"train_views": 1}, "at least 2 train views"),
])  # fmt: skip
def test_bad_synthetic_options_are_one_line_errors(options: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        get_task("nvs_synthetic", options)
    assert message in str(err.value) and "\n" not in str(err.value)
