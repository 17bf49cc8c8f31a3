"""What a run is, before it runs: its configuration and identity, its default name, its task built
from options, and the samples it covers. The runner (:mod:`harness.runner`), sweeps and the CLI
share these; none of it touches a model or the results database."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness.errors import UserError
from harness.registry import lookup
from harness.task import Task
from harness.types import Metric, Sample, stable_hash


class RunConfigError(UserError, ValueError):
    """A run cannot start: bad options, modality mismatch, name clash."""


# column widths of the results database (harness/store/schema.py): checked up front on both engines,
# so a long name is a one-line error, not a PostgreSQL DataError halfway through a run
MAX_SAMPLE_ID, MAX_RUN_NAME, MAX_SPEC = 300, 300, 500


@dataclass
class EvalConfig:
    task: str
    model: str
    task_options: dict[str, Any] = field(default_factory=dict)
    model_settings: dict[str, Any] = field(default_factory=dict)
    judge: str | None = None
    judge_settings: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    seed: int = 0
    epochs: int = 1
    sample_ids: list[str] | None = None
    concurrency: int | None = None
    use_cache: bool = True
    run_name: str | None = None
    db_url: str | None = None
    progress: bool = True

    def identity(self, task: Task) -> dict[str, Any]:
        """What makes two invocations the same run (limit/samples/concurrency only choose how much)."""
        return {
            "task": task.name,
            "task_version": task.version,
            "task_hash": task.content_hash,
            "task_options": self.task_options,
            "model": self.model,
            "model_settings": self.model_settings,
            "judge": self.judge,
            "judge_settings": self.judge_settings,
            "seed": self.seed,
            "epochs": self.epochs,
        }


@dataclass
class RunSummary:
    run_id: int
    run_name: str
    status: str
    n_planned: int
    n_skipped: int  # already done before this invocation
    n_new: int
    n_errors: int
    n_unscored: int
    seconds: float
    metrics: list[Metric]
    errors: dict[str, int] = field(default_factory=dict)  # error kind -> count
    n_held_elsewhere: int = 0  # samples another live process was working on (left to it)


def git_revision() -> str:
    root = Path(harness.__file__).resolve().parent.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _slug(text: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-._" else "-" for c in text)
    return "-".join(p for p in keep.split("-") if p)[:80]


def default_run_name(task: Task, cfg: EvalConfig) -> str:
    """The name a run gets without --run-name: task, model and a hash of what makes it this run."""
    return f"{task.name}__{_slug(cfg.model)}__{stable_hash(cfg.identity(task))[:8]}"


_SCALARS: dict[Any, str] = {int: "an integer", float: "a number", bool: "true or false"}


def _scalar_hint(hint: Any) -> Any | None:
    """``int``, ``float`` or ``bool``, alone or with ``None``, bounded or not (``Annotated[int,
    Field(ge=1)]``); anything else is the factory's to check."""
    import types
    import typing

    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if hint in _SCALARS:
        return hint
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return _scalar_hint(rest[0])
    return None


def _without_none(hint: Any) -> Any:
    import types
    import typing

    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def check_option_types(name: str, factory: Any, options: dict[str, Any]) -> None:
    """Refuse, in one line before the factory runs, a ``-T`` value its annotation says is an integer, a
    number or a boolean and that is none (``-T n=abc`` on ``n: int``), or that is outside the bounds the
    annotation gives (``n: Annotated[int, Field(ge=1)]``). Values that pass are handed to the factory
    unchanged: this only checks, so a factory's own reading of its options stays as it was."""
    import inspect
    import math
    import typing

    from pydantic import TypeAdapter, ValidationError

    from harness.backend_settings import describe

    try:
        hints = typing.get_type_hints(inspect.unwrap(factory), include_extras=True)
    except Exception:  # an annotation that does not resolve here: nothing to check against
        return
    for key, value in options.items():
        hint = hints.get(key)
        scalar = _scalar_hint(hint)
        if scalar is None or value is None:  # None: the factory's own "not given"
            continue
        declared = _without_none(hint)  # the scalar with its bounds, if the annotation gives any
        try:
            checked = TypeAdapter(declared).validate_python(value)
        except ValidationError:
            raise RunConfigError(f"task {name!r}: -T {key} must be {describe(declared)}, got {value!r}") from None
        if isinstance(checked, float) and not math.isfinite(checked):
            raise RunConfigError(f"task {name!r}: -T {key} must be a finite number, got {value!r}")


def build_task(name: str, options: dict[str, Any]) -> Task:
    entry = lookup("task", name)
    check_option_types(name, entry.factory, options)
    try:
        task: Task = entry.factory(**options)
    except UserError:
        raise
    except TypeError as exc:
        raise RunConfigError(f"task {name!r}: bad option ({exc})") from None
    except ValueError as exc:  # a factory refusing an option value
        raise RunConfigError(f"task {name!r}: {exc}") from None
    if not isinstance(task, Task):
        raise RunConfigError(f"task {name!r}: its factory returned {type(task).__name__}, not a Task")
    return task


def select_samples(task: Task, cfg: EvalConfig) -> list[Sample]:
    samples = list(task.load())
    seen: set[str] = set()
    for s in samples:
        if len(s.id) > MAX_SAMPLE_ID:
            raise RunConfigError(f"task {task.name!r}: sample id {s.id[:40]!r}... is longer than {MAX_SAMPLE_ID} "
                                 "characters (the results database's limit)")
        if s.id in seen:
            raise RunConfigError(f"task {task.name!r}: duplicate sample id {s.id!r}")
        seen.add(s.id)
    if cfg.sample_ids:
        wanted = set(cfg.sample_ids)
        missing = wanted - seen
        if missing:
            raise RunConfigError(f"unknown sample ids: {', '.join(sorted(missing)[:5])}")
        samples = [s for s in samples if s.id in wanted]
    if not samples and cfg.limit != 0:
        raise RunConfigError(f"task {task.name!r} has no samples (an empty or unreadable input?)")
    if cfg.limit is not None:
        samples = samples[: cfg.limit]
    return samples
