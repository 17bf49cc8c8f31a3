"""Task and model registries: decorators, entry points, lazy discovery, did-you-mean.

Tasks and backends come from families (entry-point group ``harness.families``, see
:mod:`harness.family`): each manifest names the modules whose ``@task`` / ``@model`` decorators
register on import. Single tasks and backends of other distributions can still register under the
``harness.tasks`` / ``harness.models`` groups, and the general backends (hf, openai, vllm, builtin,
operators) are modules of ``harness.models``. Nothing is imported until a name is asked for, so
``harness --help`` stays fast: resolving ``mytask`` first tries the module or family of that name,
and only an unknown name triggers discovery of everything.
"""

from __future__ import annotations

import difflib
import functools
import importlib
import inspect
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Literal

from harness.backend_settings import Setting, declared
from harness.errors import UserError
from harness.option_types import typed_options
from harness.task import Task

Kind = Literal["task", "model"]

# What a model backend is, declared once at registration (``@model(..., kind=...)``), never guessed
# from its name: the leaderboard ranks models only against models of the same kind (a k-means fit,
# a Crafter agent and an LLM share no scale a win rate could mean anything on). ``stub``: the
# built-in instant models, whose replies (and verdicts, as a judge) are canned, not measured.
ModelKind = Literal["llm", "method", "agent", "stub"]
MODEL_KINDS: tuple[ModelKind, ...] = ("llm", "method", "agent", "stub")


@dataclass(slots=True)
class Entry:
    name: str
    factory: Callable[..., Any]
    description: str
    kind: Kind
    family: str = ""
    operator: bool = False  # model combinators take other models as positional arguments
    # a backend's declared -M settings (besides the generation keys every backend takes), typed
    # (harness.backend_settings); strict: nothing else is accepted. Else only near-misses are refused.
    settings: Mapping[str, Setting] = field(default_factory=dict)
    strict: bool = False
    model_kind: ModelKind = "llm"  # models only: see MODEL_KINDS
    # tasks only: a *parametric* task answers every name ``NAME:VALUE``, its factory getting VALUE as
    # this keyword (``library:hellaswag`` -> ``library(name="hellaswag")``); "" for a plain task
    argument: str = ""
    values: Callable[[], list[str]] | None = None  # a parametric task's known values (``harness tasks NAME``)


class UnknownNameError(UserError, LookupError):
    """An unknown task or model name; the message lists the closest known names."""


_REGISTRY: dict[Kind, dict[str, Entry]] = {"task": {}, "model": {}}
_DISCOVERED: dict[Kind, bool] = {"task": False, "model": False}
# NAME:VALUE tasks built so far: looked up like registered ones, never listed (the base is listed, and
# what a process happened to use must not change what `harness tasks` shows)
_DERIVED: dict[str, Entry] = {}
_PACKAGES: dict[Kind, str] = {"task": "harness.tasks", "model": "harness.models"}


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def task(name: str, *, description: str = "", family: str = "", argument: str = "",
         values: Callable[[], list[str]] | None = None) -> Callable[[Any], Any]:
    """Register a task factory ``f(**options) -> Task``. Name, description and family are given
    here once: the :class:`~harness.task.Task` the factory returns gets them filled in. With
    ``argument``, the task is parametric: ``NAME:VALUE`` is a task of its own, built by the factory
    with ``argument=VALUE`` and named ``NAME:VALUE`` (a library of tasks behind one factory);
    ``values`` lists the values it knows (called only when someone asks)."""
    if ":" in name:
        raise ValueError(f"@task({name!r}): a task name has no ':' (it separates a parametric task's value)")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        desc = description or _first_line(fn.__doc__)

        @functools.wraps(fn)
        def factory(*args: Any, **kwargs: Any) -> Any:
            made = fn(*args, **typed_options(name, fn, kwargs))
            if isinstance(made, Task):  # anything else is the caller's to report (the runner refuses it)
                made.name = made.name or name
                made.description = made.description or desc
                made.family = made.family or family or _manifest_name(fn.__module__)
            return made

        _REGISTRY["task"][name] = Entry(name, factory, desc, "task", family, argument=argument, values=values)
        return fn

    return wrap


def _manifest_name(module: str) -> str:
    """The name of the family whose package holds ``module`` ("" outside every family)."""
    from harness.families import family_of_module

    fam = family_of_module(module)
    return fam.name if fam is not None else ""


