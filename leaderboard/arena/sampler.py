"""Which pair of models meets next: uniform, or active with a share of uniform pairs kept.

Active weight of a pair (a, b), from the current fit (ratings ``r`` and standard errors ``se`` on the
display scale)::

    sd = sqrt(se_a^2 + se_b^2)                  uncertainty of the rating difference
    w  = sd * Phi(-|r_a - r_b| / sd) / (1 + n_ab) ** votes_power

``Phi(-|d| / sd)`` is the probability that the fitted order of the two is wrong, so the weight goes
to neighbours whose intervals overlap (the votes that can still change the ranking) and, through
``sd``, to models little is known about; pairs already voted on often are damped. A model without
votes has an infinite ``sd`` in principle: it gets :data:`PRIOR_SD`, which puts it first.

Active choices alone are biased (the fit sees mostly close pairs, and a model judged far off early
is rarely revisited), so with probability ``uniform_share`` a pair is drawn uniformly instead.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

PRIOR_SD = 400.0  # display-scale sd of a model with no votes: a 400-point gap is 10:1 odds


def phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def active_weight(rating_a: float, rating_b: float, se_a: float, se_b: float, n_pair: int,
                  votes_power: float = 0.5) -> float:
    sd = math.sqrt(se_a * se_a + se_b * se_b)
    if not math.isfinite(sd) or sd <= 0:
        sd = PRIOR_SD
    return sd * phi(-abs(rating_a - rating_b) / sd) / (1.0 + n_pair) ** votes_power


def all_pairs(models: Sequence[str]) -> list[tuple[str, str]]:
    return [(a, b) for i, a in enumerate(models) for b in models[i + 1:]]


def pair_order(
    models: Sequence[str], rng: random.Random, *, ratings: Mapping[str, float] | None = None,
    se: Mapping[str, float] | None = None, votes: Mapping[frozenset[str], int] | None = None,
    uniform_share: float = 0.25, votes_power: float = 0.5, active: bool = True,
) -> list[tuple[str, str]]:
    """Every pair, in the order to try them: a uniform shuffle (``active=False``, or with probability
    ``uniform_share``), else a weighted draw without replacement by :func:`active_weight`
    (Efraimidis-Spirakis keys ``u ** (1 / w)``). Later pairs are fall-backs for when the first
    pair has nothing servable."""
    pairs = all_pairs(sorted(models))
    if not active or rng.random() < uniform_share:
        rng.shuffle(pairs)
        return pairs
    votes = votes or {}
    se = se or {}
    ratings = ratings or {}
    keyed = []
    for a, b in pairs:
        w = active_weight(ratings.get(a, 0.0), ratings.get(b, 0.0), se.get(a, PRIOR_SD), se.get(b, PRIOR_SD),
                          votes.get(frozenset((a, b)), 0), votes_power)
        keyed.append((rng.random() ** (1.0 / max(w, 1e-12)), a, b))
    keyed.sort(reverse=True)
    return [(a, b) for _, a, b in keyed]
