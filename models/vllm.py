"""vLLM backends: ``vllm:PATH_OR_HUB_ID`` (in-process ``vllm.LLM``) and ``vllm-server:PATH``.

In-process: the runner hands over large batches (``batch_size`` 100000 by default) and every batch
becomes ONE ``LLM.chat`` call (``LLM.generate`` with ``-M chat=false``) with a ``SamplingParams``
per request, run in a worker thread so the event loop keeps committing results. vLLM's scheduler
does the batching inside the call.

Request kinds: ``chat``, ``completion`` (the raw prompt, no chat template) and ``loglikelihood`` /
``loglikelihood_rolling`` (prompt logprobs of token-id prompts, lm-eval's rules): see
``harness.models.vllm_scoring``. Completion and scoring prompts of a batch go to the engine in one
``LLM.generate`` call. In server mode the kinds are those of the OpenAI-compatible adapter that
talks to the server.

Settings (``-M key=value``):
  tensor_parallel_size, dtype, max_model_len, gpu_memory_utilization, enforce_eager,
  limit_mm_per_prompt, quantization, ... -> ``vllm.LLM`` engine arguments, passed through
                     (``harness models vllm`` lists those declared; any other goes in
                     ``engine={'swap_space': 8}``: an undeclared key is refused, naming the closest);
  dp=N               N data-parallel replicas as Ray actors (each with tensor_parallel_size GPUs);
  ray_address=ADDR   run the replicas on an existing Ray cluster (multi-node);
  gpus_per_replica=F Ray GPUs per replica (default tensor_parallel_size; 0.5 puts two on one GPU);
  batch_size=N, concurrency=2   pipeline: score/commit one batch while the next generates;
  mode=server        start vLLM's OpenAI-compatible server and go through the OpenAI adapter
                     (the same as the ``vllm-server:`` backend);
  chat=false         plain prompts for base models; chat_template=, chat_template_kwargs={...};
  top_k, min_p, repetition_penalty, ... -> SamplingParams defaults; top_logprobs=K with logprobs=true;
  modalities=[text,image]  override the input modalities read from the model;
  max_length=N       scoring window, as hf:'s max_length (the most tokens a scored position sees; default
                     max_model_len - 2, the most a prompt of window + 1 tokens plus one generated token
                     leaves) and the context of raw completions (default max_model_len).
Media: see ``harness.models.vllm_inputs`` (``file://`` URLs decoded by vLLM's own processors).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from harness.models.vllm_config import (
    SETTINGS,
    VLLMSettings,
    check_window,
    local_config,
    modalities_from_config,
    parse_settings,
    scoring_window,
)
from harness.models.vllm_inputs import (
    RequestInputError,
    sampling_kwargs,
    to_chat_messages,
    to_output,
    to_prompt_text,
)
from harness.models.vllm_scoring import ScoringPlan, TokenRules, completion_item, token_rules
from harness.registry import model
from harness.types import REQUEST_KINDS, SCORING_KINDS, Output, Request


class VLLMModel:
    """In-process vLLM (one engine, or ``dp`` Ray replicas)."""

    cacheable = True
    request_kinds: frozenset[str] = frozenset(REQUEST_KINDS)

    def __init__(self, settings: VLLMSettings, executor: Any | None = None) -> None:
        self.settings = settings
        self.spec = settings.spec
        self.batch_size = settings.batch_size
        # engine calls are serialised (LocalEngine's lock, one call per Ray actor at a time); a
        # concurrency of 2 with a smaller batch_size lets the runner score and commit one batch
        # while the engine works on the next
        self.concurrency = settings.concurrency or 1
        owned = executor is None
        self.executor = executor if executor is not None else make_executor(settings)
        declared = settings.modalities or self.executor.modalities()
        self.modalities = frozenset(declared) | {"text"}
        self._rules: TokenRules | None = None
        self._rules_lock = threading.Lock()
        if settings.max_length is not None:  # a window the engine cannot take: refused now, in one line
            try:
                check_window(settings.max_length, self.executor.max_model_len())
            except ValueError:
                if owned:  # an engine we started: not left running behind the refusal
                    self.executor.close()
                raise

    def _item(self, request: Request) -> dict[str, Any]:
        if request.kind == "completion":
            return completion_item(request, self.token_rules(), self.settings.sampling_defaults)
        item: dict[str, Any] = {"sampling": sampling_kwargs(request.config, self.settings.sampling_defaults)}
        if self.settings.chat:
            item["conversation"] = to_chat_messages(request.messages)
        else:
            item["prompt"] = to_prompt_text(request.messages)
        return item

    def token_rules(self) -> TokenRules:
        """The tokenizer and lengths, read from the engine once (on the first completion or scoring
        request: a chat-only run never pays for them)."""
        with self._rules_lock:
            if self._rules is None:
                length = self.executor.max_model_len()
                self._rules = token_rules(self.executor.tokenizer(), length,
                                          scoring_window(length, self.settings.max_length), self.settings.max_length)
            return self._rules

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        # in a worker thread: tokenising completion and scoring prompts is CPU work, and the engine
        # call blocks; the event loop keeps committing results meanwhile
        return await asyncio.to_thread(self._generate, list(requests))

    def _generate(self, requests: list[Request]) -> list[Output]:
        t0 = time.perf_counter()
        outputs: list[Output | None] = [None] * len(requests)
        items: list[dict[str, Any]] = []
        where: list[int] = []
        for i, request in enumerate(requests):
            if request.kind in SCORING_KINDS:
                continue
            try:
                items.append(self._item(request))
                where.append(i)
            except RequestInputError as exc:  # refused before the call, recorded for that sample
                outputs[i] = Output(error=str(exc))
        scoring = [(i, r) for i, r in enumerate(requests) if r.kind in SCORING_KINDS]
        plan = ScoringPlan.build(scoring, self.token_rules()) if scoring else None
        first_scoring = len(items)
        if plan is not None:
            items += plan.items()
        results = self.executor.run_batch(items) if items else []
        # per-request latency does not exist inside one batched call: each gets its share
        share = (time.perf_counter() - t0) / max(1, len(where) + (plan.n_requests if plan else 0))
        for i, result in zip(where, results[:first_scoring], strict=True):
            outputs[i] = to_output(result, share)
        if plan is not None:
            for i, out in plan.outputs(results[first_scoring:], share).items():
                outputs[i] = out
        return [o if o is not None else Output(error="no output") for o in outputs]

    def stats(self) -> dict[str, Any]:
        return self.executor.stats()

    async def aclose(self) -> None:
        executor, self.executor = self.executor, None
        if executor is not None:
            await asyncio.to_thread(executor.close)


def make_executor(settings: VLLMSettings) -> Any:
    from harness.models.vllm_engine import LocalEngine

    if settings.dp == 1 and not settings.ray_address:
        return LocalEngine(settings.path, settings.engine, settings.chat, settings.chat_kwargs)
    from harness.models.vllm_dp import RayDataParallel, gpus_available

    tp = int(settings.engine.get("tensor_parallel_size", 1)) * int(settings.engine.get("pipeline_parallel_size", 1))
    engine = dict(settings.engine)
    if tp > 1:
        # inside a Ray actor vLLM would otherwise try to build its own Ray placement group
        engine.setdefault("distributed_executor_backend", "mp")
    make = partial(LocalEngine, settings.path, engine, settings.chat, settings.chat_kwargs)
    gpus = settings.gpus_per_replica if settings.gpus_per_replica is not None else (tp if gpus_available() else 0)
    return RayDataParallel(settings.dp, make, gpus_per_replica=gpus, cpus_per_replica=1 if gpus else tp,
                           ray_address=settings.ray_address)


def declared_modalities(settings: VLLMSettings) -> frozenset[str]:
    """For server mode (no engine in this process): from ``-M modalities`` or the local config."""
    if settings.modalities:
        return frozenset(settings.modalities) | {"text"}
    config = local_config(settings.path)
    if config is None:
        try:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(settings.path).to_dict()
        except Exception:
            config = {}
    return frozenset(modalities_from_config(config))


# strict: an engine argument not declared goes in -M engine={...} (see vllm_config)
@model("vllm", description="vLLM in-process (vllm.LLM, one batched call; -M dp=N for Ray data parallel)",
       settings=SETTINGS, strict=True)
def vllm_backend(path: str | None, **settings: Any) -> Any:
    parsed = parse_settings(path, settings)
    if parsed.mode == "server":
        return _server(parsed)
    return VLLMModel(parsed)


@model("vllm-server", description="vLLM's OpenAI-compatible server, started and stopped by the harness",
       settings=SETTINGS, strict=True)
def vllm_server_backend(path: str | None, **settings: Any) -> Any:
    parsed = parse_settings(path, {**settings, "mode": "server"})
    return _server(parsed)


def _server(parsed: VLLMSettings) -> Any:
    from harness.models.vllm_server import VLLMServerModel

    if parsed.dp > 1:
        parsed.engine.setdefault("data_parallel_size", parsed.dp)  # the server's own DP
    return VLLMServerModel(parsed, declared_modalities(parsed))
