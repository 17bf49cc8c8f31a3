"""The two closed forms: uniform-vs-weighted threshold (checked by Monte Carlo) and contractivity."""

from __future__ import annotations

import numpy as np
import pytest

from harness.models.operators.theory import (
    combined_variances,
    contraction_factor,
    contractivity_from_quality,
    fixed_point_error,
    uniform_beats_weighted,
    uniform_beats_weighted_threshold,
)


def test_threshold_is_zero_for_equal_variances_and_positive_otherwise() -> None:
    assert uniform_beats_weighted_threshold([2.0, 2.0, 2.0]) == pytest.approx(0.0, abs=1e-15)
    v = [0.5, 1.0, 4.0]
    t = uniform_beats_weighted_threshold(v)
    assert t > 0
    # identity: threshold * sum(v) = Var(uniform) - Var(inverse-variance weights)
    assert t * sum(v) == pytest.approx(sum(v) / 9 - 1 / sum(1 / x for x in v))
    with pytest.raises(ValueError):
        uniform_beats_weighted_threshold([1.0, 0.0])


def _simulate(v: np.ndarray, tau2: float, rng: np.random.Generator, n: int = 200_000) -> tuple[float, float]:
    """Empirical variances of the uniform and the noisy-weight estimators of a centred signal."""
    x = rng.normal(0.0, np.sqrt(v), size=(n, v.size))
    w = (1 / v) / (1 / v).sum()
    noisy = w + rng.normal(0.0, np.sqrt(tau2), size=(n, v.size))
    return float(x.mean(axis=1).var()), float((noisy * x).sum(axis=1).var())


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_threshold_matches_monte_carlo(factor: float) -> None:
    rng = np.random.default_rng(0)
    v = np.array([0.2, 1.0, 3.0, 6.0])
    tau2 = factor * uniform_beats_weighted_threshold(v)
    var_u, var_w = _simulate(v, tau2, rng)
    th_u, th_w = combined_variances(v, tau2)
    assert var_u == pytest.approx(th_u, rel=0.03) and var_w == pytest.approx(th_w, rel=0.03)
    # below the threshold weighting wins, above it uniform wins, as the closed form says
    assert (var_u < var_w) == uniform_beats_weighted(v, tau2) == (factor > 1)


def test_contraction_closed_forms() -> None:
    assert contraction_factor(0.5, 0.8, 0.2) == pytest.approx(0.7)
    assert contraction_factor(0.5, 0.2, 0.4) == pytest.approx(1.1)  # c < beta: divergent
    assert fixed_point_error(0.5, 0.8, 0.2, 0.1) == pytest.approx(0.2 * 0.1 / (0.5 * 0.6))
    with pytest.raises(ValueError):
        fixed_point_error(0.5, 0.2, 0.4, 0.1)


def _trajectory(e0: float, d: float, c: float, beta: float, phi: float, rounds: int) -> list[float]:
    e, out = e0, []
    for _ in range(rounds):
        out.append(1 - e)
        e = (1 - d * (c - beta)) * e + beta * phi
    return out


def test_contractivity_estimate_recovers_the_loop() -> None:
    d, c, beta, phi = 0.5, 0.9, 0.3, 0.05
    trajs = [_trajectory(e0, d, c, beta, phi, 6) for e0 in (0.9, 0.6, 0.4)]
    est = contractivity_from_quality(trajs)
    assert est.contractive and est.factor == pytest.approx(contraction_factor(d, c, beta), abs=1e-9)
    assert est.fixed_point_error == pytest.approx(fixed_point_error(d, c, beta, phi), abs=1e-9)
    assert est.c_minus_beta(d) == pytest.approx(c - beta)
    # a divergent loop (c < beta, the small-model regime) is reported as such
    bad = contractivity_from_quality([_trajectory(0.3, 1.0, 0.2, 0.5, 0.0, 5), _trajectory(0.1, 1.0, 0.2, 0.5, 0.0, 5)])
    assert not bad.contractive and bad.factor == pytest.approx(1.3) and bad.fixed_point_error is None


def test_contractivity_from_noisy_observations() -> None:
    rng = np.random.default_rng(1)
    trajs = []
    for _ in range(300):
        traj = _trajectory(rng.uniform(0.3, 0.9), 0.5, 0.8, 0.2, 0.1, 5)
        trajs.append([min(1.0, max(0.0, q + rng.normal(0, 0.01))) for q in traj])
    est = contractivity_from_quality(trajs)
    assert est.factor == pytest.approx(0.7, abs=0.03)
    with pytest.raises(ValueError):
        contractivity_from_quality([[0.5]])
