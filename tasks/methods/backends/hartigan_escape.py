"""Escapes from a Hartigan local optimum: dissolve one cluster, split another, converge again.

A Hartigan optimum is stable against every single-point move, yet two clusters sharing one true
group while another cluster straddles two groups is such an optimum: no one point can fix it. An
escape proposes the two-cluster change a point move cannot make:

1. dissolve the cluster whose points cost least to hand to their nearest other centre (that cost,
   with the centres held still, bounds the objective's rise from above);
2. split the cluster with the largest sum of squared distances in two along its principal axis
   (its points ordered by their projection, the first half forming the freed cluster);
3. run batched Hartigan from that partition to a new optimum, and keep it only if its objective is
   lower than the old one.

The search stops at the first rejected proposal or after ``rounds``; it is deterministic (no random
draws), and every result is a Hartigan local optimum, like the one it started from. This is a
swap heuristic of our own (in the spirit of the swap local search of Kanungo et al., 2004, with
Hartigan in place of Lloyd), not part of the seed paper's method.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from harness.tasks.methods.backends.hartigan_core import (
    _CHUNK,
    HartiganResult,
    _cluster_sums,
    _sq_dists,
    batched_hartigan,
)

_AXIS_ROWS = 4096  # rows (evenly spaced) that estimate a cluster's principal axis


def propose(X: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray | None:
    """The dissolve-and-split partition (steps 1 and 2 of the module doc), or None when k < 3 or
    no cluster can be split."""
    if k < 3:
        return None
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    C = _cluster_sums(X, labels, k) / counts[:, None]
    x_sq = np.einsum("ij,ij->i", X, X)
    own = np.empty(X.shape[0])
    second = np.empty(X.shape[0], dtype=np.int64)
    second_d = np.empty(X.shape[0])
    for s in range(0, X.shape[0], _CHUNK):
        D = _sq_dists(X[s:s + _CHUNK], x_sq[s:s + _CHUNK], C)
        rows = np.arange(D.shape[0])
        own[s:s + _CHUNK] = D[rows, labels[s:s + _CHUNK]]
        D[rows, labels[s:s + _CHUNK]] = np.inf
        second[s:s + _CHUNK] = D.argmin(axis=1)
        second_d[s:s + _CHUNK] = D[rows, second[s:s + _CHUNK]]
    cost = np.bincount(labels, weights=second_d - own, minlength=k)
    a = int(np.argmin(cost))
    new = labels.copy()
    members = np.flatnonzero(labels == a)
    new[members] = second[members]
    counts = np.bincount(new, minlength=k).astype(np.float64)
    sums = _cluster_sums(X, new, k)
    # sum |x - c|^2 = sum |x|^2 - |sum x|^2 / n: O(n), and rounding only sways which cluster is split
    sse = np.bincount(new, weights=x_sq, minlength=k) - np.einsum("ij,ij->i", sums, sums) / np.maximum(counts, 1.0)
    C = sums / np.maximum(counts, 1.0)[:, None]
    sse[a] = -1.0
    sse[counts < 2] = -1.0
    b = int(np.argmax(sse))
    if sse[b] <= 0.0:
        return None
    pts = np.flatnonzero(new == b)
    sub = pts[:: max(1, pts.size // _AXIS_ROWS)]
    Y = X[sub] - C[b]
    axis = np.linalg.svd(Y, full_matrices=False)[2][0]
    order = np.argsort((X[pts] - C[b]) @ axis, kind="stable")
    new[pts[order[: pts.size // 2]]] = a
    return new


def with_escapes(X: np.ndarray, result: HartiganResult, rounds: int, **hartigan: Any) -> HartiganResult:
    """``result`` (a batched Hartigan optimum of X) improved by up to ``rounds`` escapes; iterations
    and move counts add up over every attempt (the rejected last one too), time is the total, and
    a tracked history gains the objective after each accepted escape."""
    t0 = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    k = result.centers.shape[0]
    best, best_obj = result, result.objective  # computed directly from the partition (not tracked)
    iterations, par, seq = result.iterations, result.parallel_moves, result.sequential_moves
    history = list(result.history)  # then the objective after each accepted escape
    for _ in range(rounds):
        start = propose(X, best.labels, k)
        if start is None:
            break
        trial = batched_hartigan(X, best.centers, labels=start, track_objective=False, **hartigan)
        iterations += trial.iterations
        par += trial.parallel_moves
        seq += trial.sequential_moves
        trial_obj = trial.objective
        if not trial_obj < best_obj:
            break
        best, best_obj = trial, trial_obj
        if history:
            history.append(best_obj)
    return replace(best, objective=best_obj, iterations=iterations, parallel_moves=par, sequential_moves=seq,
                   seconds=result.seconds + time.perf_counter() - t0, history=history)
