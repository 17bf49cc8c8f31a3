"""ACI's update against a literal re-implementation of its authors' released loop: isgibbs/AdaptiveConformal
@ 6c312b45d914229b0b16e8235370bcf0539667b1, ``ACCode.R``, ``runElectionNightPred`` ("Simple" update):
alphat >= 1 -> err 1, alphat <= 0 -> err 0, else err = 1{quantile(scores, 1 - alphat) < newScore};
alphat <- alphat + gamma (alpha - err), never clipped. The quantile function is the harness's (the
conformal quantile of all revealed scores); the reference's update and error rule are what is checked.
``ocp:aci_clipped`` is MAPIE's reading (alpha_t clipped to [0, 1])."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.tasks.conformal.learners import conformal_quantile, make_learner
from harness.tasks.conformal.online import run_online
from harness.tasks.conformal.streams import synthetic


def reference_aci(warm: list[float], scores: list[float], alpha: float, gamma: float) -> tuple[list[float], list[int]]:
    seen = sorted(warm)
    alphat = alpha
    trajectory, errs = [], []
    for new in scores:
        if alphat >= 1:
            err = 1
        elif alphat <= 0:
            err = 0
        else:
            err = int(conformal_quantile(seen, 1 - alphat) < new)
        trajectory.append(alphat)
        errs.append(err)
        alphat = alphat + gamma * (alpha - err)
        seen = sorted([*seen, new])
    return trajectory, errs


def ours(method: str, warm: list[float], scores: list[float], alpha: float, gamma: float):
    learner = make_learner(method, [alpha], warm, {"gamma": gamma})
    trajectory, errs = [], []
    for new in scores:
        trajectory.append(learner.alpha_t[0])  # type: ignore[attr-defined]
        errs.append(int(new > learner.thresholds()[0]))
        learner.update(new)
    return trajectory, errs


def test_the_burn_in_case_follows_the_authors_code_and_the_clipped_reading_misses_every_step() -> None:
    """Burn-in scores 1..20, then 100..109, level 0.98, gamma 0.01: the released code misses 3 steps
    (alpha_t goes below 0 and the set becomes the whole line); clipping at 0 misses all 10."""
    warm, scores = [float(v) for v in range(1, 21)], [float(v) for v in range(100, 110)]
    ref_traj, ref_errs = reference_aci(warm, scores, 0.02, 0.01)
    traj, errs = ours("aci", warm, scores, 0.02, 0.01)
    assert errs == ref_errs and sum(errs) == 3
    assert traj == pytest.approx(ref_traj, abs=1e-15) and min(traj) < 0
    clipped = ours("aci_clipped", warm, scores, 0.02, 0.01)[1]
    assert sum(clipped) == 10


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("alpha,gamma", [(0.02, 0.05), (0.1, 0.005), (0.5, 0.2), (0.9, 0.3)])
def test_random_streams_match_the_reference_step_by_step(seed: int, alpha: float, gamma: float) -> None:
    rng = np.random.default_rng(seed)
    warm = list(rng.exponential(1.0, 30))
    scores = list(rng.exponential(1.0, 200) * np.where(np.arange(200) > 100, 3.0, 1.0))  # a shift halfway
    ref_traj, ref_errs = reference_aci(warm, scores, alpha, gamma)
    traj, errs = ours("aci", warm, scores, alpha, gamma)
    assert errs == ref_errs
    assert traj == pytest.approx(ref_traj, abs=1e-12)


def test_the_long_run_coverage_bound_holds_unclipped_on_the_shift_stream() -> None:
    """Gibbs & Candes' bound: |empirical miscoverage - alpha| <= (max(alpha, 1 - alpha) + gamma) / (gamma T).
    At level 0.98 with gamma 0.05 the clipped update missed it by 0.019."""
    alpha, gamma = 0.02, 0.05
    y = synthetic("shift", 3100, 0)
    res = run_online(y, [alpha], "aci", "ar", 100, {"gamma": gamma})
    scores = np.abs(np.asarray(y[100:]) - np.asarray(res.yhat))
    q = np.asarray(res.q)[:, 0]
    miscover = float(np.mean(scores > q))
    T = len(scores)
    assert abs(miscover - alpha) <= (max(alpha, 1 - alpha) + gamma) / (gamma * T)
    assert math.isinf(float(q.max()))  # the whole line was played at least once
    clipped = run_online(y, [alpha], "aci_clipped", "ar", 100, {"gamma": gamma})
    assert np.isfinite(np.asarray(clipped.q)).all()
