"""The plan of ``harness demo``, collected from the families' manifests (this module names none).

Each registered family lists its demo runs (:class:`~harness.family.DemoRun`) and the fixture writer
they evaluate on; :func:`plan` returns the runs of one demo size, refusing a declaration that
cannot run (:func:`plan_problems`), and :func:`missing_note` says in one line what a run lacks here
and how to get it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.family import DemoRun, DemoSize, Family

__all__ = ["ARENA", "BLENDER", "STUB_MARK", "DemoPlanError", "PlannedRun", "demo_families", "invalid", "missing_note",
           "plan", "plan_problems", "registered"]

STUB_MARK = "stub judge"  # every stub judge's reply says so, and so does every judged run's name
FIXTURE_TOKEN = "{fixture}"
BLENDER = "blender"
ARENA = "arena"


class DemoPlanError(ValueError):
    """A family's demo declaration cannot run (a bad size, a stub judge that does not say so, ...)."""


@dataclass(frozen=True, slots=True)
class PlannedRun:
    family: str
    run: DemoRun
    size: DemoSize

    def options(self) -> dict[str, Any]:
        merged = {**self.run.options, **(self.run.full_options if self.size == "full" else {})}
        where = f"fixtures/{self.family}"  # relative to the media folder the runs execute in
        return {k: v.replace(FIXTURE_TOKEN, where) if isinstance(v, str) else v for k, v in merged.items()}

    def settings(self) -> dict[str, Any]:
        return {**self.run.settings, **(self.run.full_settings if self.size == "full" else {})}

    def limit(self) -> int | None:
        if self.size == "full" and self.run.full_limit is not None:
            return self.run.full_limit
        return self.run.limit

    def uses_fixture(self) -> bool:
        return any(isinstance(v, str) and FIXTURE_TOKEN in v
                   for v in {**self.run.options, **self.run.full_options}.values())

    def run_name(self) -> str | None:
        """Judged runs are named for their stub judge (the judge spec alone reads ``builtin:constant``)."""
        if self.run.judge is None:
            return None
        slug = "".join(c if c.isalnum() or c in "-." else "-" for c in self.run.model)
        return f"{self.run.task}__{slug}__stub-judge"

    @property
    def label(self) -> str:
        return f"{self.run.task} · {self.run.model}"


def plan_problems(fam: Family) -> list[str]:
    """What is wrong with a family's demo declaration, one line each (empty: it can run)."""
    out = []
    for run in fam.demo:
        what = f"family {fam.name}: demo run {run.task} · {run.model}"
        if run.size not in ("small", "full"):
            out.append(f"{what}: size must be small or full, not {run.size!r}")
        if run.judge is not None and STUB_MARK not in str(run.judge_settings.get("text", "")):
            out.append(f"{what}: its judge must be a stub whose reply text says {STUB_MARK!r}")
        if PlannedRun(fam.name, run, "full").uses_fixture() and not fam.fixture:
            out.append(f"{what}: uses {FIXTURE_TOKEN} but the family declares no fixture writer")
        if any(n != BLENDER for n in run.needs) and not run.install:
            out.append(f"{what}: needs {', '.join(run.needs)} but says nowhere how to install it (install=...)")
    return out


def registered() -> Mapping[str, Family]:
    from harness.families import families

    return families()


def demo_families(fams: Mapping[str, Family] | None = None) -> dict[str, set[str]]:
    """Family name -> the sizes it has demo runs at ("arena" included: it is always there)."""
    out: dict[str, set[str]] = {ARENA: {"small", "full"}}
    for name, fam in (fams if fams is not None else registered()).items():
        for run in fam.demo:
            out.setdefault(name, set()).update({"small", "full"} if run.size == "small" else {"full"})
    return out


def invalid(fams: Mapping[str, Family], only: list[str] | None = None) -> dict[str, str]:
    """Family name -> what is wrong with its demo declaration, for the families a demo would run."""
    out = {}
    for name, fam in fams.items():
        problems = plan_problems(fam) if not only or name in only else []
        if problems:
            out[name] = "; ".join(problems)
    return out


def plan(size: DemoSize, only: list[str] | None = None, fams: Mapping[str, Family] | None = None) -> list[PlannedRun]:
    """The runs of a demo of this size, family by family in name order; :class:`DemoPlanError` when a
    family's declaration cannot run (``harness demo`` leaves such a family out with one line instead:
    one broken plugin must not take the whole demo down)."""
    found = fams if fams is not None else registered()
    problems = invalid(found, only)
    if problems:
        raise DemoPlanError("; ".join(problems.values()))
    return [PlannedRun(name, run, size) for name, fam in sorted(found.items()) if not only or name in only
            for run in fam.demo if size == "full" or run.size == "small"]


def _module_missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (ImportError, ValueError):
        return True


def missing_note(run: DemoRun, blender: bool) -> str:
    """Empty when ``run`` can run here; else one line naming what is missing and how to get it."""
    from harness.blender import how_to_install

    parts = []
    modules = [n for n in run.needs if n != BLENDER and _module_missing(n)]
    if modules:
        parts.append(f"{', '.join(modules)} ({run.install})")
    if BLENDER in run.needs and not blender:
        parts.append(f"Blender (bpy; {how_to_install()})")
    return f"needs {' and '.join(parts)}" if parts else ""
