"""LoRA fine-tuning of a causal LM with online data selection (the ``select_sft`` training loop).

At every step a pool of ``pool`` train problems arrives (a seeded pass over the train split, reshuffled
when it runs out), the selector keeps ``select`` of them and one AdamW step is taken on the mean
answer-token loss of those; ``full`` trains on the whole pool. Budget = samples trained on.

Selectors see the same candidates as on digits: ``gfv`` and ``gradnorm`` score the per-sample
gradients of the LoRA parameters (exact, from one batched backward pass: sft_grads.py); ``gfv``
whitens them with a diagonal Fisher (running mean of the pools' squared gradients), projects them
to ``proj`` dimensions with a seeded Gaussian matrix and picks greedily by Gated Fisher Volume
(gfv.py, the same definition as on digits); ``loss``/``entropy`` take the largest mean answer-token
loss / predictive entropy (one forward pass, no gradients); ``random``. Where the pool's per-sample
gradients are already computed, the step reuses them (the mean of the selected rows is exactly the
gradient of their mean loss), so ``gfv``'s extra cost over ``random`` is the pool's backward pass
plus the greedy, all counted in the selection seconds.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from harness.tasks.selection.trainer import SELECTORS


@dataclass(frozen=True)
class SFTPlan:
    """The training plan; the task sets it (``-T``), the backend's explicit ``-M`` settings override
    the selection keys (``OVERRIDABLE``)."""

    method: str = "gfv"
    base: str = "smollm2-135m-instruct"  # an embedded model name or a local transformers directory
    device: str = "auto"
    steps: int = 12
    pool: int = 8
    select: int = 2
    lr: float = 1e-3
    lora_r: int = 4
    lora_alpha: int = 8
    lora_targets: tuple[str, ...] = ("q_proj", "v_proj")
    max_len: int = 192
    lam: float = 1.0
    beta: float = 4.0
    proj: int = 64
    fisher_decay: float = 0.95
    momentum_gate: bool = False
    seed: int = 0
    eval_batch: int = 8

    def check(self) -> None:
        if self.method not in SELECTORS:
            raise ValueError(f"unknown selector {self.method!r}; choose one of {', '.join(SELECTORS)}")
        for name in ("steps", "pool", "select", "lora_r", "max_len", "eval_batch"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.select > self.pool:
            raise ValueError(f"budget per step select={self.select} is larger than the pool ({self.pool})")
        if self.proj < 1:
            raise ValueError(f"proj must be at least 1 here (the greedy works in the projected space), got {self.proj}")


OVERRIDABLE = ("steps", "pool", "select", "lr", "lam", "beta", "proj", "fisher_decay", "momentum_gate", "seed")


def plan_from(options: dict[str, Any], method: str, overrides: dict[str, Any]) -> SFTPlan:
    """The task's plan (``options``: SFTPlan fields), the selector, and ``-M`` overrides."""
    kinds: dict[str, Any] = {f.name: f.default for f in fields(SFTPlan)}  # every field has a plain default
    extra = sorted(set(overrides) - set(OVERRIDABLE))
    if extra:
        raise ValueError(f"-M {extra[0]} does not apply to select_sft (it takes {', '.join(OVERRIDABLE)})")
    kw: dict[str, Any] = {}
    for key, value in {**options, **overrides}.items():
        if key not in kinds or key == "method":
            continue
        default = kinds[key]
        if isinstance(default, bool):
            kw[key] = str(value).lower() in ("1", "true", "yes")
        elif isinstance(default, tuple):
            kw[key] = tuple(value.split(",")) if isinstance(value, str) else tuple(value)
        else:
            kw[key] = type(default)(value)
    plan = SFTPlan(method=method, **kw)
    plan.check()
    return plan


@dataclass
class SFTExample:
    conversation: list[dict[str, str]]
    answer: str
    noisy: bool = False


@dataclass
class SFTResult:
    hf: Any  # harness.models.hf.HFModel holding the peft-wrapped model
    record: dict[str, Any] = field(default_factory=dict)
    initial_lora: dict[str, Any] = field(default_factory=dict)


def load_lora(plan: SFTPlan) -> Any:
    """The base model through the project's hf loader (embedded SmolLM2 is converted once), LoRA attached."""
    import torch
    from peft import LoraConfig, get_peft_model

    from harness.models.hf import load

    hf = load(plan.base, dtype="float32", device=plan.device)
    torch.manual_seed(plan.seed)  # LoRA A's initialisation
    config = LoraConfig(r=plan.lora_r, lora_alpha=plan.lora_alpha, lora_dropout=0.0, bias="none",
                        target_modules=list(plan.lora_targets), task_type="CAUSAL_LM")
    hf.hf_model = get_peft_model(hf.hf_model, config)
    return hf


def _causal_lm(peft_model: Any) -> Any:
    return peft_model.get_base_model()  # LoRA layers are injected in place into the base modules


def mean_nll(hf: Any, examples: list[SFTExample], plan: SFTPlan) -> float:
    """Mean over examples of the mean answer-token NLL (no gradients)."""
    import torch

    from harness.tasks.selection.sft_grads import collate, encode, per_sample_losses

    if not examples:
        return float("nan")
    lm, tok = _causal_lm(hf.hf_model), hf.tokenizer
    enc = [encode(tok, e.conversation, e.answer, plan.max_len) for e in examples]
    total = 0.0
    with torch.no_grad():
        for s in range(0, len(enc), plan.eval_batch):
            batch = collate(enc[s:s + plan.eval_batch], tok.pad_token_id, hf.hf_model.device)
            total += float(per_sample_losses(lm, batch).sum())
    return total / len(enc)


