"""Holdout-based online selection baselines: RHO-LOSS and GREATS, as selection rules on plain tensors.

RHO-LOSS (Mindermann et al., ICML 2022, "Prioritized Training on Points that are Learnable, Worth
Learning, and Not Yet Learnt"): a point's reducible holdout loss is its training loss under the
current model minus its *irreducible loss*, the loss of a model trained only on a holdout split;
the ``select`` points with the largest reducible loss are trained on. The authors' code (OATML/RHO-Loss,
``src/curricula/selection_methods.py``, ``reducible_loss_selection``) precomputes the irreducible loss
once per training point and takes the top-k of ``model_loss - irreducible_loss``; we do the same.
Reconstructed, ours: the irreducible-loss model is the task's MLP trained full-batch with Adam on the
holdout (``il_steps`` steps), with no weight decay or early stopping (the paper tunes these).

GREATS (Wang et al., NeurIPS 2024, "GREATS: Online Selection of High-Quality Data for LLM Training in
Every Iteration"): greedy selection by a Taylor approximation of the decrease of the validation loss
the step would cause. With the step theta' = theta - c * sum_{i in S} g_i (c = lr / select: the
mean-loss step) and the validation Hessian approximated by the identity,

    L_val(theta') ~= L_val(theta) - c <g_val, sum_S g_i> + c^2 / 2 * ||sum_S g_i||^2

so adding j to S decreases it by c <g_val, g_j> - c^2 (<g_j, sum_S g_i> + ||g_j||^2 / 2): the
first-order alignment with the validation gradient minus a redundancy term from the candidates'
gradient inner products. The authors' code (Jiachen-T-Wang/GREATS, linked from the README of their
Jiachen-T-Wang/GhostSuite ``examples/greats``, which describes the same first-order score and
Gram-based greedy second-order variant; we read that README, not the selection code) gets the inner
products by "ghost" products without materialising gradients; our MLP is small, so we form the
per-sample gradients and their Gram matrix directly. Reconstructed, ours: the identity Hessian,
c = lr / select (our optimiser is Adam, whose real step is not c g), and g_val = the mean gradient
over the whole holdout.
"""

from __future__ import annotations

from typing import Any


def reducible_loss(train_loss: Any, irreducible: Any) -> Any:
    """RHO-LOSS's score: training loss under the current model minus the irreducible (holdout-model) loss."""
    return train_loss - irreducible


def rho_select(train_loss: Any, irreducible: Any, k: int) -> Any:
    """Indices of the ``k`` candidates with the largest reducible holdout loss."""
    import torch

    if k > train_loss.numel():
        raise ValueError(f"cannot select {k} of {train_loss.numel()} candidates")
    return torch.topk(reducible_loss(train_loss, irreducible), k).indices


def greats_greedy(g: Any, g_val: Any, k: int, c: float) -> tuple[list[int], list[float]]:
    """GREATS' greedy pick of ``k`` rows of the per-sample gradients ``g`` [n, P]; returns (picks,
    gains), gain_j = c <g_val, g_j> - c^2 (<g_j, sum_S g_i> + ||g_j||^2 / 2) for the current S."""
    import torch

    n = g.shape[0]
    if k > n:
        raise ValueError(f"cannot select {k} of {n} candidates")
    align = g @ g_val  # <g_j, g_val>
    gram = g @ g.T
    with_s = torch.zeros(n, dtype=g.dtype)  # <g_j, sum_S g_i>
    taken = torch.zeros(n, dtype=torch.bool)
    picks: list[int] = []
    gains: list[float] = []
    for _ in range(k):
        gain = (c * align - c * c * (with_s + 0.5 * gram.diagonal())).masked_fill(taken, float("-inf"))
        j = int(torch.argmax(gain))
        picks.append(j)
        gains.append(float(gain[j]))
        taken[j] = True
        with_s = with_s + gram[:, j]
    return picks, gains
