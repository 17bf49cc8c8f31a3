"""Bradley-Terry ratings from pairwise outcomes, with confidence intervals and rank-with-CI.

One code path ranks human arena votes and pairwise LLM-judge verdicts alike: the input is a list of
``(model_a, model_b, outcome)`` tuples (optionally a 4th element, a weight), outcome one of
``"a"``, ``"b"``, ``"tie"``, ``"both_bad"`` (FastChat's ``model_a``/``model_b``/``tie (bothbad)``
spellings are accepted too).

Why this lives in the core: it is a shared service, not part of one task. The arena ranks human votes
with it and any task family with a pairwise LLM judge (a code judge comparing two programs, for one) ranks its
verdicts with it, so both get the same fit, intervals and ranks, and a fix here reaches every board.

Model: P(i beats j) = sigmoid(theta_i - theta_j). A tie and a both-bad vote count as half a win each
way (FastChat's and arena-rank's convention). The fit is the exact maximum-likelihood estimate, as
FastChat's ``compute_bt`` (``fastchat/serve/monitor/rating_systems.py``): it works on the aggregated
K x K win matrix, not on one row per vote: Newton's method on the concave log-likelihood
``sum_ij W_ij log sigmoid(theta_i - theta_j)``, whose gradient and Hessian need only W and N = W + W^T,
centred at mean 0 (the likelihood is shift-invariant; FastChat's L-BFGS from 0 stays centred too).
The MLE exists exactly when the "i won (or tied) against j" graph is strongly connected (Zermelo,
Ford). Where it does not (a model that never lost or never won, groups never compared) it is
infinite, and FastChat returns wherever its 100 L-BFGS iterations stopped; we add a tiny ridge
``ridge/2 * |theta|^2`` instead, for that fit only, and say so: ``Ratings.regularized`` and its
``regularized_reason`` (:func:`mle_failure`).

Intervals (95%):
* ``bootstrap``: multinomial resampling of the pair-outcome cell counts (equivalent to resampling
  votes with replacement), all rounds fitted at once with batched Newton, percentile interval.
* ``sandwich``: robust standard errors H^+ J H^+ (H the Hessian, J the outer product of per-vote
  scores); robust because half-win ties make the Bernoulli model misspecified, which is why the plain
  Fisher interval is too wide/narrow. Normal interval +-1.96 SE.

Display scale (Elo-like, as FastChat): rating = 1000 + 400 * theta / ln(10), so a 400-point gap is
10:1 odds. Mean rating is 1000 unless ``anchor=(model, rating)`` pins one model.

Rank (UB) (LMArena): 1 + the number of models whose lower CI bound is above this model's upper bound.

Style control (a contextual BT model with style covariates) is :mod:`harness.ratings.style`; the
arena's voter audit is :mod:`harness.ratings.voter_audit`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ELO_SCALE = 400.0 / math.log(10.0)
ELO_BASE = 1000.0
Z95 = 1.959963984540054

OUTCOME_ALIASES = {
    "a": "a", "model_a": "a", "left": "a", "a>b": "a", "a>>b": "a",
    "b": "b", "model_b": "b", "right": "b", "b>a": "b", "b>>a": "b",
    "tie": "tie", "a=b": "tie", "draw": "tie",
    "both_bad": "both_bad", "tie (bothbad)": "both_bad", "bothbad": "both_bad", "both bad": "both_bad",
}


def expit(x: np.ndarray | float) -> np.ndarray:
    """The logistic function, overflow-free (numpy only: the core does not depend on scipy)."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(x, dtype=float)))


class RatingsError(ValueError):
    """Bad rating input (unknown outcome, a model paired with itself, ...): one line."""


def normalise_outcome(outcome: str) -> str:
    key = str(outcome).strip().lower()
    if key not in OUTCOME_ALIASES:
        raise RatingsError(f"unknown outcome {outcome!r} (expected a, b, tie or both_bad)")
    return OUTCOME_ALIASES[key]


