"""Online batch selection: at each step a pool of ``pool`` candidates arrives from the (noisy) train
stream, the selector keeps ``select`` of them and one Adam step is taken on their mean loss. The
budget is the number of samples trained on (``select * steps``; ``full`` trains on every candidate).

Selectors: ``gfv`` (greedy Gated Fisher Volume, see gfv.py), ``random``, ``loss`` (largest loss),
``gradnorm`` (largest per-sample gradient norm), ``entropy`` (largest predictive entropy), ``full``.
Per-sample gradients (all parameters of the MLP) come from ``torch.func.vmap(grad(...))``; the
diagonal Fisher is a running mean (decay ``fisher_decay``) of the pools' mean squared gradients.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

SELECTORS = ("gfv", "random", "loss", "gradnorm", "entropy", "full")


@dataclass(frozen=True)
class SelectConfig:
    method: str = "gfv"
    pool: int = 64
    select: int = 16
    steps: int = 150
    hidden: int = 32
    lr: float = 1e-2
    lam: float = 1.0
    beta: float = 4.0
    proj: int = 256  # random projection dimension for u (0: none)
    fisher_decay: float = 0.95
    momentum_gate: bool = False  # gate against the running mean of trained-on gradients, not the pool mean
    seed: int = 0


def _net(d_in: int, hidden: int, n_out: int) -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, n_out))


def per_sample_grads(net: Any, X: Any, y: Any) -> Any:
    """[n, P] flattened per-sample gradients of the cross-entropy."""
    import torch
    from torch.func import functional_call, grad, vmap

    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss(p: dict[str, Any], x: Any, t: Any) -> Any:
        return torch.nn.functional.cross_entropy(functional_call(net, p, (x[None],)), t[None])

    g = vmap(grad(loss), in_dims=(None, 0, 0))(params, X, y)
    return torch.cat([g[k].reshape(X.shape[0], -1) for k in params], dim=1)


def train_select(cfg: SelectConfig, X: Any, y: Any, noisy: Any, n_out: int) -> tuple[Any, dict[str, Any]]:
    """Train with online selection; returns (network, record)."""
    import torch

    from harness.tasks.selection.gfv import gate, greedy, whiten

    if cfg.method not in SELECTORS:
        raise ValueError(f"unknown selector {cfg.method!r}; choose one of {', '.join(SELECTORS)}")
    if cfg.select > cfg.pool:
        raise ValueError(f"budget per step select={cfg.select} is larger than the pool ({cfg.pool})")
    if cfg.pool > X.shape[0]:
        raise ValueError(f"pool={cfg.pool} is larger than the train split ({X.shape[0]})")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    net = _net(X.shape[1], cfg.hidden, n_out)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    n_params = sum(p.numel() for p in net.parameters())
    proj = (torch.randn(cfg.proj, n_params, generator=gen) / cfg.proj**0.5) if cfg.proj > 0 else None
    fisher = descent = None
    order = torch.randperm(X.shape[0], generator=gen)
    cursor, used, noisy_used, sel_seconds = 0, 0, 0, 0.0
    for _ in range(cfg.steps):
        if cursor + cfg.pool > len(order):
            order, cursor = torch.randperm(X.shape[0], generator=gen), 0
        idx = order[cursor:cursor + cfg.pool]
        cursor += cfg.pool
        xb, yb = X[idx], y[idx]
        t0 = time.perf_counter()
        if cfg.method == "full":
            pick = torch.arange(len(idx))
        elif cfg.method == "random":
            pick = torch.randperm(len(idx), generator=gen)[:cfg.select]
        elif cfg.method in ("loss", "entropy"):
            with torch.no_grad():
                logits = net(xb)
                if cfg.method == "loss":
                    score = torch.nn.functional.cross_entropy(logits, yb, reduction="none")
                else:
                    logp = torch.log_softmax(logits, 1)
                    score = -(logp.exp() * logp).sum(1)
            pick = torch.topk(score, cfg.select).indices
        else:
            g = per_sample_grads(net, xb, yb)
            if cfg.method == "gradnorm":
                pick = torch.topk(g.norm(dim=1), cfg.select).indices
            else:
                sq = (g * g).mean(0)
                fisher = sq if fisher is None else cfg.fisher_decay * fisher + (1 - cfg.fisher_decay) * sq
                # the descent direction: a running mean of the gradients actually trained on (the pool's
                # own mean is pulled by the high-loss, often mislabelled candidates it should gate out)
                ref = g.mean(0) if descent is None or not cfg.momentum_gate else descent
                u = whiten(g, fisher, projection=proj)
                a = gate(g, ref, fisher, beta=cfg.beta)
                pick = torch.tensor(greedy(u, a, cfg.select, lam=cfg.lam)[0])
        sel_seconds += time.perf_counter() - t0
        if cfg.method == "gfv":
            step_g = g[pick].mean(0)
            descent = step_g if descent is None else cfg.fisher_decay * descent + (1 - cfg.fisher_decay) * step_g
        chosen = idx[pick]
        used += len(chosen)
        noisy_used += int(noisy[chosen].sum())
        loss = torch.nn.functional.cross_entropy(net(X[chosen]), y[chosen])
        opt.zero_grad()
        loss.backward()
        opt.step()
    record = {"method": cfg.method, "budget_used": used, "steps": cfg.steps,
              "noisy_selected_fraction": noisy_used / max(used, 1),
              "selection_seconds_per_step": sel_seconds / max(cfg.steps, 1), "params": n_params}
    return net, record
