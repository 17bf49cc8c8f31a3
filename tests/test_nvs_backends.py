"""The nvs backends: the torch rasteriser against closed forms, training that learns, the Lipschitz
colour field, ff:consistency with and without tokens, and one-line errors for bad settings or renders."""

from __future__ import annotations

import asyncio
import math
import os

import numpy as np
import pytest
from requirements import require

torch = require("torch", "the nvs rasteriser and backends are torch")

from harness.modelspec import build_model  # noqa: E402
from harness.tasks.nvs.backends_common import write_render  # noqa: E402
from harness.tasks.nvs.gs_model import GSConfig, _neural_field, fit_scene  # noqa: E402
from harness.tasks.nvs.gs_raster import DILATION, render, torch_camera  # noqa: E402
from harness.tasks.nvs.gs_toy import look_at_c2w, write_toy_scene  # noqa: E402
from harness.tasks.nvs.scenes import Camera, load_nerf_synthetic, read_rgb  # noqa: E402
from harness.tasks.nvs.tasks import _sample  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


def _camera(size: int = 32, z: float = 3.0, focal: float = 40.0) -> Camera:
    """A camera on +Z looking at the origin (OpenGL convention: its -Z axis points down world -Z)."""
    c2w = np.eye(4)
    c2w[2, 3] = z
    return Camera.from_dict({"c2w": c2w.tolist(), "fx": focal, "fy": focal, "cx": size / 2, "cy": size / 2,
                             "width": size, "height": size})


def _one(scale: tuple[float, float, float], opacity: float = 0.5) -> dict:
    cam = _camera()
    means = torch.zeros(1, 3)
    out = render(means, torch.tensor([scale]), torch.tensor([[1.0, 0, 0, 0]]), torch.tensor([opacity]),
                 torch.tensor([[1.0, 0.0, 0.0]]), torch_camera(cam), background=0.0)
    return {k: v.numpy() for k, v in out.items()}


def test_a_single_gaussian_renders_its_analytic_footprint() -> None:
    sx, sy, z, f, o = 0.05, 0.1, 3.0, 40.0, 0.5
    out = _one((sx, sy, 0.07), o)
    # on the optical axis the EWA Jacobian is diag(f/z): image variances (f s / z)^2 plus the dilation
    var_x, var_y = (f * sx / z) ** 2 + DILATION, (f * sy / z) ** 2 + DILATION
    ys, xs = np.mgrid[0:32, 0:32] + 0.5
    expected = o * np.exp(-0.5 * ((xs - 16) ** 2 / var_x + (ys - 16) ** 2 / var_y))
    expected[expected < 1 / 255] = 0.0  # the reference skips contributions under 1/255
    assert np.abs(out["alpha"] - expected).max() < 1e-5
    assert np.abs(out["rgb"][..., 0] - expected).max() < 1e-5 and np.abs(out["rgb"][..., 1:]).max() == 0
    assert np.allclose(out["depth"], expected * z, atol=1e-5)  # expected depth = weight x z
    # elongated along world y -> along image rows (y down), not columns
    assert out["alpha"][13, 16] > out["alpha"][16, 13] > 0


