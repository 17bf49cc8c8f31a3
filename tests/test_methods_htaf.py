"""HTAF: closed-form derivative against autograd, binary networks trained and thresholded, ICBM
concepts exposed, the digits task through the runner, and the fit cache."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import asyncio  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.methods.backends.htaf_core import (  # noqa: E402
    BinaryUnit,
    htaf,
    htaf_derivative,
    htaf_reference,
)
from harness.tasks.methods.classification import make_task  # noqa: E402
from harness.types import Message, Request  # noqa: E402

torch.set_num_threads(1)
FAST = {"epochs": 6, "seeds": 2, "progress": False, "cache": False}


@pytest.mark.parametrize("a", [0.5, 2.0, 8.0, 16.0])
def test_closed_form_derivative_matches_autograd(a):
    x = torch.linspace(-8, 8, 401, dtype=torch.float64, requires_grad=True)
    (g_custom,) = torch.autograd.grad(htaf(x, a).sum(), x)
    (g_auto,) = torch.autograd.grad(htaf_reference(x, a).sum(), x)
    torch.testing.assert_close(g_custom, g_auto, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(htaf_derivative(x.detach(), a), g_auto, rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(htaf(x, a), htaf_reference(x, a))
    assert torch.autograd.gradcheck(lambda t: htaf(t, a), (torch.randn(16, dtype=torch.float64, requires_grad=True),))


def test_htaf_shape_range_midpoint_and_heavy_tail():
    x = torch.linspace(-30, 30, 2001, dtype=torch.float64)
    y = htaf(x, 8.0)
    assert float(htaf(torch.tensor(0.0, dtype=torch.float64), 8.0)) == pytest.approx(0.5)
    assert float(y.min()) >= 0.0 and float(y.max()) <= 1.0 and torch.all(torch.diff(y) >= 0)
    assert float(y[0]) == pytest.approx(0.0, abs=1e-12) and float(y[-1]) == pytest.approx(1.0, abs=1e-12)
    # gradient tail decays like sech^2 ~ e^{-2|x|}, far slower than the steep sigmoid's e^{-8|x|}
    g_h = htaf_derivative(torch.tensor([3.0], dtype=torch.float64), 8.0)
    s = torch.sigmoid(torch.tensor([24.0], dtype=torch.float64))
    g_sig = 8 * s * (1 - s)
    assert float(g_h) > 100 * float(g_sig)


def test_hard_mode_is_heaviside_and_ste_passes_clipped_gradient():
    x = torch.tensor([-2.0, -0.1, 0.0, 0.3, 2.0], requires_grad=True)
    unit = BinaryUnit("ste")
    unit(x).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]
    unit = BinaryUnit("htaf")
    unit.hard = True
    assert unit(x.detach()).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def _accuracy(model, task):
    train, test = list(task.train()), list(task.load())
    record = model.fit(train)
    outs = asyncio.run(model.generate([task.prompt(s) for s in test]))
    hard = sum(o.prediction["hard"][0] == s.target for o, s in zip(outs, test, strict=True)) / len(test)
    soft = sum(o.prediction["soft"][0] == s.target for o, s in zip(outs, test, strict=True)) / len(test)
    return record, outs, soft, hard


def test_htaf_binary_mlp_learns_digits_and_keeps_accuracy_when_thresholded():
    task = make_task("digits", test_limit=200)
    record, outs, soft, hard = _accuracy(build_model("htaf:mlp", {**FAST, "hidden": 64}), task)
    assert record["epochs"] == 6 and record["seconds"] > 0 and record["cached"] is False
    assert soft > 0.85 and hard > 0.85 and abs(soft - hard) < 0.08
    assert len(outs[0].prediction["hard"]) == 2  # one answer per seed


def test_relu_baseline_loses_more_when_thresholded_than_htaf():
    task = make_task("digits", test_limit=300)
    _, _, relu_soft, relu_hard = _accuracy(build_model("relu:mlp", {**FAST, "hidden": 64}), task)
    _, _, h_soft, h_hard = _accuracy(build_model("htaf:mlp", {**FAST, "hidden": 64}), task)
    assert relu_soft > 0.85
    assert (relu_soft - relu_hard) > (h_soft - h_hard)


def test_icbm_exposes_concepts_per_sample():
    task = make_task("digits", test_limit=60)
    model = build_model("htaf:icbm", {**FAST, "concepts": 16, "epochs": 4})
    _, outs, soft, hard = _accuracy(model, task)
    assert hard > 0.6
    for o in outs:
        concepts = o.prediction["concepts"]
        assert o.prediction["active"] == len(concepts) and all(0 <= c < 16 for c in concepts)
    assert len({tuple(o.prediction["concepts"]) for o in outs}) > 3  # different digits fire different concepts


def test_icbm_needs_images_and_bad_requests_are_per_sample_errors():
    wine = make_task("wine")
    icbm = build_model("htaf:icbm", FAST)
    assert "image" in icbm.fit(list(wine.train()))["error"]
    outs = asyncio.run(icbm.generate([wine.prompt(s) for s in list(wine.load())[:3]]))
    assert all(o.error and "fit failed" in o.error and "image" in o.error for o in outs)
    model = build_model("ste:heaviside", {**FAST, "depth": 3, "epochs": 2})
    model.fit(list(wine.train()))
    good = wine.prompt(list(wine.load())[0])
    outs = asyncio.run(model.generate([good, Request([Message.text("user", "nothing")]),
                                       Request([Message.text("user", "features: 1 2 3")])]))
    assert outs[0].error is None and outs[1].error and "takes 13" in outs[2].error


def test_digits_task_through_runner_with_seed_metrics_and_cached_refit(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    sessions = open_db(sqlite_url)
    settings = {"epochs": 4, "seeds": 3, "hidden": 32, "progress": False}
    cfg = EvalConfig(task="methods_digits", model="htaf:mlp", model_settings=settings,
                     task_options={"test_limit": 120}, progress=False)
    summary = Runner(cfg, session_factory=sessions).run()
    assert summary.n_new == 120 and summary.n_errors == 0
    top = {m.name: m for m in summary.metrics if not m.breakdown_key}
    for name in ("soft_accuracy", "hard_accuracy", "gap", "concept_sparsity"):
        assert name in top and f"{name}_over_seeds" in top
    assert top["hard_accuracy_over_seeds"].n == 3
    assert top["gap"].value == pytest.approx(top["soft_accuracy"].value - top["hard_accuracy"].value)
    assert 0.0 < top["concept_sparsity"].value < 1.0
    per_seed = [m for m in summary.metrics if m.breakdown_key == "seed" and m.name == "hard_accuracy"]
    assert sorted(m.breakdown_value for m in per_seed) == ["0", "1", "2"]
    # a second fit on the same data and config comes from the cache: same weights, no training
    model = build_model("htaf:mlp", settings)
    record = model.fit(list(make_task("digits", test_limit=120).train()))
    assert record["cached"] is True and record["epochs"] == 4


def test_deep_heaviside_stack_trains_with_batchnorm_and_thresholds_every_layer():
    task = make_task("digits", test_limit=150)
    model = build_model("htaf:heaviside", {**FAST, "depth": 4, "hidden": 64, "norm": True, "seeds": 1})
    record, outs, soft, hard = _accuracy(model, task)
    assert hard > 0.7 and record["nonfinite_steps"] == 0
    units = [m for m in model.state["weights"][0] if m.endswith("running_mean")]
    assert len(units) == 4  # one BatchNorm per binary layer
    assert all(set(o.prediction["concepts"]) <= set(range(64)) for o in outs)
