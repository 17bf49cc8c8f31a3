"""RHO-LOSS and GREATS selection rules on hand-computed cases; gfv's descent reference is the holdout
gradient; both baselines through the runner into SQLite; no datasel selector reads the evaluation
split's labels (the selection is unchanged when the test labels are permuted)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import dataclasses  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from sqlalchemy import select  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.registry import task  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.store.schema import SampleResultRow  # noqa: E402
from harness.tasks.selection.baselines import greats_greedy, reducible_loss, rho_select  # noqa: E402
from harness.tasks.selection.tasks import select_digits_noisy  # noqa: E402
from harness.tasks.selection.trainer import SelectConfig, holdout_gradient, train_select  # noqa: E402

torch.set_num_threads(1)


def test_rholoss_picks_the_largest_reducible_loss_not_the_largest_loss():
    loss = torch.tensor([2.0, 0.5, 3.0, 1.0])
    irreducible = torch.tensor([0.1, 0.4, 2.9, 0.2])  # point 2: high loss, but the holdout model finds it as hard
    assert torch.allclose(reducible_loss(loss, irreducible), torch.tensor([1.9, 0.1, 0.1, 0.8]))
    assert sorted(rho_select(loss, irreducible, 2).tolist()) == [0, 3]
    assert sorted(torch.topk(loss, 2).indices.tolist()) == [0, 2]  # plain loss selection would differ
    with pytest.raises(ValueError, match="cannot select 5 of 4"):
        rho_select(loss, irreducible, 5)


def test_greats_greedy_second_order_term_skips_a_duplicate():
    g_val = torch.tensor([1.0, 0.0], dtype=torch.float64)
    g = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.9, 0.1], [0.0, 1.0]], dtype=torch.float64)
    picks, gains = greats_greedy(g, g_val, 2, c=1.0)
    # step 1: gain = <g_val, g_j> - |g_j|^2 / 2 = 0.5, 0.5, 0.9 - 0.41 = 0.49, -0.5 -> 0 (first of the tie)
    # step 2: minus <g_j, g_0> as well: g_1 -> 1 - 1.5 = -0.5, g_2 -> 0.9 - 0.9 - 0.41 = -0.41, g_3 -> -0.5
    assert picks == [0, 2]
    assert gains == pytest.approx([0.5, -0.41])
    # with a small step the first-order term dominates and the duplicate is taken
    assert greats_greedy(g, g_val, 2, c=1e-3)[0] == [0, 1]
    # each gain is the exact change of the identity-Hessian Taylor model of the holdout loss
    def taylor(sub: list[int], c: float = 1.0) -> float:
        s = g[sub].sum(0) if sub else torch.zeros(2, dtype=torch.float64)
        return float(c * (g_val @ s) - c * c / 2 * (s @ s))
    assert gains[0] == pytest.approx(taylor([0])) and gains[1] == pytest.approx(taylor([0, 2]) - taylor([0]))


def test_gfv_reference_is_the_holdout_loss_gradient():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    X, y = torch.randn(4, 3), torch.tensor([0, 1, 1, 0])
    ref = holdout_gradient(net, X, y)
    loss = torch.nn.functional.cross_entropy(net(X), y)
    loss.backward()
    assert torch.allclose(ref, torch.cat([p.grad.reshape(-1) for p in net.parameters()]))
    # ref=holdout and ref=pool are different selections on the same stream
    t = select_digits_noisy()
    train = list(t.train())
    Xt = torch.tensor([s.messages[0].content[0].options["features"] for s in train], dtype=torch.float32)
    yt = torch.tensor([int(s.target) for s in train])
    noisy = torch.tensor([bool(s.metadata["noisy"]) for s in train])
    cfg = SelectConfig(method="gfv", steps=3, proj=32)
    a = train_select(cfg, Xt, yt, noisy, 10)[1]
    b = train_select(dataclasses.replace(cfg, ref="pool"), Xt, yt, noisy, 10)[1]
    assert a["holdout"] == 200 and b["holdout"] == 0
    assert a["selection_digest"] != b["selection_digest"]
    with pytest.raises(ValueError, match="ref must be one of holdout, pool") as info:
        build_model("datasel:gfv", {"ref": "test"})
    assert "\n" not in str(info.value)


def test_rholoss_and_greats_through_the_runner_into_sqlite(sqlite_url):
    sessions = open_db(sqlite_url)
    for method in ("rholoss", "greats"):
        summary = Runner(EvalConfig(task="select_digits_noisy", model=f"datasel:{method}", progress=False,
                                    model_settings={"steps": 20}), session_factory=sessions).run()
        m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
        assert summary.n_new == 450 and summary.n_errors == 0, method
        assert all(math.isfinite(v) for v in m.values()), m
        assert m["budget_used"] == 20 * 16 and 0.0 <= m["noisy_selected_fraction"] <= 1.0
        assert m["accuracy"] > 0.1  # better than chance after 320 samples
        with sessions() as s:
            n = len(s.execute(select(SampleResultRow.id).where(SampleResultRow.run_id == summary.run_id)).all())
        assert n == 450
    with pytest.raises(ValueError, match="holdout must be at least 1"):
        build_model("datasel:rholoss", {"holdout": 0})


PERMUTED = "select_digits_noisy_permuted_test"


def _permuted(**options: object):  # type: ignore[no-untyped-def]
    base = select_digits_noisy(**options)  # type: ignore[arg-type]
    test = list(base.load())
    targets = [s.target for s in test]
    random.Random(1).shuffle(targets)
    permuted = [dataclasses.replace(s, target=t) for s, t in zip(test, targets, strict=True)]
    return dataclasses.replace(base, name="", load=lambda: permuted, content_hash=base.content_hash + "-perm")


@pytest.fixture
def permuted_task():
    """Registered for this test only: a task left in the registry shows in every later listing."""
    from harness.registry import _REGISTRY

    task(PERMUTED, description="select_digits_noisy with its test labels permuted (a test)",
         family="selection")(_permuted)
    yield PERMUTED
    _REGISTRY["task"].pop(PERMUTED, None)


@pytest.mark.parametrize("method", ["gfv", "rholoss", "greats"])
def test_selection_is_unchanged_when_the_test_labels_are_permuted(sqlite_url, method, permuted_task):
    sessions = open_db(sqlite_url)
    got = {}
    for name in ("select_digits_noisy", permuted_task):
        summary = Runner(EvalConfig(task=name, model=f"datasel:{method}", progress=False,
                                    model_settings={"steps": 8}), session_factory=sessions).run()
        with sessions() as s:
            rows = s.execute(select(SampleResultRow.sample_id, SampleResultRow.prediction)
                             .where(SampleResultRow.run_id == summary.run_id)).all()
        got[name] = ({sid: p["class"] for sid, p in rows}, {p["selection_digest"] for _, p in rows},
                     {x.name: x.value for x in summary.metrics if not x.breakdown_key}["accuracy"])
    (pred_a, dig_a, acc_a), (pred_b, dig_b, acc_b) = got.values()
    assert len(dig_a) == 1 and dig_a == dig_b  # the same samples chosen at every step
    assert pred_a == pred_b and len(pred_a) == 450  # so the same network answers the same
    assert acc_a != acc_b  # and the labels really were permuted
