"""Raw completions and scoring requests on vLLM, as token-id prompts (no vLLM import here).

The token work is the core's (:mod:`harness.loglikelihood`, lm-eval 0.4.13's rules) on the tokenizer
vLLM itself loaded, with lm-eval's special-token rule (:class:`~harness.loglikelihood.BosAwareEncoder`,
the same encoder the ``hf:`` backend uses), so both backends feed a model the same tokens:

- **completion**: the raw prompt (no chat template) encoded by that rule and left-truncated to
  ``context - max_tokens`` tokens (``context``: ``-M max_length`` when set, else ``max_model_len``),
  then generated like a chat reply (stop strings, seed, logprobs, usage);
- **loglikelihood / loglikelihood_rolling**: each :class:`~harness.loglikelihood.TokenPair` becomes the
  prompt ``(context + continuation)[-(window + 1):]`` (the pair's ``model_input(window)`` followed by
  its last continuation token), run with ``SamplingParams(max_tokens=1, temperature=0,
  prompt_logprobs=1)``. vLLM returns, for every prompt position, the logprob of the prompt's own token
  there given all tokens before it, and its rank; a pair's value is the sum over its continuation's
  positions, and it is greedy when every one of them has rank 1. This is what lm-eval's
  ``VLLM._loglikelihood_tokens`` / ``_parse_logprobs`` compute (``lm_eval/models/vllm_causallms.py``).

The window is :func:`harness.models.vllm_config.scoring_window` (``max_model_len - 2`` unless
``-M max_length``). Identical prompts are run once (a rolling text and its neighbours, two pairs whose
token sequences coincide), each unit reading its own positions. A request whose text cannot be
encoded, or whose continuation does not fit the window, fails alone before any engine call; a prompt
the engine refuses fails only the requests that need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from harness.loglikelihood import BosAwareEncoder, TokenPair, combine, pairs_of
from harness.models.hf_scoring import encoder, prefix_token  # the hf: backend's rule, shared (no torch import)
from harness.models.vllm_inputs import RequestInputError, sampling_kwargs
from harness.types import Loglikelihood, Output, Request, Usage

# max_tokens=1: vLLM generates at least one token, which is discarded; detokenize=False: nothing of
# it is read, and decoding the prompt's top alternatives would cost time for nothing
SCORING_SAMPLING: dict[str, Any] = {"max_tokens": 1, "temperature": 0.0, "prompt_logprobs": 1, "detokenize": False}


@dataclass(frozen=True, slots=True)
class TokenRules:
    """How requests become token ids on one engine."""

    encode: BosAwareEncoder
    prefix: int  # what an empty context becomes (BOS, else EOS)
    window: int  # scoring: the most tokens a scored position is conditioned on
    context: int  # completion: the most tokens prompt and reply may take together


def token_rules(tokenizer: Any, max_model_len: int, window: int, max_length: int | None) -> TokenRules:
    return TokenRules(encoder(tokenizer), prefix_token(tokenizer), window,
                      min(max_length, max_model_len) if max_length else max_model_len)


def completion_item(request: Request, rules: TokenRules, defaults: dict[str, Any]) -> dict[str, Any]:
    """The engine item of one completion request (raises RequestInputError for that request)."""
    config = request.config
    keep = max(1, rules.context - int(config.max_tokens))
    ids = rules.encode(request.prompt)[-keep:]
    if not ids:  # vLLM refuses an empty prompt; a tokenizer that adds no BOS gives one for ""
        raise RequestInputError("input: the prompt encodes to no tokens")
    return {"prompt_token_ids": ids, "sampling": sampling_kwargs(config, defaults)}


@dataclass(slots=True)
class _Unit:
    request: int  # the request's position in the caller's list
    item: int  # pair or text within the request
    prompt: int  # index of the engine prompt it reads
    n: int  # continuation tokens, the prompt's last n positions
    fed: int  # prompt tokens


@dataclass(slots=True)
class ScoringPlan:
    """A batch of scoring requests as deduplicated engine items, and the way back to Outputs."""

    rules: TokenRules
    failed: dict[int, Output] = field(default_factory=dict)  # refused before the engine call
    units: list[_Unit] = field(default_factory=list)
    shapes: dict[int, int] = field(default_factory=dict)  # request -> number of pairs or texts
    rolling: set[int] = field(default_factory=set)
    prompts: dict[tuple[int, ...], int] = field(default_factory=dict)
    depth: list[int] = field(default_factory=list)  # per prompt: trailing positions any unit reads

    @staticmethod
    def build(requests: Sequence[tuple[int, Request]], rules: TokenRules) -> ScoringPlan:
        plan = ScoringPlan(rules)
        for index, request in requests:
            try:  # the core refuses a continuation longer than the window, as lm-eval does
                per_item = pairs_of(request, rules.encode, rules.prefix, rules.window)
            except ValueError as exc:
                plan.failed[index] = Output(error=f"input: {exc}", details={"error_kind": "input"})
                continue
            plan.shapes[index] = len(per_item)
            if request.kind == "loglikelihood_rolling":
                plan.rolling.add(index)
            for j, pairs in enumerate(per_item):
                for pair in pairs:
                    plan._add(index, j, pair)
        return plan

    def _add(self, request: int, item: int, pair: TokenPair) -> None:
        prompt = (pair.context + pair.continuation)[-(self.rules.window + 1):]
        k = self.prompts.setdefault(prompt, len(self.prompts))
        if k == len(self.depth):
            self.depth.append(0)
        self.depth[k] = max(self.depth[k], len(pair.continuation))
        self.units.append(_Unit(request, item, k, len(pair.continuation), len(prompt)))

    @property
    def n_requests(self) -> int:
        """Requests answered by the engine call (refused ones excluded)."""
        return len(self.shapes)

    def items(self) -> list[dict[str, Any]]:
        return [{"prompt_token_ids": list(prompt), "sampling": dict(SCORING_SAMPLING), "score_last": self.depth[k]}
                for prompt, k in self.prompts.items()]

    def outputs(self, results: Sequence[dict[str, Any]], seconds: float) -> dict[int, Output]:
        """One Output per request of the plan (``seconds``: each request's share of the call)."""
        if len(results) != len(self.prompts):
            raise RuntimeError(f"{len(results)} engine results for {len(self.prompts)} scoring prompts")
        values: dict[tuple[int, int], list[Loglikelihood]] = {}
        errors: dict[int, str] = {}
        fed: dict[int, int] = {}
        for unit in self.units:
            result = results[unit.prompt]
            if result.get("error"):
                errors.setdefault(unit.request, str(result["error"]))
                continue
            scored = result["scored"][len(result["scored"]) - unit.n:]
            value = Loglikelihood(sum(lp for lp, _rank in scored), all(rank == 1 for _lp, rank in scored), unit.n)
            values.setdefault((unit.request, unit.item), []).append(value)
            fed[unit.request] = fed.get(unit.request, 0) + unit.fed
        out = dict(self.failed)
        for index, n_items in self.shapes.items():
            if index in errors:
                out[index] = Output(error=errors[index], usage=Usage(calls=0, seconds=seconds))
                continue
            parts = [values.get((index, j), []) for j in range(n_items)]
            # a rolling text is the sum of its windows (an empty text has none: 0); a pair is one unit
            lls = [combine(p) if index in self.rolling else p[0] for p in parts]
            n_units = sum(len(p) for p in parts)
            out[index] = Output(loglikelihoods=lls,
                                usage=Usage(input_tokens=fed.get(index, 0), calls=1, seconds=seconds),
                                details={"scored_units": n_units, "max_length": self.rules.window})
        return out
