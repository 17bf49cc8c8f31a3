"""DtACI against a literal re-implementation of its authors' released loop: isgibbs/DtACI
@ 09ab1674bc579b46d0e54b3525059c0591be342f, ``DtACI.R``, ``conformalAdaptStable(betas, alpha, gammas,
sigma=1/1000, eta=2.72)`` with ``etaAdapt = FALSE``: per step the mean miscoverage is
sum(expertProbs * expertAlphas); the expert losses are pinball(beta_t - expertAlphas, alpha) with
pinball(u, alpha) = alpha u - min(u, 0); every expert steps expertAlphas + gammas (alpha - 1{expertAlphas >
beta_t}), unclipped; the weights become expertWs exp(-eta losses), renormalised and mixed as
(1 - sigma) w / sum(w) + sigma / k. The gamma grid is ``gammaGrid`` of their ``VolatilityPredictions.R``.
The reference's random draw of one expert (``curExpert``) is left out: the harness plays the mean (the
code's ``meanAlphaSeq``, which their figures plot), so nothing is drawn.

beta_t, the largest miscoverage whose set covers s_t, is found here by brute force over the harness's
quantile, independently of ``covering_beta``'s closed form.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.tasks.conformal.learners import (
    DTACI_GAMMAS,
    DtACI,
    aci_threshold,
    conformal_quantile,
    covering_beta,
    make_learner,
)
from harness.tasks.conformal.metrics import stream_metrics
from harness.tasks.conformal.online import run_online
from harness.tasks.conformal.streams import DEFAULT_LEVELS, synthetic


def brute_beta(seen: list[float], score: float) -> float:
    """The largest m/(n+1) whose open cell ((m-1)/(n+1), m/(n+1)) of miscoverages covers ``score``."""
    n = len(seen)
    covered = [score <= conformal_quantile(seen, 1 - (m - 0.5) / (n + 1)) for m in range(1, n + 2)]
    # the quantile falls as the miscoverage grows, so the covering cells come first
    assert covered == sorted(covered, reverse=True)
    return sum(covered) / (n + 1)


def reference_dtaci(betas: list[float], alpha: float, gammas: tuple[float, ...], sigma: float,
                    eta: float) -> tuple[list[float], list[list[float]]]:
    """conformalAdaptStable, line by line (eta < Inf branch), without the random expert draw."""
    k = len(gammas)
    expert_alphas = [alpha] * k
    expert_ws = [1.0] * k
    expert_probs = [1.0 / k] * k
    mean_alpha_seq, experts_seq = [], []
    for beta in betas:
        mean_alpha_seq.append(sum(p * a for p, a in zip(expert_probs, expert_alphas, strict=True)))
        experts_seq.append(list(expert_alphas))
        expert_losses = [alpha * (beta - a) - min(beta - a, 0.0) for a in expert_alphas]
        expert_alphas = [a + g * (alpha - float(a > beta)) for a, g in zip(expert_alphas, gammas, strict=True)]
        bar = [w * math.exp(-eta * loss) for w, loss in zip(expert_ws, expert_losses, strict=True)]
        total = sum(bar)
        nxt = [(1 - sigma) * b / total + sigma / k for b in bar]
        expert_probs = [w / sum(nxt) for w in nxt]
        expert_ws = nxt
    return mean_alpha_seq, experts_seq


def ours(learner: DtACI, scores: list[float]) -> tuple[list[list[float]], list[np.ndarray], list[list[float]]]:
    means, experts, played = [], [], []
    for s in scores:
        means.append(list(learner.alpha_t))
        experts.append(learner.expert_alphas.copy())
        played.append(learner.thresholds())
        learner.update(s)
    return means, experts, played


def betas_of(warm: list[float], scores: list[float]) -> list[float]:
    seen, out = sorted(warm), []
    for s in scores:
        out.append(brute_beta(seen, s))
        seen = sorted([*seen, s])
    return out


def check_parity(learner: DtACI, warm: list[float], scores: list[float], sigma: float, eta: float) -> list[float]:
    means, experts, played = ours(learner, scores)
    betas = betas_of(warm, scores)
    seen = sorted(warm)
    all_means = []
    for k, alpha in enumerate(learner.alphas):
        ref_means, ref_experts = reference_dtaci(betas, alpha, tuple(learner.gammas), sigma, eta)
        assert [m[k] for m in means] == pytest.approx(ref_means, abs=1e-12)
        assert np.allclose([e[k] for e in experts], ref_experts, atol=1e-12)
        all_means += ref_means
    for t, s in enumerate(scores):  # the played sets are the ACI sets of the reference's mean alphas
        assert played[t] == [aci_threshold(seen, m) for m in means[t]]
        seen = sorted([*seen, s])
    return all_means


@pytest.mark.parametrize("seed", [0, 1])
def test_closed_form_beta_matches_brute_force_and_the_error_rule(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for scores in (list(rng.exponential(1.0, 40)), [float(v) for v in rng.integers(0, 5, 40)]):  # ties too
        seen = sorted(scores[:10])
        for s in scores[10:]:
            beta = covering_beta(seen, s)
            assert beta == pytest.approx(brute_beta(seen, s), abs=1e-15)
            for a in rng.uniform(0.0, 1.0, 20):  # err_t(a) = 1{a > beta_t} is the harness's miss
                assert (a > beta) == (s > conformal_quantile(seen, 1 - a))
            seen = sorted([*seen, s])
    assert covering_beta([1.0, 2.0], 3.0) == 0.0  # above every score: no level in (0, 1) covers


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("sigma,eta", [(0.001, 2.72), (0.002, 2.8), (0.1, 30.0)])
def test_random_shifted_streams_match_the_reference_at_every_level(seed: int, sigma: float, eta: float) -> None:
    rng = np.random.default_rng(seed)
    warm = list(rng.exponential(1.0, 30))
    scores = list(rng.exponential(1.0, 300) * np.where(np.arange(300) > 150, 4.0, 1.0))  # a shift halfway
    alphas = [0.5, 0.2, 0.1, 0.02]
    learner = make_learner("dtaci", alphas, warm, {"sigma": sigma, "eta": eta})
    assert isinstance(learner, DtACI) and tuple(learner.gammas) == DTACI_GAMMAS
    check_parity(learner, warm, scores, sigma, eta)


def test_alpha_leaving_zero_and_one_plays_the_whole_line_and_the_empty_set() -> None:
    """Large step sizes drive the experts, and their mean, below 0 after a jump in the scores (the whole
    line is played) and above 1 on scores far below the burn-in (the empty set); the released code never
    clips, and neither does ours."""
    warm = [float(v) for v in range(1, 21)]
    jump = [float(v) for v in range(100, 112)]
    learner = DtACI([0.1], warm, {"sigma": 0.001, "eta": 2.72}, gammas=(0.3, 0.6))
    means = check_parity(learner, warm, jump, 0.001, 2.72)
    assert min(means) < 0
    assert math.inf in [q for qs in ours(DtACI([0.1], warm, {"sigma": 0.001, "eta": 2.72}, gammas=(0.3, 0.6)),
                                         jump)[2] for q in qs]
    low = [0.001 * (i + 1) for i in range(12)]
    learner = DtACI([0.8], warm, {"sigma": 0.001, "eta": 2.72}, gammas=(0.3, 0.6))
    means = check_parity(learner, warm, low, 0.001, 2.72)
    assert max(means) > 1
    assert -math.inf in [q for qs in ours(DtACI([0.8], warm, {"sigma": 0.001, "eta": 2.72}, gammas=(0.3, 0.6)),
                                          low)[2] for q in qs]


def test_dtaci_covers_on_the_shift_stream_and_its_settings_are_checked() -> None:
    y = synthetic("shift", 3100, 0)
    res = run_online(y, [1 - v for v in DEFAULT_LEVELS], "dtaci", "ar", 100)
    m = stream_metrics(y[100:], res.yhat, res.q, DEFAULT_LEVELS)
    assert m["coverage_gap_max"] <= 0.02
    from harness.modelspec import build_model

    assert build_model("ocp:dtaci", {"sigma": 0.002}).spec == "ocp:dtaci?sigma=0.002"
    with pytest.raises(ValueError, match="mixing rate"):
        build_model("ocp:dtaci", {"sigma": 2})
    with pytest.raises(ValueError, match="does not apply"):
        build_model("ocp:dtaci", {"gamma": 0.01})
    with pytest.raises(ValueError, match="sigma must lie"):
        DtACI([0.1], [1.0, 2.0], {"sigma": -0.5, "eta": 1.0})
