"""The core and the leaderboard name no family: nothing under `harness/` (the core) or `leaderboard/`
imports `harness.tasks.<family>` or a specific backend module by name. Families are reached only
through their manifests (`harness.families`); general backends only through the registry."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE_DIRS = ("harness", "leaderboard")
# the registry may name the packages it discovers from; nothing else
ALLOWED = {"harness.tasks", "harness.models"}
FORBIDDEN_PREFIXES = ("harness.tasks.", "harness.models.")


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names
                      if node.module in ALLOWED]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((node.lineno, arg.value))
    return found


def violations() -> list[str]:
    out = []
    for folder in CORE_DIRS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for lineno, module in imported_modules(path):
                if module.startswith(FORBIDDEN_PREFIXES):
                    out.append(f"{path.relative_to(ROOT)}:{lineno} imports {module}")
    return out


def test_core_and_leaderboard_import_no_family_or_backend_by_name() -> None:
    assert violations() == []


def test_the_rule_sees_a_family_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from harness.tasks.alignment.redact import is_hidden\nimport harness.models.hf\n"
                     "from harness.tasks import gsm8k\nimportlib.import_module('harness.tasks.dsgg.analysis')\n")
    found = [m for _, m in imported_modules(probe)]
    assert "harness.tasks.alignment.redact" in found and "harness.models.hf" in found
    assert "harness.tasks.gsm8k" in found and "harness.tasks.dsgg.analysis" in found


def test_every_family_folder_is_registered() -> None:
    """A folder under tasks/ that no manifest names would be invisible to the registry."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]["harness.families"]
    folders = {p.parent.name for p in (ROOT / "tasks").glob("*/family.py")}
    assert folders == set(declared)
    for name, target in declared.items():
        assert target == f"harness.tasks.{name}.family:FAMILY"
