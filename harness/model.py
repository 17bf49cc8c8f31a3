"""The model protocol: anything with ``async generate(requests) -> outputs``.

LLM backends, reliability operators wrapping other models and fit-then-predict training-method
backends all meet the runner here. ``batch_size`` tells the runner how many requests to hand over
per call (1 for per-request HTTP APIs, large for vLLM / transformers); ``concurrency`` how many calls
may be in flight. ``generate`` must return one Output per request, in order; a per-request failure
is an Output with ``error`` set, an exception fails the whole batch (the runner records it per sample).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from harness.types import Output, Request, Sample


@runtime_checkable
class Model(Protocol):
    spec: str  # canonical spec string, e.g. "hf:HuggingFaceTB/SmolLM2-135M-Instruct"
    batch_size: int
    concurrency: int
    modalities: frozenset[str]
    cacheable: bool  # False for instant or stateful backends where a cache would only cost

    async def generate(self, requests: Sequence[Request]) -> list[Output]: ...


@runtime_checkable
class FitModel(Model, Protocol):
    """A training-method backend: fitted on the task's train split once before test requests."""

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]: ...


async def close_model(model: Any) -> None:
    """Release a model's resources if it holds any (servers, GPU memory, HTTP pools)."""
    close = getattr(model, "aclose", None)
    if close is not None:
        await close()
        return
    close = getattr(model, "close", None)
    if close is not None:
        close()
