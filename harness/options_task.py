"""What a task accepts and measures, read from its registration: the ``-T`` options (the factory's
signature, with each option's words from its docstring), the metrics it declares, where its data
comes from. ``harness tasks TASK`` prints it, and ``harness eval`` checks ``-T`` keys against it
before the run starts, so a typo is one line naming the closest options, not Python's
"unexpected keyword argument".
"""

from __future__ import annotations

import difflib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backend_settings import describe
from harness.errors import UserError
from harness.option_types import hints_of

__all__ = ["OptionSpec", "check_task_options", "describe_task", "task_options"]


@dataclass(frozen=True, slots=True)
class OptionSpec:
    name: str
    type: str  # as annotated ("int", "str | None"); "" when not annotated
    default: Any  # inspect.Parameter.empty: required
    doc: str

    @property
    def required(self) -> bool:
        return self.default is inspect.Parameter.empty

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "required": self.required,
                "default": None if self.required else _jsonable(self.default), "doc": self.doc}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def _annotation(param: inspect.Parameter) -> str:
    ann = param.annotation
    if ann is inspect.Parameter.empty:
        return ""
    return ann if isinstance(ann, str) else getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def _option_docs(doc: str, names: list[str]) -> dict[str, str]:
    """Each option's words in a free-form docstring: ````name``: text`` (up to the next ``;`` or
    ````other``:``), ``name: text`` lines (Google style) or ``-T name=...: text``."""
    text = " ".join(doc.split())
    out: dict[str, str] = {}
    for name in names:
        pats = (rf"``{re.escape(name)}``\s*[:=]\s*(.+?)(?=;\s*``\w+``|\s``\w+``\s*:|$)",
                rf"(?:^|\s){re.escape(name)}\s*(?:\([^)]*\))?\s*:\s+(.+?)(?=\s\w+\s*(?:\([^)]*\))?:\s|$)",
                rf"-T\s+{re.escape(name)}=\S*\s*:?\s*(.+?)(?=\s-T\s|;|$)")
        for pat in pats:
            m = re.search(pat, text)
            if m:
                words = m.group(1).strip().rstrip(";,")
                out[name] = words if len(words) <= 200 else words[:197].rstrip() + "..."
                break
    return out


def task_options(factory: Any, description: str = "") -> tuple[list[OptionSpec], bool]:
    """The factory's options and whether it also takes any other keyword (``**kwargs``)."""
    fn = inspect.unwrap(factory)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [], True
    params = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    open_ended = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    docs = _option_docs(inspect.getdoc(fn) or "", [p.name for p in params])
    # a registration's description may list choices: "(-T stream=stationary|shift|sinusoid T= ...)"
    described = " ".join(description.split())
    for p in params:
        m = re.search(rf"-T[^()]*?\b{re.escape(p.name)}=([^\s=)]+)", described)
        if m and p.name not in docs:
            docs[p.name] = "one of " + ", ".join(m.group(1).split("|"))
    hints = hints_of(fn)

    def shown(p: inspect.Parameter) -> str:
        # a bounded type reads as its meaning ("an integer >= 1"), not as pydantic's spelling of it
        written = _annotation(p)
        return describe(hints[p.name]) if p.name in hints and "Annotated[" in repr(hints[p.name]) else written

    return [OptionSpec(p.name, shown(p), p.default, docs.get(p.name, "")) for p in params], open_ended


