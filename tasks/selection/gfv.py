"""Gated Fisher Volume (GFV): the batch objective and its greedy maximiser.

Definitions (one candidate i with per-sample gradient g_i, a diagonal Fisher estimate F (running
mean of squared gradients, plus ``eps``), the pool's mean gradient g_bar, and an optional random
projection R with i.i.d. N(0, 1/k) entries):

    u_i   = R F^{-1/2} g_i                      (the whitened update direction)
    IG_i  = log(1 + lam * ||u_i||^2)              (Fisher-whitened information gain)
    c_i   = cos_F(-F^{-1} g_i, -F^{-1} g_bar) = g_i^T F^{-1} g_bar / (|g_i|_{F^-1} |g_bar|_{F^-1})
    a_i   = sigmoid(beta * (c_i - mean_pool c) / std_pool c)     (Descent Alignment Gate, in (0, 1))
    GFV(S) = log det(I + lam * sum_{i in S} a_i u_i u_i^T)

The gate compares the update a step on i would take (-F^{-1} g_i) with the descent direction
(-F^{-1} g_bar, the pool's mean gradient; ``momentum_gate``: a running mean of the trained-on gradients); a sample whose
update points against it (a mislabelled one, typically) is damped. Two choices of ours, measured
on digits with 30 % label noise (per-sample gradients of a small MLP are nearly orthogonal to any
mean): the cosine is taken in the Fisher metric (clean vs noisy mean cosine 0.163 vs 0.078; the
Euclidean cosine of the natural gradients gives 0.037 vs 0.011), and it is standardised over the
pool (``center=False`` gives the raw sigmoid(beta * c_i), which stays near 0.5 for every sample and
so gates nothing). The gate sits inside the log, so on a singleton GFV({i}) = log(1 + lam a_i ||u_i||^2), the
gated per-sample score (``gated_score``); with a_i = 1 it is IG_i. GFV is monotone and submodular
(log det of I plus a sum of PSD terms), so greedy selection is within (1 - 1/e) of the best k-set.

Greedy: with M_S = I + lam sum_{S} a_i u_i u_i^T, the gain of adding j is
log(1 + lam a_j u_j^T M_S^{-1} u_j); M^{-1} is kept and updated by Sherman-Morrison after each pick,
so a pick costs O(n k + k^2) for n candidates of dimension k.
"""

from __future__ import annotations

from typing import Any


def whiten(g: Any, fisher_diag: Any, eps: float = 1e-8, projection: Any = None) -> Any:
    """u = R F^{-1/2} g for rows of g [n, P]; ``projection`` R is [k, P] or None."""
    u = g / (fisher_diag + eps).sqrt()
    return u if projection is None else u @ projection.T


def gate(g: Any, g_bar: Any, fisher_diag: Any, beta: float = 4.0, eps: float = 1e-8, center: bool = True) -> Any:
    """a_i = sigmoid(beta * z_i), in (0, 1): z_i is the cosine between the natural-gradient update of
    i and of the descent direction in the Fisher metric, cos_F(g_i, g_bar) = g_i^T F^-1 g_bar /
    (|g_i|_F^-1 |g_bar|_F^-1), standardised over the pool when ``center`` (see the module docstring)."""
    import torch

    scale = (fisher_diag + eps).rsqrt()
    d, ref = g * scale, g_bar * scale
    cos = torch.nn.functional.cosine_similarity(d, ref[None].expand_as(d), dim=1, eps=1e-12)
    if center and cos.numel() > 1:
        cos = (cos - cos.mean()) / (cos.std() + 1e-12)
    return torch.sigmoid(beta * cos)


def information_gain(u: Any, lam: float = 1.0) -> Any:
    import torch

    return torch.log1p(lam * (u * u).sum(1))


def gated_score(u: Any, a: Any, lam: float = 1.0) -> Any:
    """The per-sample score GFV reduces to on a singleton: log(1 + lam a ||u||^2)."""
    import torch

    return torch.log1p(lam * a * (u * u).sum(1))


def gfv(u: Any, a: Any, subset: list[int], lam: float = 1.0) -> float:
    """GFV(S) computed directly (log det in the dual n x n form, exact for any dimension)."""
    import torch

    if not subset:
        return 0.0
    us = u[subset] * (lam * a[subset]).sqrt()[:, None]
    gram = us @ us.T
    return float(torch.logdet(torch.eye(len(subset), dtype=u.dtype) + gram))


def greedy(u: Any, a: Any, k: int, lam: float = 1.0) -> tuple[list[int], list[float]]:
    """Greedy GFV maximisation with Sherman-Morrison updates; returns (picks, gains)."""
    import torch

    n, dim = u.shape
    if k > n:
        raise ValueError(f"cannot select {k} of {n} candidates")
    w = lam * a  # per-candidate weight
    Minv = torch.eye(dim, dtype=u.dtype)
    q = (u * u).sum(1)  # u_i^T M^{-1} u_i, M = I at the start
    chosen: list[int] = []
    gains: list[float] = []
    taken = torch.zeros(n, dtype=torch.bool)
    for _ in range(k):
        gain = torch.log1p(w * q).masked_fill(taken, float("-inf"))
        j = int(torch.argmax(gain))
        chosen.append(j)
        gains.append(float(gain[j]))
        taken[j] = True
        v = Minv @ u[j]  # M^{-1} u_j
        denom = 1.0 + w[j] * q[j]
        Minv = Minv - (w[j] / denom) * torch.outer(v, v)
        c = u @ v  # u_i^T M^{-1} u_j for every candidate
        q = q - (w[j] / denom) * c * c
    return chosen, gains
