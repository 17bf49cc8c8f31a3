"""What the two sweep-file test modules share: where the families' sweep files are, which option values
are placeholders for data not shipped, the families' offline fixtures and the Blender check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from requirements import require_that

ROOT = Path(__file__).resolve().parents[1]
TASKS = ROOT / "tasks"
PLACEHOLDER_ROOT = "/data/"

def _families() -> list[str]:
    return sorted(p.name for p in TASKS.iterdir() if p.is_dir() and (p / "__init__.py").is_file())


def _files() -> list[Path]:
    return sorted(TASKS.glob("*/sweep*.yaml"))


def _family_of(path: Path) -> str:
    return path.parent.name


def _strings(value: Any) -> Iterator[str]:
    """Every string in a (nested) options or settings value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(PLACEHOLDER_ROOT)


def _has_placeholder(value: Any) -> bool:
    return any(_is_placeholder(s) for s in _strings(value))



def _require_blender() -> None:
    from harness.blender import blender_available

    require_that(blender_available(), "Blender (the bpy venv)", "tests/setup.d/50-bpy.sh builds it")


@pytest.fixture(scope="module", name="fixtures")
def family_fixtures(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A family's offline fixture (its manifest's ``fixture`` writer), written once per module."""
    from harness.families import family, resolve

    made: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in made:
            fam = family(name)
            assert fam is not None and fam.fixture, f"family {name!r} has no fixture writer"
            folder = tmp_path_factory.mktemp(f"fixture-{name}")
            resolve(fam.fixture)(folder)
            made[name] = folder
        return made[name]

    return get
