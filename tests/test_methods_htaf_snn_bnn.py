"""HTAF's spiking (snn) and binary-weight (bnn) networks: the step's gradient is the surrogate's
closed-form derivative, the LIF update follows the leaky integrate-and-fire recursion with reset by
subtraction, trained networks compute exactly binary at test, both learn digits with every
surrogate, the fit cache holds them, and bad settings are one line."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import asyncio  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from harness.cli import app  # noqa: E402
from harness.modelspec import build_model  # noqa: E402
from harness.tasks.methods.backends.htaf_core import (  # noqa: E402
    TrainConfig,
    build_net,
    htaf_derivative,
    htaf_reference,
    key_settings,
)
from harness.tasks.methods.backends.htaf_snn import (  # noqa: E402
    BinaryWeightNet,
    SpikingNet,
    StepUnit,
    step,
)
from harness.tasks.methods.classification import make_task  # noqa: E402

torch.set_num_threads(1)
FAST = {"epochs": 8, "seeds": 1, "hidden": 64, "progress": False, "cache": False}
X = torch.tensor([-3.0, -1.5, -0.4, 0.0, 0.25, 0.9, 1.0, 2.5], dtype=torch.float64)


def _grad(fn, x):
    x = x.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(fn(x).sum(), x)
    return g


@pytest.mark.parametrize("a", [2.0, 8.0])
def test_htaf_step_is_heaviside_forward_and_htaf_derivative_backward(a):
    assert step(X, "htaf", alpha=a).tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    g = _grad(lambda t: step(t, "htaf", alpha=a), X)
    torch.testing.assert_close(g, htaf_derivative(X, a), rtol=1e-10, atol=1e-14)
    torch.testing.assert_close(g, _grad(lambda t: htaf_reference(t, a), X), rtol=1e-10, atol=1e-14)
    assert float(g[3]) == pytest.approx(a * 0.25 / (torch.sigmoid(torch.tensor(a)) - torch.sigmoid(torch.tensor(-a))))


def test_sigmoid_and_ste_steps_pass_their_surrogates_derivatives():
    g = _grad(lambda t: step(t, "sigmoid", beta=8.0), X)
    torch.testing.assert_close(g, _grad(lambda t: torch.sigmoid(8.0 * t), X), rtol=1e-12, atol=1e-15)
    assert float(g[3]) == pytest.approx(2.0)  # beta / 4 at 0
    assert _grad(lambda t: step(t, "ste"), X).tolist() == [0, 0, 1, 1, 1, 1, 1, 0]
    # the bnn's +-1 activation 2 H(x) - 1: twice the surrogate's derivative
    signed = StepUnit("htaf", alpha=8.0, signed=True)
    assert signed(X).tolist() == [-1, -1, -1, -1, 1, 1, 1, 1]
    torch.testing.assert_close(_grad(signed, X), 2 * htaf_derivative(X, 8.0), rtol=1e-10, atol=1e-14)


def test_lif_follows_the_leaky_recursion_with_reset_by_subtraction():
    net = SpikingNet(1, 1, "htaf", hidden=1, depth=1, steps=12, decay=0.9, threshold=1.0).double()
    with torch.no_grad():
        net.fcs[0].weight.fill_(1.0)
        net.fcs[0].bias.fill_(0.0)
        net.fcs[1].weight.fill_(2.0)  # every hidden spike pushes the output neuron over threshold
        net.fcs[1].bias.fill_(-0.5)
    # I = 0.45 tells the orders apart: decay applied to the reset too, reset to zero, no reset and a
    # reset in the same step each give another train
    _, spikes = net.run(torch.tensor([[0.45]], dtype=torch.float64))
    v, s, expected = 0.0, 0.0, []
    for _ in range(12):  # written out by hand: v[t] = 0.9 v[t-1] + I - 1.0 * s[t-1]; s[t] = 1[v[t] > 1]
        v = 0.9 * v + 0.45 - 1.0 * s
        s = float(v > 1.0)
        expected.append(s)
    assert expected == [0, 0, 1, 0, 0, 1, 0, 1, 0, 0, 1, 0]
    assert spikes[0][:, 0, 0].tolist() == expected
    out_v, out_s, out_expected = 0.0, 0.0, []
    for hidden in expected:
        out_v = 0.9 * out_v + (2.0 * hidden - 0.5) - out_s
        out_s = float(out_v > 1.0)
        out_expected.append(out_s)
    assert spikes[1][:, 0, 0].tolist() == out_expected


def _fit(spec, task, **settings):
    model = build_model(spec, {**FAST, **settings})
    record = model.fit(list(task.train()))
    test = list(task.load())
    outs = asyncio.run(model.generate([task.prompt(s) for s in test]))
    hard = sum(o.prediction["hard"][0] == s.target for o, s in zip(outs, test, strict=True)) / len(test)
    return model, record, outs, hard


def _trained_net(model, task):
    """Seed 0's network rebuilt from the fitted weights, and the task's test inputs as it sees them."""
    st = model.state
    net = build_net(st["cfg"], st["mean"].shape[0], st["n_out"], None)
    net.load_state_dict({k: torch.as_tensor(v) for k, v in st["weights"][0].items()})
    net.eval()
    rows = torch.tensor([s.messages[0].content[0].options["features"] for s in task.load()], dtype=torch.float64)
    return net, ((rows - torch.as_tensor(st["mean"])) / torch.as_tensor(st["std"])).float()


def test_trained_snn_spikes_are_exactly_binary_at_test():
    task = make_task("digits", test_limit=100)
    model, record, outs, hard = _fit("htaf:snn", task)
    assert record["nonfinite_steps"] == 0 and hard > 0.8
    net, x = _trained_net(model, task)
    assert isinstance(net, SpikingNet)
    with torch.no_grad():
        counts, spikes = net.run(x)
    for layer in spikes:
        assert set(layer.unique().tolist()) == {0.0, 1.0}  # spikes and silences, nothing graded
    assert torch.equal(counts, spikes[-1].sum(0)) and set(counts.unique().tolist()) <= set(range(9))
    assert [o.prediction["hard"][0] for o in outs] == counts.argmax(1).tolist()
    assert all(set(o.prediction["concepts"]) <= set(range(64)) for o in outs)
    net.set_hard(False)  # the soft reading is graded: the surrogate's value in place of each spike
    with torch.no_grad():
        _, soft_spikes = net.run(x)
    assert any(((s > 0) & (s < 1)).any() for s in soft_spikes)


def test_trained_bnn_weights_and_activations_are_plus_minus_one_at_test():
    task = make_task("digits", test_limit=100)
    model, record, outs, hard = _fit("ste:bnn", task, depth=2)
    assert hard > 0.8
    net, x = _trained_net(model, task)
    assert isinstance(net, BinaryWeightNet)
    layers = net.binary_layers()
    assert len(layers) == 3 and all(float(m.weight.detach().abs().max()) <= 1.0 for m in layers)  # clipped latents
    for m in layers:
        assert set(m.binary_weight().unique().tolist()) == {-1.0, 1.0}
    with torch.no_grad():
        logits, acts = net.run(x)
        assert all(set(a.unique().tolist()) == {-1.0, 1.0} for a in acts)
        # the same logits from the signs alone: the forward pass computes with the binary weights
        h = x
        bns = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm1d)]
        for i, (lin, bn) in enumerate(zip(layers, bns, strict=True)):
            z = h @ torch.where(lin.weight >= 0, 1.0, -1.0).T
            z = (z - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias
            h = torch.where(z > 0, 1.0, -1.0) if i < len(layers) - 1 else z
    torch.testing.assert_close(logits, h, rtol=1e-5, atol=1e-4)
    assert [o.prediction["hard"][0] for o in outs] == logits.argmax(1).tolist()


@pytest.mark.parametrize("arch", ["snn", "bnn"])
@pytest.mark.parametrize("act", ["htaf", "ste", "sigmoid"])
def test_every_surrogate_trains_snn_and_bnn_well_above_chance_on_digits(arch, act):
    # measured with these settings (seed 0, full 450-image test split): 0.90-0.98; chance is 0.1
    _, record, outs, hard = _fit(f"{act}:{arch}", make_task("digits"))
    assert hard > 0.7, (act, arch, hard)
    assert record["seconds"] < 60 and len(outs[0].prediction["soft"]) == 1


def test_snn_fit_is_cached_and_other_architectures_keep_their_cache_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path / "cache"))
    task = make_task("digits", test_limit=50)
    settings = {**FAST, "epochs": 2, "cache": True, "steps": 4}
    first = build_model("sigmoid:snn", settings)
    assert first.fit(list(task.train()))["cached"] is False
    second = build_model("sigmoid:snn", settings)
    assert second.fit(list(task.train()))["cached"] is True
    for name, w in first.state["weights"][0].items():
        assert (second.state["weights"][0][name] == w).all()
    assert build_model("sigmoid:snn", {**settings, "steps": 5}).fit(list(task.train()))["cached"] is False
    assert "steps" not in key_settings(TrainConfig(arch="mlp")) and key_settings(TrainConfig(arch="snn"))["steps"] == 8


@pytest.mark.parametrize(("spec", "settings", "message"), [
    ("relu:snn", {}, "relu:snn is not offered"),
    ("relu:bnn", {}, "ReLU is no surrogate of a step"),
    ("htaf:mlp", {"steps": 4}, "setting 'steps' applies only to snn"),
    ("ste:bnn", {"threshold": 0.5}, "setting 'threshold' applies only to snn"),
    ("htaf:bnn", {"norm": True}, "setting 'norm' does not apply"),
    ("htaf:snn", {"decay": 1.5}, "decay=1.5 must be a number >= 0 and <= 1"),
    ("htaf:snn", {"steps": 0}, "steps=0 must be an integer >= 1"),
    ("htaf:snn", {"threshold": 0}, "threshold=0 must be a number > 0"),
    ("htaf:snn", {"leak": 0.5}, "unknown setting 'leak'"),
])
def test_bad_settings_are_one_line(spec, settings, message):
    with pytest.raises(ValueError) as info:
        build_model(spec, settings)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_cli_refuses_relu_snn_with_exit_status_2(tmp_path):
    result = CliRunner().invoke(app, ["eval", "--task", "methods_wine", "--model", "relu:snn",
                                      "--db", f"sqlite:///{tmp_path / 'r.db'}"])
    assert result.exit_code == 2 and "relu:snn is not offered" in result.output
    assert "Traceback" not in result.output and len(result.output.strip().splitlines()) == 1
