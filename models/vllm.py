"""vLLM backends: ``vllm:PATH_OR_HUB_ID`` (in-process ``vllm.LLM``) and ``vllm-server:PATH``.

In-process: the runner hands over large batches (``batch_size`` 100000 by default) and every batch
becomes ONE ``LLM.chat`` call (``LLM.generate`` with ``-M chat=false``) with a ``SamplingParams``
per request, run in a worker thread so the event loop keeps committing results. vLLM's scheduler
does the batching inside the call.

Settings (``-M key=value``):
  tensor_parallel_size, dtype, max_model_len, gpu_memory_utilization, enforce_eager,
  limit_mm_per_prompt, quantization, ... -> ``vllm.LLM`` engine arguments, passed through;
  dp=N               N data-parallel replicas as Ray actors (each with tensor_parallel_size GPUs);
  ray_address=ADDR   run the replicas on an existing Ray cluster (multi-node);
  gpus_per_replica=F Ray GPUs per replica (default tensor_parallel_size; 0.5 puts two on one GPU);
  batch_size=N, concurrency=2   pipeline: score/commit one batch while the next generates;
  mode=server        start vLLM's OpenAI-compatible server and go through the OpenAI adapter
                     (the same as the ``vllm-server:`` backend);
  chat=false         plain prompts for base models; chat_template=, chat_template_kwargs={...};
  top_k, min_p, repetition_penalty, ... -> SamplingParams defaults; top_logprobs=K with logprobs=true;
  modalities=[text,image]  override the input modalities read from the model.
Media: see ``harness.models.vllm_inputs`` (``file://`` URLs decoded by vLLM's own processors).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from functools import partial
from typing import Any

from harness.models.vllm_config import (
    ADAPTER_KEYS,
    VLLMSettings,
    local_config,
    modalities_from_config,
    parse_settings,
)
from harness.models.vllm_inputs import (
    SAMPLING_EXTRAS,
    RequestInputError,
    sampling_kwargs,
    to_chat_messages,
    to_output,
    to_prompt_text,
)
from harness.registry import model
from harness.types import Output, Request


class VLLMModel:
    """In-process vLLM (one engine, or ``dp`` Ray replicas)."""

    cacheable = True

    def __init__(self, settings: VLLMSettings, executor: Any | None = None) -> None:
        self.settings = settings
        self.spec = settings.spec
        self.batch_size = settings.batch_size
        # engine calls are serialised (LocalEngine's lock, one call per Ray actor at a time); a
        # concurrency of 2 with a smaller batch_size lets the runner score and commit one batch
        # while the engine works on the next
        self.concurrency = settings.concurrency or 1
        self.executor = executor if executor is not None else make_executor(settings)
        declared = settings.modalities or self.executor.modalities()
        self.modalities = frozenset(declared) | {"text"}

    def _item(self, request: Request) -> dict[str, Any]:
        item: dict[str, Any] = {"sampling": sampling_kwargs(request.config, self.settings.sampling_defaults)}
        if self.settings.chat:
            item["conversation"] = to_chat_messages(request.messages)
        else:
            item["prompt"] = to_prompt_text(request.messages)
        return item

    async def generate(self, requests: Sequence[Request]) -> list[Output]:
        outputs: list[Output | None] = [None] * len(requests)
        items, where = [], []
        for i, request in enumerate(requests):
            try:
                items.append(self._item(request))
                where.append(i)
            except RequestInputError as exc:  # refused before the call, recorded for that sample
                outputs[i] = Output(error=str(exc))
        if items:
            t0 = time.perf_counter()
            results = await asyncio.to_thread(self.executor.run_batch, items)
            share = (time.perf_counter() - t0) / len(items)
            for i, result in zip(where, results, strict=True):
                outputs[i] = to_output(result, share)
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


# not strict: other keys are vLLM engine arguments; near misses of these are refused
@model("vllm", description="vLLM in-process (vllm.LLM, one batched call; -M dp=N for Ray data parallel)",
       settings=(*ADAPTER_KEYS, *SAMPLING_EXTRAS))
def vllm_backend(path: str | None, **settings: Any) -> Any:
    parsed = parse_settings(path, settings)
    if parsed.mode == "server":
        return _server(parsed)
    return VLLMModel(parsed)


@model("vllm-server", description="vLLM's OpenAI-compatible server, started and stopped by the harness",
       settings=(*ADAPTER_KEYS, *SAMPLING_EXTRAS))
def vllm_server_backend(path: str | None, **settings: Any) -> Any:
    parsed = parse_settings(path, {**settings, "mode": "server"})
    return _server(parsed)


def _server(parsed: VLLMSettings) -> Any:
    from harness.models.vllm_server import VLLMServerModel

    if parsed.dp > 1:
        parsed.engine.setdefault("data_parallel_size", parsed.dp)  # the server's own DP
    return VLLMServerModel(parsed, declared_modalities(parsed))
