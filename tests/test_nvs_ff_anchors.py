"""ff:consistency's 3D consistency tokens: a separate set of K anchors lifted with the network's own
predicted depth, co-refined with the image tokens for ``rounds`` rounds; the tokens=false ablation is
the same network without that branch; and no prediction reads ground truth."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from requirements import require

torch = require("torch", "the nvs feed-forward model is torch")

from harness.modelspec import build_model  # noqa: E402
from harness.tasks.nvs.ff_model import (  # noqa: E402
    ANCHOR_PREFIXES,
    STRIDE,
    FFConfig,
    build_network,
    predict_gaussians,
    token_rays,
)
from harness.tasks.nvs.gs_toy import write_toy_scene  # noqa: E402
from harness.tasks.nvs.scenes import load_nerf_synthetic  # noqa: E402
from harness.tasks.nvs.tasks import _sample  # noqa: E402
from harness.types import Request, Sample  # noqa: E402

os.environ.setdefault("OMP_NUM_THREADS", "1")
torch.set_num_threads(1)


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("HARNESS_ARTIFACTS", str(tmp_path / "art"))
    return tmp_path


def _fitted(root: Path, settings: dict[str, Any]) -> tuple[Any, Any]:
    """A briefly trained ff:consistency backend on a toy scene written under ``root``, and the scene."""
    scene = load_nerf_synthetic(write_toy_scene(root / "toy", size=32, n_train=6, n_test=2))
    model = build_model("ff:consistency", {"steps": 2, "width": 16, "cache": False, **settings})
    model.fit([_sample(scene, v, True) for v in scene.train])
    return model, scene


def _context(model: Any) -> tuple[Any, list[int]]:
    sc = next(iter(model.scenes.values()))
    return sc, [0, 1]


def _predict(model: Any) -> dict[str, Any]:
    sc, ctx = _context(model)
    with torch.no_grad():
        return predict_gaussians(model.net, [sc.images[i] for i in ctx], [sc.cams[i] for i in ctx], sc.depth_range,
                                 sc.center, sc.radius)


def _lifted_cloud(model: Any) -> Any:
    """The context views' token pixels lifted with the network's first depth estimate, recomputed here
    from ``depth0``'s outputs (captured by a hook) and the cameras' rays: what the anchors must lie on."""
    sc, ctx = _context(model)
    captured: list[Any] = []
    handle = model.net.depth0.register_forward_hook(lambda _m, _i, out: captured.append(out.detach()))
    try:
        _predict(model)
    finally:
        handle.remove()
    near, far = sc.depth_range
    points = []
    for logits, i in zip(captured, ctx, strict=True):
        o, d = token_rays(sc.cams[i])
        points.append(o + d * (near + (far - near) * torch.sigmoid(logits[:, 0]))[:, None])
    return torch.cat(points)


def _nearest(anchors: Any, cloud: Any) -> Any:
    return torch.cdist(anchors, cloud, compute_mode="donot_use_mm_for_euclid_dist").min(dim=1).values


def test_anchors_are_k_points_of_the_cloud_lifted_with_the_predicted_depth(env: Path) -> None:
    model, _ = _fitted(env, {"anchors": 16})
    sc, _ = _context(model)
    tokens = 2 * (sc.cams[0].height // STRIDE) * (sc.cams[0].width // STRIDE)
    queries: list[tuple[int, ...]] = []
    model.net.rounds[0].to_anchor.register_forward_hook(lambda _m, inp, _o: queries.append(tuple(inp[0].shape)))
    before = _predict(model)["anchors"]
    assert before.shape == (16, 3) and len(torch.unique(before, dim=0)) == 16  # K distinct 3D points
    assert queries == [(1, 16, 16)]  # K anchor tokens of width 16 query the image tokens
    cloud = _lifted_cloud(model)
    assert cloud.shape == (tokens, 3)
    assert float(_nearest(before, cloud).max()) < 1e-5  # each anchor is a lifted token pixel
    with torch.no_grad():  # another predicted depth: the anchors move with it, onto the new cloud
        model.net.depth0.bias += 1.0
    after = _predict(model)["anchors"]
    new_cloud = _lifted_cloud(model)
    assert float(_nearest(after, new_cloud).max()) < 1e-5
    assert float((after - before).norm(dim=1).mean()) > 0.05 * sc.radius
    assert float(_nearest(after, cloud).min()) > 1e-4  # none is left where the old depth put it


def test_co_refinement_runs_its_rounds_anchors_first_over_both_views(env: Path) -> None:
    model, _ = _fitted(env, {"anchors": 8, "rounds": 3})
    sc, _ = _context(model)
    tokens = 2 * (sc.cams[0].height // STRIDE) * (sc.cams[0].width // STRIDE)
    calls: list[tuple[str, int, tuple[int, ...], tuple[int, ...]]] = []
    assert len(model.net.rounds) == 3
    for r, layer in enumerate(model.net.rounds):
        for name in ("to_anchor", "to_image"):
            getattr(layer, name).register_forward_hook(
                lambda _m, inp, _o, name=name, r=r: calls.append((name, r, tuple(inp[0].shape), tuple(inp[1].shape))))
    _predict(model)
    assert calls == [call for r in range(3) for call in (
        ("to_anchor", r, (1, 8, 16), (1, tokens, 16)),  # the anchors read every context view's tokens
        ("to_image", r, (1, tokens, 16), (1, 8, 16)),  # then every image token reads the anchors
    )]  # fmt: skip


def test_every_anchor_parameter_gets_a_gradient(env: Path) -> None:
    model, _ = _fitted(env, {"anchors": 8})
    from harness.tasks.nvs.ff_model import render_gaussians

    sc, ctx = _context(model)
    model.net.train()
    g = predict_gaussians(model.net, [sc.images[i] for i in ctx], [sc.cams[i] for i in ctx], sc.depth_range,
                          sc.center, sc.radius)
    (render_gaussians(g, sc.cams[2])["rgb"] - sc.images[2]).abs().mean().backward()
    branch = {n: p.grad for n, p in model.net.named_parameters() if n.startswith(ANCHOR_PREFIXES)}
    assert {n.split(".")[0] for n in branch} == {"point", "pool", "rounds"}
    for name, grad in branch.items():
        assert grad is not None and torch.isfinite(grad).all() and float(grad.abs().sum()) > 0, name


def test_tokens_false_is_the_same_network_without_the_anchor_branch() -> None:
    with_anchors = {n: p.shape for n, p in build_network(FFConfig(tokens=True, width=16)).named_parameters()}
    ablation = {n: p.shape for n, p in build_network(FFConfig(tokens=False, width=16)).named_parameters()}
    assert not [n for n in ablation if n.startswith(ANCHOR_PREFIXES)]
    assert ablation == {n: s for n, s in with_anchors.items() if not n.startswith(ANCHOR_PREFIXES)}
    assert len(with_anchors) > len(ablation)
    # a prediction of the ablation has no anchors at all
    net = build_network(FFConfig(tokens=False, width=16))
    rounds = build_network(FFConfig(tokens=True, width=16, rounds=5)).rounds
    assert not hasattr(net, "rounds") and len(rounds) == 5


# --- nothing at test time reads ground truth ---------------------------------------------------------

_OPENED: list[str] | None = None  # while recording: every path the process opens


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        _OPENED.append(os.path.realpath(os.fsdecode(args[0])))


sys.addaudithook(_audit)  # cannot be removed; it does nothing unless a test is recording


@contextmanager
def _recording() -> Iterator[list[str]]:
    global _OPENED
    _OPENED = opened = []
    try:
        yield opened
    finally:
        _OPENED = None


def _images(model: Any, requests: list[Request]) -> list[tuple[bytes, bytes]]:
    outs = asyncio.run(model.generate(requests))
    assert all(o.error is None for o in outs), [o.error for o in outs]
    return [(Path(o.prediction["image"]).read_bytes(), np.load(o.prediction["depth"]).tobytes()) for o in outs]


@pytest.mark.parametrize("tokens", [True, False])
def test_no_prediction_reads_ground_truth(env: Path, tokens: bool) -> None:
    """The strongest check that is practical here, in two parts.

    1. The same fit and predictions, bit for bit, whether or not ground truth exists: once with the
       samples as the runner hands them over, then again after every ground-truth file of the scene
       (true depth maps of all views, the surface points, the held-out views' images) has been
       deleted and the train samples stripped of ``target`` and ``metadata``. A backend that read any
       of them, even behind an ``exists()`` test or a caught error, would fail or predict otherwise.
    2. A Python audit hook records every file the process opens, in both runs (so a read that would
       not change the output is caught too, while the files exist): during the fit, the only files of
       the scene opened are the train views' images; during the predictions, none at all (the
       context images were loaded at fit time, the held-out request carries only its camera).
    """
    scene = load_nerf_synthetic(write_toy_scene(env / "toy", size=32, n_train=6, n_test=2))
    root = Path(os.path.realpath(scene.root))
    train = [_sample(scene, v, True) for v in scene.train]
    requests = [Request(s.messages, sample_id=s.id) for s in (_sample(scene, v, False) for v in scene.test)]
    settings = {"tokens": tokens, "steps": 3, "width": 16, "cache": False}
    train_images = {os.path.realpath(v.image) for v in scene.train}

    def fit_and_predict(samples: list[Sample]) -> list[tuple[bytes, bytes]]:
        model = build_model("ff:consistency", settings)
        with _recording() as fit_opened:
            record = model.fit(samples)
        assert "error" not in record, record
        with _recording() as predict_opened:
            out = _images(model, requests)
        in_scene = {p for p in fit_opened if Path(p).is_relative_to(root)}
        assert in_scene and in_scene <= train_images, sorted(in_scene - train_images)
        assert not [p for p in predict_opened if Path(p).is_relative_to(root)]
        return out

    expected = fit_and_predict(train)  # ground truth present: the audit sees it is not opened
    truth = [Path(v.depth) for v in [*scene.train, *scene.test] if v.depth] + [Path(v.image) for v in scene.test]
    truth.append(Path(scene.points or root / "points.npy"))
    assert len(truth) == 6 + 2 + 2 + 1 and all(p.is_file() for p in truth)
    for p in truth:
        p.unlink()
    bare = [Sample(s.id, s.messages) for s in train]  # what a prediction may use: messages only
    assert all(s.target is None and s.metadata == {} for s in bare)
    assert fit_and_predict(bare) == expected  # ground truth gone: the very same bytes


def test_anchor_settings_reach_the_config_and_the_fit_record(env: Path) -> None:
    model, _ = _fitted(env, {"anchors": 12, "rounds": 3})
    assert (model.cfg.tokens, model.cfg.anchors, model.cfg.rounds) == (True, 12, 3)
    assert (model.record["anchors"], model.record["rounds"]) == (12, 3)
    ablation, _ = _fitted(env / "b", {"tokens": False})
    assert "anchors" not in ablation.record and "rounds" not in ablation.record
