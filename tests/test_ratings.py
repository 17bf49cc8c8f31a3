"""Bradley-Terry ratings: recovery of known strengths, CI coverage, ranks, style control, outliers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit
from scipy.stats import spearmanr

from harness.ratings import (
    ELO_SCALE,
    PairCounts,
    RatingsError,
    counts_from_indices,
    fit_bt,
    pair_counts,
    rank_ub,
    rate,
    rate_counts,
)
from harness.ratings.style import rate_with_style, style_features
from harness.ratings.voter_audit import implausible_voters


def simulate(theta: np.ndarray, n: int, rng: np.random.Generator, tie_share: float = 0.5):
    """Votes whose expected win share is exactly sigmoid(theta_a - theta_b): ties take
    tie_share * min(p, 1-p) of the mass, half from each side, so half-win BT is well specified."""
    k = len(theta)
    a = rng.integers(0, k, n)
    b = (a + rng.integers(1, k, n)) % k
    p = expit(theta[a] - theta[b])
    tie = tie_share * np.minimum(p, 1 - p)
    u = rng.random(n)
    outcome = np.where(u < tie, 2, np.where(u < tie + p - tie / 2, 0, 1))
    return a, b, outcome


def counts_for(theta: np.ndarray, n: int, seed: int) -> PairCounts:
    rng = np.random.default_rng(seed)
    a, b, o = simulate(theta, n, rng)
    wins, ties = counts_from_indices(len(theta), a, b, o)
    return PairCounts([f"m{i}" for i in range(len(theta))], wins, ties)


def test_recovers_known_strengths():
    rng = np.random.default_rng(7)
    theta = rng.normal(0, 1, 30)
    counts = counts_for(theta, 200_000, seed=1)
    fitted = fit_bt(counts.effective_wins)
    assert spearmanr(fitted, theta).statistic > 0.95
    err = np.abs(fitted - (theta - theta.mean())).max() * ELO_SCALE
    assert err < 25, err  # Elo points


@pytest.mark.parametrize("method", ["sandwich", "bootstrap"])
def test_ci_coverage_near_95_percent(method):
    theta = np.linspace(-1.2, 1.2, 8)
    truth = ELO_SCALE * (theta - theta.mean()) + 1000
    hits = total = 0
    for draw in range(200):
        counts = counts_for(theta, 3000, seed=1000 + draw)
        r = rate_counts(counts, ci=method, rounds=100, seed=draw).by_model()
        for i, m in enumerate(counts.models):
            hits += r[m].ci_low <= truth[i] <= r[m].ci_high
            total += 1
    coverage = hits / total
    assert 0.88 <= coverage <= 0.99, coverage


def test_tuples_from_a_pairwise_judge_and_ties_count_half():
    verdicts = [("x", "y", "a")] * 3 + [("x", "y", "b")] + [("y", "x", "tie"), ("x", "y", "both_bad")]
    counts = pair_counts(verdicts)
    assert counts.models == ["x", "y"]
    assert counts.wins[0, 1] == 3 and counts.wins[1, 0] == 1 and counts.ties[0, 1] == 2
    # MLE of a 2-model BT: p = effective wins / battles = 4/6
    r = rate(verdicts, ci="sandwich", ridge=0.0).by_model()
    assert math.isclose(r["x"].rating - r["y"].rating, ELO_SCALE * math.log(4 / 2), rel_tol=1e-6)
    assert r["x"].win_rate == pytest.approx(4 / 6)


def test_bad_input_is_a_one_line_error():
    with pytest.raises(RatingsError, match="unknown outcome"):
        pair_counts([("x", "y", "maybe")])
    with pytest.raises(RatingsError, match="itself"):
        pair_counts([("x", "x", "a")])


def test_undefeated_model_stays_finite_and_first():
    votes = [("champ", "m1", "a")] * 20 + [("m1", "m2", "a")] * 10 + [("m2", "m1", "a")] * 5
    r = rate(votes, rounds=50)
    assert r.ratings[0].model == "champ"
    assert all(math.isfinite(x.rating) and math.isfinite(x.ci_low) for x in r.ratings)


def test_rank_ub_and_listing_thresholds():
    assert rank_ub(np.array([10, 5, 0]), np.array([12, 11, 4])).tolist() == [1, 1, 3]
    votes = [("a", "b", "a")] * 60 + [("b", "a", "a")] * 40 + [("a", "c", "a")] * 3
    r = rate(votes, min_votes=10, provisional_votes=101, ci="sandwich").by_model()
    assert r["a"].listed and not r["a"].provisional and r["b"].listed and r["b"].provisional  # 103 vs 100 votes
    assert not r["c"].listed and r["c"].rank == 0
    assert [x.model for x in rate(votes, min_votes=10).ratings][-1] == "c"


def test_anchor_pins_one_model():
    votes = [("a", "b", "a")] * 30 + [("b", "a", "a")] * 20
    r = rate(votes, anchor=("b", 1114.0), ci="sandwich").by_model()
    assert r["b"].rating == pytest.approx(1114.0)


def test_style_control_removes_a_length_effect():
    """Two equally good models; voters prefer the longer answer and model 'long' writes longer ones.
    Plain BT credits 'long'; style control attributes the preference to length."""
    rng = np.random.default_rng(3)
    votes, fa, fb = [], [], []
    for _ in range(3000):
        la, lb = rng.integers(50, 400, 2)
        models = ("long", "short") if rng.random() < 0.5 else ("short", "long")
        la = la * 2 if models[0] == "long" else la
        lb = lb * 2 if models[1] == "long" else lb
        p = expit(2.0 * (la - lb) / (la + lb + 1))
        votes.append((models[0], models[1], "a" if rng.random() < p else "b"))
        fa.append({"length": float(la)})
        fb.append({"length": float(lb)})
    plain = rate(votes, ci="sandwich").by_model()
    styled = rate_with_style(votes, fa, fb).by_model()
    assert plain["long"].rating - plain["short"].rating > 80
    assert abs(styled["long"].rating - styled["short"].rating) < 30
    assert plain["short"].rank == 2 and styled["long"].rank == styled["short"].rank == 1
    assert styled["long"].ci_low < 1000 < styled["long"].ci_high  # truth: equal strength, mean 1000


def test_style_features_count_markdown():
    f = style_features("# Title\n\nSome **bold** text\n- one\n- two\n1. three\n")
    assert f == {"length": 11.0, "headers": 1.0, "lists": 3.0, "bold": 1.0}


def test_implausible_voters_flagged_honest_ones_not():
    rng = np.random.default_rng(11)
    theta = {f"m{i}": t for i, t in enumerate(np.linspace(-2, 2, 6))}
    names = list(theta)
    votes = []
    for voter in [f"honest{i}" for i in range(20)] + ["always_left", "contrarian"]:
        for _ in range(60):
            left, right = rng.choice(names, 2, replace=False)
            p_left = expit(theta[left] - theta[right])
            if voter == "always_left":
                outcome = "a"
            elif voter == "contrarian":
                outcome = "b" if p_left > 0.5 else "a"
            else:
                outcome = "a" if rng.random() < p_left else "b"
            votes.append((voter, left, right, outcome))
    flags = {f.voter: f for f in implausible_voters(votes, theta)}
    assert set(flags) == {"always_left", "contrarian"}
    assert "position" in flags["always_left"].reason and "consensus" in flags["contrarian"].reason
