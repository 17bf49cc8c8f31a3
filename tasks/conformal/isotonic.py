"""Euclidean projection onto non-decreasing vectors (pool-adjacent-violators).

The level count d is small (a handful of coverage levels), so a plain-Python stack beats calling
scikit-learn's ``isotonic_regression`` once per step; the tests check both agree.
"""

from __future__ import annotations

from collections.abc import Sequence


def isotonic_projection(values: Sequence[float]) -> list[float]:
    """argmin_{z_1 <= ... <= z_d} ||z - v||_2 with unit weights. A non-decreasing input is returned
    unchanged (no block is ever merged), which makes the projection idempotent."""
    sums: list[float] = []
    counts: list[int] = []
    for v in values:
        s, c = float(v), 1
        # merge while the previous block's mean exceeds this block's mean, compared as the very means
        # that are written out: a cross-multiplied test can disagree with them by one ulp and let a
        # crossing through
        while sums and sums[-1] / counts[-1] > s / c:
            s += sums.pop()
            c += counts.pop()
        sums.append(s)
        counts.append(c)
    out: list[float] = []
    for s, c in zip(sums, counts, strict=True):
        out.extend([s / c] * c)
    return out
