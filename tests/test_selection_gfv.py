"""Gated Fisher Volume: monotone and submodular, greedy within (1 - 1/e) of brute force, redundancy
penalised, gate in (0, 1), singleton = gated per-sample score; datasel backends through the runner."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch starts its thread pool

import itertools  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from harness.modelspec import build_model  # noqa: E402
from harness.runner import EvalConfig, Runner  # noqa: E402
from harness.store.db import open_db  # noqa: E402
from harness.tasks.selection.gfv import gate, gated_score, gfv, greedy, information_gain, whiten  # noqa: E402

torch.set_num_threads(1)


def _random(n: int = 10, d: int = 6, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, d, dtype=torch.float64, generator=g), torch.rand(n, dtype=torch.float64, generator=g)


def test_gfv_is_monotone_and_submodular_on_random_vectors():
    for seed in range(5):
        u, a = _random(seed=seed)
        for _ in range(20):
            perm = torch.randperm(10, generator=torch.Generator().manual_seed(seed)).tolist()
            A, B, j = perm[:2], perm[:5], perm[7]  # A within B, j in neither
            gain_a = gfv(u, a, A + [j]) - gfv(u, a, A)
            gain_b = gfv(u, a, B + [j]) - gfv(u, a, B)
            assert gain_b >= -1e-12 and gain_a >= gain_b - 1e-12
            assert gfv(u, a, B) >= gfv(u, a, A) - 1e-12


def test_greedy_gains_are_the_log_det_increments_and_reach_1_minus_1_over_e_of_brute_force():
    for seed in range(5):
        u, a = _random(seed=seed)
        picks, gains = greedy(u, a, 3)
        for t in range(3):
            assert gains[t] == pytest.approx(gfv(u, a, picks[:t + 1]) - gfv(u, a, picks[:t]), abs=1e-9)
        best = max(gfv(u, a, list(s)) for s in itertools.combinations(range(10), 3))
        assert gfv(u, a, picks) >= (1 - 1 / math.e) * best


def test_identical_candidates_gain_less_than_orthogonal_ones_and_singleton_is_the_gated_score():
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    a = torch.ones(3, dtype=torch.float64)
    assert gfv(u, a, [0, 1]) < gfv(u, a, [0, 2])
    assert greedy(u, a, 2)[0] in ([0, 2], [2, 0], [1, 2], [2, 1])
    uu, aa = _random(seed=3)
    for i in range(10):
        assert gfv(uu, aa, [i]) == pytest.approx(float(gated_score(uu, aa)[i]), abs=1e-12)
    assert torch.allclose(gated_score(uu, torch.ones(10, dtype=torch.float64)), information_gain(uu))


def test_gate_is_in_open_unit_interval_and_prefers_aligned_updates():
    g = torch.randn(32, 20, generator=torch.Generator().manual_seed(0))
    ref = g[:4].mean(0)
    fisher = (g * g).mean(0)
    for center in (True, False):
        a = gate(g, ref, fisher, beta=4.0, center=center)
        assert bool(((a > 0) & (a < 1)).all())
    a = gate(torch.stack([ref, -ref, g[10]]), ref, fisher, center=False)
    assert a[0] > a[2] > a[1]
    u = whiten(g, fisher, projection=torch.randn(8, 20) / 8**0.5)
    assert u.shape == (32, 8)


def test_datasel_gfv_and_random_through_the_runner_and_budget_errors(sqlite_url):
    sessions = open_db(sqlite_url)
    out = {}
    for method in ("gfv", "random"):
        summary = Runner(EvalConfig(task="select_digits_noisy", model=f"datasel:{method}", progress=False,
                                    model_settings={"steps": 60}), session_factory=sessions).run()
        m = {x.name: x.value for x in summary.metrics if not x.breakdown_key}
        assert summary.n_new == 450 and summary.n_errors == 0
        assert m["budget_used"] == 60 * 16 and 0.0 <= m["noisy_selected_fraction"] <= 1.0
        out[method] = m
    assert out["random"]["accuracy"] > 0.5 and out["gfv"]["accuracy"] > 0.3  # both learn in 60 steps
    with pytest.raises(ValueError, match="larger than the pool") as info:
        build_model("datasel:gfv", {"select": 100, "pool": 64})
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="did you mean 'steps'"):
        build_model("datasel:loss", {"step": 3})