def model(name: str, *, description: str = "", operator: bool = False,
          settings: Mapping[str, Setting] | Iterable[str] = (), strict: bool = False,
          kind: str = "llm") -> Callable[[Any], Any]:
    """Register a model backend factory ``f(path, **settings) -> Model`` (or an operator
    ``f(*models, **params) -> Model`` with ``operator=True``). ``settings`` declares the backend's
    ``-M`` keys (``{name: Setting(type, default, doc)}``, see :mod:`harness.backend_settings`; names
    alone are untyped): values are checked and coerced before the factory runs, and with
    ``strict=True`` any other key is refused, naming the closest known keys. Either way a key one typo
    away from a known one (``temprature``) is refused.
    ``kind`` is one of :data:`MODEL_KINDS` (an operator's is the one its models share, see
    :func:`harness.modelspec.spec_kind`); anything else is refused here, at import, not on a leaderboard later."""
    model_kind = check_kind(kind, f"@model({name!r})")

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        desc = description or _first_line(fn.__doc__)
        _REGISTRY["model"][name] = Entry(name, fn, desc, "model", operator=operator, settings=declared(settings),
                                         strict=strict, model_kind=model_kind)
        return fn

    return wrap


def check_kind(kind: object, where: str) -> ModelKind:
    """``kind`` as a :data:`ModelKind`, or a ValueError naming ``where`` and the known kinds."""
    for known in MODEL_KINDS:
        if kind == known:
            return known
    raise ValueError(f"{where}: unknown model kind {kind!r}; one of {', '.join(MODEL_KINDS)}")


def _try_import(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as exc:
        # only swallow "that module does not exist", never a broken import inside it
        if exc.name and module.startswith(exc.name) or exc.name == module:
            return False
        raise
    return True


def _family_modules(kind: Kind, name: str | None = None) -> list[str]:
    """Modules that register a kind's entries: every family's, or (with ``name``) those of the
    families the name plausibly belongs to (``alignment_refusal`` -> family ``alignment``)."""
    from harness import families

    out: list[str] = []
    for fam in families.families().values():
        if name is None or name == fam.name or name.startswith(fam.name + "_") or name.startswith(fam.name + "-"):
            out.extend(fam.tasks if kind == "task" else fam.backends)
    return out


def discover(kind: Kind) -> None:
    """Import every family's modules of a kind, the general backends and single entry points (once)."""
    if _DISCOVERED[kind]:
        return
    for module in _family_modules(kind):
        importlib.import_module(module)
    if kind == "model":
        pkg = importlib.import_module(_PACKAGES[kind])
        for info in pkgutil.iter_modules(pkg.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{_PACKAGES[kind]}.{info.name}")
    group = "harness.tasks" if kind == "task" else "harness.models"
    for ep in entry_points(group=group):
        if ep.name in _REGISTRY[kind]:
            continue
        obj = ep.load()
        if callable(obj) and ep.name not in _REGISTRY[kind]:
            # an entry point may name a module (which registers itself) or a factory
            if not isinstance(obj, type(importlib)):
                _REGISTRY[kind][ep.name] = Entry(ep.name, obj, _first_line(obj.__doc__), kind)
    _DISCOVERED[kind] = True


def lookup(kind: Kind, name: str) -> Entry:
    reg = _REGISTRY[kind]
    if name in reg:
        return reg[name]
    if kind == "task" and ":" in name:
        return _DERIVED.get(name) or _parametric(name)
    # fast paths: a general backend module of that name (harness.models.openai), then the modules of
    # the family the name belongs to; only an unknown name pays for importing everything
    if kind == "model" and name.isidentifier() and _try_import(f"{_PACKAGES[kind]}.{name}") and name in reg:
        return reg[name]
    for module in _family_modules(kind, name):
        importlib.import_module(module)
        if name in reg:
            return reg[name]
    discover(kind)
    if name in reg:
        return reg[name]
    close = difflib.get_close_matches(name, list(reg), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise UnknownNameError(f"unknown {kind} {name!r}{hint} (see `harness {kind}s`)")


def _parametric(name: str) -> Entry:
    """``BASE:VALUE`` as a task of its own: the parametric task BASE's factory with its argument bound."""
    base_name, _, value = name.partition(":")
    base = lookup("task", base_name) if base_name else None
    if base is None or not base.argument:
        raise UnknownNameError(f"unknown task {name!r}: {base_name!r} is not a task that takes a ':' value "
                               "(see `harness tasks`)")
    if not value:
        raise UnknownNameError(f"task {name!r}: name the {base.argument} after the ':' "
                               f"(see `harness tasks {base_name}`)")
    bound = base.factory

    @functools.wraps(bound)
    def factory(*args: Any, **kwargs: Any) -> Any:
        made = bound(*args, **{base.argument: value}, **kwargs)
        if isinstance(made, Task) and made.name in ("", base_name):
            made.name = name
        return made

    # the bound argument is no option of the derived task (its -T listing and check leave it out)
    factory.__signature__ = _without(inspect.signature(bound), base.argument)  # type: ignore[attr-defined]
    entry = Entry(name, factory, base.description, "task", base.family)
    _DERIVED[name] = entry
    return entry


def _without(sig: inspect.Signature, parameter: str) -> inspect.Signature:
    return sig.replace(parameters=[p for p in sig.parameters.values() if p.name != parameter])


def entries(kind: Kind) -> list[Entry]:
    discover(kind)
    return sorted(_REGISTRY[kind].values(), key=lambda e: e.name)
