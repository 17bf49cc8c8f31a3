"""Shared fixtures: real databases (a SQLite file and a PostgreSQL server) for store tests.

``db_url`` is parametrised over both engines; the PostgreSQL variant creates a fresh database on
the server that tests/setup.d/10-postgres.sh started (HARNESS_TEST_PG_URL). Under CI a missing
server is a failure, not a skip (tests/requirements.py reads CI).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from requirements import missing, require_that

# `from tests.tiny_models import ...` must mean this folder. It has no __init__.py (the tests import
# their helpers as top-level modules), so a regular `tests` package that some PyPI distribution
# ships into site-packages (opensimplex does) would win over it: bind the name to this folder first.
_tests = sys.modules.get("tests")
if _tests is None or list(getattr(_tests, "__path__", [])) != [str(Path(__file__).resolve().parent)]:
    _spec = importlib.machinery.ModuleSpec("tests", None, is_package=True)
    _spec.submodule_search_locations = [str(Path(__file__).resolve().parent)]
    sys.modules["tests"] = importlib.util.module_from_spec(_spec)

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "needs(condition, what, why): fail under CI, else skip, when condition is false")


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        require_that(*mark.args)


def _pg_admin_url() -> str:
    url = os.environ.get("HARNESS_TEST_PG_URL")
    if not url:
        missing("the PostgreSQL server (HARNESS_TEST_PG_URL)", "tests/run.sh starts it (tests/setup.d/10-postgres.sh)")
    return url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'harness.db'}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    from sqlalchemy import create_engine, text

    admin = _pg_admin_url()
    name = f"t_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    base = admin.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with engine.connect() as conn:
        conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
    engine.dispose()


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request) -> str:
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_url")
    return request.getfixturevalue("pg_url")


@pytest.fixture(scope="session")
def harness_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness wheel, built once per session from a copy of the sources (tests/test_packaging.py)."""
    from test_packaging import build_wheel

    return build_wheel(tmp_path_factory)


@pytest.fixture(scope="session")
def harness_wheel_venv(harness_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment with that wheel installed non-editable, shared by the tests that only
    read it (the packaging checks, the outside plugin's type check)."""
    from test_packaging import install_wheel

    return install_wheel(harness_wheel, tmp_path_factory)
