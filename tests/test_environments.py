"""Every environment tests/run.sh builds holds what pyproject.toml declares for it: the test venv
(the core and every main extra), the vLLM venv (the core, openai, ray: 60-vllm.sh's VLLM_EXTRAS) and
the Blender venv (the `blender` extra). A cached venv made before a dependency was added must fail
here (and be re-synced by its fragment's stamp), never pass on a warm machine and fail on a fresh one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from requirements import missing

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "tests" / "check_declared.py"
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
OWN_VENVS = {"vllm", "ray", "blender"}  # tests/pins.sh's main_extras leaves these out of the main venv


def declared(*names: str) -> list[str]:
    out: list[str] = []
    for name in names:
        out += PROJECT["dependencies"] if name == "core" else PROJECT["optional-dependencies"][name]
    return out


def unsatisfied(python: str, requirements: list[str]) -> list[str]:
    done = subprocess.run([python, str(CHECK)], input="\n".join(requirements), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("missing:")]


def venv_python(variable: str, fragment: str) -> str:
    python = os.environ.get(variable)
    if not python or not Path(python).exists():
        missing(f"the venv of {fragment} ({variable})", f"tests/run.sh builds it (tests/setup.d/{fragment})")
    return python


def vllm_extras() -> list[str]:
    found = re.search(r"^VLLM_EXTRAS=\(([^)]*)\)", (ROOT / "tests/setup.d/60-vllm.sh").read_text(), re.M)
    assert found
    return found.group(1).split()


def test_the_test_venv_holds_every_declared_main_dependency() -> None:
    extras = sorted(set(PROJECT["optional-dependencies"]) - OWN_VENVS)
    assert unsatisfied(sys.executable, declared("core", *extras)) == []


def test_the_vllm_venv_holds_the_core_and_its_extras() -> None:
    python = venv_python("HARNESS_VLLM_PYTHON", "60-vllm.sh")
    assert "core" in vllm_extras()
    assert unsatisfied(python, declared(*vllm_extras())) == []


def test_the_bpy_venv_holds_the_blender_extra() -> None:
    python = venv_python("HARNESS_BPY_PYTHON", "50-bpy.sh")
    assert unsatisfied(python, declared("blender")) == []


def test_the_check_sees_a_missing_or_too_old_dependency() -> None:
    """What makes the three tests above able to fail: a package that is absent, one too old, one fine."""
    found = unsatisfied(sys.executable, ["no-such-package-harness>=1", "pytest>=999", "pytest>=1,!=0.1", "orjson"])
    assert found == ["missing: no-such-package-harness>=1 (not installed)",
                     f"missing: pytest>=999 (installed {pytest.__version__})"]
