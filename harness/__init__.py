"""harness: evaluation harness with a SQL results store, leaderboard and arena.

The public API for writing tasks and backends::

    from harness import task, model, Task, Sample, Message, Part, Request, Output, Score, Usage
    from harness import GenerationConfig, Metric, MetricInfo, Family, ModelClient, UserError

Names are imported on first use, so ``import harness`` (and ``harness --help``) stays fast.
``harness.task`` and ``harness.model`` are also the modules of the task and model protocols; those
modules are callable and register like the decorators of :mod:`harness.registry`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Task": "harness.task", "ScoreContext": "harness.task",
    "Sample": "harness.types", "Message": "harness.types", "Part": "harness.types", "Request": "harness.types",
    "Output": "harness.types", "Score": "harness.types", "Usage": "harness.types",
    "GenerationConfig": "harness.types", "Metric": "harness.types", "MetricInfo": "harness.types",
    "Family": "harness.family", "ModelClient": "harness.client", "UserError": "harness.errors",
}

__all__ = ["Family", "GenerationConfig", "Message", "Metric", "MetricInfo", "ModelClient", "Output", "Part",
           "Request", "Sample", "Score", "ScoreContext", "Task", "Usage", "UserError", "__version__", "model", "task"]

if TYPE_CHECKING:
    from harness.client import ModelClient
    from harness.errors import UserError
    from harness.family import Family
    from harness.task import ScoreContext, Task
    from harness.types import GenerationConfig, Message, Metric, MetricInfo, Output, Part, Request, Sample, Score, Usage


from harness import model, task  # noqa: E402  (the callable protocol modules, see the docstring)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
