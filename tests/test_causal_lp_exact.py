"""The response-function LP on identified queries equals the closed-form identification formulas,
with no smoothing of the observed distribution where it has full support (a 1e-9 pseudo-count moved
the "sharp" bounds by up to 3e-4 on near-deterministic SCMs, and in one backdoor case put the truth
outside them by more than the task's 1e-6 allowance).

References, written out from their definitions (Pearl, *Causality*, 2009): the backdoor adjustment
P(y | do(x)) = sum_z P(y | x, z) P(z) over the parents of X, and the front-door formula
P(y | do(x)) = sum_m P(m | x) sum_x' P(y | m, x') P(x')."""

from __future__ import annotations

import numpy as np
import pytest
from requirements import require

require("scipy", "the LP is scipy's HiGHS")

from harness.tasks.causal.graphs import GRAPHS  # noqa: E402
from harness.tasks.causal.lp import conditionals, lp_bounds  # noqa: E402
from harness.tasks.causal.scm import SCM, configs  # noqa: E402


def near_deterministic(name: str, seed: int, eps: float) -> SCM:
    d = GRAPHS[name]
    rng = np.random.default_rng(seed)
    latents = sorted(tuple(sorted(e)) for e in d.bidirected)
    tables = {}
    for v in d.names:
        k = len(d.parents(v)) + sum(v in e for e in latents)
        tables[v] = np.where(rng.random((2,) * k) < 0.5, eps, 1 - eps)  # P(V = 1 | inputs) near 0 or 1
    return SCM(d, latents, tables)  # type: ignore[arg-type]


def _marg(p: np.ndarray, V: np.ndarray, names: tuple[str, ...], fixed: dict[str, int]) -> float:
    keep = np.ones(len(V), dtype=bool)
    for name, value in fixed.items():
        keep &= V[:, names.index(name)] == value
    return float(p[keep].sum())


def backdoor_formula(p: np.ndarray, names: tuple[str, ...], xv: int) -> float:
    V = configs(len(names))
    total = 0.0
    for w in (0, 1):
        for z in (0, 1):
            pz = _marg(p, V, names, {"W": w, "Z": z})
            pxz = _marg(p, V, names, {"W": w, "Z": z, "X": xv})
            total += _marg(p, V, names, {"W": w, "Z": z, "X": xv, "Y": 1}) / pxz * pz
    return total


def frontdoor_formula(p: np.ndarray, names: tuple[str, ...], xv: int) -> float:
    V = configs(len(names))
    total = 0.0
    for m in (0, 1):
        p_m_x = _marg(p, V, names, {"M": m, "X": xv}) / _marg(p, V, names, {"X": xv})
        inner = 0.0
        for x2 in (0, 1):
            inner += (_marg(p, V, names, {"M": m, "X": x2, "Y": 1}) / _marg(p, V, names, {"M": m, "X": x2})
                      * _marg(p, V, names, {"X": x2}))
        total += p_m_x * inner
    return total


@pytest.mark.parametrize("eps", [0.03, 1e-3, 1e-4])
@pytest.mark.parametrize("seed", range(4))
def test_backdoor_ate_equals_the_adjustment_formula_on_near_deterministic_scms(eps: float, seed: int) -> None:
    scm = near_deterministic("backdoor", seed, eps)
    d, p = scm.diagram, scm.joint()
    assert (p > 0).all()
    truth = backdoor_formula(p, d.names, 1) - backdoor_formula(p, d.names, 0)
    assert truth == pytest.approx(scm.query("ate"), abs=1e-12)
    b = lp_bounds(d, p, "ate")
    assert b.lower == pytest.approx(truth, abs=1e-8) and b.upper == pytest.approx(truth, abs=1e-8)


@pytest.mark.parametrize("seed", range(4))
def test_frontdoor_pyx_equals_the_front_door_formula(seed: int) -> None:
    if "frontdoor" not in GRAPHS:
        pytest.fail("the frontdoor diagram is gone from GRAPHS")
    scm = near_deterministic("frontdoor", seed, 1e-3)
    d, p = scm.diagram, scm.joint()
    truth = frontdoor_formula(p, d.names, 1)
    assert truth == pytest.approx(scm.query("pyx"), abs=1e-10)
    b = lp_bounds(d, p, "pyx")
    assert b.lower == pytest.approx(truth, abs=1e-8) and b.upper == pytest.approx(truth, abs=1e-8)


def test_the_old_pseudo_count_moved_the_conditionals_and_zero_cells_still_get_one() -> None:
    scm = near_deterministic("backdoor", 0, 1e-4)
    d, p = scm.diagram, scm.joint()
    exact, smoothed = conditionals(p, d), conditionals(p, d, smooth=1e-9)
    assert np.abs(exact - smoothed).max() > 1e-6  # what the default pseudo-count used to cost
    zero = p.copy()
    zero[0] = 0.0
    zero /= zero.sum()
    assert np.isfinite(conditionals(zero, d)).all()  # 0/0 cells: the pseudo-count keeps them defined
