"""What a run is, before it runs: its configuration and identity, its default name, its task built
from options, and the samples it covers. The runner (:mod:`harness.runner`), sweeps and the CLI
share these; none of it touches a model or the results database."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from harness.errors import RunConfigError, UserError
from harness.option_types import hints_of, is_text, typed_options
from harness.registry import lookup
from harness.task import Task
from harness.types import Metric, Sample, stable_hash

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


def check_option_types(name: str, factory: Any, options: dict[str, Any]) -> None:
    """Refuse, in one line, a ``-T`` value its annotation does not allow (see :func:`typed_options`)."""
    typed_options(name, factory, options)


def text_options_as_written(task: str, options: dict[str, Any], items: list[str] | None) -> dict[str, Any]:
    """The command line's ``-T`` options with every ``str``-annotated one back to its text as written
    (the typed parser reads ``-T name=007`` as 7). A task that does not resolve is left to the run,
    which reports it in one line."""
    try:
        factory = lookup("task", task).factory
    except Exception:  # an unknown task: the runner's one-line error names it
        return options
    hints = hints_of(factory)
    raw = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in items or [])}
    return {k: raw[k] if k in raw and k in hints and is_text(hints[k]) and v is not None else v
            for k, v in options.items()}


def build_task(name: str, options: dict[str, Any]) -> Task:
    entry = lookup("task", name)
    try:  # the registered factory converts the options to its annotations first (harness.option_types)
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