def test_compositing_is_front_to_back_whatever_the_input_order() -> None:
    cam = torch_camera(_camera())
    means = torch.tensor([[0.0, 0.0, -0.5], [0.0, 0.0, 0.5]])  # the second is nearer the camera at z = 3
    scales = torch.full((2, 3), 0.2)
    quats = torch.tensor([[1.0, 0, 0, 0]] * 2)
    cols = torch.tensor([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    out = render(means, scales, quats, torch.tensor([0.9, 0.9]), cols, cam, background=0.0)
    alone = [render(means[i:i + 1], scales[:1], quats[:1], torch.tensor([0.9]), cols[i:i + 1], cam,
                    background=0.0)["alpha"] for i in range(2)]
    back, front = alone
    assert torch.allclose(out["rgb"][..., 0], front, atol=1e-6)  # the near (red) one is in front
    assert torch.allclose(out["rgb"][..., 2], (1 - front) * back, atol=1e-6)  # blue is seen through it
    flipped = render(means.flip(0), scales, quats, torch.tensor([0.9, 0.9]), cols.flip(0), cam, background=0.0)
    assert torch.allclose(out["rgb"], flipped["rgb"], atol=1e-6)
    # a Gaussian behind the camera contributes nothing
    behind = render(torch.tensor([[0.0, 0.0, 4.0]]), scales[:1], quats[:1], torch.tensor([0.9]), cols[:1], cam,
                    background=0.0)
    assert float(behind["alpha"].max()) == 0.0


@pytest.fixture(scope="module")
def toy(tmp_path_factory: pytest.TempPathFactory):
    return load_nerf_synthetic(write_toy_scene(tmp_path_factory.mktemp("toy"), size=32, n_train=6, n_test=2))


@pytest.mark.parametrize("color", ["sh", "neural"])
def test_gradients_reach_every_parameter_and_training_lowers_the_loss(toy, color: str) -> None:
    cams = [v.camera for v in toy.train]
    images = torch.from_numpy(np.stack([read_rgb(v.image) for v in toy.train]))
    cfg = GSConfig(color=color, steps=80, gaussians=150, patch=16, seed=0)
    model, record = fit_scene(cfg, cams, images)
    assert record["nonfinite_steps"] == 0
    assert record["loss_last"] < 0.8 * record["loss_first"], record
    # one more step: every parameter tensor gets a finite, non-zero gradient
    out = model.render(cams[0])
    loss = (out["rgb"] - images[0]).abs().mean()
    loss.backward()
    grads = {k: p.grad for k, p in model.params.items()}
    if model.field is not None:
        grads.update({f"field.{k}": p.grad for k, p in model.field.named_parameters()})
    for name, g in grads.items():
        assert g is not None and torch.isfinite(g).all() and float(g.abs().sum()) > 0, name


def test_neural_colour_field_respects_its_lipschitz_bound() -> None:
    torch.manual_seed(0)
    field = _neural_field(GSConfig(color="neural", lipschitz=3.0, hidden=32))
    x = torch.rand(4000, 3) * 2 - 1
    dx = (torch.rand(4000, 3) * 2 - 1) * 0.01
    d = torch.nn.functional.normalize(torch.randn(4000, 3), dim=-1)

    def worst() -> float:
        with torch.no_grad():
            change = (field(x + dx, d) - field(x, d)).norm(dim=-1)
        return float((change / dx.norm(dim=-1)).max())

    with torch.no_grad():  # weights with norms far above 1: the operator-norm caps are what holds the bound
        for name, p in field.named_parameters():
            if name.endswith("weight"):
                p.mul_(20.0)
    assert 0.01 < worst() <= 3.0 + 1e-4  # bounded, and not trivially constant
    with torch.no_grad():
        for name, p in field.named_parameters():
            if name.endswith("weight"):
                p.mul_(1000.0)
    assert worst() <= 3.0 + 1e-4


def test_gs_backend_fits_renders_files_and_caches(toy, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    train = [_sample(toy, v, True) for v in toy.train]
    test = [_sample(toy, v, False) for v in toy.test]
    settings = {"steps": 20, "gaussians": 60, "patch": 16}
    model = build_model("gs:neural_color", settings)
    record = model.fit(train)
    assert record["scenes"][f"{toy.name}-{toy.content_hash}"]["cached"] is False
    from harness.types import Request

    outs = asyncio.run(model.generate([Request(s.messages, sample_id=s.id) for s in test]))
    assert all(o.error is None for o in outs)
    pred = outs[0].prediction
    img = read_rgb(pred["image"])
    assert img.shape == (32, 32, 3) and np.load(pred["depth"]).shape == (32, 32)
    assert np.load(pred["gaussians"]).shape[1] == 4 and pred["n_gaussians"] <= 60
    again = build_model("gs:neural_color", settings)
    assert next(iter(again.fit(train)["scenes"].values()))["cached"] is True
    # a NaN render is that view's error row, never a crash
    scene = next(iter(again.scenes.values()))
    scene.params["opacity_logits"] = torch.full_like(scene.params["opacity_logits"], float("nan"))
    bad = asyncio.run(again.generate([Request(test[0].messages, sample_id=test[0].id)]))
    assert bad[0].error and "non-finite" in bad[0].error and "\n" not in bad[0].error


def test_ff_consistency_tokens_change_the_prediction_and_are_trained(toy, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    from harness.types import Request

    train = [_sample(toy, v, True) for v in toy.train]
    test = [_sample(toy, v, False) for v in toy.test]
    images = {}
    for tokens in (True, False):
        model = build_model("ff:consistency", {"tokens": tokens, "steps": 6, "width": 16, "cache": False})
        record = model.fit(train)
        assert record["tokens"] is tokens and record["nonfinite_steps"] == 0
        point_grad = [p for n, p in model.net.named_parameters() if n.startswith("point.")]
        out = asyncio.run(model.generate([Request(test[0].messages, sample_id=test[0].id)]))[0]
        assert out.error is None and len(out.prediction["context"]) == 2
        images[tokens] = read_rgb(out.prediction["image"])
        if not tokens:  # without tokens the point embedding never sees a gradient: still at its init
            torch.manual_seed(0)
            fresh = build_model("ff:consistency", {"tokens": False, "width": 16}).cfg
            from harness.tasks.nvs.ff_model import build_network

            torch.manual_seed(0)
            init = dict(build_network(fresh).named_parameters())
            assert all(torch.equal(p, init[n]) for n, p in model.net.named_parameters() if n.startswith("point."))
        else:
            torch.manual_seed(0)
            from harness.tasks.nvs.ff_model import build_network

            init = dict(build_network(model.cfg).named_parameters())
            moved = [not torch.equal(p, init[n]) for n, p in model.net.named_parameters() if n.startswith("point.")]
            assert point_grad and all(moved)
    assert not np.array_equal(images[True], images[False])


@pytest.mark.parametrize("spec,settings,message", [
    ("gs:sh", {"stepz": 3}, "did you mean 'steps'"),
    ("gs:sh", {"lipschitz": 3}, "applies to gs:neural_color only"),
    ("gs:neural_color", {"sh_degree": 1}, "applies to gs:sh only"),
    ("gs:sh", {"steps": "many"}, "steps='many' must be an integer"),
    ("gs:sh", {"sh_degree": 3}, "between 0 and 1"),
    ("gs:bogus", {}, "unknown gs path"),
    ("ff:consistency", {"tokens": "maybe"}, "tokens='maybe' must be true or false"),
    ("ff:consistency", {"anchors": 0}, "anchors=0 must be an integer between 1 and 1024"),
    ("ff:consistency", {"rounds": "two"}, "rounds='two' must be an integer between 1 and 8"),
    ("ff:consistency", {"tokens": False, "anchors": 8}, "anchors applies to tokens=true only"),
    ("ff:consistency", {"tokens": "false", "rounds": 3}, "rounds applies to tokens=true only"),
    ("ff:consistency", {"width": 18}, "width=18 must be a multiple of 4"),
])  # fmt: skip
def test_bad_settings_are_one_line_errors(spec: str, settings: dict, message: str) -> None:
    with pytest.raises(ValueError) as err:
        build_model(spec, settings)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_fit_without_train_views_and_requests_without_camera_are_error_rows() -> None:
    from harness.types import Message, Part, Request

    model = build_model("gs:sh", {"steps": 1})
    assert "error" in model.fit([])
    outs = asyncio.run(model.generate([Request([Message("user", [Part("text", text="hi")])])]))
    assert outs[0].error and "no train views" in outs[0].error


def test_write_render_refuses_non_finite_values(tmp_path) -> None:
    rgb = np.zeros((4, 4, 3))
    rgb[0, 0, 0] = math.nan
    with pytest.raises(ValueError, match="non-finite"):
        write_render(tmp_path, "v", rgb, np.zeros((4, 4)), np.ones((4, 4)))


def test_toy_scene_cameras_look_at_the_origin() -> None:
    c2w = look_at_c2w([0.0, -3.0, 1.0])
    forward = -c2w[:3, 2]
    assert np.allclose(forward, -c2w[:3, 3] / np.linalg.norm(c2w[:3, 3]))
    assert np.allclose(c2w[:3, :3] @ c2w[:3, :3].T, np.eye(3))
