"""The core's modules import each other without a cycle.

The graph: one node per module of the core (`harness/*.py`, `harness/commands/`, `harness/store/`; not the
plugin folders `harness.tasks`, `harness.models`, `harness.leaderboard`), one edge per import of another core
module that runs when the module is imported: a statement at module level, in a module-level `try`/`if`/`with`
block or in a class body, but not under `if TYPE_CHECKING:` (never run) and not in a function body.
`from harness import x` is an edge to `harness.x` when `x` is a submodule, else to the package `harness`;
relative imports are resolved the same way. The implicit import of a module's parent package is not an edge
(Python has the parent in `sys.modules` before the child runs, so a package importing its own submodules is
not a cycle).

Why a cycle matters: with A -> B -> A, whichever is imported first sees the other half-initialised, so a name
defined below the import is missing (`ImportError: cannot import name ... partially initialized module`)
depending only on which module a caller happened to import first; and neither module can be understood,
tested or moved without the other.

Why lazy imports (in a function body) are tolerated: they run when the function is called, after every
module involved has finished importing, so they cannot see a half-initialised module; the CLI uses them to
keep `harness --help` fast. But a lazy import that closes a loop (A imports B in a function, B imports A,
at module level or lazily) is a cycle kept out of sight, so the second test takes every import, lazy ones
too, and requires that the graph without the imports listed in `DEFERRED` is acyclic: each listed import is
a function-level one whose use is genuinely deferred, with the reason. It fails on an unlisted loop, and on
a listed import that is gone or no longer closes a loop. (A function called at module level runs its lazy
imports at import time; the walk does not follow calls.)
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "harness"
PLUGINS = {"tasks", "models", "leaderboard"}  # plugin packages, mapped into harness.* by setup.py

# (importer, imported) -> why: the function-level imports that are the only thing closing a loop among
# the core's modules. Every other loop, lazy imports included, is a failure.
DEFERRED: dict[tuple[str, str], str] = {
    ("harness.task", "harness.registry"): "the module is callable as the @task decorator (harness/__init__.py "
    "exports it so); registering needs the registry, which builds Tasks, and happens only when called",
    ("harness.model", "harness.registry"): "the module is callable as the @model decorator (as above); the "
    "registry reaches the model protocol through task -> client",
    ("harness.client", "harness.modelspec"): "ModelClient.build: building from a spec needs the registry of "
    "backends, which sits above the client (registry -> task -> client); only that constructor needs it",
}


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line of the import statement
    lazy: bool


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def core_files(root: Path = CORE) -> dict[str, Path]:
    """Module name -> file, for every core module under `root` (a folder named like the package)."""
    files = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).parts
        if relative[0] in PLUGINS or "__pycache__" in relative:
            continue
        files[module_name(path, root)] = path
    return files


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def import_statements(body: list[ast.stmt], lazy: bool = False) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement under `body`, with whether it runs later than the module's import (in a function)."""
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, lazy
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from import_statements(node.body, lazy=True)
        elif isinstance(node, ast.If) and is_type_checking(node.test):
            yield from import_statements(node.orelse, lazy)  # the `else:` of `if TYPE_CHECKING:` does run
        else:
            # if/try/with/for/while/match/class bodies run at import time; expressions hold no statements
            for field in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(node, field, []):
                    if isinstance(child, ast.stmt):
                        yield from import_statements([child], lazy)
                    else:  # an except handler or a match case: a holder of statements
                        yield from import_statements(child.body, lazy)


