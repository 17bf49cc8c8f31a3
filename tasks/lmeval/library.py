"""lm-evaluation-harness's task library, reached through its own ``TaskManager``.

Everything that decides what a task asks and how it is scored stays lm-eval's: its YAML configs,
prompt templates, few-shot samplers, filters, ``process_results`` and aggregations. This module only
finds and configures the tasks the way ``lm_eval.simple_evaluate`` does (0.4.13, ``lm_eval/evaluator.py``):
``num_fewshot`` is applied unless the task's config pins 0, an unset one becomes 0, the few-shot
sampler's seed defaults to lm-eval's 1234, and generation keyword arguments update the task's own.

lm-eval is an extra (``pip install 'harness[lmeval]'``), imported only when an ``lmeval:`` task is asked for.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError

LM_EVAL_VERSION = "0.4.13"
DEFAULT_FEWSHOT_SEED = 1234  # lm_eval.evaluator's DEFAULT_OTHER_SEED


class LmEvalError(UserError):
    """An lm-eval task that cannot be built here (not installed, unknown name, unsupported shape)."""


def _lm_eval() -> Any:
    # offline by default: a task whose data is on a hub fails in one line instead of hanging on the network
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import lm_eval
        import lm_eval.tasks
    except ImportError:
        raise LmEvalError(f"lmeval: tasks need lm-evaluation-harness {LM_EVAL_VERSION}: "
                          "pip install 'harness[lmeval]'") from None
    version = getattr(lm_eval, "__version__", "?")
    if version != LM_EVAL_VERSION:
        raise LmEvalError(f"lmeval: lm-eval {version} is installed; this harness is pinned to {LM_EVAL_VERSION} "
                          "(pip install 'harness[lmeval]')")
    return lm_eval


@functools.lru_cache(maxsize=4)
def task_manager(include_path: str | None) -> Any:
    """lm-eval's index of its tasks plus the YAML tasks under ``include_path`` (indexing reads every
    YAML file of the library: seconds, so once per process and folder)."""
    lm_eval = _lm_eval()
    if include_path is not None and not Path(include_path).is_dir():
        raise LmEvalError(f"lmeval: include_path {include_path}: no such folder")
    import logging

    logging.getLogger("lm_eval").setLevel(logging.ERROR)  # its per-task info lines would bury the progress bar
    return lm_eval.tasks.TaskManager(include_path=include_path)


def available(include_path: str | None = None) -> list[str]:
    """Every task, group and tag name the installed lm-eval (plus ``include_path``) offers."""
    return sorted(task_manager(include_path).all_tasks)


@dataclass(slots=True)
class LeafTask:
    """One lm-eval task (a leaf of a group), configured for this run."""

    name: str
    task: Any  # lm_eval.api.task.Task

    @property
    def output_type(self) -> str:
        return str(self.task.OUTPUT_TYPE)


def load(name: str, include_path: str | None, num_fewshot: int | None, fewshot_seed: int,
         gen_kwargs: dict[str, Any] | None) -> list[LeafTask]:
    """The leaf tasks ``name`` stands for (itself, or every task of a group or tag), configured."""
    manager = task_manager(include_path)
    if name not in manager.all_tasks:
        import difflib

        close = difflib.get_close_matches(name, manager.all_tasks, n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise LmEvalError(f"lmeval: lm-eval has no task {name!r}{hint} (see `harness tasks lmeval`)")
    try:
        loaded = manager.load([name])
    except Exception as exc:  # a task whose data cannot be read offline, a broken YAML
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise LmEvalError(f"lmeval:{name}: lm-eval cannot build it ({type(exc).__name__}: {first[:300]})") from None
    leaves = [LeafTask(leaf, obj) for leaf, obj in sorted(loaded["tasks"].items())]
    if not leaves:
        raise LmEvalError(f"lmeval:{name}: names no task")
    for leaf in leaves:
        configure(leaf.task, num_fewshot, fewshot_seed, gen_kwargs)
    return leaves


def configure(task: Any, num_fewshot: int | None, fewshot_seed: int, gen_kwargs: dict[str, Any] | None) -> None:
    """``simple_evaluate``'s overrides, in its order (see the module docstring)."""
    if task.get_config("output_type") == "generate_until" and gen_kwargs:
        task.set_config(key="generation_kwargs", value=gen_kwargs, update=True)
    if num_fewshot is not None:
        if task.get_config("num_fewshot") != 0:
            task.set_config(key="num_fewshot", value=num_fewshot)
    elif task.get_config("num_fewshot") is None:
        task.set_config(key="num_fewshot", value=0)
    task.set_fewshot_seed(seed=fewshot_seed)
