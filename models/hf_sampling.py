"""Per-row token selection for batched ``generate``: greedy or sampled, each row with its own seed.

``transformers.generate`` samples a whole batch from one global RNG, so a request's sample would
depend on which other requests shared its batch (and on resume order). Instead we run ``generate``
in greedy mode and put this processor last: it picks each row's token itself (argmax, or a draw
from that row's own ``torch.Generator`` after temperature / top-k / top-p) and masks every other
token, so greedy decoding then takes exactly that token. It also records the chosen token's
log-probability under the model's raw distribution (before temperature and truncation: the
convention of vLLM's default ``raw_logprobs`` mode and what scoring by likelihood needs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class RowSampling:
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    top_logprobs: int = 0


@dataclass
class RowSelector:
    """A ``LogitsProcessor`` (duck-typed: transformers only calls it) choosing one token per row."""

    rows: list[RowSampling]
    record_logprobs: bool = False
    chosen: list[Any] = field(default_factory=list)  # per step: LongTensor (B,)
    logprobs: list[Any] = field(default_factory=list)  # per step: FloatTensor (B,)
    top: list[tuple[Any, Any]] = field(default_factory=list)  # per step: (values (B,k), ids (B,k))
    _generators: list[Any] | None = None

    def _row_generators(self, device: Any) -> list[Any]:
        import torch

        if self._generators is None:
            gens: list[Any] = []  # a torch.Generator per sampled row, None for greedy rows
            for row in self.rows:
                if row.temperature > 0:
                    g = torch.Generator(device=device)
                    seed = row.seed if row.seed is not None else int.from_bytes(os.urandom(8), "little") >> 1
                    g.manual_seed(int(seed))
                    gens.append(g)
                else:
                    gens.append(None)
            self._generators = gens
        return self._generators

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        scores = scores.float()
        choice = scores.argmax(dim=-1)
        gens = self._row_generators(scores.device)
        for i, row in enumerate(self.rows):
            if row.temperature <= 0:
                continue
            logits = scores[i] / row.temperature
            if row.top_k and row.top_k > 0:
                kth = torch.topk(logits, min(row.top_k, logits.numel())).values[-1]
                logits = logits.masked_fill(logits < kth, float("-inf"))
            if row.top_p < 1.0:
                sorted_logits, order = torch.sort(logits, descending=True)
                cumulative = sorted_logits.softmax(-1).cumsum(-1)
                # drop tokens once the mass *before* them already reaches top_p (keeps at least one)
                drop_sorted = (cumulative - sorted_logits.softmax(-1)) >= row.top_p
                logits = logits.masked_fill(drop_sorted.scatter(0, order, drop_sorted), float("-inf"))
            probs = logits.softmax(-1)
            choice[i] = torch.multinomial(probs, 1, generator=gens[i])[0]
        self.chosen.append(choice.clone())
        if self.record_logprobs:
            raw = scores.log_softmax(-1)
            self.logprobs.append(raw.gather(1, choice[:, None])[:, 0].clone())
            k = max((r.top_logprobs for r in self.rows), default=0)
            if k:
                values, ids = raw.topk(k, dim=-1)
                self.top.append((values.clone(), ids.clone()))
        forced = torch.full_like(scores, float("-inf"))
        forced.scatter_(1, choice[:, None], 0.0)
        return forced


def eos_token_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every end-of-sequence id the model's generation config, its config and its tokenizer name:
    checkpoints disagree on where they declare it (chat models often add a second one)."""
    ids: set[int] = set()
    for source in (model.generation_config, model.config, tokenizer):
        value = getattr(source, "eos_token_id", None)
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, list | tuple):
            ids.update(int(v) for v in value)
    return sorted(ids)
