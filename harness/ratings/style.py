"""Style control for Bradley-Terry ratings: answers' style covariates (length, markdown headers,
lists, bold) enter the model as ``P(a beats b) = sigmoid(theta_a - theta_b + beta . z_ab)`` and the
ratings are the theta with style held out. The feature normalisation ``(f_a - f_b) / (f_a + f_b + 1)``
then z-scoring is our reconstruction of FastChat's style control. Split from :mod:`harness.ratings`
(the plain fit, its intervals and the table), which this module builds on."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.ratings import RIDGE, Ratings, expit, mle_failure, normalise_outcome, pair_counts, rate_counts

STYLE_FEATURES = ("length", "headers", "lists", "bold")
_HEADER = re.compile(r"^#{1,6}\s", re.M)
_LIST = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s", re.M)
_BOLD = re.compile(r"\*\*[^*\n]+\*\*|__[^_\n]+__")


def style_features(text: str) -> dict[str, float]:
    """Style covariates of one answer: length in whitespace tokens (a tokenizer-free stand-in for
    FastChat's token count), markdown headers, list items, bold spans."""
    text = text or ""
    return {
        "length": float(len(text.split())),
        "headers": float(len(_HEADER.findall(text))),
        "lists": float(len(_LIST.findall(text))),
        "bold": float(len(_BOLD.findall(text))),
    }


def style_design(features_a: np.ndarray, features_b: np.ndarray) -> np.ndarray:
    """Standardised per-vote style differences, (n, F): (f_a - f_b) / (f_a + f_b + 1), z-scored."""
    fa = np.asarray(features_a, dtype=float)
    fb = np.asarray(features_b, dtype=float)
    z = (fa - fb) / (fa + fb + 1.0)
    sd = z.std(axis=0)
    return (z - z.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


def _contextual_matrix(k: int, a: np.ndarray, b: np.ndarray, z: np.ndarray, w: np.ndarray) -> np.ndarray:
    """sum_v w_v x_v x_v^T for x_v = (e_a - e_b, z_v), aggregated with bincount (no n x K design)."""
    f = z.shape[1]
    pair = np.bincount(a * k + b, w, k * k).reshape(k, k)
    pair = pair + pair.T
    m_tt = -pair
    m_tt[np.arange(k), np.arange(k)] = pair.sum(axis=1)
    m_tb = np.stack([np.bincount(a, w * z[:, j], k) - np.bincount(b, w * z[:, j], k) for j in range(f)], axis=1)
    m_bb = (z * w[:, None]).T @ z
    return np.block([[m_tt, m_tb.reshape(k, f)], [m_tb.reshape(k, f).T, m_bb]])


def fit_contextual_bt(
    k: int, a: np.ndarray, b: np.ndarray, y: np.ndarray, z: np.ndarray, *, ridge: float = RIDGE,
    beta_ridge: float = RIDGE, max_iter: int = 50,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint Newton fit of theta (K) and style coefficients beta (F) on per-vote rows.

    y is a's share of the win (1, 0, 0.5). ``ridge`` penalises theta, ``beta_ridge`` beta (kept > 0:
    a style feature no answer shows is a constant zero column). Returns (theta centred at 0, beta,
    sandwich SE of theta): the SEs come from H^-1 J H^-1 of the joint model, so they include the
    uncertainty of beta."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    y = np.asarray(y, dtype=float)
    z = np.asarray(z, dtype=float).reshape(len(a), -1)
    f = z.shape[1]
    theta = np.zeros(k)
    beta = np.zeros(f)
    ridges = np.concatenate([np.full(k, ridge), np.full(f, beta_ridge)])
    penalty = np.diag(ridges)
    penalty[:k, :k] += 1.0 / k  # gauge fix on theta (see fit_bt)
    hess = penalty
    for _ in range(max_iter):
        p = expit(theta[a] - theta[b] + z @ beta)
        r = y - p
        grad = np.concatenate([np.bincount(a, r, k) - np.bincount(b, r, k), z.T @ r]) - ridges * np.concatenate(
            [theta, beta])
        hess = _contextual_matrix(k, a, b, z, p * (1 - p)) + penalty
        step = np.linalg.solve(hess, grad)
        big = np.abs(step).max()
        step *= min(1.0, 4.0 / max(big, 1e-300))
        theta += step[:k]
        beta += step[k:]
        if big < 1e-9:
            break
    p = expit(theta[a] - theta[b] + z @ beta)
    meat = _contextual_matrix(k, a, b, z, (y - p) ** 2)
    hinv = np.linalg.inv(hess)
    cov = (hinv @ meat @ hinv)[:k, :k]
    centre = np.eye(k) - 1.0 / k
    se = np.sqrt(np.clip(np.diag(centre @ cov @ centre), 0.0, None))
    return theta - theta.mean(), beta, se



def rate_with_style(
    votes: Sequence[Sequence[Any]],
    features_a: Sequence[dict[str, float]],
    features_b: Sequence[dict[str, float]],
    *,
    ridge: float | None = None,
    **options: Any,
) -> Ratings:
    """Style-controlled ratings: theta and sandwich intervals from the contextual fit (a bootstrap
    would cost one per-vote fit per round, so style control always uses sandwich CIs). ``ridge`` on
    theta as in :func:`rate_counts` (``None``: only where the plain MLE does not exist)."""
    counts = pair_counts(votes)
    index = {m: i for i, m in enumerate(counts.models)}
    a = np.array([index[str(v[0])] for v in votes], dtype=np.int64)
    b = np.array([index[str(v[1])] for v in votes], dtype=np.int64)
    share = {"a": 1.0, "b": 0.0, "tie": 0.5, "both_bad": 0.5}
    y = np.array([share[normalise_outcome(v[2])] for v in votes])
    fa = np.array([[f.get(n, 0.0) for n in STYLE_FEATURES] for f in features_a])
    fb = np.array([[f.get(n, 0.0) for n in STYLE_FEATURES] for f in features_b])
    z = style_design(fa, fb) if len(votes) else np.zeros((0, len(STYLE_FEATURES)))
    theta_ridge = (RIDGE if mle_failure(counts) else 0.0) if ridge is None else float(ridge)
    theta, beta, se = fit_contextual_bt(len(counts.models), a, b, y, z, ridge=theta_ridge)
    options = {**options, "ci": "sandwich"}
    return rate_counts(
        counts, theta=theta, se=se, ridge=ridge,
        style_coefficients=dict(zip(STYLE_FEATURES, map(float, beta), strict=True)), **options,
    )
