"""Reading the installed families' manifests (entry-point group ``harness.families``).

The only door from the core and the leaderboard into a family: everything here works on the
import strings a :class:`~harness.family.Family` names, imported when first needed. Loading the
manifests themselves imports only each family's light ``family`` module.
"""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable, Iterator
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from harness.family import Family, LiveKind

GROUP = "harness.families"
CHAT = "chat"  # the live arena's own kind: any pool model answering as text
_KIND_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,39}")  # a live kind's name is a form value and a task name
log = logging.getLogger(__name__)


class FamilyError(RuntimeError):
    """A family's manifest or one of the modules it names could not be loaded."""


@cache
def families() -> dict[str, Family]:
    """Every installed family by name (a broken manifest is logged and left out, never fatal:
    one bad plugin must not take ``harness eval`` down with it)."""
    found: dict[str, Family] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            manifest = ep.load()
        except Exception as exc:
            log.warning("family %s (%s) not loaded: %s", ep.name, ep.value, exc)
            continue
        if not isinstance(manifest, Family):
            log.warning("entry point %s = %s is not a harness.family.Family", ep.name, ep.value)
            continue
        if not manifest.package:
            object.__setattr__(manifest, "package", ep.value.split(":", 1)[0].rsplit(".", 1)[0])
        found.setdefault(manifest.name, manifest)
    return found


def family(name: str) -> Family | None:
    return families().get(name)


def modules(kind: str) -> Iterator[str]:
    """Module names of every family's ``tasks`` or ``backends``."""
    for fam in families().values():
        yield from (fam.tasks if kind == "task" else fam.backends)


def resolve(target: str) -> Any:
    """``"pkg.module:attr"`` -> the attribute; ``"pkg.module"`` -> the module."""
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split(".") if attr else []:
        obj = getattr(obj, part)
    return obj


def family_of_module(module: str) -> Family | None:
    """The family whose package contains ``module`` (e.g. the module a task factory lives in)."""
    best: Family | None = None
    for fam in families().values():
        if fam.package and (module == fam.package or module.startswith(fam.package + ".")):
            if best is None or len(fam.package) > len(best.package):
                best = fam
    return best


def chart_hook(task_module: str) -> Callable[..., Any] | None:
    fam = family_of_module(task_module)
    if fam is None or not fam.charts:
        return None
    hook = resolve(fam.charts)
    return hook if callable(hook) else None


@cache
def public_views() -> tuple[Any, ...]:
    """The hide/redact rules of every family that declares one (each a module or object with
    ``is_hidden(metadata)``, ``redact_details(details)`` and ``redact_row(row)``)."""
    out = []
    for fam in families().values():
        if fam.public_view:
            try:
                out.append(resolve(fam.public_view))
            except Exception as exc:  # a rule that cannot load hides nothing: say so loudly
                log.error("family %s: public view %s not loaded: %s", fam.name, fam.public_view, exc)
    return tuple(out)


def is_hidden(metadata: dict[str, Any] | None) -> bool:
    return any(view.is_hidden(metadata) for view in public_views())


def redact_details(details: dict[str, Any]) -> dict[str, Any]:
    for view in public_views():
        details = view.redact_details(details)
    return details


def redact_row(row: dict[str, Any]) -> dict[str, Any]:
    for view in public_views():
        row = view.redact_row(row)
    return row


# ---------------------------------------------------------------- the arena's view of a family


def arena_display(name: str) -> str | None:
    """How a person judges the tasks of the family ``name`` in the arena (its manifest's
    ``arena_display``); None for no such family or none declared."""
    fam = family(name)
    return fam.arena_display if fam is not None else None


def arena_category(name: str) -> str | None:
    """The ``kind`` category the family ``name`` gives its arena battles; None when it declares none."""
    fam = family(name)
    return fam.arena_category if fam is not None else None


@cache
def live_kinds() -> dict[str, tuple[Family, LiveKind]]:
    """Every live-arena kind a family adds, by name, with the family that adds it. ``chat`` is the
    arena's own; a name that is taken, or not a short lower-case word, is logged and left out (it
    is a form value, a CLI option and part of a stored task name)."""
    out: dict[str, tuple[Family, LiveKind]] = {}
    for fam in families().values():
        for kind in fam.live:
            if kind.name == CHAT or kind.name in out or not _KIND_NAME.fullmatch(kind.name):
                log.warning("family %s: live kind %r left out (taken, or not [a-z0-9_-]+)", fam.name, kind.name)
                continue
            out[kind.name] = (fam, kind)
    return out


def live_kind(name: str) -> LiveKind | None:
    found = live_kinds().get(name)
    return found[1] if found is not None else None
