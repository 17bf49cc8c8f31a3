"""Parity of the Bradley-Terry ratings with FastChat's ``compute_bt``.

Reference: lm-sys/FastChat at commit 0e6d3e4beaab66f4d3f93db72541a4abab8af28d,
``fastchat/serve/monitor/rating_systems.py``: ``get_matchups_models``, ``preprocess_for_bt``,
``bt_loss_and_grad``, ``fit_bt`` (L-BFGS-B from 0), ``scale_and_offset`` and ``compute_bt``. The ``ref_*``
functions re-implement them from reading them (pandas and scipy as there). Where the MLE exists the
two must agree; where it does not (a model that never lost or never won, a split comparison graph)
FastChat's answer is wherever its iterations stopped, so there we check that ours is flagged instead.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.optimize import minimize
from scipy.special import expit

from harness.ratings import fit_bt, mle_exists, pair_counts, rate

WINNER = {"a": "model_a", "b": "model_b", "tie": "tie", "both_bad": "tie (bothbad)"}


# ---- literal re-implementation of the reference -------------------------------------------------
def ref_get_matchups_models(df: pd.DataFrame) -> tuple[np.ndarray, list[str]]:
    n_rows = len(df)
    model_indices, models = pd.factorize(pd.concat([df["model_a"], df["model_b"]]))
    matchups = np.column_stack([model_indices[:n_rows], model_indices[n_rows:]])
    return matchups, models.to_list()


def ref_preprocess_for_bt(df: pd.DataFrame):  # type: ignore[no-untyped-def]
    n_rows = len(df)
    schedule = np.full((n_rows, 3), fill_value=1, dtype=np.int32)
    schedule[:, [0, 1]], models = ref_get_matchups_models(df)
    schedule[df["winner"] == "model_a", 2] = 2
    schedule[df["winner"] == "model_b", 2] = 0
    matchups_outcomes, weights = np.unique(schedule, return_counts=True, axis=0)
    matchups = matchups_outcomes[:, [0, 1]]
    outcomes = matchups_outcomes[:, 2].astype(np.float64) / 2.0
    weights = weights.astype(np.float64)
    return matchups, outcomes, models, weights


def ref_bt_loss_and_grad(ratings, matchups, outcomes, weights, alpha=1.0):  # type: ignore[no-untyped-def]
    matchup_ratings = ratings[matchups]
    logits = alpha * (matchup_ratings[:, 0] - matchup_ratings[:, 1])
    probs = expit(logits)
    loss = -((np.log(probs) * outcomes + np.log(1.0 - probs) * (1.0 - outcomes)) * weights).sum()
    matchups_grads = -alpha * (outcomes - probs) * weights
    model_grad = np.zeros_like(ratings)
    np.add.at(model_grad, matchups[:, [0, 1]], matchups_grads[:, None] * np.array([1.0, -1.0], dtype=np.float64))
    return loss, model_grad


def ref_fit_bt(matchups, outcomes, weights, n_models, alpha, tol=1e-6):  # type: ignore[no-untyped-def]
    initial_ratings = np.zeros(n_models, dtype=np.float64)
    result = minimize(fun=ref_bt_loss_and_grad, x0=initial_ratings, args=(matchups, outcomes, weights, alpha),
                      jac=True, method="L-BFGS-B", options={"disp": False, "maxiter": 100, "gtol": tol})
    return result["x"]


def ref_scale_and_offset(ratings, models, scale=400, init_rating=1000, baseline_model="mixtral-8x7b-instruct-v0.1",
                         baseline_rating=1114):  # type: ignore[no-untyped-def]
    scaled_ratings = (ratings * scale) + init_rating
    if baseline_model in models:
        baseline_idx = models.index(baseline_model)
        scaled_ratings += baseline_rating - scaled_ratings[..., [baseline_idx]]
    return scaled_ratings


def ref_compute_bt(df: pd.DataFrame, base=10.0, scale=400.0, init_rating=1000, tol=1e-6) -> pd.Series:  # type: ignore
    matchups, outcomes, models, weights = ref_preprocess_for_bt(df)
    ratings = ref_fit_bt(matchups, outcomes, weights, len(models), math.log(base), tol)
    scaled_ratings = ref_scale_and_offset(ratings, models, scale, init_rating=init_rating)
    return pd.Series(scaled_ratings, index=models).sort_values(ascending=False)


# ---- random vote tables --------------------------------------------------------------------------
def votes_for(case: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(case)
    k = int(rng.integers(2, 9))
    strength = rng.normal(0, rng.choice([0.3, 1.0, 2.5]), k)
    n = int(rng.integers(k * 3, 400))
    votes = []
    for _ in range(n):
        i, j = rng.choice(k, 2, replace=False)
        p = expit(strength[i] - strength[j])
        u = rng.random()
        tie = rng.choice([0.0, 0.1, 0.3])
        outcome = "tie" if u < tie / 2 else "both_bad" if u < tie else "a" if rng.random() < p else "b"
        votes.append((f"m{i}", f"m{j}", outcome))
    if case % 7 == 0:  # m0 undefeated (no loss, no tie): no MLE
        votes = [v for v in votes if "m0" not in v[:2] or (v[0] == "m0" and v[2] == "a")
                 or (v[1] == "m0" and v[2] == "b")] + [("m0", "m1", "a")]
    if case % 11 == 0:  # two groups never compared: no MLE
        votes = [v for v in votes if (v[0] in ("m0", "m1")) == (v[1] in ("m0", "m1"))] + [("m1", "m0", "tie")]
    return votes


@pytest.mark.filterwarnings("ignore:scipy.optimize")  # the reference still passes ``disp``
@pytest.mark.parametrize("case", range(150))
def test_ratings_equal_compute_bt(case: int) -> None:
    votes = votes_for(case)
    assert votes
    counts = pair_counts(votes)
    ours = rate(votes, ci="sandwich")
    if not mle_exists(counts.effective_wins):
        assert ours.regularized and ours.regularized_reason
        return
    assert not ours.regularized and ours.regularized_reason == ""
    df = pd.DataFrame({"model_a": [v[0] for v in votes], "model_b": [v[1] for v in votes],
                       "winner": [WINNER[v[2]] for v in votes]})
    ref = ref_compute_bt(df)
    got = ours.by_model()
    for model, value in ref.items():
        assert got[model].rating == pytest.approx(value, abs=0.01), model
    # L-BFGS stops on its loss tolerance; ours (Newton to 1e-9) is at least as close to the optimum
    matchups, outcomes, models, weights = ref_preprocess_for_bt(df)
    as_ref = np.array([(got[m].rating - 1000.0) / 400.0 for m in models])
    ref_at = np.array([(ref[m] - 1000.0) / 400.0 for m in models])
    loss_ours, grad_ours = ref_bt_loss_and_grad(as_ref, matchups, outcomes, weights, math.log(10.0))
    loss_ref, _ = ref_bt_loss_and_grad(ref_at, matchups, outcomes, weights, math.log(10.0))
    assert loss_ours <= loss_ref + 1e-9 and np.abs(grad_ours).max() < 1e-6


def test_the_mle_condition() -> None:
    w = np.array([[0.0, 2.0, 0.0], [1.0, 0.0, 1.0], [0.0, 3.0, 0.0]])
    assert mle_exists(w)  # 0 <-> 1 <-> 2
    w_undefeated = w.copy()
    w_undefeated[1, 0] = 0.0  # model 0 never loses
    assert not mle_exists(w_undefeated)
    assert mle_exists(np.stack([w, w_undefeated])).tolist() == [True, False]
    r = rate([("x", "y", "a")] * 5 + [("y", "z", "a"), ("z", "y", "a")])
    assert r.regularized and "x never lost" in r.regularized_reason
    assert r.to_dict()["regularized"] is True
    # a forced ridge shrinks an existing MLE and says so
    fair = [("x", "y", "a")] * 3 + [("y", "x", "a")]
    assert rate(fair, ridge=0.1, ci="sandwich").regularized
    exact = fit_bt(pair_counts(fair).effective_wins)
    assert exact[0] - exact[1] == pytest.approx(math.log(3.0), rel=1e-9)  # no shrinkage by default
