"""Token-level SFT losses and exact per-sample gradients of the LoRA parameters, for a padded batch.

A batch is right-padded: ``input_ids``/``attention_mask`` [b, t] and ``labels`` [b, t] with -100 on
the prompt and the padding, so only the answer tokens are trained on. A sample's loss is the mean
NLL of its answer tokens. Logits are computed only at answer positions (the vocabulary is 49k wide:
full [b, t, V] logits and their gradient would dominate the memory).

Per-sample gradients come from one batched forward and backward pass, not a loop: every LoRA
factor is an ``nn.Linear`` without bias, ``y = W x``, so for the summed loss the gradient of W due
to sample b is sum_t (dL/dy_{b,t}) x_{b,t}^T. A forward hook keeps each factor's input and hooks
the gradient of its output; one einsum per factor gives the [b, out, in] per-sample gradients.
Padded positions get zero output gradient (no loss token attends to them under the causal mask),
so they add nothing; the test checks the result against one backward pass per sample.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Encoded:
    input_ids: list[int]
    n_prompt: int  # the first n_prompt tokens are the prompt (not trained on)


def encode(tokenizer: Any, conversation: list[dict[str, str]], answer: str, max_len: int) -> Encoded:
    """Chat-templated prompt plus the answer and the end-of-turn token, cut to ``max_len`` tokens
    (the answer's tail goes first: the prompt must stay whole for the train and test prompts to match)."""
    prompt = tokenizer.apply_chat_template(conversation, add_generation_prompt=True, tokenize=False)
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    a_ids = tokenizer(answer + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"]
    if len(p_ids) >= max_len:
        raise ValueError(f"a prompt has {len(p_ids)} tokens, max_len={max_len} leaves no room for the answer")
    return Encoded(list(p_ids) + list(a_ids[:max_len - len(p_ids)]), len(p_ids))


def collate(items: list[Encoded], pad_id: int, device: Any = "cpu") -> dict[str, Any]:
    import torch

    t = max(len(e.input_ids) for e in items)
    ids = torch.full((len(items), t), pad_id, dtype=torch.long)
    mask = torch.zeros((len(items), t), dtype=torch.long)
    labels = torch.full((len(items), t), -100, dtype=torch.long)
    for b, e in enumerate(items):
        n = len(e.input_ids)
        ids[b, :n] = torch.tensor(e.input_ids)
        mask[b, :n] = 1
        labels[b, e.n_prompt:n] = ids[b, e.n_prompt:n]
    return {"input_ids": ids.to(device), "attention_mask": mask.to(device), "labels": labels.to(device)}


def answer_logits(causal_lm: Any, batch: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(logits at answer positions [N, V], their target tokens [N], the sample of each [N])."""
    hidden = causal_lm.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    # position p predicts token p + 1
    targets = batch["labels"][:, 1:]
    rows, cols = (targets != -100).nonzero(as_tuple=True)
    logits = causal_lm.lm_head(hidden[rows, cols])
    return logits, targets[rows, cols], rows


def per_sample_losses(causal_lm: Any, batch: dict[str, Any], entropy: bool = False) -> Any:
    """[b] mean answer-token NLL per sample (``entropy``: mean predictive entropy instead)."""
    import torch

    logits, targets, rows = answer_logits(causal_lm, batch)
    if entropy:
        logp = torch.log_softmax(logits, dim=-1)
        tok = -(logp.exp() * logp).sum(-1)
    else:
        tok = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    b = batch["input_ids"].shape[0]
    total = torch.zeros(b, dtype=tok.dtype, device=tok.device).index_add(0, rows, tok)
    count = torch.zeros(b, dtype=tok.dtype, device=tok.device).index_add(0, rows, torch.ones_like(tok))
    return total / count.clamp_min(1.0)


def trainable(model: Any) -> list[tuple[str, Any]]:
    """The trainable (LoRA) parameters in a fixed order: the layout of a flattened gradient."""
    return [(n, p) for n, p in model.named_parameters() if p.requires_grad]


def per_sample_grads(causal_lm: Any, batch: dict[str, Any]) -> tuple[Any, Any]:
    """(per-sample losses [b], flattened per-sample gradients of the trainable parameters [b, P])."""
    import torch

    params = trainable(causal_lm)
    modules = {}
    for name, _ in params:
        if not name.endswith(".weight"):
            raise ValueError(f"per-sample gradients need bias-free LoRA factors; {name} is trainable")
        modules[name] = causal_lm.get_submodule(name[: -len(".weight")])
    if any(not isinstance(m, torch.nn.Linear) or m.bias is not None for m in modules.values()):
        raise ValueError("per-sample gradients need the LoRA factors to be bias-free nn.Linear layers")
    grads: dict[str, Any] = {}
    handles = []

    def hook(name: str) -> Any:
        def forward(_mod: Any, inputs: tuple[Any, ...], out: Any) -> None:
            x = inputs[0].detach()

            def backward(g: Any) -> None:
                grads[name] = torch.einsum("bto,bti->boi", g, x).reshape(g.shape[0], -1)

            out.register_hook(backward)

        return forward

    try:
        for name, mod in modules.items():
            handles.append(mod.register_forward_hook(hook(name)))
        losses = per_sample_losses(causal_lm, batch)
        # the sum, not the mean: each sample's own loss gradient lands in its row
        losses.sum().backward()
    finally:
        for h in handles:
            h.remove()
        for _, p in params:
            p.grad = None
    missing = [n for n, _ in params if n not in grads]
    if missing:
        raise ValueError(f"no gradient reached {missing[0]} (is the LoRA factor used in the forward pass?)")
    return losses.detach(), torch.cat([grads[n] for n, _ in params], dim=1)
