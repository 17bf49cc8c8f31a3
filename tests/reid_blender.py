"""The ReID Blender tests' shared setting: the bpy venv found (or the test fails under CI with how
to get it) and a private ``HARNESS_CACHE_DIR``, so renders and fits start from nothing."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.requirements import require_that


def bpy_python() -> str:
    explicit = os.environ.get("HARNESS_BPY_PYTHON")
    base = Path(os.environ.get("HARNESS_CACHE_DIR", Path.home() / ".cache" / "harness"))
    return explicit or str(base / "venvs" / "bpy" / "bin" / "python")


@contextmanager
def blender_cache(tmp_path_factory: pytest.TempPathFactory, name: str) -> Iterator[Path]:
    bpy = bpy_python()
    require_that(Path(bpy).exists(), "Blender (the bpy venv)", "tests/setup.d/50-bpy.sh builds it")
    cache = tmp_path_factory.mktemp(name)
    mp = pytest.MonkeyPatch()
    mp.setenv("HARNESS_BPY_PYTHON", bpy)
    mp.setenv("HARNESS_CACHE_DIR", str(cache))
    try:
        yield cache
    finally:
        mp.undo()
