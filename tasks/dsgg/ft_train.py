"""LoRA fine-tuning of a causal LM on DSGG replies with a per-token weighted loss (IAF or uniform).

LoRA sits on the top ``layers`` decoder layers only, and that is what keeps a fit on two CPU cores in
minutes: the layers below are frozen, so the hidden state entering the first adapted layer is a
constant of each training example. :func:`prefix_states` computes it once (one no-grad pass through
the frozen layers), and every step runs only the adapted layers on it (:func:`top_logits`) -- exactly
the loss of the whole model (a test checks it), at a fraction of the cost. The constants are cached
(``harness.fit_cache``, kind ``dsgg-ft-prefix``) because they depend on the base model, the layer
split and the train replies only: IAF and plain fits and every seed share them.

The loss of a batch is ``sum_t w_t * nll_t / sum_t w_t`` over its reply tokens (:func:`weighted_nll`);
with every ``w_t = 1`` it is the usual mean token NLL, so IAF changes the balance between tokens, not
the step size.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from harness.tasks.dsgg.ft_data import Example, FitError

# the train NLL before and after a fit is measured on the first this many train videos (all of them
# would cost a third of the fit's time on the fixture)
EVAL_VIDEOS = 8
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class FitPlan:
    base: str = "smollm2-135m-instruct"  # an embedded model name or a local transformers directory
    iaf: bool = True
    steps: int = 48
    batch: int = 2
    lr: float = 5e-3
    rank: int = 8
    layers: int = 6  # LoRA on the top this many decoder layers
    seed: int = 0
    device: str = "cpu"

    def fitted_settings(self) -> dict[str, Any]:
        """What changes the fitted weights (the fit-cache key; ``device`` does not)."""
        return {k: v for k, v in asdict(self).items() if k != "device"}


class _Stop(Exception):
    """Raised by the capture hook: the frozen pass ends at the first adapted layer."""


def decoder_layers(causal_lm: Any) -> Any:
    """The decoder-layer list of a Llama-style causal LM (``model.layers``), or a one-line error."""
    layers = getattr(getattr(causal_lm, "model", None), "layers", None)
    if layers is None:
        raise FitError(f"dsgg-ft: {type(causal_lm).__name__} has no model.layers (a Llama-style causal LM is needed)")
    return layers


def first_adapted(causal_lm: Any, plan: FitPlan) -> int:
    n = len(decoder_layers(causal_lm))
    if plan.layers > n:
        raise FitError(f"dsgg-ft: layers={plan.layers} but the model has {n} decoder layers")
    return n - plan.layers


def attach_lora(causal_lm: Any, plan: FitPlan) -> Any:
    import torch
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(plan.seed)  # LoRA A's initialisation
    start = first_adapted(causal_lm, plan)
    config = LoraConfig(r=plan.rank, lora_alpha=2 * plan.rank, lora_dropout=0.0, bias="none",
                        target_modules=list(LORA_TARGETS), task_type="CAUSAL_LM",
                        layers_to_transform=list(range(start, start + plan.layers)))
    return get_peft_model(causal_lm, config)


def prefix_states(causal_lm: Any, start: int, examples: Sequence[Example]) -> list[Any]:
    """Per example, the hidden state [T, H] entering decoder layer ``start`` (no gradients)."""
    import torch

    layer = decoder_layers(causal_lm)[start]
    grabbed: list[Any] = []

    def grab(_mod: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        grabbed.append((args[0] if args else kwargs["hidden_states"]).detach()[0].clone())
        raise _Stop

    handle = layer.register_forward_pre_hook(grab, with_kwargs=True)
    out = []
    try:
        with torch.no_grad():
            for ex in examples:
                ids = torch.tensor([ex.ids], device=causal_lm.device)
                try:
                    causal_lm.model(input_ids=ids, use_cache=False)
                except _Stop:
                    pass
                out.append(grabbed.pop())
    finally:
        handle.remove()
    return out


@contextmanager
def _top_only(causal_lm: Any, start: int) -> Any:
    """The decoder stack cut to the adapted layers (restored afterwards, whatever happens)."""
    import torch

    inner = causal_lm.model
    full = inner.layers
    inner.layers = torch.nn.ModuleList(list(full)[start:])
    try:
        yield
    finally:
        inner.layers = full


def collate(examples: Sequence[Example], states: Sequence[Any], device: Any) -> dict[str, Any]:
    """Right-padded batch of prefix states with the reply targets and weights (prompt and padding
    positions carry no target)."""
    import torch

    t = max(len(e.ids) for e in examples)
    h = states[0].shape[-1]
    hidden = torch.zeros((len(examples), t, h), dtype=states[0].dtype)
    mask = torch.zeros((len(examples), t), dtype=torch.long)
    targets = torch.full((len(examples), t), -100, dtype=torch.long)
    weights = torch.zeros((len(examples), t), dtype=torch.float32)
    for b, (e, s) in enumerate(zip(examples, states, strict=True)):
        n = len(e.ids)
        hidden[b, :n] = s
        mask[b, :n] = 1
        # position p predicts token p + 1: reply tokens n_prompt..n-1 are predicted at n_prompt-1..n-2
        targets[b, e.n_prompt - 1:n - 1] = torch.tensor(e.ids[e.n_prompt:])
        weights[b, e.n_prompt - 1:n - 1] = torch.tensor(e.weights)
    return {"hidden": hidden.to(device), "attention_mask": mask.to(device), "targets": targets.to(device),
            "weights": weights.to(device)}


def top_logits(causal_lm: Any, start: int, batch: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(logits at target positions [N, V], their targets [N], their weights [N]) from the adapted
    layers alone; logits only where there is a target (the vocabulary is wide)."""
    with _top_only(causal_lm, start):
        hidden = causal_lm.model(inputs_embeds=batch["hidden"], attention_mask=batch["attention_mask"],
                                 use_cache=False).last_hidden_state
    rows, cols = (batch["targets"] != -100).nonzero(as_tuple=True)
    return causal_lm.lm_head(hidden[rows, cols]), batch["targets"][rows, cols], batch["weights"][rows, cols]


