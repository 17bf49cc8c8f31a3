"""The arena's voter audit: voters whose decisive choices are implausible for an honest voter
(position bias, or disagreement with the consensus ratings). Split from :mod:`harness.ratings`."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from harness.ratings import expit, normalise_outcome


@dataclass(slots=True)
class VoterFlag:
    voter: str
    reason: str
    votes: int
    statistic: float


def implausible_voters(
    votes: Iterable[tuple[str, str, str, str]],
    theta: dict[str, float],
    *,
    min_votes: int = 10,
    z_threshold: float = 3.29,
) -> list[VoterFlag]:
    """Voters whose decisive choices are implausible for an honest voter.

    ``votes``: ``(voter, left_model, right_model, outcome)`` with outcome ``a`` = left won. Two
    one-sided z tests at ``z_threshold`` (3.29 ~ p = 0.0005 two-sided per test), after ``min_votes``
    decisive votes: (1) position bias, the share of left picks against Binomial(n, 1/2) (always-left
    or always-right voters); (2) disagreement with consensus: agreements with the consensus ratings
    against their expected count (a Poisson-binomial, normal approximation). Ties are not informative
    for either test. A voter who only follows position fails (1); a random or adversarial voter fails
    (2) once the consensus is clear enough for the test to have power.
    """
    by_voter: dict[str, list[tuple[bool, float]]] = {}
    for voter, left, right, outcome in votes:
        o = normalise_outcome(outcome)
        if o not in ("a", "b"):
            continue
        p_left = float(expit(theta.get(left, 0.0) - theta.get(right, 0.0)))
        picked_left = o == "a"
        by_voter.setdefault(voter, []).append((picked_left, p_left if picked_left else 1.0 - p_left))
    flags: list[VoterFlag] = []
    for voter, rows in by_voter.items():
        n = len(rows)
        if n < min_votes:
            continue
        lefts = sum(1 for left, _ in rows if left)
        z_pos = (lefts - n / 2) / math.sqrt(n / 4)
        if abs(z_pos) > z_threshold:
            side = "left" if z_pos > 0 else "right"
            flags.append(VoterFlag(voter, f"position bias: picked {side} in {max(lefts, n - lefts)}/{n}", n, z_pos))
            continue
        probs = np.array([p for _, p in rows])
        # the agreement indicator is 1 when the voter's pick is the consensus favourite
        fav = np.maximum(probs, 1 - probs)
        agree = float(np.sum(probs >= 0.5))
        var = float(np.sum(fav * (1 - fav)))
        if var <= 0:
            continue
        z_agree = (agree - float(fav.sum())) / math.sqrt(var)
        if z_agree < -z_threshold:
            flags.append(VoterFlag(voter, f"disagrees with consensus: {int(agree)}/{n} agreements, "
                                          f"{fav.sum():.1f} expected", n, z_agree))
    return flags