def train_sft(plan: SFTPlan, train: list[SFTExample], dev: list[SFTExample] | None = None,
              hf: Any = None) -> SFTResult:
    """Fine-tune LoRA with online selection; returns the model and the training record."""
    import torch

    from harness.tasks.selection.gfv import gate, greedy, whiten
    from harness.tasks.selection.sft_grads import collate, encode, per_sample_grads, per_sample_losses, trainable

    plan.check()
    if plan.pool > len(train):
        raise ValueError(f"pool={plan.pool} is larger than the train split ({len(train)})")
    t_start = time.perf_counter()
    hf = hf if hf is not None else load_lora(plan)
    lm, tok = _causal_lm(hf.hf_model), hf.tokenizer
    device = hf.hf_model.device
    params = trainable(lm)
    initial = {n: p.detach().clone() for n, p in params}
    n_params = sum(p.numel() for _, p in params)
    gen = torch.Generator().manual_seed(plan.seed)
    # its own generator: every selector then sees the same stream of pools for a seed
    proj_gen = torch.Generator().manual_seed(plan.seed + 1)
    pick_gen = torch.Generator().manual_seed(plan.seed + 2)
    proj = (torch.randn(plan.proj, n_params, generator=proj_gen) / plan.proj**0.5).to(device) \
        if plan.method == "gfv" else None
    opt = torch.optim.AdamW([p for _, p in params], lr=plan.lr, weight_decay=0.0)
    dev_before = mean_nll(hf, dev or [], plan)
    encoded: dict[int, Any] = {}

    def enc(i: int) -> Any:
        if i not in encoded:
            encoded[i] = encode(tok, train[i].conversation, train[i].answer, plan.max_len)
        return encoded[i]

    order = torch.randperm(len(train), generator=gen).tolist()
    cursor, used, noisy_used, sel_seconds = 0, 0, 0, 0.0
    fisher = descent = None
    losses_seen: list[float] = []
    pools: list[list[int]] = []
    picks: list[list[int]] = []
    for _ in range(plan.steps):
        if cursor + plan.pool > len(order):
            order, cursor = torch.randperm(len(train), generator=gen).tolist(), 0
        idx = order[cursor:cursor + plan.pool]
        cursor += plan.pool
        batch = collate([enc(i) for i in idx], tok.pad_token_id, device)
        grads = pool_losses = None
        t0 = time.perf_counter()
        if plan.method == "full":
            pick = list(range(len(idx)))
        elif plan.method == "random":
            pick = torch.randperm(len(idx), generator=pick_gen)[:plan.select].tolist()
        elif plan.method in ("loss", "entropy"):
            with torch.no_grad():
                score = per_sample_losses(lm, batch, entropy=plan.method == "entropy")
            pick = torch.topk(score, plan.select).indices.tolist()
        else:
            pool_losses, grads = per_sample_grads(lm, batch)
            if plan.method == "gradnorm":
                pick = torch.topk(grads.norm(dim=1), plan.select).indices.tolist()
            else:
                sq = (grads * grads).mean(0)
                fisher = sq if fisher is None else plan.fisher_decay * fisher + (1 - plan.fisher_decay) * sq
                ref = descent if plan.momentum_gate and descent is not None else grads.mean(0)
                u = whiten(grads, fisher, projection=proj)
                a = gate(grads, ref, fisher, beta=plan.beta)
                # the greedy is small ([pool, proj]) and builds its matrices on the CPU
                pick = greedy(u.double().cpu(), a.double().cpu(), plan.select, lam=plan.lam)[0]
        sel_seconds += time.perf_counter() - t0
        opt.zero_grad()
        if grads is not None:
            step_g = grads[pick].mean(0)
            if plan.method == "gfv":
                descent = step_g if descent is None else plan.fisher_decay * descent + (1 - plan.fisher_decay) * step_g
            offset = 0
            for _, p in params:
                p.grad = step_g[offset:offset + p.numel()].view_as(p).clone()
                offset += p.numel()
            assert pool_losses is not None  # computed with the gradients
            losses_seen.append(float(pool_losses[pick].mean()))
        else:
            loss = per_sample_losses(lm, _rows(batch, pick)).mean()
            loss.backward()
            losses_seen.append(float(loss.detach()))
        opt.step()
        used += len(pick)
        pools.append(list(idx))
        picks.append([idx[j] for j in pick])
        noisy_used += sum(bool(train[idx[j]].noisy) for j in pick)
    hf.hf_model.eval()
    record = {"method": plan.method, "budget_used": used, "steps": plan.steps,
              "noisy_selected_fraction": noisy_used / max(used, 1),
              "selection_seconds_per_step": sel_seconds / max(plan.steps, 1),
              "dev_nll": mean_nll(hf, dev or [], plan), "dev_nll_base": dev_before,
              "train_loss_first": losses_seen[0], "train_loss_last": losses_seen[-1],
              "lora_params": n_params, "pools": pools, "picks": picks, "train_seconds": time.perf_counter() - t_start,
              "plan": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(plan).items()}}
    return SFTResult(hf, record, initial)


def _rows(batch: dict[str, Any], pick: list[int]) -> dict[str, Any]:
    import torch

    sel = torch.tensor(pick, device=batch["input_ids"].device)
    out = {k: v.index_select(0, sel) for k, v in batch.items()}
    n = int(out["attention_mask"].sum(1).max())  # drop the padding columns the picked rows do not need
    return {k: v[:, :n] for k, v in out.items()}
