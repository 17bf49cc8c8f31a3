"""Scoring requests on a transformers model: loglikelihood and rolling loglikelihood, exact and batched.

The token boundary and the rolling windows are the core's (:mod:`harness.loglikelihood`, lm-eval's
rules); this module runs the forward passes the way lm-eval's ``HFLM._loglikelihood_tokens`` does
(``lm_eval/models/huggingface.py``, 0.4.13), so the numbers agree with ``lm_eval --model hf``:

- each unit's input is ``(context + continuation)[-(max_length + 1):][:-1]``, right-padded in its
  batch, fed without an attention mask (causal attention never looks right, so the padding cannot
  reach a real position) and with the positions 0..n-1 lm-eval feeds;
- the log-softmax is float32 over the whole vocabulary; a unit's value is the sum of its continuation
  tokens' entries, and it is greedy when the argmax at every scored position is the token itself;
- units are run longest first, and units with the same input tokens are run once (lm-eval's
  ``group_by="contexts"`` cache for one-token continuations, which is the common case of a multiple-
  choice question whose choices are letters; here generalised to any shared input).

Unlike lm-eval, only the positions a batch scores go through the output layer (``logits_to_keep``
with their indices): a batch of long MMLU prompts otherwise materialises batch x length x vocabulary
floats (16 x 1024 x 262k for Gemma 3 is 17 GB), which is what makes lm-eval need batch size 1 on CPU.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness.loglikelihood import BosAwareEncoder, TokenPair, combine, expand
from harness.types import Loglikelihood, Output, Request, Usage

DEFAULT_MAX_LENGTH = 2048  # lm-eval's fallback when neither config nor tokeniser gives a length
TOKENIZER_INFINITY = 1000000000000000019884624838656


def max_length(config: Any, tokenizer: Any) -> int:
    """The context length lm-eval's ``resolve_max_length`` reads: the text config's (or the
    config's) ``n_positions``, ``max_position_embeddings`` or ``n_ctx``, else the tokeniser's
    ``model_max_length`` unless unset, else 2048."""
    cfg = getattr(config, "text_config", None) or config
    for attr in ("n_positions", "max_position_embeddings", "n_ctx"):
        value = getattr(cfg, attr, None)
        if value is not None:
            return int(value)
    limit = getattr(tokenizer, "model_max_length", None)
    if limit is not None and limit != TOKENIZER_INFINITY:
        return int(limit)
    return DEFAULT_MAX_LENGTH


def prefix_token(tokenizer: Any) -> int:
    """What an empty context becomes: BOS, else EOS (lm-eval's ``prefix_token_id``)."""
    bos = tokenizer.bos_token_id
    return int(bos if bos is not None else tokenizer.eos_token_id)


def encoder(tokenizer: Any) -> BosAwareEncoder:
    bos_text = tokenizer.decode([prefix_token(tokenizer)])
    return BosAwareEncoder(lambda t: tokenizer.encode(t), lambda t: tokenizer.encode(t, add_special_tokens=False),
                           bos_text)


class Scorer:
    """Loglikelihoods of token pairs on one loaded model (see the module docstring)."""

    def __init__(self, hf_model: Any, tokenizer: Any, batch_size: int, length: int | None = None) -> None:
        self.model = hf_model
        self.tokenizer = tokenizer
        self.batch_size = max(1, batch_size)
        self.max_length = length or max_length(hf_model.config, tokenizer)
        self.prefix = prefix_token(tokenizer)
        self.encode = encoder(tokenizer)

    def score(self, requests: Sequence[Request]) -> list[Output]:
        """One Output per request, in order; a request whose text cannot be encoded fails alone."""
        t0 = time.perf_counter()
        outputs: list[Output | None] = [None] * len(requests)
        work = expand(requests, self.encode, self.prefix, self.max_length)
        for i, why in work.failed.items():
            outputs[i] = Output(error=f"input: {why}", details={"error_kind": "input"})
        units, shapes = work.units, work.shapes
        values = self._run([u.pair for u in units])
        seconds = time.perf_counter() - t0
        collected: dict[tuple[int, int], list[Loglikelihood]] = {}
        tokens_in: dict[int, int] = {}
        for unit, value in zip(units, values, strict=True):
            collected.setdefault((unit.request, unit.item), []).append(value)
            tokens_in[unit.request] = tokens_in.get(unit.request, 0) + len(unit.pair.model_input(self.max_length))
        n_ok = max(1, len(shapes))
        for i, counts in shapes.items():
            lls = [combine(collected.get((i, j), [])) if requests[i].kind == "loglikelihood_rolling"
                   else collected[(i, j)][0] for j in range(len(counts))]
            outputs[i] = Output(loglikelihoods=lls,
                                usage=Usage(input_tokens=tokens_in.get(i, 0), calls=1, seconds=seconds / n_ok),
                                details={"scored_units": sum(counts), "max_length": self.max_length})
        return [o if o is not None else Output(error="internal: no output") for o in outputs]

    def _run(self, pairs: Sequence[TokenPair]) -> list[Loglikelihood]:
        """Each pair's value; identical inputs run once, longest first, ``batch_size`` rows a pass."""
        inputs: dict[tuple[int, ...], list[int]] = {}
        for k, pair in enumerate(pairs):
            inputs.setdefault(pair.model_input(self.max_length), []).append(k)
        order = sorted(inputs, key=lambda toks: (-len(toks), toks))
        results: list[Loglikelihood | None] = [None] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            batch = order[start:start + self.batch_size]
            for toks, lls in zip(batch, self._forward(batch, [[pairs[k] for k in inputs[t]] for t in batch]),
                                 strict=True):
                for k, ll in zip(inputs[toks], lls, strict=True):
                    results[k] = ll
        return [r for r in results if r is not None]

    def _forward(self, batch: list[tuple[int, ...]], members: list[list[TokenPair]]) -> list[list[Loglikelihood]]:
        import torch
        import torch.nn.functional as F

        width = len(batch[0])  # longest first: the first row sets the padded width
        pad = 0  # never attended to: right padding under causal attention, and never scored
        ids = torch.tensor([list(t) + [pad] * (width - len(t)) for t in batch], dtype=torch.long,
                           device=self.model.device)
        # the positions any row scores: row r's last len(cont) real positions, for its longest member
        spans = [(len(t) - max(len(p.continuation) for p in group), len(t)) for t, group in zip(batch, members,
                                                                                                 strict=True)]
        keep = sorted({pos for lo, hi in spans for pos in range(lo, hi)})
        index = {pos: n for n, pos in enumerate(keep)}
        keep_t = torch.tensor(keep, dtype=torch.long, device=self.model.device)
        with torch.inference_mode():
            logits = self.model(input_ids=ids, use_cache=False, logits_to_keep=keep_t).logits
            logprobs = F.log_softmax(logits, dim=-1, dtype=torch.float32)
        out: list[list[Loglikelihood]] = []
        for row, (toks, group) in enumerate(zip(batch, members, strict=True)):
            row_values = []
            for pair in group:
                cont = list(pair.continuation)
                positions = [index[p] for p in range(len(toks) - len(cont), len(toks))]
                scored = logprobs[row, positions]  # [len(cont), vocab]
                target = torch.tensor(cont, dtype=torch.long, device=scored.device)
                picked = scored.gather(1, target.unsqueeze(1)).squeeze(1)
                greedy = bool((scored.argmax(dim=-1) == target).all())
                row_values.append(Loglikelihood(float(picked.sum()), greedy, len(cont)))
            out.append(row_values)
        return out
