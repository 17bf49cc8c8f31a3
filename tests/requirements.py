"""One rule for what a test needs from the machine: under CI a missing component fails the test (a
green run must not hide a broken install step), elsewhere it skips with the reason and the setup
fragment that installs it.

``CI`` is read one way, here: set to ``true``, ``1`` or ``yes`` (any case) means CI. tests/run.sh's
setup fragments install everything the suite needs, so under CI nothing may be missing.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path
from typing import Any, NoReturn

import pytest

__all__ = ["missing", "needs", "require", "require_that", "under_ci"]


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def missing(what: str, why: str) -> NoReturn:
    """Fail (under CI) or skip the current test, or the whole module when called at import time."""
    message = f"{what} is missing: {why}"
    if under_ci():
        pytest.fail(message, pytrace=False)
    pytest.skip(message, allow_module_level=True)


def require(component: str, why: str) -> Any:
    """The component a test needs, or fail/skip through :func:`missing`.

    ``component`` is an import name (returns the imported module), ``bin:NAME`` (an executable on
    PATH; returns its path) or a filesystem path containing ``/`` (returns it as a Path)."""
    if component.startswith("bin:"):
        found = shutil.which(component[4:])
        if found is None:
            missing(f"the program {component[4:]}", why)
        return found
    if "/" in component:
        path = Path(component)
        if not path.exists():
            missing(str(path), why)
        return path
    try:
        return importlib.import_module(component)
    except ImportError as exc:
        missing(f"the Python module {component} ({exc})", why)


def require_that(condition: bool, what: str, why: str) -> None:
    """For needs that are neither a module, a program nor a file (a venv that works, a kernel feature)."""
    if not condition:
        missing(what, why)


def needs(condition: bool, what: str, why: str) -> pytest.MarkDecorator:
    """A mark (for a test, a class or ``pytestmark``) that applies :func:`require_that` when each
    marked test is set up (tests/conftest.py's hook): the ``skipif`` of this rule."""
    return pytest.mark.needs(condition, what, why)