@dataclass(slots=True)
class PairCounts:
    """Aggregated outcomes: ``wins[i, j]`` decisive wins of i over j; ``ties[i, j]`` (symmetric) ties
    and both-bad votes between i and j. Weighted inputs give fractional counts."""

    models: list[str]
    wins: np.ndarray
    ties: np.ndarray

    @property
    def effective_wins(self) -> np.ndarray:
        return self.wins + 0.5 * self.ties

    @property
    def battles(self) -> np.ndarray:
        """Battles per pair (symmetric)."""
        return self.wins + self.wins.T + self.ties

    @property
    def votes_per_model(self) -> np.ndarray:
        return self.battles.sum(axis=1)

    @property
    def total(self) -> float:
        return float(self.wins.sum() + np.triu(self.ties, 1).sum())

    def win_fraction(self) -> np.ndarray:
        """Observed share of i's battles against j that i won (ties half); NaN where none."""
        n = self.battles
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, self.effective_wins / np.where(n > 0, n, 1), np.nan)


def counts_from_indices(
    k: int, a: np.ndarray, b: np.ndarray, outcome: np.ndarray, weight: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Win and tie matrices from integer arrays: ``outcome`` 0 = a wins, 1 = b wins, 2 = tie/both-bad."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    outcome = np.asarray(outcome)
    w = None if weight is None else np.asarray(weight, dtype=float)

    def cell(rows: np.ndarray, cols: np.ndarray, mask: np.ndarray) -> np.ndarray:
        flat = rows[mask] * k + cols[mask]
        return np.bincount(flat, weights=None if w is None else w[mask], minlength=k * k).reshape(k, k).astype(float)

    wins = cell(a, b, outcome == 0) + cell(b, a, outcome == 1)
    tie_half = cell(a, b, outcome == 2)
    return wins, tie_half + tie_half.T


def pair_counts(votes: Iterable[Sequence[Any]], models: Sequence[str] | None = None) -> PairCounts:
    """Aggregate ``(model_a, model_b, outcome[, weight])`` tuples. ``models`` fixes the order (and may
    list models without votes); otherwise models are sorted by name."""
    rows = list(votes)
    names = list(models) if models is not None else sorted({str(r[0]) for r in rows} | {str(r[1]) for r in rows})
    index = {m: i for i, m in enumerate(names)}
    code = {"a": 0, "b": 1, "tie": 2, "both_bad": 2}
    a = np.empty(len(rows), dtype=np.int64)
    b = np.empty(len(rows), dtype=np.int64)
    o = np.empty(len(rows), dtype=np.int8)
    w = np.ones(len(rows))
    for n, row in enumerate(rows):
        ma, mb = str(row[0]), str(row[1])
        if ma == mb:
            raise RatingsError(f"vote {n}: model {ma!r} paired with itself")
        if ma not in index or mb not in index:
            raise RatingsError(f"vote {n}: model {ma if ma not in index else mb!r} not in the model list")
        a[n], b[n], o[n] = index[ma], index[mb], code[normalise_outcome(row[2])]
        if len(row) > 3 and row[3] is not None:
            w[n] = float(row[3])
    wins, ties = counts_from_indices(len(names), a, b, o, None if np.all(w == 1) else w)
    return PairCounts(names, wins, ties)


# --------------------------------------------------------------------------------------------------
# Fitting

RIDGE = 1e-3  # used only where the MLE does not exist (see the module docstring)


def mle_exists(wins: np.ndarray) -> np.ndarray | bool:
    """Whether the BT MLE exists for (K, K) or (B, K, K) effective win matrices: the digraph with an
    edge i -> j where i won or tied against j is strongly connected (every model reaches every other
    and is reached by it). Breadth-first reachability from model 0, forwards and backwards, batched."""
    w = np.asarray(wins, dtype=float)
    single = w.ndim == 2
    if single:
        w = w[None]
    bsz, k, _ = w.shape
    if k <= 1:
        ok = np.ones(bsz, dtype=bool)
        return bool(ok[0]) if single else ok
    edges = (w > 0).astype(float)
    ok = np.ones(bsz, dtype=bool)
    for adj in (edges, np.swapaxes(edges, 1, 2)):
        seen = np.zeros((bsz, k), dtype=bool)
        seen[:, 0] = True
        for _ in range(k):
            grown = seen | (np.einsum("bi,bij->bj", seen.astype(float), adj) > 0)
            if (grown == seen).all():
                break
            seen = grown
        ok &= seen.all(axis=1)
    return bool(ok[0]) if single else ok


def mle_failure(counts: PairCounts) -> str:
    """Why the MLE does not exist for these counts ("" when it does), in words for a page."""
    w = counts.effective_wins
    if mle_exists(w):
        return ""
    n = counts.battles.sum(axis=1)
    won, lost = w.sum(axis=1), w.sum(axis=0)
    checks = (("no votes", n == 0), ("never lost", (n > 0) & (lost == 0)), ("never won", (n > 0) & (won == 0)))
    for label, bad in checks:
        if bad.any():
            names = [m for m, b in zip(counts.models, bad, strict=True) if b]
            return f"{', '.join(names[:3])}{' and others' if len(names) > 3 else ''} {label}"
    return "some groups of models were never compared both ways"


def fit_bt(
    wins: np.ndarray, *, ridge: float | np.ndarray | None = None, tol: float = 1e-9, max_iter: int = 100,
    theta0: np.ndarray | None = None,
) -> np.ndarray:
    """Bradley-Terry MLE (natural-log-odds scale) from effective win matrices, batched.

    ``wins`` is (K, K) or (B, K, K) with ties already split half/half. ``ridge``: ``None`` (default)
    fits the exact MLE wherever it exists and adds :data:`RIDGE` only to the matrices where it does
    not (:func:`mle_exists`); a number or a (B,) array forces that ridge. Newton steps; steps are
    capped at 4 log-odds units so a model that never loses cannot overflow before the ridge catches
    it. Returns theta of shape (K,) or (B, K), each row summing to ~0.
    """
    w = np.asarray(wins, dtype=float)
    single = w.ndim == 2
    if single:
        w = w[None]
    bsz, k, _ = w.shape
    if ridge is None:
        ridge = np.where(mle_exists(w), 0.0, RIDGE)
    ridges = np.broadcast_to(np.asarray(ridge, dtype=float), (bsz,))
    n = w + np.swapaxes(w, 1, 2)
    row_wins = w.sum(axis=2)
    theta = np.zeros((bsz, k)) if theta0 is None else np.broadcast_to(theta0, (bsz, k)).astype(float).copy()
    active = np.ones(bsz, dtype=bool)
    for _ in range(max_iter):
        t = theta[active]
        nn = n[active]
        r = ridges[active][:, None]
        p = expit(t[:, :, None] - t[:, None, :])
        grad = row_wins[active] - (nn * p).sum(axis=2) - r * t
        wpq = nn * p * (1.0 - p)
        hess = -wpq  # the negative Hessian: graph Laplacian of the weights p*q*N plus the ridge
        hess[:, np.arange(k), np.arange(k)] = wpq.sum(axis=2) + r
        hess += 1.0 / k  # gauge fix: theta is only defined up to a shift; the step keeps sum(theta) = 0
        step = np.linalg.solve(hess, grad[:, :, None])[:, :, 0]
        biggest = np.abs(step).max(axis=1)
        scale = np.minimum(1.0, 4.0 / np.maximum(biggest, 1e-300))
        theta[active] = t + step * scale[:, None]
        done = biggest < tol
        if done.all():
            active[active] = False
            break
        idx = np.flatnonzero(active)
        active[idx[done]] = False
    theta -= theta.mean(axis=1, keepdims=True)
    return theta[0] if single else theta


def bootstrap_thetas(
    counts: PairCounts, rounds: int = 100, *, seed: int = 0, ridge: float | None = None,
    theta0: np.ndarray | None = None,
) -> np.ndarray:
    """(rounds, K) bootstrap fits: the vote table is resampled with replacement, which for
    aggregated data is one multinomial draw over the pair-outcome cells per round. ``ridge=None``:
    the exact MLE in every round where it exists (a resample can lose it even when the data has it)."""
    k = len(counts.models)
    iu = np.triu_indices(k, 1)
    off = ~np.eye(k, dtype=bool)
    cells = np.concatenate([counts.wins[off], counts.ties[iu]])
    total = cells.sum()
    if total <= 0 or rounds <= 0:
        return np.zeros((max(rounds, 0), k))
    rng = np.random.default_rng(seed)
    if np.allclose(cells, np.round(cells)):
        draws = rng.multinomial(int(round(total)), cells / total, size=rounds).astype(float)
    else:  # weighted votes: resample the total weight with the same cell probabilities
        draws = rng.multinomial(int(round(total)) or 1, cells / total, size=rounds) * (total / max(round(total), 1))
    n_off = int(off.sum())
    wins = np.zeros((rounds, k, k))
    wins[:, off] = draws[:, :n_off]
    ties = np.zeros((rounds, k, k))
    ties[:, iu[0], iu[1]] = draws[:, n_off:]
    ties = ties + np.swapaxes(ties, 1, 2)
    return fit_bt(wins + 0.5 * ties, ridge=ridge, theta0=theta0)


def sandwich_se(counts: PairCounts, theta: np.ndarray, *, ridge: float = 0.0) -> np.ndarray:
    """Robust (sandwich) standard errors of theta under the sum-to-zero constraint.

    H = Laplacian(N p q) (+ ridge); J = Laplacian(sum over cells count * (y - p)^2) with y = 1, 0 or
    1/2 the share i won; Cov = H^+ J H^+ (pseudo-inverse = the sum-zero parametrisation)."""
    k = len(counts.models)
    p = expit(theta[:, None] - theta[None, :])
    n = counts.battles

    def laplacian(weights: np.ndarray) -> np.ndarray:
        lap = -weights.copy()
        lap[np.arange(k), np.arange(k)] = weights.sum(axis=1) - np.diag(weights)
        return lap

    # per-vote score of theta_i for a vote i vs j is (y - p_ij) (e_i - e_j); squared: the three outcomes
    jw = counts.wins * (1 - p) ** 2 + counts.wins.T * p**2 + counts.ties * (0.5 - p) ** 2
    h = laplacian(n * p * (1 - p)) + ridge * np.eye(k)
    hinv = np.linalg.pinv(h)
    centre = np.eye(k) - 1.0 / k  # project onto the sum-zero subspace
    hinv = centre @ hinv @ centre
    cov = hinv @ laplacian(jw) @ hinv
    return np.sqrt(np.clip(np.diag(cov), 0.0, None))


# --------------------------------------------------------------------------------------------------
# Leaderboard


@dataclass(slots=True)
class Rating:
    model: str
    rating: float  # Elo-like display scale
    ci_low: float
    ci_high: float
    votes: float
    rank: int  # rank (UB) among listed models
    listed: bool  # has at least min_votes
    provisional: bool  # listed but below provisional_votes
    theta: float = 0.0
    se: float = 0.0  # standard error on the display scale (sandwich), for active sampling
    win_rate: float = math.nan  # share of its battles won, ties half


@dataclass(slots=True)
class Ratings:
    ratings: list[Rating]  # listed models first, best first
    counts: PairCounts
    method: str
    rounds: int
    style_coefficients: dict[str, float] = field(default_factory=dict)
    regularized: bool = False  # the MLE does not exist for these votes: a small ridge was added
    regularized_reason: str = ""

    def by_model(self) -> dict[str, Rating]:
        return {r.model: r for r in self.ratings}

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "bootstrap_rounds": self.rounds,
            "regularized": self.regularized,
            "regularized_reason": self.regularized_reason,
            "models": self.counts.models,
            "total_votes": self.counts.total,
            "style_coefficients": self.style_coefficients,
            "ratings": [
                {k: (None if isinstance(v, float) and math.isnan(v) else v)
                 for k, v in ((s, getattr(r, s)) for s in Rating.__slots__)}
                for r in self.ratings
            ],
        }


