"""The core and the leaderboard name no family: nothing under `harness/` (the core) or `leaderboard/`
imports `harness.tasks.<family>` or a specific backend module by name. Families are reached only
through their manifests (`harness.families`); general backends only through the registry."""

from __future__ import annotations

import ast
import re
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


# ------------------------------------------- nor does any string or name of the core or the leaderboard
#
# The rule (``name_violations``), over every ``.py`` file under harness/ and leaderboard/ (its string
# literals that are not docstrings, f-string pieces included, and its identifiers) and every template
# and script there (``.html``, ``.js``, read whole):
#
# 1. a module path of a family or backend: ``harness.tasks.<x>``, ``harness.models.<x>`` or
#    ``tasks/<family>`` anywhere in a string;
# 2. a family's name as a string's whole value, or as the head of a snake or spec token
#    (``alignment_refusal``, ``methods_wine``, ``selection:gfv``) anywhere in a string (not before
#    ``-``: "decision-making" is English);
# 3. a family name that is no English word (code3d, gsm8k, dsgg, ...) as a whole word anywhere in a
#    string (case-insensitive: ``CODE3D``, ``code3d-live`` too) or as a ``_``-separated part of an
#    identifier (``CODE3D_TASK``, ``code3d_pool_size``).
#
# Family names that are also ordinary English words (:data:`ENGLISH_NAMES`) are not matched as bare
# words in prose (rule 3): "trained or fitted methods", "a decision loop" say nothing of a family.
# Docstrings and comments are prose and are not read; the `.md` docs are not read either.

ENGLISH_NAMES = frozenset({"agents", "alignment", "causal", "conformal", "decision", "methods", "puzzles",
                           "reliability", "selection", "transport"})
TEXT_SUFFIXES = (".html", ".js")


def family_names() -> set[str]:
    from harness.families import families

    return set(families())


def identifiers(tree: ast.AST) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Name):
            name = node.id
        elif isinstance(node, ast.Attribute):
            name = node.attr
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.arg | ast.keyword):
            name = node.arg
        elif isinstance(node, ast.alias):
            name = node.asname or node.name
        if name:
            out.append((getattr(node, "lineno", 0), name))
    return out


def _string_rules(names: set[str]) -> list[tuple[str, re.Pattern[str]]]:
    alt = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    coined = "|".join(re.escape(n) for n in sorted(names - ENGLISH_NAMES, key=len, reverse=True)) or r"(?!x)x"
    return [
        ("a module path", re.compile(rf"harness\.(?:tasks|models)\.\w|(?<![\w.])tasks/(?:{alt})(?!\w)")),
        ("a family name", re.compile(rf"^\W*(?:{alt})\W*$")),
        ("a family's compound name", re.compile(rf"(?<![\w.:/-])(?:{alt})[_:]\w")),
        ("a family name", re.compile(rf"(?<![A-Za-z0-9])(?:{coined})(?![A-Za-z0-9])", re.IGNORECASE)),
    ]


def name_violations(paths: list[Path] | None = None, names: set[str] | None = None) -> list[str]:
    names = family_names() if names is None else names
    rules = _string_rules(names)
    coined = names - ENGLISH_NAMES
    if paths is None:
        paths = sorted(p for folder in CORE_DIRS for p in (ROOT / folder).rglob("*")
                       if p.suffix in (".py", *TEXT_SUFFIXES) and p.is_file())
    out: list[str] = []
    for path in paths:
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        if path.suffix == ".py":
            strings = code_strings(path)
            for lineno, ident in identifiers(ast.parse(path.read_text(), filename=str(path))):
                parts = set(ident.lower().split("_"))
                if parts & coined:
                    out.append(f"{where}:{lineno} identifier {ident!r} names {sorted(parts & coined)[0]!r}")
        else:
            strings = list(enumerate(path.read_text().splitlines(), start=1))
        for lineno, text in strings:
            for what, pattern in rules:
                m = pattern.search(text)
                if m:
                    out.append(f"{where}:{lineno} names {what} ({m.group(0).strip()!r}) in {text[:80]!r}")
                    break
    return out


def test_core_and_leaderboard_name_no_family_in_strings_or_identifiers() -> None:
    """The done-when of "the manifest names everything a family contributes": the leaderboard's
    per-family display table, the live arena's 3D kind and its renderer's module paths are read
    from the manifests; no string or name of the core or the leaderboard names a family."""
    assert {"code3d", "gsm8k", "methods", "selection", "lmeval", "mmlu"} <= family_names()
    assert ENGLISH_NAMES <= family_names()  # no stale entry lets a removed family's name through
    assert name_violations() == []


def test_the_name_rule_catches_what_used_to_leak(tmp_path: Path) -> None:
    """Planted violations, one per way the boundary leaked: a family module named by string, the old
    per-family display table, the live arena's hard-coded kind, its task and config names, and a
    template; prose that merely uses English words (and docstrings) is not flagged."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""A docstring may say code3d and harness.tasks.code3d."""\n'
        'from harness.families import resolve\n'
        'POOL = resolve("harness.tasks.code3d.executor:BlenderPool")\n'
        'HF = "harness.models.hf"\n'
        'DISPLAY = {"gsm8k": "text", "methods": "none", "selection": "none", "longshot": "video+audio"}\n'
        'CODE3D_TASK = "chat"\n'
        'def turn(kind, code3d_pool_size=1):\n'
        '    return 900.0 if kind == "code3d" else 0.0\n'
        'HELP = "chat (default) and/or CODE3D"\n'
        'TASKS = ("alignment_refusal", "methods_wine")\n'
        'PATH = "see tasks/reliability/humaneval.py"\n'
        'PROSE = "trained or fitted methods (clustering, transport, conformal prediction, ...)"\n'
        'LABEL, OTHER = "Methods", "agents acting in an environment or a decision loop"\n'
        'NOQA, HYPHEN = "# noqa: S506", "decision-making"\n'
        'LIVE = "code3d-live"\n'
    )
    found = name_violations([probe])
    text = "\n".join(found)
    for leaked in ("harness.tasks.code3d", "harness.models.hf", "'gsm8k'", "'methods'", "'selection'", "'longshot'",
                   "'CODE3D_TASK'", "'code3d_pool_size'", "'CODE3D'", "'alignment_refusal'", "'methods_wine'",
                   "tasks/reliability", ":15 "):
        assert leaked in text, (leaked, found)
    assert not any(":1 " in v for v in found)  # the docstring is prose
    assert not any(":12 " in v or ":13 " in v or ":14 " in v for v in found), found  # English words, noqa
    page = tmp_path / "chat.html"
    page.write_text('<option>{{ "3D code (Blender)" if k == "code3d" else "Chat" }}</option>\n<p>methods</p>\n')
    assert [v.split(" names")[0] for v in name_violations([page])] == ["chat.html:1"]


def test_the_name_rule_sees_the_old_display_table_in_full(tmp_path: Path) -> None:
    """The per-family table that leaderboard/arena/suitability.py used to hold: every key that is a
    family's name is reported, whatever kind of word it is."""
    probe = tmp_path / "suitability.py"
    old = ["gsm8k", "qa", "alignment", "reliability", "code3d", "partverse", "nvs", "longshot", "methods",
           "conformal", "causal", "decision", "selection", "transport", "spa3d", "dsgg", "reid", "puzzles", "agents"]
    probe.write_text("FAMILY_DISPLAY = {\n" + "".join(f'    "{n}": "none",\n' for n in old) + "}\n")
    found = name_violations([probe])
    assert len(found) == len(old) and set(old) <= family_names()
