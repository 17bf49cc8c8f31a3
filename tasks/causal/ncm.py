"""Neural causal models on a binary diagram, fitted to a distribution and pushed to min / max a query.

NCM (after Xia et al.): every c-component C has a latent U_C shared by its members; each variable
is V_i ~ Bernoulli(sigmoid(f_i(pa_i, U_C))) with f_i an MLP (a parentless singleton component needs
no latent). U_C is a learned discrete latent: M atoms in R^d (initialised at Sobol points) with
learnable weights, as expressive as a push-forward of a uniform and far easier to drive to the
extreme response-type mixtures a bound needs (with fixed Sobol atoms and equal weights our runs
stopped 0.1-0.2 short of the LP bounds). The likelihood and the query are then exact sums over the
2^n configurations and the M atoms, and a fitted model is itself an SCM of the diagram: its query
value is attained by an SCM that reproduces the fitted distribution.

Counterfactual queries (ETT, PN, PS, PNS; counterfactual.py) are evaluated on the same model by
abduction, action and prediction over its atoms, exactly, on the twin network: given its atom, a
variable's responses at different parent values are independent Bernoulli draws (the generating
SCMs' convention), so all cross-world dependence a bound needs is carried by the learned atoms (at
saturated sigmoids an atom is one joint response type). ``_NCM.mixture`` gives a replica as the
exogenous mixture the exact evaluator of the SCMs takes, which the tests use to check the two agree.

The min and max models and ``restarts`` seeds of each are trained together as independent replicas
of one batched network (batched matrix products; the replicas share nothing but the tensors they
live in), so the Python overhead of a step is paid once. A replica can end stuck in a poor fit (a
latent atom's weight collapsed while lambda was large); it says nothing about the bound, so among
the replicas of one sense whose KL to the data is within ``kl_tol`` the most extreme value is kept.

Training (the reference MLE pipeline's shape, CausalAILab/NCMCounterfactuals): AdamW, loss
KL(P_data || P_model) + lambda * (-/+ query), lambda annealed log-linearly from ``lam_start`` to
``lam_end`` over the first ``anneal`` share of the iterations and then held while the learning rate
decays (the fit settles); one model minimises and one maximises. If X is not an ancestor of Y the query is
identified (P(Y = 1), ATE 0) and no model is trained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from harness.tasks.causal.counterfactual import CF_QUERIES, Twin, state_weights, twin
from harness.tasks.causal.graphs import Diagram
from harness.tasks.causal.scm import configs


@dataclass(frozen=True)
class NCMConfig:
    iters: int = 1000
    lr: float = 4e-3
    width: int = 16
    latent_dim: int = 4
    latent_points: int = 32
    lam_start: float = 1.0
    lam_end: float = 1e-3
    anneal: float = 0.6  # share of the iterations over which lambda anneals
    restarts: int = 2  # seeds per sense, trained side by side
    seed: int = 0
    # spread of the initial atoms (0: 1 for ate/pyx, COUNTERFACTUAL_ATOM_SCALE for counterfactual queries)
    atom_scale: float = 0.0


# Identical atoms are a stationary point of every counterfactual coupling (the product coupling
# moves only at second order), so counterfactual bounds need atoms that start apart: on ten
# known-graph (graph, query) problems at 1000 iterations, one restart, a spread of 4 ended closer to
# the sharp ends on 8 (median distance 0.042 -> 0.017; 8 gave 0.021), though one minimising PN fit
# stalled at KL 7e-3 (the KL filter drops such fits). Interventional queries keep the spread their
# results were measured at.
COUNTERFACTUAL_ATOM_SCALE = 4.0


@dataclass
class Fit:
    value: float  # the query at the end of training
    kl: float  # KL(P_data || P_model) at the end
    seconds: float


class _BatchedMLP:
    """R independent MLPs (in -> width -> width -> 1) as batched weight tensors."""

    def __init__(self, R: int, n_in: int, width: int, gen: Any) -> None:
        import torch

        def init(fan_in: int, *shape: int) -> Any:
            bound = 1 / math.sqrt(fan_in)
            return torch.nn.Parameter((torch.rand(*shape, generator=gen) * 2 - 1) * bound)

        self.params = [init(n_in, R, n_in, width), init(n_in, R, 1, width), init(width, R, width, width),
                       init(width, R, 1, width), init(width, R, width, 1), init(width, R, 1, 1)]

    def __call__(self, x: Any) -> Any:  # x [R, N, in] -> [R, N]
        import torch

        w1, b1, w2, b2, w3, b3 = self.params
        h = torch.relu(torch.baddbmm(b1, x, w1))
        h = torch.relu(torch.baddbmm(b2, h, w2))
        return torch.baddbmm(b3, h, w3).squeeze(-1)


class _NCM:
    def __init__(self, d: Diagram, cfg: NCMConfig, R: int) -> None:
        import torch

        self.d, self.cfg, self.R = d, cfg, R
        gen = torch.Generator().manual_seed(cfg.seed)
        self.names = d.names
        self.V = torch.as_tensor(configs(len(d.names)), dtype=torch.float32)  # [K, n]
        self.comps = d.components()
        self.params: list[Any] = []
        self.atoms: dict[int, Any] = {}  # component index -> [R, M, d] learned atoms
        self.atom_logits: dict[int, Any] = {}  # component index -> [R, M] learned weights
        for j, comp in enumerate(self.comps):
            if len(comp) > 1 or any(d.parents(v) for v in comp):
                starts = [torch.quasirandom.SobolEngine(cfg.latent_dim, scramble=True, seed=cfg.seed * 101 + 7 * r + j)
                          .draw(cfg.latent_points) for r in range(R)]  # a different scramble per replica
                self.atoms[j] = torch.nn.Parameter((cfg.atom_scale or 1.0) * (2 * torch.stack(starts) - 1))
                self.atom_logits[j] = torch.nn.Parameter(torch.zeros(R, cfg.latent_points))
                self.params += [self.atoms[j], self.atom_logits[j]]
        self.nets: dict[str, _BatchedMLP] = {}
        for v in d.names:
            j = next(i for i, c in enumerate(self.comps) if v in c)
            n_in = len(d.parents(v)) + (cfg.latent_dim if j in self.atoms else 0)
            self.nets[v] = _BatchedMLP(R, max(n_in, 1), cfg.width, gen)
            self.params += self.nets[v].params

    def forward(self, x: str, y: str) -> tuple[Any, Any, Any]:
        """Per replica: (log P(v) [R, K], P(Y=1 | do(X=1)) [R], P(Y=1 | do(X=0)) [R]) in one pass over
        the observational rows and the two intervened copies (X's own factor dropped), stacked."""
        import torch

        R, K, xi, yi = self.R, self.V.shape[0], self.names.index(x), self.names.index(y)
        V1, V0 = self.V.clone(), self.V.clone()
        V1[:, xi], V0[:, xi] = 1.0, 0.0
        V = torch.cat([self.V, V1, V0])  # [3K, n]
        keep_x = torch.cat([torch.ones(K), torch.zeros(2 * K)])  # X's factor only in observed rows
        total = torch.zeros(R, 3 * K)
        for j, comp in enumerate(self.comps):
            u = self.atoms.get(j)
            M = 1 if u is None else u.shape[1]
            logp = torch.zeros(R, M, 3 * K)
            for v in comp:
                pa = [self.names.index(a) for a in self.d.parents(v)]
                parts = [(2 * V[:, pa] - 1)[None, None].expand(R, M, 3 * K, len(pa))] if pa else []
                if u is not None:
                    parts.append(u[:, :, None, :].expand(R, M, 3 * K, u.shape[2]))
                inp = torch.cat(parts, dim=-1) if parts else torch.zeros(R, M, 3 * K, 1)
                logit = self.nets[v](inp.reshape(R, M * 3 * K, -1)).reshape(R, M, 3 * K)
                val = V[:, self.names.index(v)]
                term = torch.nn.functional.logsigmoid(torch.where(val > 0.5, logit, -logit))
                logp = logp + (term * keep_x if v == x else term)
            if u is None:
                total = total + logp[:, 0]
            else:
                logw = torch.log_softmax(self.atom_logits[j], dim=1)[:, :, None]
                total = total + torch.logsumexp(logp + logw, dim=1)
        rows1 = (self.V[:, xi] == 1) & (self.V[:, yi] == 1)
        rows0 = (self.V[:, xi] == 0) & (self.V[:, yi] == 1)
        return total[:, :K], torch.exp(total[:, K:2 * K][:, rows1]).sum(1), torch.exp(total[:, 2 * K:][:, rows0]).sum(1)

    def counterfactual(self, tw: Twin, num: Any, den: Any) -> Any:
        """Per replica [R]: the counterfactual query sum(num * P) / sum(den * P) over the twin states,
        each state's probability computed as in counterfactual.py: per c-component, the mixture over
        its atoms of the product, over members and the worlds where a member acts on a parent
        configuration no earlier world gave it, of Bernoulli(sigmoid(f_v(pa, u))) (responses at
        different inputs independent given the atom; repeated inputs repeat the value, which the
        twin's consistent states already guarantee)."""
        import torch

        R, S = self.R, tw.worlds.shape[1]
        W = torch.as_tensor(tw.worlds.reshape(3 * S, -1), dtype=torch.float32)  # [3S, n]
        total = torch.zeros(R, S)
        for j, comp in enumerate(self.comps):
            u = self.atoms.get(j)
            M = 1 if u is None else u.shape[1]
            logp = torch.zeros(R, M, S)
            for v in comp:
                pa = [self.names.index(a) for a in self.d.parents(v)]
                parts = [(2 * W[:, pa] - 1)[None, None].expand(R, M, 3 * S, len(pa))] if pa else []
                if u is not None:
                    parts.append(u[:, :, None, :].expand(R, M, 3 * S, u.shape[2]))
                inp = torch.cat(parts, dim=-1) if parts else torch.zeros(R, M, 3 * S, 1)
                logit = self.nets[v](inp.reshape(R, M * 3 * S, -1)).reshape(R, M, 3, S)
                val = W[:, self.names.index(v)].reshape(3, S)
                term = torch.nn.functional.logsigmoid(torch.where(val > 0.5, logit, -logit))
                logp = logp + (term * torch.as_tensor(tw.new[v], dtype=torch.float32)).sum(2)
            if u is None:
                total = total + logp[:, 0]
            else:
                logw = torch.log_softmax(self.atom_logits[j], dim=1)[:, :, None]
                total = total + torch.logsumexp(logp + logw, dim=1)
        prob = torch.exp(total)
        n_t, d_t = torch.as_tensor(num, dtype=torch.float32), torch.as_tensor(den, dtype=torch.float32)
        return (prob * n_t).sum(1) / (prob * d_t).sum(1)

    def mixture(self, r: int) -> list[tuple[float, dict[str, Any]]]:
        """Replica r as the exogenous mixture counterfactual.exact_table takes: one latent configuration
        per combination of the components' atoms (its weight the product of theirs), with each
        variable's P(v = 1 | pa) there. The NCM read as the SCM it is."""
        import itertools

        import torch

        per_comp = []
        with torch.no_grad():
            for j, _ in enumerate(self.comps):
                if j in self.atoms:
                    w = torch.softmax(self.atom_logits[j][r], dim=0)
                    per_comp.append([(float(w[m]), m) for m in range(w.shape[0])])
                else:
                    per_comp.append([(1.0, -1)])
        out = []
        with torch.no_grad():
            for combo in itertools.product(*per_comp):
                probs: dict[str, Any] = {}
                for j, comp in enumerate(self.comps):
                    m = combo[j][1]
                    for v in comp:
                        pa = self.d.parents(v)
                        P = torch.as_tensor(configs(len(pa)), dtype=torch.float32)  # [2^|pa|, |pa|], c = sum pa_j 2^j
                        parts = [2 * P - 1] if pa else []
                        if m >= 0:
                            parts.append(self.atoms[j][r, m][None].expand(len(P), -1))
                        inp = torch.cat(parts, dim=-1) if parts else torch.zeros(1, 1)
                        logit = self.nets[v](inp[None].expand(self.R, -1, -1))[r]
                        probs[v] = torch.sigmoid(logit).double().numpy().reshape((2,) * len(pa), order="F")
                out.append((math.prod(c[0] for c in combo), probs))
        return out


def _query(p1: Any, p0: Any, q: str) -> Any:
    return p1 if q == "pyx" else p1 - p0


def fit_bounds(d: Diagram, p: Any, query: str, cfg: NCMConfig, x: str = "X", y: str = "Y"
               ) -> tuple[list[Fit], list[Fit]]:
    """Train ``restarts`` minimising and as many maximising NCMs of ``d`` on ``p`` (length-2^n
    probabilities) side by side; returns (min fits, max fits)."""
    import time

    import numpy as np
    import torch

    t0 = time.perf_counter()
    V = configs(len(d.names))
    if x not in d.ancestors(y):  # Y_1 = Y_0 = Y: ate and every counterfactual query are 0
        val = float(np.asarray(p)[V[:, d.names.index(y)] == 1].sum()) if query == "pyx" else 0.0
        return [Fit(val, 0.0, 0.0)], [Fit(val, 0.0, 0.0)]
    cf = None
    if query in CF_QUERIES:
        tw = twin(d, x, y)
        cf = (tw, *state_weights(tw, query))
    n_rep = max(int(cfg.restarts), 1)
    scale = cfg.atom_scale or (COUNTERFACTUAL_ATOM_SCALE if cf else 1.0)
    model = _NCM(d, replace(cfg, atom_scale=scale), 2 * n_rep)
    target = torch.as_tensor(np.asarray(p, dtype=float) / float(np.sum(p)), dtype=torch.float32)
    ent = float((target[target > 0] * torch.log(target[target > 0])).sum())
    sign = torch.cat([torch.ones(n_rep), -torch.ones(n_rep)])  # +1 minimises the query, -1 maximises it
    opt = torch.optim.AdamW(model.params, lr=cfg.lr)
    anneal = max(int(cfg.anneal * cfg.iters), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda it: 1.0 if it < anneal else 1.0 - 0.9 * (it - anneal) / max(cfg.iters - anneal, 1))
    for it in range(cfg.iters):
        # lambda anneals log-linearly over the first part, then holds at lam_end while the fit settles
        frac = min(it / anneal, 1.0)
        lam = math.exp(math.log(cfg.lam_start) * (1 - frac) + math.log(cfg.lam_end) * frac)
        logj, p1, p0 = model.forward(x, y)
        kl = ent - (target[None] * logj).sum(1)
        value = model.counterfactual(*cf) if cf else _query(p1, p0, query)
        loss = (kl + lam * sign * value).sum()  # replicas are independent: sum = each
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    with torch.no_grad():
        logj, p1, p0 = model.forward(x, y)
        values = (model.counterfactual(*cf) if cf else _query(p1, p0, query)).tolist()
        kls = (ent - (target[None] * logj).sum(1)).tolist()
    per = (time.perf_counter() - t0) / (2 * n_rep)
    fits = [Fit(v, k, per) for v, k in zip(values, kls, strict=True)]
    return fits[:n_rep], fits[n_rep:]


@dataclass
class NCMBounds:
    lower: float
    upper: float
    kl: float  # worst fit among the fits used
    diagrams: int
    trained: int
    seconds: float
    poor_fit: bool = False


def ncm_bounds(diagrams: tuple[Diagram, ...], p: Any, query: str, cfg: NCMConfig, kl_tol: float = 5e-4
               ) -> NCMBounds:
    """Union of min/max NCM fits over ``diagrams``. A fit whose KL to the data exceeds ``kl_tol`` nats
    does not reproduce the data and is left out (a diagram the data rule out fits no better); if
    every fit of one sense is left out, the best-fitting one is used and ``poor_fit`` set."""
    return bounds_of_fits([fit_bounds(d, p, query, cfg) for d in diagrams], kl_tol)


def bounds_of_fits(runs: list[tuple[list[Fit], list[Fit]]], kl_tol: float = 5e-4) -> NCMBounds:
    """The KL filter and union of :func:`ncm_bounds` over (min fits, max fits) per diagram (or per
    parameterised class)."""
    all_min = [f for lo, _ in runs for f in lo]
    all_max = [f for _, hi in runs for f in hi]
    mins = [f for f in all_min if f.kl <= kl_tol] or [min(all_min, key=lambda f: f.kl)]
    maxs = [f for f in all_max if f.kl <= kl_tol] or [min(all_max, key=lambda f: f.kl)]
    poor = any(f.kl > kl_tol for f in mins + maxs)
    kept = sum(1 for lo, hi in runs if any(f.kl <= kl_tol for f in lo + hi))
    trained = sum(1 for f in all_min + all_max if f.seconds > 0)
    return NCMBounds(min(f.value for f in mins), max(f.value for f in maxs), max(f.kl for f in mins + maxs),
                     kept, trained, sum(f.seconds for f in all_min + all_max), poor)
