"""Hartigan k-means: the classical sequential method and a batched variant (numpy).

Hartigan's move rule: a point x in cluster i (n_i > 1) moves to cluster j when

    n_j / (n_j + 1) * |x - c_j|^2  <  n_i / (n_i - 1) * |x - c_i|^2

and the left/right difference is exactly the drop of the k-means objective (sum of squared
distances to cluster means) that the single move causes. Moves keep the objective from increasing.

Batched Hartigan (the seed paper's idea; its exact safety test is not public, so the tests below are
our reconstruction, marked [inferred] in the methods README): each iteration scores every point's
best Hartigan move against the current centroids, sorts the candidate moves by gain and handles
them in blocks of ``_BLOCK``, each block from the state the previous ones left, in two phases.

1. Parallel-safe moves, applied all at once. A move is *parallel-safe* when it stays improving
   whatever subset of the *other* candidate moves of its block has been applied before it. Applying a subset
   A (joins) and R (leaves) to cluster c moves its mean to c + T / n', with

       T = sum_A (x - c) - sum_R (x - c),   n' = n_c + |A| - |R|,

   and, per coordinate f, every subset sum T_f lies in [-N_f, P_f] where P_f (N_f) sums the positive
   (negative) parts of the candidates' signed offsets +-(x - c)_f, the move's own offset left out
   (it is not applied before itself). For the move's own offset u = x - c that gives

       u . T <= L = sum_f max(u_f P_f, -u_f N_f)      and  |T| <= sqrt(sum_f max(P_f, N_f)^2) = T_max,

   so |x - c_i'|^2 >= max(|u_i|^2 - 2 L_i / lo_i, (|u_i| - T_max,i / lo_i)_+^2) for the source and
   |x - c_j'|^2 <= |u_j|^2 + 2 L_j / lo_j + (T_max,j / lo_j)^2 (L_j with the signs flipped) for the
   target, lo the smallest size the cluster can have before the move. n/(n-1) falls and n/(n+1)
   rises with n, so the largest possible sizes are the weights' worst case. The move is safe when
   the worst-case remove value still beats the worst-case add value by more than the rounding floor
   and the source cannot empty. Then applying the safe moves one by one in *any* order improves the
   objective at every step (each intermediate state is a subset of the block), so applying
   them all at once in parallel is a sequence of Hartigan moves. The directional term L is what
   makes this much tighter than the plain triangle inequality: moves that leave i for j shift c_i
   away from j and c_j towards i, which helps every other i -> j move, and L counts only the
   components that can hurt.
2. The rest, in order of decreasing gain, as *sequential* Hartigan moves, vectorised: with the
   moves' offsets grouped by cluster, a cumulative sum gives every move the exact centroids and
   sizes its two clusters have after all earlier accepted moves, so its exact gain in that state
   is one O(d) computation. Moves whose exact gain is not above the floor are dropped and the
   gains of the survivors recomputed (dropping a move changes later states) until every survivor
   improves in its exact state, or, after a few rounds, the prefix before the first failure is
   kept. The result is exactly a run of the sequential method over the accepted moves.

The loop stops when no point has an improving move: a Hartigan local optimum, like the
sequential method. Scoring is incremental (Hamerly-style bounds, see ``_update_bounds``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

# moves whose exact gain is below this fraction of the mean squared distance are rounding noise
_REL_TOL = 1e-12
# rows of points scored against all centres per block: keeps the n x k block in cache
_CHUNK = 4096
# rounds of the sequential phase's drop-and-recheck before falling back to the verified prefix
_VERIFY_ROUNDS = 12
# candidate moves handled together (parallel-safe test and sequential phase) per block
_BLOCK = 2048


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
    total = 0.0
    for s in range(0, X.shape[0], 8 * _CHUNK):  # blocks: no n x d temporary
        diff = (X[s:s + 8 * _CHUNK] - centers[labels[s:s + 8 * _CHUNK]]).ravel()
        total += float(diff @ diff)
    return total


def _cluster_sums(X: np.ndarray, labels: np.ndarray, k: int, weights: np.ndarray | None = None) -> np.ndarray:
    """Per-cluster (weighted) sums of the rows of X, as one sparse (k x n) @ X product (np.add.at is
    an order of magnitude slower, a bincount per column about as fast but d Python calls)."""
    from scipy.sparse import csr_matrix

    n = labels.shape[0]
    w = np.ones(n) if weights is None else weights
    onehot = csr_matrix((w, (labels, np.arange(n))), shape=(k, n))
    return np.asarray(onehot @ X)


def _sq_dists(X: np.ndarray, x_sq: np.ndarray, C: np.ndarray) -> np.ndarray:
    D = X @ C.T
    D *= -2.0
    D += x_sq[:, None]
    D += np.einsum("ij,ij->i", C, C)[None, :]
    np.maximum(D, 0.0, out=D)
    return D


def assign_nearest(X: np.ndarray, centers: np.ndarray) -> np.ndarray:
    x_sq = np.einsum("ij,ij->i", X, X)
    out = np.empty(X.shape[0], dtype=np.int64)
    for s in range(0, X.shape[0], _CHUNK):
        out[s:s + _CHUNK] = np.argmin(_sq_dists(X[s:s + _CHUNK], x_sq[s:s + _CHUNK], centers), axis=1)
    return out


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


def _given_partition(labels: np.ndarray, n: int, k: int) -> np.ndarray:
    """A caller's starting partition, checked: Hartigan moves never empty a cluster, so every one
    of the k clusters must start non-empty."""
    out = np.array(labels, dtype=np.int64, copy=True)
    if out.shape != (n,):
        raise ValueError(f"labels has shape {out.shape}, expected ({n},)")
    if out.size and (out.min() < 0 or out.max() >= k):
        raise ValueError(f"labels must lie in [0, {k})")
    empty = np.flatnonzero(np.bincount(out, minlength=k) == 0)
    if empty.size:
        raise ValueError(f"cluster {int(empty[0])} of the starting partition is empty")
    return out


def _sequential_move(x: np.ndarray, i: int, C: np.ndarray, counts: np.ndarray, sums: np.ndarray,
                     floor: float) -> int:
    """Re-score x's best Hartigan move exactly against the current state and apply it; returns the
    target cluster or -1 when no move improves (the classical method's inner step)."""
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


def ratio_of(counts: np.ndarray) -> np.ndarray:
    """n/(n-1) per cluster (the remove weight); -inf for singletons, which may not be emptied."""
    return np.where(counts > 1, counts / np.maximum(counts - 1.0, 1.0), -np.inf)


def _rowdot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("ij,ij->i", a, b)


def parallel_safe(x: np.ndarray, src: np.ndarray, dst: np.ndarray, C: np.ndarray, counts: np.ndarray,
                  floor: float) -> np.ndarray:
    """Which candidate moves x[t]: src[t] -> dst[t] are parallel-safe (see the module doc, phase 1)."""
    k = C.shape[0]
    u = x - C[src]  # offset from the source mean; leaving adds -u to the source's T
    v = x - C[dst]  # offset from the target mean; joining adds +v to the target's T
    d = x.shape[1]
    # P (N): per cluster and coordinate, the sum of the positive (negative) parts of the offsets
    parts = np.concatenate([np.concatenate([np.maximum(-u, 0.0), np.maximum(u, 0.0)], axis=1),
                            np.concatenate([np.maximum(v, 0.0), np.maximum(-v, 0.0)], axis=1)])
    PN = _cluster_sums(parts, np.concatenate([src, dst]), k)
    P, N = PN[:, :d], PN[:, d:]
    out_c = np.bincount(src, minlength=k).astype(np.float64)
    in_c = np.bincount(dst, minlength=k).astype(np.float64)
    # source, own offset left out: T_f in [-(N_f - u+_f), P_f - u-_f]
    Ps = P[src] - np.maximum(-u, 0.0)
    Ns = N[src] - np.maximum(u, 0.0)
    L = _rowdot(np.maximum(u, 0.0), Ps) + _rowdot(np.maximum(-u, 0.0), Ns)  # max over subsets of u . T
    t_max = np.sqrt(_rowdot(np.maximum(Ps, Ns), np.maximum(Ps, Ns)))
    lo = counts[src] - out_c[src] + 1.0
    hi = counts[src] + in_c[src]
    du = np.sqrt(_rowdot(u, u))
    lower = np.maximum(du**2 - 2.0 * L / lo, np.maximum(du - t_max / lo, 0.0) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):  # a singleton source (hi = 1): refused below
        remove = hi / (hi - 1.0) * lower
    # target, own offset left out; the worst case of -v . T
    Pd = P[dst] - np.maximum(v, 0.0)
    Nd = N[dst] - np.maximum(-v, 0.0)
    L = _rowdot(np.maximum(v, 0.0), Nd) + _rowdot(np.maximum(-v, 0.0), Pd)
    lo = np.maximum(counts[dst] - out_c[dst], 1.0)
    hi = counts[dst] + in_c[dst] - 1.0
    upper = _rowdot(v, v) + 2.0 * L / lo + _rowdot(np.maximum(Pd, Nd), np.maximum(Pd, Nd)) / lo**2
    add = hi / (hi + 1.0) * upper
    margin = floor + 1e-12 * (remove + add)  # the bounds themselves are rounded
    return (counts[src] - out_c[src] >= 1.0) & (remove - add > margin)


def sequential_accept(x: np.ndarray, src: np.ndarray, dst: np.ndarray, C: np.ndarray, counts: np.ndarray,
                      floor: float, rounds: int = _VERIFY_ROUNDS) -> np.ndarray:
    """Which of the moves x[t]: src[t] -> dst[t], applied in the order given and skipping the
    rejected ones, each strictly lower the objective in the exact state they meet (phase 2 of the
    module doc). Vectorised: no Python loop over moves."""
    m, k = x.shape[0], C.shape[0]
    ev_cluster = np.concatenate([src, dst])
    ev_move = np.concatenate([np.arange(m), np.arange(m)])
    order = np.lexsort((ev_move, ev_cluster))  # events grouped by cluster, in move order within each
    u = x - C[src]
    v = x - C[dst]
    offsets = np.concatenate([-u, v])[order]  # what each event adds to its cluster's T
    steps = np.concatenate([-np.ones(m), np.ones(m)])[order]
    slot = np.empty(2 * m, dtype=np.int64)
    slot[order] = np.arange(2 * m)
    src_slot, dst_slot = slot[:m], slot[m:]
    cl_sorted = ev_cluster[order]
    first = np.flatnonzero(np.r_[True, cl_sorted[1:] != cl_sorted[:-1]])
    group = np.repeat(np.arange(first.size), np.diff(np.r_[first, 2 * m]))
    move_of_event = ev_move[order]
    n_src, n_dst = counts[src], counts[dst]
    active = np.ones(m, dtype=bool)
    del k
    for r in range(rounds):
        w = active[move_of_event].astype(np.float64)
        V = offsets * w[:, None]
        T = np.cumsum(V, axis=0)
        T -= V  # exclusive: what earlier accepted moves added
        T -= T[first][group]  # ... to this event's own cluster only
        s = steps * w
        cnt = np.cumsum(s) - s
        cnt -= cnt[first][group]
        ni = n_src + cnt[src_slot]
        nj = n_dst + cnt[dst_slot]
        # a round's state still counts moves this round will reject, so a cluster can look empty
        # (size 0): those divisions give inf/nan, whose gain fails the test below
        with np.errstate(divide="ignore", invalid="ignore"):
            a = u - T[src_slot] / ni[:, None]  # x - c_i in the state the move meets
            b = v - T[dst_slot] / nj[:, None]
            gain = np.where(ni > 1.0, ni / (ni - 1.0) * _rowdot(a, a), -np.inf) - nj / (nj + 1.0) * _rowdot(b, b)
        bad = active & ~(gain > floor)
        if not bad.any():
            return active
        if r == rounds - 1:
            active[int(np.argmax(bad)):] = False  # the verified prefix: earlier moves never see later ones
            return active
        active &= ~bad
    return active


def _score(Xc: np.ndarray, x_sq: np.ndarray, idx: np.ndarray, labels: np.ndarray, C: np.ndarray,
           counts: np.ndarray, u: np.ndarray, lt: np.ndarray, tgt: np.ndarray, q: np.ndarray, err: float) -> None:
    """Score points idx against every centre: exact own distance u, best target tgt by add value, a
    lower bound lt on its distance, and q = sqrt of a lower bound on every other cluster's add value.

    One single-precision BLAS product per block gives r_j |x - c_j|^2 directly,
    [x, |x|^2, 1] . [-2 r_j c_j, r_j, r_j |c_j|^2], to within ``err`` (the caller's bound on the
    rounding, subtracted so lt and q stay bounds); float32 halves the dominant cost and the bounds
    only decide which points get an exact float64 look."""
    k, d = C.shape
    r = counts / (counts + 1.0)
    Ca = np.concatenate([-2.0 * r[:, None] * C, r[:, None], (r * _rowdot(C, C))[:, None]], axis=1)
    Ca = Ca.astype(np.float32).T.copy()
    Xa = np.empty((_CHUNK, d + 2), dtype=np.float32)
    Xa[:, -1] = 1.0
    for s in range(0, idx.size, _CHUNK):
        part = idx[s:s + _CHUNK]
        m = part.size
        own = labels[part]
        xp = Xc[part]
        diff = xp - C[own]
        u[part] = np.sqrt(_rowdot(diff, diff))
        Xa[:m, :-2] = xp
        Xa[:m, -2] = x_sq[part]
        A = Xa[:m] @ Ca
        rows = np.arange(m)
        A[rows, own] = np.inf
        tg = np.argmin(A, axis=1)
        tgt[part] = tg
        lt[part] = np.sqrt(np.maximum(A[rows, tg].astype(np.float64) - err, 0.0) / r[tg])
        if k > 2:
            A[rows, tg] = np.inf
            q[part] = np.sqrt(np.maximum(A.min(axis=1).astype(np.float64) - err, 0.0))
        else:
            q[part] = np.inf


def _update_bounds(C_old: np.ndarray, C_new: np.ndarray, counts_old: np.ndarray, counts: np.ndarray,
                   changed: np.ndarray, moved: np.ndarray, labels: np.ndarray, u: np.ndarray, lt: np.ndarray,
                   tgt: np.ndarray, q: np.ndarray) -> None:
    """Hamerly-style bounds after an iteration, in distance units (the Hartigan weights folded in).

    Each cluster's mean moved by delta_c, so the own distance grows by at most delta_own and the best
    target's shrinks by at most delta_tgt (its add weight is known exactly when the bound is used).
    Every other cluster j had r_j |x - c_j|^2 >= q^2, so |x - c_j| >= q / sqrt(r_j) and now
    r'_j |x - c'_j|^2 >= r'_j (q / sqrt(r_j) - delta_j)_+^2; with the worst r, r' and delta over the
    changed clusters that is one O(n) update (unchanged clusters keep q). Points that moved get
    bounds that force a full re-score."""
    r_old = counts_old / (counts_old + 1.0)
    r_new = counts / (counts + 1.0)
    step = C_new - C_old
    delta = np.sqrt(_rowdot(step, step))
    u += delta[labels]
    lt -= delta[tgt]
    np.maximum(lt, 0.0, out=lt)
    a = np.sqrt(float(r_new[changed].min()) / float(r_old[changed].max()))
    b = np.sqrt(float(r_new[changed].min())) * float(delta[changed].max())
    bound = q * a
    bound -= b
    np.maximum(bound, 0.0, out=bound)
    np.minimum(q, bound, out=q)
    u[moved] = np.inf
    q[moved] = -1.0


def batched_hartigan(X: np.ndarray, init: np.ndarray, *, max_iter: int = 1000, seq_cap: int | None = None,
                     on_iteration: Callable[[int, float, int, int], None] | None = None,
                     track_objective: bool = True, labels: np.ndarray | None = None) -> HartiganResult:
    """Batched Hartigan from initial centres ``init`` (e.g. k-means++ seeds); see the module doc.

    ``labels`` starts from that partition instead of the nearest-seed one (``init`` then only
    gives k): a random partition is the start of Telgarsky and Vattani's comparison with Lloyd.

    ``seq_cap`` caps the moves the sequential phase considers per iteration (largest gains first;
    None: all, 0: parallel-safe moves only). Scoring is incremental: each point keeps an upper bound
    on its own distance, a lower bound on its best target's and one on every other cluster's add
    value (``_update_bounds``); only points whose bounds admit an improving move are looked at
    (exact own and target distances, O(d)), and only those whose bound on the other clusters fails
    too, or that moved, are re-scored against every cluster, so late iterations cost O(n)."""
    t0 = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, k = X.shape[0], init.shape[0]
    if k < 1 or k > n:
        raise ValueError(f"k={k} must be between 1 and the number of points ({n})")
    # centred copy: the objective is translation invariant and the |x|^2 expansion loses less
    mean = X.mean(axis=0)
    Xc = X - mean
    labels = (_initial_partition(Xc, np.asarray(init, dtype=np.float64) - mean) if labels is None
              else _given_partition(labels, n, k))
    counts = np.bincount(labels, minlength=k).astype(np.float64)
    sums = _cluster_sums(Xc, labels, k)
    x_sq = _rowdot(Xc, Xc)
    history = [objective(X, labels, k)] if track_objective else []
    floor = _REL_TOL * max(float(x_sq.mean()), 1e-300)
    # rounding of the expansion: centroids are convex combinations of points, so every term is at
    # most ~4 max|x|^2; 1e-12 of that is far above double precision and far below real gains.
    # Bounds compare square roots, and |sqrt(a) - sqrt(b)| <= sqrt(|a - b|).
    sq_slack = 1e-12 * 4.0 * (float(x_sq.max()) + 1e-300)
    slack = np.sqrt(sq_slack)
    # single-precision scoring: dot products of d + 2 terms whose absolute values sum to at most
    # 4 max|x|^2, inputs and sums rounded to float32 (unit roundoff 6e-8), with a factor 2 to spare
    err32 = 2.0 * (X.shape[1] + 4) * 6e-8 * 4.0 * float(x_sq.max())
    u = np.full(n, np.inf)  # upper bound on |x - c_own|
    lt = np.zeros(n)  # lower bound on |x - c_tgt|
    tgt = np.zeros(n, dtype=np.int64)  # best target when last scored
    q = np.full(n, -1.0)  # sqrt of a lower bound on the add value of every cluster but own and tgt
    par_total = seq_total = 0
    it = 0
    converged = k == 1
    while it < max_iter and k > 1:
        C = sums / counts[:, None]
        r = counts / (counts + 1.0)
        ratio_out = ratio_of(counts)
        s_out = np.sqrt(np.maximum(ratio_out, 0.0))
        with np.errstate(invalid="ignore"):  # singleton (weight 0) times unscored (inf): nan, never a candidate
            lhs = s_out[labels] * u
        need = np.flatnonzero(lhs > np.minimum(np.sqrt(r)[tgt] * lt, q) - slack)
        cand = need[:0]
        if need.size:
            # points that moved have no bounds (q < 0): straight to the full score; the others get
            # their exact own distance first, and a full score only if it beats the bound q
            forced = q[need] < 0.0
            rest = need[~forced]
            diff = Xc[rest] - C[labels[rest]]
            u[rest] = np.sqrt(_rowdot(diff, diff))
            full = np.concatenate([need[forced], rest[s_out[labels[rest]] * u[rest] > q[rest] - slack]])
            if full.size:
                _score(Xc, x_sq, full, labels, C, counts, u, lt, tgt, q, err32)
            own, dst = labels[need], tgt[need]
            # lt is a lower bound, so this gain an upper one: the exact target distance only where
            # it is above the floor
            gain = ratio_out[own] * u[need] ** 2 - r[dst] * lt[need] ** 2
            redo = np.flatnonzero(gain > floor)
            if redo.size:
                p = need[redo]
                diff = Xc[p] - C[dst[redo]]
                d_t = _rowdot(diff, diff)
                lt[p] = np.sqrt(d_t)
                gain[redo] = ratio_out[own[redo]] * u[p] ** 2 - r[dst[redo]] * d_t
            keep = gain > floor
            cand, src, dst, gain = need[keep], own[keep], dst[keep], gain[keep]
        if cand.size == 0:
            converged = True
            break
        C_start, counts_start = C, counts.copy()
        order = np.argsort(-gain, kind="stable")  # largest gains first
        cand, src, dst = cand[order], src[order], dst[order]
        moved = np.zeros(n, dtype=bool)
        touched: list[np.ndarray] = []
        n_par = n_seq = 0
        budget = n if seq_cap is None else seq_cap
        for s in range(0, cand.size, _BLOCK):
            # blocks keep the arrays in cache and the parallel-safe test to a block's own moves
            # (fewer moves per cluster, tighter bounds); each block starts from the state the
            # previous ones left
            bc, bs, bd = cand[s:s + _BLOCK], src[s:s + _BLOCK], dst[s:s + _BLOCK]
            C = sums / counts[:, None]
            xb = Xc[bc]
            safe = parallel_safe(xb, bs, bd, C, counts, floor)
            if safe.any():
                _apply(xb[safe], bs[safe], bd[safe], sums, counts, k)
                n_par += int(safe.sum())
                touched += [bs[safe], bd[safe]]
            rest = np.flatnonzero(~safe)[:budget]
            if rest.size:
                budget -= rest.size
                C = sums / counts[:, None]
                rest = rest[sequential_accept(xb[rest], bs[rest], bd[rest], C, counts, floor)]
                _apply(xb[rest], bs[rest], bd[rest], sums, counts, k)
                n_seq += int(rest.size)
                touched += [bs[rest], bd[rest]]
                safe[rest] = True
            labels[bc[safe]] = bd[safe]
            moved[bc[safe]] = True
        if n_par == 0 and n_seq == 0:
            break  # nothing applicable (only possible with seq_cap=0): stop rather than spin
        it += 1
        changed = np.unique(np.concatenate(touched))
        _update_bounds(C_start, sums / counts[:, None], counts_start, counts, changed, moved, labels, u, lt, tgt, q)
        par_total += n_par
        seq_total += n_seq
        if track_objective:
            history.append(objective(X, labels, k))
        if on_iteration is not None:
            on_iteration(it, history[-1] if history else float("nan"), n_par, n_seq)
    C = sums / counts[:, None] + mean
    obj = history[-1] if history else objective(X, labels, k)
    return HartiganResult(labels, C, obj, it, time.perf_counter() - t0, history, par_total, seq_total, converged)


def _apply(x: np.ndarray, src: np.ndarray, dst: np.ndarray, sums: np.ndarray, counts: np.ndarray, k: int) -> None:
    m = x.shape[0]
    sums += _cluster_sums(np.concatenate([x, x]), np.concatenate([src, dst]), k,
                          np.concatenate([-np.ones(m), np.ones(m)]))
    counts -= np.bincount(src, minlength=k)
    counts += np.bincount(dst, minlength=k)


def sequential_hartigan(X: np.ndarray, init: np.ndarray, *, max_sweeps: int = 100,
                        on_iteration: Callable[[int, float, int, int], None] | None = None,
                        labels: np.ndarray | None = None) -> HartiganResult:
    """Classical Hartigan: sweep the points in order, applying each improving move at once (the
    reference the batched method must match in kind: it stops at a Hartigan local optimum too).
    ``labels`` as in ``batched_hartigan``."""
    t0 = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, k = X.shape[0], init.shape[0]
    labels = (_initial_partition(X, np.asarray(init, dtype=np.float64)) if labels is None
              else _given_partition(labels, n, k))
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
