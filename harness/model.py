"""The model protocol: anything with ``async generate(requests) -> outputs``.

LLM backends, reliability operators wrapping other models and fit-then-predict training-method
backends all meet the runner here. ``batch_size`` tells the runner how many requests to hand over
per call (1 for per-request HTTP APIs, large for vLLM / transformers); ``concurrency`` how many calls
may be in flight. ``generate`` must return one Output per request, in order; a per-request failure
is an Output with ``error`` set, an exception fails the whole batch (the runner records it per sample).

Required attributes: ``spec``, ``batch_size``, ``concurrency``, ``modalities``, ``cacheable`` and
``generate``. ``spec`` is the model's half of the response-cache key (the other half is the
request): a backend must put every setting that changes its replies into it (``hf:DIR?dtype=...``).
Optional: ``request_kinds`` (the :data:`~harness.types.RequestKind` values it answers; ``{"chat"}``
when absent: such a backend is never handed a completion or scoring request), ``generation_extras``
(request-level ``-M`` keys besides GenerationConfig's fields, which the model client puts into
``config.extra``), ``fit`` (a :class:`FitModel`), ``aclose``/``close``.
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


class Backend:
    """The model protocol's defaults, for a backend class to inherit instead of re-declaring them.

    A backend (a dataclass or not) sets ``spec`` and overrides only what differs: how many requests
    one ``generate`` call takes (``batch_size``), how many calls may be in flight (``concurrency``),
    what it reads (``modalities``), whether the response cache should keep its replies
    (``cacheable``: False for instant or fitted backends, whose replies depend on more than the
    request) and which request kinds it answers (``request_kinds``). These are class attributes, not
    dataclass fields, so a dataclass subclass that names one makes it a field of its own."""

    spec: str
    batch_size: int = 1
    concurrency: int = 1
    modalities: frozenset[str] = frozenset({"text"})
    cacheable: bool = True
    request_kinds: frozenset[str] = frozenset({"chat"})


@runtime_checkable
class FitModel(Model, Protocol):
    """A training-method backend: fitted on the task's train split once before test requests."""

    def fit(self, train: Sequence[Sample]) -> dict[str, Any]: ...


def request_kinds(model: Any) -> frozenset[str]:
    """What kinds of request a model answers: its ``request_kinds``, else chat only."""
    return frozenset(getattr(model, "request_kinds", None) or ("chat",))


def kind_refusal(model: Any, kind: str) -> str | None:
    """The one line that says a model cannot answer ``kind`` requests, or None when it can."""
    kinds = request_kinds(model)
    if kind in kinds:
        return None
    spec = getattr(model, "spec", "?")
    what = {"loglikelihood": "loglikelihood requests (the log-probability of given continuations)",
            "loglikelihood_rolling": "rolling loglikelihood requests (the log-probability of whole texts)",
            "completion": "raw-text completion requests (no chat template)"}.get(kind, f"{kind} requests")
    hint = (" Scoring needs a backend that reads the model's log-probabilities of given text: hf:, llamacpp:,"
            " vllm:, or openai: with -M endpoint=completions (a server that echoes prompt logprobs, e.g. vLLM)."
            if kind.startswith("loglikelihood") else
            " Raw completions need hf:, llamacpp:, vllm:, or openai: with -M endpoint=completions."
            if kind == "completion" else "")
    return f"{spec} cannot answer {what}; it answers {', '.join(sorted(kinds))}.{hint}"


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
        # deferred to the call (a backend module decorating its factory, after this module has loaded):
        # the registry sits above the model protocol (registry -> task -> client -> model), so a
        # module-level import would be a cycle
        from harness.registry import model as register

        return register(*args, **kwargs)


sys.modules[__name__].__class__ = _Registering