def to_elo(theta: np.ndarray, anchor_offset: float = 0.0) -> np.ndarray:
    return ELO_BASE + ELO_SCALE * np.asarray(theta) + anchor_offset


def rank_ub(lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
    """LMArena's rank (UB): 1 + number of models whose lower bound exceeds this one's upper bound."""
    lows = np.asarray(lows)
    highs = np.asarray(highs)
    return 1 + (lows[None, :] > highs[:, None]).sum(axis=1)


def rate_counts(
    counts: PairCounts,
    *,
    ci: str = "bootstrap",
    rounds: int = 100,
    seed: int = 0,
    ridge: float | None = None,
    min_votes: int = 0,
    provisional_votes: int = 0,
    anchor: tuple[str, float] | None = None,
    theta: np.ndarray | None = None,
    se: np.ndarray | None = None,
    style_coefficients: dict[str, float] | None = None,
) -> Ratings:
    """Fit, intervals, ranks. ``ci`` is ``bootstrap`` or ``sandwich`` (sandwich SEs are always
    computed too: active sampling uses them). Models below ``min_votes`` are fitted (their votes
    inform the others) but not listed or ranked; listed models under ``provisional_votes`` are marked.
    ``ridge=None``: the exact MLE, with :data:`RIDGE` only where the MLE does not exist (flagged in the
    result); a number forces that ridge (flagged when > 0)."""
    if ci not in ("bootstrap", "sandwich"):
        raise RatingsError(f"unknown ci method {ci!r} (bootstrap or sandwich)")
    k = len(counts.models)
    reason = mle_failure(counts) if k else ""
    fit_ridge = (RIDGE if reason else 0.0) if ridge is None else float(ridge)
    if ridge is not None and fit_ridge > 0 and not reason:
        reason = f"ridge {fit_ridge:g} requested"
    if theta is None:
        theta = fit_bt(counts.effective_wins, ridge=fit_ridge) if k else np.zeros(0)
    if se is None:
        se = sandwich_se(counts, theta, ridge=fit_ridge) if k else np.zeros(0)
    offset = 0.0
    if anchor is not None:
        if anchor[0] not in counts.models:
            raise RatingsError(f"anchor model {anchor[0]!r} has no votes")
        offset = anchor[1] - float(to_elo(theta[counts.models.index(anchor[0])]))
    elo = to_elo(theta, offset)
    if ci == "bootstrap" and rounds > 0 and k:
        boots = to_elo(bootstrap_thetas(counts, rounds, seed=seed, ridge=ridge, theta0=theta), offset)
        lo, hi = np.quantile(boots, [0.025, 0.975], axis=0)
    else:
        lo, hi = elo - Z95 * ELO_SCALE * se, elo + Z95 * ELO_SCALE * se
    votes = counts.votes_per_model
    listed = votes >= min_votes
    ranks = np.zeros(k, dtype=int)
    if listed.any():
        ranks[listed] = rank_ub(lo[listed], hi[listed])
    with np.errstate(invalid="ignore", divide="ignore"):
        win_rate = counts.effective_wins.sum(axis=1) / np.where(votes > 0, votes, np.nan)
    rows = [
        Rating(
            model=m, rating=float(elo[i]), ci_low=float(lo[i]), ci_high=float(hi[i]), votes=float(votes[i]),
            rank=int(ranks[i]), listed=bool(listed[i]), provisional=bool(listed[i] and votes[i] < provisional_votes),
            theta=float(theta[i]), se=float(ELO_SCALE * se[i]), win_rate=float(win_rate[i]),
        )
        for i, m in enumerate(counts.models)
    ]
    rows.sort(key=lambda r: (not r.listed, -r.rating))
    method = "bootstrap" if ci == "bootstrap" and rounds > 0 else "sandwich"
    return Ratings(rows, counts, method, rounds if method == "bootstrap" else 0, dict(style_coefficients or {}),
                   regularized=bool(reason), regularized_reason=reason)


def rate(votes: Iterable[Sequence[Any]], models: Sequence[str] | None = None, **options: Any) -> Ratings:
    """Ratings from ``(model_a, model_b, outcome[, weight])`` tuples (arena votes or pairwise judge
    verdicts). Options as ``rate_counts``."""
    return rate_counts(pair_counts(votes, models), **options)
