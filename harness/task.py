"""The task protocol: a dataclass of plain functions, built by a registered factory.

A task family module does::

    @task("wordcount", description="Count the words of a sentence (exact match)", family="wordcount")
    def wordcount(data_file: str | None = None) -> Task:
        return Task(version="1", load=..., score=..., metrics={"exact_match": higher("exact match")})

``harness eval -T key=value`` passes options to the factory; name, description and family are
given once, to ``@task``. ``prompt`` defaults to the sample's own messages.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from harness.client import ModelClient, as_client
from harness.types import Metric, MetricInfo, Output, Request, RequestKind, Sample, Score
from harness.types import SampleRecord as SampleRecord  # defined with the value types; importable from here


@dataclass(slots=True)
class ScoreContext:
    """What a scorer may use besides the sample and output.

    ``model``: the model under test as a :class:`~harness.client.ModelClient` (multi-turn scorers
    send follow-up turns through it: the run's settings, cache and accounting apply); ``judge``: the
    judge's client, or None when the run has no judge. A bare model handed in (tests, tools scoring
    outside a run) is wrapped in a client without a cache."""

    judge: ModelClient | None = None
    judge_spec: str | None = None
    run_id: int | None = None
    model: ModelClient | None = None

    def __post_init__(self) -> None:
        self.judge = as_client(self.judge, role="judge", seed=None, label=self.judge_spec)
        self.model = as_client(self.model)


ScoreFn = Callable[[Sample, Output, ScoreContext], "Score | Awaitable[Score]"]


def messages_prompt(sample: Sample) -> Request:
    """The default prompt: the sample's own messages, default generation settings."""
    return Request(list(sample.messages))


@dataclass(kw_only=True)
class Task:
    """What a task factory returns. ``name``, ``description`` and ``family`` come from the ``@task``
    registration (the registry fills them in when the factory returns); a factory need not repeat
    them. ``metrics`` declares each metric's direction, scale and display name: the leaderboard
    ranks only metrics declared here, and never guesses a direction from a name."""

    version: str
    load: Callable[[], Iterable[Sample]]
    score: ScoreFn
    prompt: Callable[[Sample], Request] = messages_prompt
    name: str = ""
    description: str = ""
    family: str = ""
    modalities: frozenset[str] = frozenset({"text"})
    primary_metric: str = "accuracy"
    metrics: dict[str, MetricInfo] = field(default_factory=dict)
    # metadata keys whose values get their own metric rows (category, modality, duration bin, ...)
    breakdowns: tuple[str, ...] = ()
    # custom aggregation; default: mean of every score value with bootstrap CI, plus breakdowns
    aggregate: Callable[[list[SampleRecord]], list[Metric]] | None = None
    # hash of the data and anything else that changes what is measured (files, prompts)
    content_hash: str = ""
    default_judge: str | None = None
    needs_judge: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # train split for fit-then-predict backends (training methods as models)
    train: Callable[[], Iterable[Sample]] | None = None
    # what ``prompt`` asks the model (harness.types.RequestKind): a run on a backend that cannot
    # answer it is refused before any call
    request_kind: RequestKind = "chat"

    def metric_info(self, name: str) -> MetricInfo | None:
        """The declaration of a metric (breakdown rows share their metric's); None if undeclared."""
        return self.metrics.get(name)


class _Registering(types.ModuleType):
    """``from harness import task`` gives this module; calling it registers like
    :func:`harness.registry.task` (a package attribute cannot be both a submodule and a function)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # deferred to the call (a family module decorating its factory, after this module has loaded):
        # the registry sits above this module (it builds Tasks), so a module-level import would be a cycle
        from harness.registry import task as register

        return register(*args, **kwargs)


sys.modules[__name__].__class__ = _Registering
