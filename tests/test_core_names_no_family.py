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


# ---------------------------------------------------------------- the demo names no family either

DEMO_CORE = ("harness/demo.py", "harness/demo_plan.py", "harness/commands/demo.py")


def code_strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module that is not a docstring (f-string pieces included): what the
    code itself says, not its prose."""
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docstrings.add(id(first.value))
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def family_words() -> set[str]:
    """What naming a family would look like: its name, its demo tasks and the backends of its demo
    models (``gs`` of ``gs:sh``), from the registered manifests."""
    from harness.families import families

    words = set()
    for fam in families().values():
        words.add(fam.name)
        for run in fam.demo:
            words.add(run.task)
            backend = run.model.split("(", 1)[0].split(":", 1)[0]
            if backend != "builtin":  # the core's own built-in models are no family's
                words.add(backend)
    return words


def demo_violations(paths: tuple[Path, ...] = tuple(ROOT / p for p in DEMO_CORE)) -> list[str]:
    import re

    out = []
    for word in sorted(family_words()):
        pattern = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)")
        for path in paths:
            for lineno, text in code_strings(path):
                if pattern.search(text):
                    out.append(f"{path.name}:{lineno} names {word!r} in {text!r}")
    return out


def test_the_demo_core_names_no_family_in_its_strings() -> None:
    """The demo's plan lives in the families' manifests: the core's literals name none of them."""
    assert family_words() >= {"gsm8k", "longshot", "code3d", "reid", "nvs"}
    assert demo_violations() == []


def test_the_string_rule_sees_a_family_named_in_code(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text('"""A docstring may say longshot."""\nPLAN = [("longshot", "builtin:echo")]\n'
                     'def f():\n    """nvs here is prose."""\n    return f"{1}-reid_aerial_ground"\n')
    found = demo_violations((probe,))
    assert any("'longshot'" in v for v in found) and any("reid_aerial_ground" in v for v in found)
    assert not any("'nvs'" in v for v in found)  # docstrings are prose, not the code naming a family
