"""harness: evaluation harness with a SQL results store, leaderboard and arena.

The public API for writing tasks and backends::

    from harness import task, model, Task, Sample, Message, Part, Request, Output, Score, Usage
    from harness import GenerationConfig, Metric, MetricInfo, Family, ModelClient, UserError, Backend

Names are imported on first use, so ``import harness`` (and ``harness --help``) stays fast.
``harness.task`` and ``harness.model`` are also the modules of the task and model protocols; those
modules are callable and register like the decorators of :mod:`harness.registry`.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Task": "harness.task", "ScoreContext": "harness.task",
    "Sample": "harness.types", "Message": "harness.types", "Part": "harness.types", "Request": "harness.types",
    "Output": "harness.types", "Score": "harness.types", "Usage": "harness.types",
    "GenerationConfig": "harness.types", "Metric": "harness.types", "MetricInfo": "harness.types",
    "Family": "harness.family", "ModelClient": "harness.client", "UserError": "harness.errors",
    "Backend": "harness.model",
}

__all__ = ["Backend", "Family", "GenerationConfig", "Message", "Metric", "MetricInfo", "ModelClient", "Output", "Part",
           "Request", "Sample", "Score", "ScoreContext", "Task", "Usage", "UserError", "__version__", "model", "task"]

if TYPE_CHECKING:
    from collections.abc import Sequence
    from importlib.machinery import ModuleSpec
    from types import ModuleType

    from harness.client import ModelClient
    from harness.errors import UserError
    from harness.family import Family
    from harness.model import Backend
    from harness.task import ScoreContext, Task
    from harness.types import GenerationConfig, Message, Metric, MetricInfo, Output, Part, Request, Sample, Score, Usage


# setup.py maps the top-level folders tasks/, models/ and leaderboard/ to these names. From a source
# checkout, an editable install's import hook answers them with the folders of the checkout it was
# installed from, which need not be the one this package was imported from (a second checkout run from
# its own root): the two code bases would mix silently. So, from a checkout, a finder placed first on
# sys.meta_path answers every ``harness.*`` name from THIS checkout's folders. An installed wheel has no
# sibling folders and keeps the ordinary import machinery.
_MAPPED = ("tasks", "models", "leaderboard")
_FINDER_MARK = "_harness_checkout_finder"


def _is_harness_checkout(root: str) -> bool:
    """``root`` holds tasks/, models/, leaderboard/ (each a package) and a pyproject.toml whose
    ``[project]`` is named ``harness``. A few stats and one small read: this runs on every
    ``import harness``, so no TOML parser (tomllib's import alone costs more than this)."""
    pyproject = os.path.join(root, "pyproject.toml")
    if not os.path.isfile(pyproject):  # the common case in a wheel: one stat and done
        return False
    if not all(os.path.isfile(os.path.join(root, folder, "__init__.py")) for folder in _MAPPED):
        return False
    try:
        with open(pyproject, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return False
    section = ""
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line.startswith("["):
            section = line
        elif section == "[project]" and line.partition("=")[0].strip() == "name":
            return line.partition("=")[2].strip().strip("\"'") == "harness"
    return False


class _CheckoutFinder:
    """Answers ``harness.tasks``, ``harness.models`` and ``harness.leaderboard`` with one checkout's
    folders, and every other ``harness.*`` name from its parent package's ``__path__`` (as the default
    finder would). A name the checkout does not have is refused here rather than left to a later finder,
    which could find it in another checkout."""

    _harness_checkout_finder = True

    def __init__(self, root: str) -> None:
        self.root = root
        self.folders = {f"harness.{folder}": os.path.join(root, folder) for folder in _MAPPED}

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if not fullname.startswith("harness.") or path is None:
            return None
        from importlib.machinery import PathFinder
        from importlib.util import spec_from_file_location

        folder = self.folders.get(fullname)
        if folder is not None:
            return spec_from_file_location(fullname, os.path.join(folder, "__init__.py"),
                                           submodule_search_locations=[folder])
        spec = PathFinder.find_spec(fullname, path, target)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return spec


def _install_checkout_finder() -> None:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not _is_harness_checkout(root):
        return
    # one finder only, even when this module is executed again (a test re-importing harness)
    sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, _FINDER_MARK, False)]
    sys.meta_path.insert(0, _CheckoutFinder(root))


_install_checkout_finder()


from harness import model, task  # noqa: E402  (the callable protocol modules, see the docstring)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