def weighted_nll(logits: Any, targets: Any, weights: Any) -> Any:
    """``sum_t w_t * nll_t / sum_t w_t``: the IAF loss (every w_t = 1: the mean token NLL)."""
    import torch

    nll = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    return (weights * nll).sum() / weights.sum()


def mean_nll(causal_lm: Any, start: int, examples: Sequence[Example], states: Sequence[Any],
             batch: int) -> float:
    """Unweighted mean reply-token NLL over the examples (comparable between IAF and plain fits)."""
    import torch

    total, count = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(examples), batch):
            b = collate(examples[i:i + batch], states[i:i + batch], causal_lm.device)
            logits, targets, _ = top_logits(causal_lm, start, b)
            nll = torch.nn.functional.cross_entropy(logits, targets, reduction="sum")
            total, count = total + float(nll), count + int(targets.numel())
    return total / max(count, 1)


def train(peft_model: Any, plan: FitPlan, examples: Sequence[Example], states: Sequence[Any]) -> dict[str, Any]:
    """``plan.steps`` AdamW steps of the weighted loss on seeded mini-batches; returns the record."""
    import torch

    lm = peft_model.get_base_model()  # LoRA layers are injected in place into the base modules
    start = first_adapted(lm, plan)
    params = [p for p in lm.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=plan.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(plan.seed)
    t0 = time.perf_counter()
    probe, probe_states = examples[:EVAL_VIDEOS], states[:EVAL_VIDEOS]
    before = mean_nll(lm, start, probe, probe_states, plan.batch)
    order: list[int] = []
    losses = []
    for _ in range(plan.steps):
        if len(order) < min(plan.batch, len(examples)):
            order += torch.randperm(len(examples), generator=gen).tolist()
        idx, order = order[:plan.batch], order[plan.batch:]
        b = collate([examples[i] for i in idx], [states[i] for i in idx], lm.device)
        loss = weighted_nll(*top_logits(lm, start, b))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    after = mean_nll(lm, start, probe, probe_states, plan.batch)
    return {"train_nll_before": before, "train_nll_after": after, "step_losses": losses,
            "lora_params": sum(p.numel() for p in params), "train_seconds": time.perf_counter() - t0}
