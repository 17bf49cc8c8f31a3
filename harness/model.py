"""The model protocol: anything with ``async generate(requests) -> outputs``.

LLM backends, reliability operators wrapping other models and fit-then-predict training-method
backends all meet the runner here. ``batch_size`` tells the runner how many requests to hand over
per call (1 for per-request HTTP APIs, large for vLLM / transformers); ``concurrency`` how many calls
may be in flight. ``generate`` must return one Output per request, in order; a per-request failure
is an Output with ``error`` set, an exception fails the whole batch (the runner records it per sample).

Required attributes: ``spec``, ``batch_size``, ``concurrency``, ``modalities``, ``cacheable`` and
``generate``. ``spec`` is the model's half of the response-cache key (the other half is the
request): a backend must put every setting that changes its replies into it (``hf:DIR?dtype=...``).
Optional: ``generation_extras`` (request-level ``-M`` keys besides GenerationConfig's fields, which
the model client puts into ``config.extra``), ``fit`` (a :class:`FitModel`), ``aclose``/``close``.
Backends are called through :class:`harness.client.ModelClient`, which applies the run's settings:
a backend never re-applies ``-M`` generation keys itself.
"""

from __future__ import annotations

import sys
import types
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


class _Registering(types.ModuleType):
    """``from harness import model`` gives this module; calling it registers like
    :func:`harness.registry.model` (a package attribute cannot be both a submodule and a function)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from harness.registry import model as register

        return register(*args, **kwargs)


sys.modules[__name__].__class__ = _Registering
