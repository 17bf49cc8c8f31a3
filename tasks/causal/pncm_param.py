"""One NCM per sense whose causal diagram is learned over a PAG's class (``pncm -M class=param``).

What is reconstructed, and how. The P-NCM paper's code is not public; its abstract promises "a
differentiable characterisation of the causal diagrams in a PAG's equivalence class, giving P-NCMs
that parameterise the class". This module is our design of such a parameterisation, not the paper's:

- **Structure.** Every adjacency of the PAG has learnable logits over the edge types its invariant
  marks allow (pag_space.py: ``->``, ``<-``, ``<->``, a directed edge plus ``<->``). Each step each
  replica draws one structure by the Gumbel-max trick; a draw outside the class (cyclic, a mark
  violated, or another ``dag2pag``) is redrawn (the share is reported), and the member drawn is
  upgraded greedily to one no single added edge keeps in the class (only maximal members matter for
  bounds; graphs.py), which is what the step trains.
- **Parents.** Each mechanism is an MLP over *all* the variable's PAG neighbours, each input
  multiplied by its directed-edge gate, 0 or 1 in the forward pass: one network serves every
  structure of the class (weight sharing, as in one-shot architecture search).
- **Shared latent noise.** Every variable has its own coordinates of M shared atoms and its own atom
  logits; a c-component C of the structure gets the joint atoms (u_v^m), v in C, with weights
  softmax_m(sum_{v in C} a_v^m). Disjoint components use disjoint parameters, so for any fixed
  structure this is ncm.py's per-component discrete latent (M atoms, free weights) and the
  likelihood is the same exact sum; switching a bidirected edge regroups the sum, not the networks.
- **The logits' gradient** (``struct_grad``). ``local`` (default): the exact derivative of the
  expected loss over each adjacency's member types, the other adjacencies held at the draw (a local
  expectation gradient): every member one adjacency away is evaluated with the shared networks, and
  the networks train on that whole neighbourhood, each type alike, so a neighbour is judged by
  networks that also fitted it. ``st``: straight through the Gumbel-softmax relaxation
  (temperature 1) of the parent gates, plus, for each bidirected gate b_e, the derivative of the
  mixture "e's latent is shared with probability b_e", the loss with it shared minus without.
- **Acyclicity, marks and membership**, as constraints under one augmented-Lagrangian schedule
  (multiplier and penalty updated every 50 steps): NOTEARS' h(W) = tr(exp(W o W)) - n on the expected
  directed adjacency W, for every arrowhead at B on A *-> B the B-to-A path mass exp(W o W)[B, A], and
  the logits' probability mass outside the class, estimated from the step's draws with its
  score-function gradient. They keep the logits' mode in the class.
- **Schedule and the final check.** The first quarter of the structure phase trains the networks on
  uniform draws from the class; the logits then learn until 40% of lambda's anneal
  (``struct_share``), when each replica is frozen at its logits' mode, upgraded, and checked with
  the enumeration's own test (acyclic, marks, causal-learn's ``dag2pag``). A mode outside the class
  is reported (``nonmember_modes``) and the replica is frozen at its last drawn member instead, so
  every bound comes from an NCM on a class member; the rest of training fits that structure.

Data term, query term and lambda's schedule are ncm.py's: KL(P_data || P_model) + lambda * (+/-
query), ``restarts`` minimising and maximising replicas side by side, and :func:`ncm.bounds_of_fits`'s
KL filter on the result. Counterfactual queries are evaluated on each structure's own twin network
(counterfactual.py), one structure at a time.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import Any

from harness.tasks.causal.counterfactual import CF_QUERIES, state_weights, twin
from harness.tasks.causal.ncm import COUNTERFACTUAL_ATOM_SCALE, Fit, NCMConfig, _BatchedMLP
from harness.tasks.causal.pag_space import BACKWARD, BETA_FLIP, BIDIRECTED, FORWARD, TYPES, StructureSpace
from harness.tasks.causal.scm import configs

STRUCT_LR = 0.05  # Adam step on the edge-type logits
STRUCT_SHARE = 0.4  # share of lambda's anneal before the structure freezes (lambda is still ~0.06 there)
STRUCT_GRADS = ("local", "st")
WARM_SHARE = 0.25  # of the structure phase: the networks train on uniform draws from the class first
TAU = 1.0  # Gumbel-softmax temperature of the relaxed pass (struct_grad=st)
ALM_EVERY = 50  # steps between augmented-Lagrangian updates
# a gentle penalty: at rho0 = 1 and a tenfold growth h(W) drove every adjacency to a bare <-> (no
# directed edge, no cycle) within 200 steps, before the query could shape the structure
ALM_RHO0, ALM_GROW, ALM_RHO_MAX = 0.1, 2.0, 100.0
DRAWS = 32  # Gumbel draws per replica per step; the first member among them is trained
FIRST_DRAWS = 4096  # draws before a PAG with no member found is refused


@dataclass
class ParamFit(Fit):
    structure: str = ""  # the diagram the replica ended on
    mode_member: bool = True  # the logits' mode at the freeze was a class member


class _ParamNCM:
    """R replicas of one NCM over every structure of ``space`` (gated parents, per-variable atoms)."""

    def __init__(self, space: StructureSpace, cfg: NCMConfig, R: int) -> None:
        import torch

        self.space, self.cfg, self.R = space, cfg, R
        names = space.names
        self.names, n, M = names, len(names), cfg.latent_points
        gen = torch.Generator().manual_seed(cfg.seed)
        self.V = torch.as_tensor(configs(n), dtype=torch.float32)  # [K, n]
        adj = {frozenset(p) for p in space.pairs}
        self.pot = {v: tuple(u for u in names if frozenset((u, v)) in adj) for v in names}  # neighbours
        # [R, n, M, d] atoms: a different scramble per replica and variable
        starts = [[torch.quasirandom.SobolEngine(cfg.latent_dim, scramble=True, seed=cfg.seed * 101 + 7 * r + j)
                   .draw(M) for j in range(n)] for r in range(R)]
        grid = torch.stack([torch.stack(s) for s in starts])
        self.atoms = torch.nn.Parameter((cfg.atom_scale or 1.0) * (2 * grid - 1))
        self.atom_logits = torch.nn.Parameter(torch.zeros(R, n, M))
        self.nets = {v: _BatchedMLP(R, len(self.pot[v]) + cfg.latent_dim, cfg.width, gen) for v in names}
        self.params: list[Any] = [self.atoms, self.atom_logits] + [p for v in names for p in self.nets[v].params]
        # constant maps from the type probabilities [R, A, 5] to the directed gates [R, n, n] (parent, child)
        A = len(space.pairs)
        self.dir_map = torch.zeros(A, len(TYPES), n, n)
        for i, (a, b) in enumerate(space.pairs):
            ia, ib = names.index(a), names.index(b)
            for t in FORWARD:
                self.dir_map[i, t, ia, ib] = 1.0
            for t in BACKWARD:
                self.dir_map[i, t, ib, ia] = 1.0
        self.bi_map = torch.zeros(len(TYPES))
        self.bi_map[list(BIDIRECTED)] = 1.0

    def gates(self, q: Any) -> Any:
        """Directed gates [R, n(parent), n(child)] from type probabilities (or one-hots) [R, A, 5]."""
        import torch

        return torch.einsum("rit,itab->rab", q, self.dir_map)

    def factors(self, rows: Any, G: Any, reps: Any) -> Any:
        """log P(v_i | gated neighbours, u_i^m) at every row: [R', n, M, N] for the replicas ``reps``
        (an index tensor; a replica may appear several times, once per structure evaluated)."""
        import torch

        R_, N, M = G.shape[0], rows.shape[0], self.cfg.latent_points
        out = []
        for j, v in enumerate(self.names):
            pa = [self.names.index(u) for u in self.pot[v]]
            enc = (2 * rows[:, pa] - 1)[None] * G[:, pa, j][:, None, :]  # [R', N, |pa|]
            u = self.atoms[reps, j]  # [R', M, d]
            inp = torch.cat([enc[:, None].expand(R_, M, N, len(pa)), u[:, :, None].expand(R_, M, N, u.shape[2])], -1)
            w1, b1, w2, b2, w3, b3 = (p[reps] for p in self.nets[v].params)
            h = torch.relu(torch.baddbmm(b1, inp.reshape(R_, M * N, -1), w1))
            h = torch.relu(torch.baddbmm(b2, h, w2))
            logit = torch.baddbmm(b3, h, w3).reshape(R_, M, N)
            val = rows[:, j]
            out.append(torch.nn.functional.logsigmoid(torch.where(val > 0.5, logit, -logit)))
        return torch.stack(out, 1)

    def combine(self, ell: Any, comp: Any, reps: Any) -> Any:
        """sum over c-components of log sum_m w_C^m prod_{v in C} P(v | ., u_v^m): [R', P, N] for the
        partitions ``comp`` [R', P, n(component), n(variable)] (an empty component contributes 0)."""
        import torch

        s = torch.einsum("rpcv,rvmn->rpcmn", comp, ell)
        lw = torch.log_softmax(torch.einsum("rpcv,rvm->rpcm", comp, self.atom_logits[reps]), dim=-1)
        return torch.logsumexp(s + lw[..., None], dim=3).sum(2)

    def mixture(self, r: int, choice: tuple[int, ...]) -> list[tuple[float, dict[str, Any]]]:
        """Replica r at the structure ``choice`` as the exogenous mixture counterfactual.exact_table
        takes (the NCM read as the SCM it is; the tests check the forward passes against it)."""
        import itertools

        import torch

        d = self.space.diagram(choice)
        per_comp = []
        with torch.no_grad():
            for comp in d.components():
                idx = [self.names.index(v) for v in comp]
                w = torch.softmax(self.atom_logits[r, idx].sum(0), dim=0)
                per_comp.append([(float(w[m]), m) for m in range(w.shape[0])])
            out = []
            for combo in itertools.product(*per_comp):
                probs: dict[str, Any] = {}
                for comp, (_, m) in zip(d.components(), combo, strict=True):
                    for v in comp:
                        j, pa = self.names.index(v), d.parents(v)
                        P = configs(len(pa))  # c = sum_k pa_k 2^k, pa in the diagram's order
                        enc = torch.zeros(len(P), len(self.pot[v]))
                        for k, a in enumerate(pa):
                            enc[:, self.pot[v].index(a)] = torch.as_tensor(2 * P[:, k] - 1, dtype=torch.float32)
                        inp = torch.cat([enc, self.atoms[r, j, m][None].expand(len(P), -1)], -1)
                        w1, b1, w2, b2, w3, b3 = (p[r] for p in self.nets[v].params)
                        h = torch.relu(inp @ w1 + b1)
                        h = torch.relu(h @ w2 + b2)
                        probs[v] = torch.sigmoid(h @ w3 + b3).squeeze(-1).double().numpy().reshape((2,) * len(pa),
                                                                                                   order="F")
                out.append((math.prod(c[0] for c in combo), probs))
        return out


def components_matrix(space: StructureSpace, beta: list[int]) -> Any:
    """[n, n] 0/1: row c holds the variables whose c-component's first member is c (bidirected
    edges where ``beta`` is 1)."""
    import numpy as np

    names = space.names
    root = list(range(len(names)))

    def find(i: int) -> int:
        while root[i] != i:
            i = root[i]
        return i

    for (a, b), on in zip(space.pairs, beta, strict=True):
        if on:
            ra, rb = find(names.index(a)), find(names.index(b))
            root[max(ra, rb)] = min(ra, rb)
    out = np.zeros((len(names), len(names)), dtype=np.float32)
    for i in range(len(names)):
        out[find(i), i] = 1.0
    return out


def _penalty(model: _ParamNCM, probs: Any) -> Any:
    """Per replica [R]: h(W) + the path mass against every arrowhead, W the expected directed adjacency."""
    import torch

    W = model.gates(probs)
    E = torch.linalg.matrix_exp(W * W)
    c = E.diagonal(dim1=1, dim2=2).sum(1) - len(model.names)
    names = model.names
    for a, ma, mb, b in model.space.pag.edges:
        ia, ib = names.index(a), names.index(b)
        if mb == ">":  # b is no ancestor of a
            c = c + E[:, ib, ia]
        if ma == ">":
            c = c + E[:, ia, ib]
    return c


class _Objective:
    """KL(P_data || P_model) and the query of given structures of given replicas of a _ParamNCM."""

    def __init__(self, model: _ParamNCM, p: Any, query: str, x: str, y: str) -> None:
        import numpy as np
        import torch

        self.model, self.query, self.x, self.y = model, query, x, y
        self.cf = query in CF_QUERIES
        n = len(model.names)
        self.target = torch.as_tensor(np.asarray(p, dtype=float) / float(np.sum(p)), dtype=torch.float32)
        pos = self.target[self.target > 0]
        self.ent = float((pos * torch.log(pos)).sum())
        V = model.V
        self.K, xi, yi = V.shape[0], model.names.index(x), model.names.index(y)
        V1, V0 = V.clone(), V.clone()
        V1[:, xi], V0[:, xi] = 1.0, 0.0
        # the observational rows and, for ate / pyx, the two intervened copies with X's factor dropped
        self.rows = V if self.cf else torch.cat([V, V1, V0])
        keep_x = torch.ones(self.rows.shape[0]) if self.cf else torch.cat([torch.ones(self.K), torch.zeros(2 * self.K)])
        self.x_only = torch.where(torch.arange(n)[None, :, None, None] == xi, keep_x, torch.ones_like(keep_x))
        self.rows1, self.rows0 = (V[:, xi] == 1) & (V[:, yi] == 1), (V[:, xi] == 0) & (V[:, yi] == 1)
        self.twins: dict[tuple[int, ...], Any] = {}

    def comps(self, choices: list[tuple[int, ...]]) -> Any:  # [len, 1, n, n] component matrices
        import numpy as np
        import torch

        space = self.model.space
        return torch.as_tensor(np.stack([components_matrix(space, [int(t in BIDIRECTED) for t in ch])
                                         for ch in choices]))[:, None]

    def __call__(self, q: Any, choices: list[tuple[int, ...]], reps: Any) -> tuple[Any, Any]:
        """(KL, query), each [len(choices)]: the structures ``q`` [B, A, T] (one-hot, or carrying
        relaxed gradients), ``choices`` their hard types, of the replicas ``reps`` [B]."""
        import numpy as np
        import torch

        model, K = self.model, self.K
        G = model.gates(q)
        ell = model.factors(self.rows, G, reps) * self.x_only
        total = model.combine(ell, self.comps(choices), reps)[:, 0]  # [B, rows]
        kl = self.ent - (self.target * total[:, :K]).sum(-1)
        if not self.cf:
            p1 = torch.exp(total[:, K:2 * K][:, self.rows1]).sum(-1)
            p0 = torch.exp(total[:, 2 * K:][:, self.rows0]).sum(-1)
            return kl, (p1 if self.query == "pyx" else p1 - p0)
        n, vals = len(model.names), []
        for b, ch in enumerate(choices):  # each structure's own twin network
            if ch not in self.twins:
                tw = twin(model.space.diagram(ch), self.x, self.y)
                S = tw.worlds.shape[1]
                self.twins[ch] = (S, torch.as_tensor(tw.worlds.reshape(3 * S, n), dtype=torch.float32),
                                  torch.as_tensor(np.stack([tw.new[v] for v in model.names]), dtype=torch.float32),
                                  *(torch.as_tensor(w, dtype=torch.float32) for w in state_weights(tw, self.query)))
            S, W, new, num, den = self.twins[ch]
            e = model.factors(W, G[b:b + 1], reps[b:b + 1]).reshape(1, n, -1, 3, S)
            e = (e * new[None, :, None]).sum(3)  # each response counted once per new parent input
            prob = torch.exp(model.combine(e, self.comps([ch]), reps[b:b + 1]))[0, 0]  # [S]
            vals.append((prob * num).sum() / (prob * den).sum())
        return kl, torch.stack(vals)


def _neighbours(space: StructureSpace, choice: tuple[int, ...], grad: str) -> list[tuple[int, int, tuple[int, ...]]]:
    """The class members one adjacency away from ``choice``, as (adjacency, type, choice): every other
    allowed type (``grad=local``) or only the latent-sharing flip (``grad=st``), members only."""
    out = []
    for i, t in enumerate(choice):
        alts = [BETA_FLIP[t]] if grad == "st" else [u for u in space.allowed[i] if u != t]
        for u in alts:
            if u is None:
                continue
            alt = choice[:i] + (u,) + choice[i + 1:]
            if space.is_member(alt):
                out.append((i, u, alt))
    return out


def fit_param_bounds(space: StructureSpace, p: Any, query: str, cfg: NCMConfig, struct_lr: float = STRUCT_LR,
                     struct_share: float = STRUCT_SHARE, struct_grad: str = "local", x: str = "X",
                     y: str = "Y") -> tuple[list[ParamFit], list[ParamFit], float]:
    """Train ``restarts`` minimising and as many maximising P-NCMs over ``space`` on ``p``; returns
    (min fits, max fits, share of structure draws redrawn because they left the class)."""
    import torch

    if struct_grad not in STRUCT_GRADS:
        raise ValueError(f"unknown struct_grad {struct_grad!r}; choose one of {', '.join(STRUCT_GRADS)}")
    t0 = time.perf_counter()
    n_rep = max(int(cfg.restarts), 1)
    R, A, T = 2 * n_rep, len(space.pairs), len(TYPES)
    cf = query in CF_QUERIES
    model = _ParamNCM(space, replace(cfg, atom_scale=cfg.atom_scale or (COUNTERFACTUAL_ATOM_SCALE if cf else 1.0)), R)
    objective = _Objective(model, p, query, x, y)
    sampler = _Sampler(space, R, torch.Generator().manual_seed(cfg.seed * 7919 + 13))
    theta = torch.nn.Parameter(torch.zeros(R, A, T))  # the edge-type logits, per replica
    sign = torch.cat([torch.ones(n_rep), -torch.ones(n_rep)])  # +1 minimises the query, -1 maximises it
    opt = torch.optim.AdamW([{"params": model.params, "lr": cfg.lr},
                             {"params": [theta], "lr": struct_lr, "weight_decay": 0.0}])
    anneal = max(int(cfg.anneal * cfg.iters), 1)
    freeze_at = max(int(struct_share * anneal), 1)
    warm = int(WARM_SHARE * freeze_at)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda it: 1.0 if it < anneal else 1.0 - 0.9 * (it - anneal) / max(cfg.iters - anneal, 1))
    alpha, rho = torch.zeros(R), torch.full((R,), ALM_RHO0)
    c_prev = torch.full((R,), float("inf"))
    everyone = torch.arange(R)

    def one_hot(choices: list[tuple[int, ...]]) -> Any:
        return torch.nn.functional.one_hot(torch.as_tensor(choices), T).float()

    def freeze() -> tuple[list[tuple[int, ...]], list[bool]]:
        """Each replica's logits' mode, upgraded, where it is a member; its last trained member if not."""
        if not sampler.trained:
            sampler.draw(theta.detach())
        modes = [tuple(m) for m in (theta.detach() + sampler.mask).argmax(-1).tolist()]
        ok = [space.is_member(m) for m in modes]
        return [space.upgrade(m) if good else c for m, good, c in zip(modes, ok, sampler.trained, strict=True)], ok

    frozen: list[tuple[int, ...]] | None = None
    mode_ok = [True] * R
    for it in range(cfg.iters):
        frac = min(it / anneal, 1.0)
        lam = math.exp(math.log(cfg.lam_start) * (1 - frac) + math.log(cfg.lam_end) * frac)
        if frozen is None and it >= freeze_at:
            frozen, mode_ok = freeze()
        if frozen is not None:
            kl, value = objective(one_hot(frozen), frozen, everyone)
            loss = (kl + lam * sign * value).sum()
        elif it < warm:  # the networks learn on uniform draws from the class; the logits wait
            picks, outside, soft = sampler.draw(theta.detach())
            kl, value = objective(one_hot(sampler.trained), sampler.trained, everyone)
            loss = (kl + lam * sign * value).sum()
        else:
            picks, outside, soft = sampler.draw(theta)
            if struct_grad == "local":
                loss = _local_surrogate(space, sampler, theta, lam, sign, objective, one_hot)
            else:
                hard = one_hot(sampler.trained)
                kl, value = objective(hard + soft - soft.detach(), sampler.trained, everyone)
                loss = (kl + lam * sign * value).sum() + _st_bidirected(space, sampler, soft, lam, sign, objective,
                                                                         one_hot, model.bi_map)
            # the constraints, each 0 on the class: h(W) + arrowhead path mass (differentiable), and the
            # mass outside the class with its score-function gradient E[(1_out - mean) grad log p(draw)]
            c = _penalty(model, torch.softmax(theta + sampler.mask, dim=-1))
            logp = torch.log_softmax(theta + sampler.mask, dim=-1)
            logp_draws = logp[:, None].expand(R, DRAWS, A, T).gather(-1, picks[..., None]).squeeze(-1).sum(-1)
            p_out = outside.mean(1)
            score = ((outside - p_out[:, None]) * logp_draws).mean(1)
            c_tot = c.detach() + p_out
            loss = loss + ((alpha + rho * c_tot) * (c + score)).sum()  # d/dc of alpha c + rho c^2 / 2
            if (it + 1 - warm) % ALM_EVERY == 0:
                alpha = alpha + rho * c_tot
                rho = torch.where(c_tot > 0.25 * c_prev, (rho * ALM_GROW).clamp_max(ALM_RHO_MAX), rho)
                c_prev = c_tot
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
    if frozen is None:  # too few iterations to reach the freeze
        frozen, mode_ok = freeze()
    with torch.no_grad():
        kl, value = objective(one_hot(frozen), frozen, everyone)
    per = (time.perf_counter() - t0) / R
    fits = [ParamFit(float(v), float(k), per, str(space.diagram(ch)), ok)
            for v, k, ch, ok in zip(value.tolist(), kl.tolist(), frozen, mode_ok, strict=True)]
    return fits[:n_rep], fits[n_rep:], sampler.redrawn / max(sampler.draws, 1)


class _Sampler:
    """Per replica, the member drawn this step (``drawn``) and the structure trained for it
    (``trained``: the draw upgraded), redrawing draws outside the class."""

    def __init__(self, space: StructureSpace, R: int, gen: Any) -> None:
        import torch

        self.space, self.R, self.gen = space, R, gen
        A, T = len(space.pairs), len(TYPES)
        self.mask = torch.full((A, T), -1e4)  # disallowed types: never drawn
        for i, ok in enumerate(space.allowed):
            self.mask[i, list(ok)] = 0.0
        self.drawn: list[tuple[int, ...]] = []
        self.trained: list[tuple[int, ...]] = []
        self.noise = torch.zeros(R, A, T)
        self.draws = self.redrawn = 0

    def _gumbel(self, *shape: int) -> Any:
        import torch

        return -torch.log(-torch.log(torch.rand(*shape, generator=self.gen).clamp_min(1e-12)))

    def _first_member(self, logits: Any) -> tuple[tuple[int, ...], Any]:
        A, T = self.mask.shape
        for _ in range(FIRST_DRAWS // DRAWS):
            g = self._gumbel(DRAWS, A, T)
            for k, pick in enumerate((logits[None] + g).argmax(-1).tolist()):
                if self.space.is_member(tuple(pick)):
                    return tuple(pick), g[k]
        raise ValueError(f"not a PAG: no causal diagram with this PAG among {FIRST_DRAWS} draws of its edge "
                         f"types ({self.space.pag})")

    def draw(self, theta: Any) -> tuple[Any, Any, Any]:
        """Draw DRAWS structures per replica from the logits; keep each replica's first member (its
        previous one if none). Returns the draws [R, DRAWS, A], their out-of-class flags [R, DRAWS]
        and the kept draws' Gumbel-softmax probabilities [R, A, T] (the relaxed pass)."""
        import torch

        A, T = self.mask.shape
        logits = theta.detach() + self.mask
        g = self._gumbel(self.R, DRAWS, A, T)
        picks = (logits[:, None] + g).argmax(-1)
        outside = torch.tensor([[not self.space.is_member(tuple(ch)) for ch in rep] for rep in picks.tolist()],
                               dtype=torch.float32)
        for r in range(self.R):
            inside = (outside[r] < 0.5).nonzero()
            self.draws += int(inside[0]) + 1 if len(inside) else DRAWS
            self.redrawn += int(inside[0]) if len(inside) else DRAWS
            if len(inside):
                k = int(inside[0])
                ch, noise = tuple(int(t) for t in picks[r, k]), g[r, k]
            elif len(self.drawn) <= r:  # the first step: keep drawing until a member comes
                ch, noise = self._first_member(logits[r])
            else:
                continue
            if len(self.drawn) <= r:
                self.drawn.append(ch)
                self.trained.append(ch)
            self.drawn[r], self.trained[r], self.noise[r] = ch, self.space.upgrade(ch), noise
        return picks, outside, torch.softmax((theta + self.mask + self.noise) / TAU, dim=-1)


def _local_surrogate(space: StructureSpace, sampler: _Sampler, theta: Any, lam: float, sign: Any,
                     objective: _Objective, one_hot: Any) -> Any:
    """A surrogate whose gradient in the logits is that of (1/A) sum_i E_{t ~ pi_i over member
    types}[loss(the draw with adjacency i set to t, upgraded)], the local expectation gradient, and
    in the networks that of the mean loss over the draw's member neighbourhood."""
    import torch

    R, A, T = theta.shape
    slot: dict[tuple[int, tuple[int, ...]], int] = {(r, ch): r for r, ch in enumerate(sampler.trained)}
    entries = [(r, i, t, r) for r, ch in enumerate(sampler.drawn) for i, t in enumerate(ch)]
    for r, ch in enumerate(sampler.drawn):
        for i, u, alt in _neighbours(space, ch, "local"):
            key = (r, space.upgrade(alt))
            slot.setdefault(key, len(slot))  # one evaluation per distinct (replica, structure)
            entries.append((r, i, u, slot[key]))
    keys = sorted(slot, key=slot.__getitem__)
    choices, reps = [ch for _, ch in keys], torch.as_tensor([r for r, _ in keys])
    kl, value = objective(one_hot(choices), choices, reps)
    obj = kl + lam * sign[reps] * value
    member = torch.zeros(R, A, T, dtype=torch.bool)
    for r, i, t, _ in entries:
        member[r, i, t] = True
    pi = torch.softmax((theta + sampler.mask).masked_fill(~member, -1e4), dim=-1)
    idx = torch.as_tensor(entries)
    at = (idx[:, 0], idx[:, 1], idx[:, 2])
    # the networks weight every member type of an adjacency alike: weighted by pi, a type the logits
    # turned from early stopped being fitted and could not win back (on iv and front-door problems the
    # maximising replicas then settled on diagrams where X does not cause Y, ATE 0)
    uniform = (member.float() / member.float().sum(-1, keepdim=True))[at]
    return ((pi[at] * obj[idx[:, 3]].detach()).sum() + (uniform * obj[idx[:, 3]]).sum()) / A


def _st_bidirected(space: StructureSpace, sampler: _Sampler, soft: Any, lam: float, sign: Any,
                   objective: _Objective, one_hot: Any, bi_map: Any) -> Any:
    """struct_grad=st: a surrogate giving each bidirected gate the derivative of its mixture, the loss
    with the latent shared minus without (0 where the flip leaves the class)."""
    import torch

    R = len(sampler.trained)
    todo = [(r, i, alt) for r, ch in enumerate(sampler.trained) for i, _, alt in _neighbours(space, ch, "st")]
    d_beta = torch.zeros(soft.shape[:2])
    if todo:
        with torch.no_grad():
            choices = sampler.trained + [alt for _, _, alt in todo]
            reps = torch.as_tensor(list(range(R)) + [r for r, _, _ in todo])
            kl, value = objective(one_hot(choices), choices, reps)
            obj = kl + lam * sign[reps] * value
        for k, (r, i, _) in enumerate(todo):
            diff = obj[r] - obj[R + k]  # loss(trained) - loss(flipped)
            d_beta[r, i] = diff if sampler.trained[r][i] in BIDIRECTED else -diff
    beta_soft = (soft * bi_map).sum(-1)
    return ((beta_soft - beta_soft.detach()) * d_beta).sum()
