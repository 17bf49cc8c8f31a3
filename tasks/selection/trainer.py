"""Online batch selection: at each step a pool of ``pool`` candidates arrives from the (noisy) train
stream, the selector keeps ``select`` of them and one Adam step is taken on their mean loss. The
budget is the number of samples trained on (``select * steps``; ``full`` trains on every candidate).

Selectors: ``gfv`` (greedy Gated Fisher Volume, see gfv.py), ``random``, ``loss`` (largest loss),
``gradnorm`` (largest per-sample gradient norm), ``entropy`` (largest predictive entropy), ``full``,
and the holdout baselines ``rholoss`` (largest reducible holdout loss) and ``greats`` (greedy Taylor
estimate of the holdout-loss decrease), see baselines.py.

Holdout: ``gfv`` (with ``ref=holdout``, the default), ``rholoss`` and ``greats`` first set aside
``holdout`` samples of the train split (seeded by ``seed``; their labels carry the task's noise like
every train label) and stream only the rest; the other selectors stream the whole train split. The
evaluation split is never seen here: the backend is fitted on the train split alone.
Per-sample gradients (all parameters of the MLP) come from ``torch.func.vmap(grad(...))``; the
diagonal Fisher is a running mean (decay ``fisher_decay``) of the pools' mean squared gradients.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

SELECTORS = ("gfv", "random", "loss", "gradnorm", "entropy", "full")  # also the select_sft selectors
HOLDOUT_BASELINES = ("rholoss", "greats")  # digits only: they need a holdout split
ALL_SELECTORS = SELECTORS + HOLDOUT_BASELINES
REFS = ("holdout", "pool")


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
    momentum_gate: bool = False  # gate against the running mean of trained-on gradients
    ref: str = "holdout"  # gfv's descent reference: the holdout loss gradient, or the pool's mean gradient
    holdout: int = 200  # train samples set aside for gfv (ref=holdout), rholoss and greats
    il_steps: int = 300  # rholoss: full-batch Adam steps of the irreducible-loss model on the holdout
    seed: int = 0

    def uses_holdout(self) -> bool:
        return self.method in HOLDOUT_BASELINES or (self.method == "gfv" and self.ref == "holdout")


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


def holdout_gradient(net: Any, X: Any, y: Any) -> Any:
    """[P] flattened gradient of the mean cross-entropy over (X, y): the descent direction of the holdout loss."""
    import torch

    params = list(net.parameters())
    loss = torch.nn.functional.cross_entropy(net(X), y)
    return torch.cat([t.reshape(-1) for t in torch.autograd.grad(loss, params)])


def fit_irreducible(X: Any, y: Any, n_out: int, hidden: int, steps: int, lr: float, seed: int) -> Any:
    """RHO-LOSS's irreducible-loss model: the same MLP trained full-batch on the holdout only."""
    import torch

    torch.manual_seed(seed + 1)
    net = _net(X.shape[1], hidden, n_out)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    for _ in range(steps):
        loss = torch.nn.functional.cross_entropy(net(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net


def check_config(cfg: SelectConfig, n_train: int | None = None) -> None:
    """One-line errors for settings no run can use (``n_train``: the train split's size, when known)."""
    if cfg.method not in ALL_SELECTORS:
        raise ValueError(f"unknown selector {cfg.method!r}; choose one of {', '.join(ALL_SELECTORS)}")
    if cfg.select > cfg.pool:
        raise ValueError(f"budget per step select={cfg.select} is larger than the pool ({cfg.pool})")
    if cfg.ref not in REFS:
        raise ValueError(f"ref must be one of {', '.join(REFS)}, got {cfg.ref!r}")
    if cfg.uses_holdout() and cfg.holdout < 1:
        raise ValueError(f"holdout must be at least 1 for {cfg.method}, got {cfg.holdout}")
    if n_train is not None:
        left = n_train - (cfg.holdout if cfg.uses_holdout() else 0)
        if cfg.pool > left:
            raise ValueError(f"pool={cfg.pool} is larger than the streamed train split ({left})")


def train_select(cfg: SelectConfig, X: Any, y: Any, noisy: Any, n_out: int) -> tuple[Any, dict[str, Any]]:
    """Train with online selection; returns (network, record). The record's ``selection_digest``
    fingerprints every step's chosen train indices (for checking what the selection depended on)."""
    import hashlib

    import torch

    from harness.tasks.selection.baselines import greats_greedy, rho_select
    from harness.tasks.selection.gfv import gate, greedy, whiten

    check_config(cfg, X.shape[0])
    X_h = y_h = il = None
    if cfg.uses_holdout():
        # a separate generator, so the selectors without a holdout keep their exact pool stream
        split = torch.randperm(X.shape[0], generator=torch.Generator().manual_seed(cfg.seed + 7919))
        X_h, y_h = X[split[:cfg.holdout]], y[split[:cfg.holdout]]
        keep = split[cfg.holdout:].sort().values
        X, y, noisy = X[keep], y[keep], noisy[keep]
    if cfg.method == "rholoss":
        il_net = fit_irreducible(X_h, y_h, n_out, cfg.hidden, cfg.il_steps, cfg.lr, cfg.seed)
        with torch.no_grad():
            il = torch.nn.functional.cross_entropy(il_net(X), y, reduction="none")
    torch.manual_seed(cfg.seed)
    gen = torch.Generator().manual_seed(cfg.seed)
    net = _net(X.shape[1], cfg.hidden, n_out)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    n_params = sum(p.numel() for p in net.parameters())
    proj = (torch.randn(cfg.proj, n_params, generator=gen) / cfg.proj**0.5) if cfg.proj > 0 else None
    fisher = descent = None
    order = torch.randperm(X.shape[0], generator=gen)
    cursor, used, noisy_used, sel_seconds = 0, 0, 0, 0.0
    digest = hashlib.sha256()
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
        elif cfg.method == "rholoss":
            assert il is not None  # computed above for rholoss
            with torch.no_grad():
                train_loss = torch.nn.functional.cross_entropy(net(xb), yb, reduction="none")
            pick = rho_select(train_loss, il[idx], cfg.select)
        else:
            g = per_sample_grads(net, xb, yb)
            if cfg.method == "gradnorm":
                pick = torch.topk(g.norm(dim=1), cfg.select).indices
            elif cfg.method == "greats":
                g_val = holdout_gradient(net, X_h, y_h)
                pick = torch.tensor(greats_greedy(g, g_val, cfg.select, cfg.lr / cfg.select)[0])
            else:
                sq = (g * g).mean(0)
                fisher = sq if fisher is None else cfg.fisher_decay * fisher + (1 - cfg.fisher_decay) * sq
                # the descent direction the gate compares each update with: the gradient of the loss on
                # the holdout (the loss the learner should descend, estimated on samples that are not
                # candidates, so a mislabelled candidate cannot pull its own reference), or with
                # ref=pool the pool's mean gradient; momentum_gate: a running mean of trained-on gradients
                if cfg.momentum_gate and descent is not None:
                    ref = descent
                elif cfg.ref == "holdout":
                    ref = holdout_gradient(net, X_h, y_h)
                else:
                    ref = g.mean(0)
                u = whiten(g, fisher, projection=proj)
                a = gate(g, ref, fisher, beta=cfg.beta)
                pick = torch.tensor(greedy(u, a, cfg.select, lam=cfg.lam)[0])
        sel_seconds += time.perf_counter() - t0
        if cfg.method == "gfv":
            step_g = g[pick].mean(0)
            descent = step_g if descent is None else cfg.fisher_decay * descent + (1 - cfg.fisher_decay) * step_g
        chosen = idx[pick]
        digest.update(",".join(str(int(i)) for i in chosen).encode() + b";")
        used += len(chosen)
        noisy_used += int(noisy[chosen].sum())
        loss = torch.nn.functional.cross_entropy(net(X[chosen]), y[chosen])
        opt.zero_grad()
        loss.backward()
        opt.step()
    record = {"method": cfg.method, "budget_used": used, "steps": cfg.steps,
              "noisy_selected_fraction": noisy_used / max(used, 1),
              "selection_seconds_per_step": sel_seconds / max(cfg.steps, 1), "params": n_params,
              "holdout": cfg.holdout if cfg.uses_holdout() else 0, "selection_digest": digest.hexdigest()[:16]}
    return net, record