def check_task_options(task_name: str, options: dict[str, Any]) -> None:
    """Refuse ``-T`` keys the task's factory does not take, naming the closest ones."""
    from harness.registry import lookup

    specs, open_ended = task_options(lookup("task", task_name).factory)
    if open_ended:
        return
    known = [s.name for s in specs]
    for key in options:
        if key in known:
            continue
        close = difflib.get_close_matches(key, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        listing = f" (options: {', '.join(known)})" if known else " (it takes no options)"
        raise UserError(f"task {task_name}: unknown option -T {key}{hint}{listing}; see `harness tasks {task_name}`")
    missing = [s.name for s in specs if s.required and s.name not in options]
    if missing:
        raise UserError(f"task {task_name} needs " + ", ".join(f"-T {m}=..." for m in missing))


def _package_dir(module: str) -> Path | None:
    from harness.families import family_of_module

    fam = family_of_module(module)
    if fam is None or not fam.package:
        return None
    import importlib.util

    spec = importlib.util.find_spec(fam.package)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def _first_text_line(path: Path) -> str:
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip().lstrip("#").strip()
        if line and not set(line) <= set("=-*"):
            return line
    return ""


def data_provenance(module: str, doc: str) -> tuple[str, str]:
    """(data source, licence): ``Data:``/``Licence:`` lines of the factory's docstring, else the
    family's ``data/PROVENANCE.md`` (its title and ``Source``/``License`` lines) and ``data/LICENSE*``."""
    source = licence = ""
    for line in doc.splitlines():
        m = re.match(r"\s*(Data|Source|Licen[cs]e)\s*:\s*(.+)", line)
        if m:
            if m.group(1).startswith("Licen"):
                licence = licence or m.group(2).strip()
            else:
                source = source or m.group(2).strip()
    root = _package_dir(module)
    data = root / "data" if root else None
    if data is not None and data.is_dir():
        prov = data / "PROVENANCE.md"
        if prov.is_file():
            text = prov.read_text(errors="replace")
            repo = re.search(r"Source repository:\s*(\S+)", text)
            source = source or (_first_text_line(prov) + (f" ({repo.group(1)})" if repo else ""))
            lic = re.search(r"Licen[cs]e:\s*(.+)", text)
            # the licence's name, not the sentences after it ("Full text copied alongside ...")
            licence = licence or (lic.group(1).replace("*", "").strip().split(". ")[0] if lic else "")
        if not licence:
            found = sorted({_first_text_line(p) for p in data.glob("LICENSE*") if p.is_file()} - {""})
            licence = "; ".join(found)
    return source, licence


def describe_task(name: str) -> dict[str, Any]:
    """Everything ``harness tasks NAME`` shows, as a JSON-able dict. The metrics come from building
    the task with its defaults; a task that cannot be built so (it needs an option, a data set or
    a package that is missing) says why instead."""
    from harness.registry import lookup

    entry = lookup("task", name)
    fn = inspect.unwrap(entry.factory)
    doc = inspect.getdoc(fn) or ""
    specs, open_ended = task_options(entry.factory, entry.description)
    source, licence = data_provenance(fn.__module__, doc)
    info: dict[str, Any] = {
        "name": entry.name, "family": entry.family, "description": entry.description, "doc": doc,
        # a parametric task's argument is the name's value, not a -T option
        "options": [s.to_dict() for s in specs if s.name != entry.argument], "other_options": open_ended,
        "data_source": source, "licence": licence, "metrics": [], "primary_metric": None, "modalities": [],
        "needs_judge": None, "metrics_error": None, "argument": entry.argument, "values": None,
    }
    if entry.argument:  # a parametric task is built per value: NAME:VALUE has the metrics
        info["metrics_error"] = (f"each {name}:{entry.argument.upper()} task declares its own "
                                 f"(see `harness tasks {name}:...`)")
        if entry.values is not None:
            try:
                info["values"] = list(entry.values())
            except Exception as exc:  # e.g. the library behind it is not installed: a line
                info["values_error"] = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        return info
    if any(s.required for s in specs):
        info["metrics_error"] = "the task needs options to be built: " + ", ".join(s.name for s in specs if s.required)
        return info
    try:
        made = entry.factory()
    except Exception as exc:  # a missing optional package or data set: a line, not a traceback
        why = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        info["metrics_error"] = f"could not build the task with its defaults: {why}"
        return info
    info["metrics"] = [{"name": k, **m.to_dict()} for k, m in sorted(getattr(made, "metrics", {}).items())]
    info["primary_metric"] = getattr(made, "primary_metric", None)
    info["modalities"] = sorted(getattr(made, "modalities", ()))
    info["needs_judge"] = bool(getattr(made, "needs_judge", False))
    info["default_judge"] = getattr(made, "default_judge", None)
    return info
