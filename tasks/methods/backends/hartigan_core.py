"""Hartigan k-means: the classical sequential method and a batched variant (numpy).

Hartigan's move rule: a point x in cluster i (n_i > 1) moves to cluster j when

    n_j / (n_j + 1) * |x - c_j|^2  <  n_i / (n_i - 1) * |x - c_i|^2

and the left/right difference is exactly the drop of the k-means objective (sum of squared
distances to cluster means) that the single move causes. Moves keep the objective from increasing.

Batched Hartigan (the seed paper's idea; its exact safety test is not public, so the test below is
our reconstruction, marked [inferred] in ../shared/notes/training-methods.md (c)): each iteration
scores every point's best Hartigan move against the current centroids in one vectorised pass, then
keeps as *parallel-safe* the moves that stay improving however the other candidate moves change the
clusters they touch. For a candidate set M, each cluster c can drift by at most

    delta_c = sum_{moves of M into or out of c} |x - c_c|  /  (n_c - out_c)

(the mean after adding set A and removing set R is c + (sum_A (x-c) - sum_R (x-c)) / n', and
n' >= n_c - out_c), and its size stays within [n_c - out_c, n_c + in_c]. A move i -> j is safe when,
by the triangle inequality, its worst-case gain is still positive:

    hi_i/(hi_i - 1) * max(|x-c_i| - delta_i, 0)^2  >  hi_j/(hi_j + 1) * (|x-c_j| + delta_j)^2

(n/(n-1) falls and n/(n+1) rises with n, so the largest sizes hi_c = n_c + in_c are the worst case),
and the source cluster cannot empty (n_i - out_i >= 1). Then applying the safe moves one by one in
any order improves the objective at every step, and the final partition (hence objective) does not
depend on the order, so applying them all at once in parallel never increases the objective. The
unsafe rest is re-checked and applied sequentially, exactly, against the updated centroids (at most
``seq_cap`` per iteration, largest gains first; the remainder is re-scored next iteration). The loop
stops when no point has an improving move: a Hartigan local optimum, like the sequential method.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# moves whose exact gain is below this fraction of the mean squared distance are rounding noise
_REL_TOL = 1e-12


@dataclass
class HartiganResult:
    labels: np.ndarray
    centers: np.ndarray
    objective: float
    iterations: int
    seconds: float
    history: list[float] = field(default_factory=list)  # objective after init and after every iteration
    parallel_moves: int = 0
    sequential_moves: int = 0
    converged: bool = False


def objective(X: np.ndarray, labels: np.ndarray, k: int) -> float:
    """k-means objective of a partition with each cluster at its mean (computed directly, not by
    the |x|^2 - 2x.c + |c|^2 expansion, so tests can compare it across iterations to ~1e-12)."""
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _cluster_sums(X, labels, k)
    centers = sums / np.maximum(counts, 1)[:, None]
    diff = X - centers[labels]
    return float(np.einsum("ij,ij->", diff, diff))


def _cluster_sums(X: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    # per-column bincount: np.add.at is an order of magnitude slower on large arrays
    return np.stack([np.bincount(labels, weights=X[:, f], minlength=k) for f in range(X.shape[1])], axis=1)


def _sq_dists(X: np.ndarray, x_sq: np.ndarray, C: np.ndarray) -> np.ndarray:
    D = X @ C.T
    D *= -2.0
    D += x_sq[:, None]
    D += np.einsum("ij,ij->i", C, C)[None, :]
    np.maximum(D, 0.0, out=D)
    return D


def assign_nearest(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    x_sq = np.einsum("ij,ij->i", X, X)
    return np.argmin(_sq_dists(X, x_sq, centers), axis=1)


def _initial_partition(X: np.ndarray, init: np.ndarray) -> np.ndarray:
    """Nearest-seed assignment; a seed that wins no point takes the point farthest from its centre
    (Hartigan moves never empty a cluster, so every cluster must start non-empty)."""
    k = init.shape[0]
    labels = assign_nearest(X, init)
    counts = np.bincount(labels, minlength=k)
    for c in np.flatnonzero(counts == 0):
        d = np.einsum("ij,ij->i", X - init[labels], X - init[labels])
        d[np.bincount(labels, minlength=k)[labels] <= 1] = -1.0
        labels[int(np.argmax(d))] = c
    return labels


def _sequential_move(x: np.ndarray, i: int, C: np.ndarray, counts: np.ndarray, sums: np.ndarray,
                     floor: float) -> int:
    """Re-score x's best Hartigan move exactly against the current state and apply it; returns the
    target cluster or -1 when no move improves."""
    n_i = counts[i]
    if n_i <= 1:
        return -1
    d = x - C
    dist = np.einsum("ij,ij->i", d, d)
    add = counts / (counts + 1.0) * dist
    add[i] = np.inf
    j = int(np.argmin(add))
    gain = n_i / (n_i - 1.0) * dist[i] - add[j]
    if not gain > floor:
        return -1
    counts[i] -= 1
    counts[j] += 1
    sums[i] -= x
    sums[j] += x
    C[i] = sums[i] / counts[i]
    C[j] = sums[j] / counts[j]
    return j


def _drift_bound(X: np.ndarray, C: np.ndarray, src: np.ndarray, dst: np.ndarray, k: int) -> np.ndarray:
    """Per cluster, an upper bound on |sum over any subset of its moves of +-(x - c)|.

    Per coordinate f, a subset sum of the signed offsets lies between minus the sum of the negative
    parts and the sum of the positive parts, so |sum| <= sqrt(sum_f max(P_f, N_f)^2). This is the
    triangle inequality applied per coordinate: never larger than sum |x - c|, and much tighter when
    the moves leave and join a cluster from different directions."""
    out_off = C[src] - X  # removing x shifts the mean by -(x - c) / n'
    in_off = X - C[dst]  # adding x shifts it by +(x - c) / n'
    pos = np.zeros((k, X.shape[1]))
    neg = np.zeros((k, X.shape[1]))
    for off, lab in ((out_off, src), (in_off, dst)):
        pos += _cluster_sums(np.maximum(off, 0.0), lab, k)
        neg += _cluster_sums(np.maximum(-off, 0.0), lab, k)
    return np.sqrt(np.einsum("ij,ij->i", np.maximum(pos, neg), np.maximum(pos, neg)))


def ratio_of(counts: np.ndarray) -> np.ndarray:
    """n/(n-1) per cluster (the remove weight); -inf for singletons, which may not be emptied."""
    return np.where(counts > 1, counts / np.maximum(counts - 1.0, 1.0), -np.inf)


def _update_bounds(X: np.ndarray, labels: np.ndarray, old_labels: np.ndarray, C_old: np.ndarray,
                   sums: np.ndarray, counts: np.ndarray, counts_old: np.ndarray, changed: np.ndarray, d_own: np.ndarray,
                   best_add: np.ndarray, best_tgt: np.ndarray, second: np.ndarray, slack: np.ndarray) -> np.ndarray:
    """Hamerly-style bounds after an iteration (the Hartigan weights folded in); returns the points
    that need a full re-score.

    Changed clusters moved by delta_c and their add weight went from r_c to r'_c. Every cluster j other
    than a point's own and best target had add_j >= second, so |x - c_j| >= sqrt(second / r_j) and now
    add'_j >= r'_j (sqrt(second / r_j) - delta_j)_+^2; with the worst r, r' and delta over the changed
    clusters that is one O(n) update. The own distance and the best target's add value are recomputed
    exactly where their cluster changed. A point is re-scored against all clusters only when its
    remove value could beat the lowered bound (or it moved), so late iterations cost O(n)."""
    k = C_old.shape[0]
    C_new = sums / counts[:, None]
    r_old = counts_old / (counts_old + 1.0)
    r_new = counts / (counts + 1.0)
    delta = np.sqrt(((C_new[changed] - C_old[changed]) ** 2).sum(axis=1))
    r_old_max, r_new_min, d_max = float(r_old[changed].max()), float(r_new[changed].min()), float(delta.max())
    bound = np.sqrt(second / r_old_max)
    bound -= d_max
    np.maximum(bound, 0.0, out=bound)
    bound **= 2
    bound *= r_new_min
    np.minimum(second, bound, out=second)  # unchanged clusters keep their old bound
    is_changed = np.zeros(k, dtype=bool)
    is_changed[changed] = True
    moved = labels != old_labels
    own_changed = np.flatnonzero(is_changed[labels] & ~moved)
    diff = X[own_changed] - C_new[labels[own_changed]]
    d_own[own_changed] = np.einsum("ij,ij->i", diff, diff)
    tgt_changed = np.flatnonzero(is_changed[best_tgt] & ~moved)
    diff = X[tgt_changed] - C_new[best_tgt[tgt_changed]]
    best_add[tgt_changed] = r_new[best_tgt[tgt_changed]] * np.einsum("ij,ij->i", diff, diff)
    remove = ratio_of(counts)[labels] * d_own
    return np.flatnonzero(moved | (remove - second > -slack))


def batched_hartigan(X: np.ndarray, init: np.ndarray, *, max_iter: int = 1000, seq_cap: int = 4096,
                     on_iteration: Callable[[int, float, int, int], None] | None = None,
                     track_objective: bool = True) -> HartiganResult:
    """Batched Hartigan from initial centres ``init`` (e.g. k-means++ seeds); see the module doc.

    Scoring is incremental: each point keeps its exact own distance, its best target's add value and a
    lower bound on every other cluster's (Hamerly-style, see ``_update_bounds``); only points whose
    bounds admit an improving move, and points that moved, are re-scored against every cluster, so
    late iterations that touch a few clusters cost O(n)."""
    t0 = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, k = X.shape[0], init.shape[0]
    if k < 1 or k > n:
        raise ValueError(f"k={k} must be between 1 and the number of points ({n})")
    labels = _initial_partition(X, np.asarray(init, dtype=np.float64))
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _cluster_sums(X, labels, k)
    x_sq = np.einsum("ij,ij->i", X, X)
    history = [objective(X, labels, k)] if track_objective else []
    floor = _REL_TOL * max(history[0] if history else float(x_sq.mean()) * n, 1e-300) / n
    d_own = np.empty(n)
    best_add = np.empty(n)
    best_tgt = np.empty(n, dtype=np.int64)
    second = np.empty(n)  # lower bound on the add value of every cluster other than own and best_tgt
    rescore = np.arange(n)  # points whose bounds cannot be trusted: score against every cluster
    par_total = seq_total = 0
    it = 0
    converged = False
    slack = 1e-9 * (x_sq + 1.0)  # rounding of the |x|^2 - 2x.c + |c|^2 expansion
    while it < max_iter:
        C = sums / counts[:, None]
        C_start, counts_start = C, counts.copy()  # the sequential phase works on a fresh C array
        add_ratio = counts / (counts + 1.0)
        ratio_out = ratio_of(counts)
        if rescore.size:
            full = rescore
            D = _sq_dists(X[full], x_sq[full], C)
            r = np.arange(full.size)
            own = labels[full]
            d_own[full] = D[r, own]
            D *= add_ratio[None, :]
            D[r, own] = np.inf
            tg = np.argmin(D, axis=1)
            best_tgt[full] = tg
            best_add[full] = D[r, tg]
            D[r, tg] = np.inf
            second[full] = D.min(axis=1) if k > 2 else np.inf
            del D
        remove = ratio_out[labels] * d_own
        # prefilter by the expanded-distance gain with slack for rounding, then score candidates exactly
        cand = np.flatnonzero(remove - best_add > -slack)
        if cand.size:
            xc = X[cand]
            src, dst = labels[cand], best_tgt[cand]
            di = np.sqrt(np.einsum("ij,ij->i", xc - C[src], xc - C[src]))
            dj = np.sqrt(np.einsum("ij,ij->i", xc - C[dst], xc - C[dst]))
            gain = ratio_out[src] * di**2 - add_ratio[dst] * dj**2
            keep = gain > floor
            cand, src, dst, di, dj, gain = cand[keep], src[keep], dst[keep], di[keep], dj[keep], gain[keep]
        if cand.size == 0:
            converged = True
            break
        it += 1
        old_labels = labels.copy()
        out_c = np.bincount(src, minlength=k).astype(np.float64)
        in_c = np.bincount(dst, minlength=k).astype(np.float64)
        lo = counts - out_c
        delta = _drift_bound(X[cand], C, src, dst, k) / np.maximum(lo, 1.0)
        hi = counts + in_c
        keep_lhs = hi[src] / (hi[src] - 1.0) * np.maximum(di - delta[src], 0.0) ** 2
        add_rhs = hi[dst] / (hi[dst] + 1.0) * (dj + delta[dst]) ** 2
        safe = (lo[src] >= 1.0) & (keep_lhs > add_rhs)
        s_idx = cand[safe]
        moved_from: list[np.ndarray] = [src[safe], dst[safe]]
        if s_idx.size:
            xs = X[s_idx]
            sums -= _cluster_sums(xs, src[safe], k)
            sums += _cluster_sums(xs, dst[safe], k)
            counts -= np.bincount(src[safe], minlength=k)
            counts += np.bincount(dst[safe], minlength=k)
            labels[s_idx] = dst[safe]
        n_seq = 0
        unsafe = np.flatnonzero(~safe)
        if unsafe.size:
            order = unsafe[np.argsort(-gain[unsafe], kind="stable")][:seq_cap]
            C = sums / counts[:, None]
            seq_moves = []
            for p in cand[order]:
                i = int(labels[p])
                j = _sequential_move(X[p], i, C, counts, sums, floor)
                if j >= 0:
                    labels[p] = j
                    seq_moves += [i, j]
                    n_seq += 1
            moved_from.append(np.asarray(seq_moves, dtype=np.int64))
        if s_idx.size == 0 and n_seq == 0:
            it -= 1
            break  # nothing applicable (only possible with seq_cap=0): stop rather than spin
        changed = np.unique(np.concatenate(moved_from))
        rescore = _update_bounds(X, labels, old_labels, C_start, sums, counts, counts_start, changed, d_own,
                                 best_add, best_tgt, second, slack)
        par_total += int(s_idx.size)
        seq_total += n_seq
        if track_objective:
            history.append(objective(X, labels, k))
        if on_iteration is not None:
            on_iteration(it, history[-1] if history else float("nan"), int(s_idx.size), n_seq)
    C = sums / counts[:, None]
    obj = history[-1] if history else objective(X, labels, k)
    return HartiganResult(labels, C, obj, it, time.perf_counter() - t0, history, par_total, seq_total, converged)


def sequential_hartigan(X: np.ndarray, init: np.ndarray, *, max_sweeps: int = 100,
                        on_iteration: Callable[[int, float, int, int], None] | None = None) -> HartiganResult:
    """Classical Hartigan: sweep the points in order, applying each improving move at once (the
    reference the batched method must match in kind: it stops at a Hartigan local optimum too)."""
    t0 = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, k = X.shape[0], init.shape[0]
    labels = _initial_partition(X, np.asarray(init, dtype=np.float64))
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _cluster_sums(X, labels, k)
    C = sums / counts[:, None]
    history = [objective(X, labels, k)]
    floor = _REL_TOL * max(history[0], 1e-300) / n
    sweeps, moves, converged = 0, 0, False
    while sweeps < max_sweeps:
        sweeps += 1
        moved = 0
        for p in range(n):
            j = _sequential_move(X[p], int(labels[p]), C, counts, sums, floor)
            if j >= 0:
                labels[p] = j
                moved += 1
        moves += moved
        history.append(objective(X, labels, k))
        if on_iteration is not None:
            on_iteration(sweeps, history[-1], 0, moved)
        if moved == 0:
            converged = True
            break
    return HartiganResult(labels, C.copy(), history[-1], sweeps, time.perf_counter() - t0, history, 0, moves,
                          converged)