def resolve(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules: set[str]) -> list[str]:
    """The core modules `node` imports, as absolute names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in modules]
    if node.level:
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    found = []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            found.append(submodule)
        elif base in modules:
            found.append(base)
    return found


def import_edges(root: Path = CORE) -> list[Edge]:
    files = core_files(root)
    modules = set(files)
    edges = []
    for name, path in files.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        for node, lazy in import_statements(tree.body):
            for target in resolve(node, name, path.name == "__init__.py", modules):
                if target != name:
                    edges.append(Edge(name, target, f"{path.relative_to(root.parent)}:{node.lineno}", lazy))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, smallest name first."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def describe(component: list[str], edges: list[Edge]) -> str:
    members = set(component)
    inside = sorted({f"    {e.source} -> {e.target}  ({e.where}{', in a function' if e.lazy else ''})"
                     for e in edges if e.source in members and e.target in members})
    return f"  cycle of {len(component)}: {', '.join(component)}\n" + "\n".join(inside)


def unlisted_loops(edges: list[Edge], deferred: dict[tuple[str, str], str]) -> list[list[str]]:
    """The cycles of the whole graph (lazy imports too) that no import listed in ``deferred`` breaks."""
    return cycles([e for e in edges if (e.source, e.target) not in deferred])


def stale(edges: list[Edge], deferred: dict[tuple[str, str], str]) -> list[str]:
    """Listed imports that are not (only) function-level ones, or that lie on no cycle."""
    in_cycle = {m: i for i, c in enumerate(cycles(edges)) for m in c}
    out = []
    for source, target in sorted(deferred):
        kinds = {e.lazy for e in edges if (e.source, e.target) == (source, target)}
        if kinds != {True}:
            out.append(f"{source} -> {target}: " + ("no such import" if not kinds else "imported at module level"))
        elif source not in in_cycle or in_cycle[source] != in_cycle.get(target):
            out.append(f"{source} -> {target}: closes no loop")
    return out


def test_module_level_import_graph_of_the_core_is_acyclic() -> None:
    edges = import_edges()
    assert len({e.source for e in edges}) > 20, "the walk found too few core modules: is CORE right?"
    found = cycles([e for e in edges if not e.lazy])
    assert not found, "import cycles among the core's modules (module-level imports):\n" + "\n".join(
        describe(c, edges) for c in found)


def test_lazy_imports_close_no_loop_but_the_listed_deferred_ones() -> None:
    edges = import_edges()
    found = unlisted_loops(edges, DEFERRED)
    assert not found, ("import cycles among the core's modules, lazy imports included (break them structurally, "
                       "or list a genuinely deferred function-level import in DEFERRED with why):\n"
                       + "\n".join(describe(c, edges) for c in found))
    assert stale(edges, DEFERRED) == []


def write_package(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        path = root / "harness" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "harness"


def test_the_walk_sees_what_runs_at_import_time_and_nothing_else(tmp_path: Path) -> None:
    package = write_package(tmp_path, {
        "__init__.py": "",
        "a.py": ("from typing import TYPE_CHECKING\nfrom harness import b\ntry:\n    from .c import f\n"
                 "except ImportError:\n    import harness.d\nif TYPE_CHECKING:\n    from harness.e import T\n"
                 "else:\n    from harness import store\nclass K:\n    from harness.f import g\n"
                 "    def m(self):\n        from harness import e\n"),
        "b.py": "", "c.py": "", "d.py": "", "e.py": "", "f.py": "",
        "store/__init__.py": "from . import ops\nfrom .ops import x\nfrom .. import b\nfrom harness import Name\n",
        "store/ops.py": "",
        "tasks/fam.py": "from harness import a\n",
    })
    edges = {(e.source, e.target, e.lazy) for e in import_edges(package)}
    assert edges == {
        ("harness.a", "harness.b", False), ("harness.a", "harness.c", False), ("harness.a", "harness.d", False),
        ("harness.a", "harness.store", False), ("harness.a", "harness.f", False), ("harness.a", "harness.e", True),
        ("harness.store", "harness.store.ops", False), ("harness.store", "harness.b", False),
        ("harness.store", "harness", False),
    }


def test_cycles_and_unlisted_loops_are_found(tmp_path: Path) -> None:
    package = write_package(tmp_path, {
        "__init__.py": "",
        "a.py": "from harness import b\n", "b.py": "import harness.c\n", "c.py": "from .a import x\n",
        "d.py": "from harness import a\n",
        "e.py": "from harness import f\n", "f.py": "def later():\n    from harness import e\n",
        "g.py": "def later():\n    from harness import h\n", "h.py": "def later():\n    from harness import g\n",
    })
    edges = import_edges(package)
    assert cycles([e for e in edges if not e.lazy]) == [["harness.a", "harness.b", "harness.c"]]
    listed = {("harness.f", "harness.e"): "why", ("harness.g", "harness.h"): "why"}
    assert unlisted_loops(edges, {}) == [["harness.a", "harness.b", "harness.c"], ["harness.e", "harness.f"],
                                         ["harness.g", "harness.h"]]
    assert unlisted_loops(edges, listed) == [["harness.a", "harness.b", "harness.c"]]
    assert stale(edges, listed) == []
    assert stale(edges, {("harness.e", "harness.f"): "", ("harness.d", "harness.a"): "",
                         ("harness.a", "harness.d"): ""}) == [
        "harness.a -> harness.d: no such import", "harness.d -> harness.a: imported at module level",
        "harness.e -> harness.f: imported at module level"]
