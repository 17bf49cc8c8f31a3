"""``harness demo``: a showcase database built offline, one line per step.

What runs comes from the families: each registered family's manifest lists its demo runs
(:class:`~harness.family.DemoRun`: task, model, options, settings, size, needs) and the fixture
writer they evaluate on; this module collects them and names no family itself. Tasks that need a
judge get a *stub judge* (``builtin:constant`` replying one fixed verdict in the judge's format,
with the words "stub judge" in it), and such runs are named ``...__stub-judge``. A run whose
optional components (a package, Blender) are missing is skipped with one line saying how to get
them. The arena gets its text demo tasks and a seeded vote set; its 3D battles are the families'
Blender renders (runs marked ``renders_3d``), or, without Blender, left out with one line.

Everything a run writes or reads lives under ``--dir``: the database at ``DIR/demo.db`` and the
*media folder* ``DIR/media`` (``fixtures/``, ``artifacts/`` = ``$HARNESS_ARTIFACTS``, ``cache/`` =
``$HARNESS_CACHE_DIR``). The runs execute in the media folder with paths stored relative to it
(:mod:`harness.stored_paths`), so the leaderboard serving that one folder shows every file, and
no page holds the machine's absolute paths. Runs go through the ordinary
:class:`~harness.runner.Runner`: rerunning the demo resumes, and ``harness runs`` lists it.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from harness.demo_plan import ARENA, DemoPlanError, PlannedRun, invalid, missing_note, plan, registered
from harness.family import DemoSize, Family

__all__ = ["DemoPlanError", "DemoReport", "build_demo"]

MEDIA = "media"  # DIR/media: the media root the demo's leaderboard serves (the database stays outside it)
Write = Callable[[str], None]


@dataclass(slots=True)
class DemoResult:
    kind: str  # "run", "fixture", "arena" or "invalid" (a family whose declaration cannot run)
    family: str
    what: str  # "task · model", "fixture", ...
    status: str  # "ok", "skipped", "failed"
    note: str = ""
    seconds: float = 0.0
    run_name: str = ""
    votes: int = 0  # the arena step's seeded votes


@dataclass(slots=True)
class DemoReport:
    db_url: str
    folder: Path
    media: Path
    results: list[DemoResult] = field(default_factory=list)
    arena_votes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> list[DemoResult]:
        """The runs that finished (fixtures and the arena's step are not runs)."""
        return [r for r in self.results if r.status == "ok" and r.kind == "run"]


# ---------------------------------------------------------------- where the runs execute


@contextlib.contextmanager
def demo_environment(media: Path, bpy_python: str | None) -> Iterator[None]:
    """Run in ``media`` with every location the runs use inside it (restored afterwards)."""
    settings = {
        "HARNESS_ARTIFACTS": "artifacts", "HARNESS_CACHE_DIR": "cache", "HARNESS_STORE_PATHS_UNDER": str(media),
        # offline by definition, and no progress bars between the step lines
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1",
    }
    if bpy_python:  # the bpy venv is found through the cache folder the demo moves: pin it first
        settings["HARNESS_BPY_PYTHON"] = bpy_python
    saved = {k: os.environ.get(k) for k in settings}
    cwd = os.getcwd()
    os.environ.update(settings)
    os.chdir(media)
    try:
        yield
    finally:
        os.chdir(cwd)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def output_to(log: Path) -> Iterator[None]:
    """What a step prints goes to ``log``, so nothing lands between the step lines: the process's
    stdout and stderr file descriptors (Blender, native libraries) and Python's ``sys.stdout`` /
    ``sys.stderr`` (which need not be those descriptors); an empty log is removed afterwards."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    log.parent.mkdir(parents=True, exist_ok=True)
    saved = [os.dup(1), os.dup(2)]
    try:
        # two appending handles on one file: raw writes and Python's buffered ones both land in order
        with log.open("ab", buffering=0) as raw, log.open("a", buffering=1, encoding="utf-8", errors="replace") as text:
            os.dup2(raw.fileno(), 1)
            os.dup2(raw.fileno(), 2)
            try:
                with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                    yield
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
    finally:
        for fd in saved:
            os.close(fd)
        if log.exists() and log.stat().st_size == 0:
            log.unlink()


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# ---------------------------------------------------------------- the steps


def write_fixture(fam: Family, media: Path) -> str:
    """The family's fixture under ``media/fixtures/<family>`` (written into a temporary folder and
    renamed, so an interrupted demo never leaves half a fixture that a rerun would take as done)."""
    from harness.families import resolve

    target = media / "fixtures" / fam.name
    if target.is_dir():
        return "there already"
    import shutil

    writer = resolve(fam.fixture or "")
    tmp = target.with_name(f".{fam.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        writer(tmp)
        tmp.rename(target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ""


def run_one(item: PlannedRun, sessions: Any, db_url: str) -> tuple[str, str]:
    """(run name, note) of one demo run through the ordinary runner."""
    from harness.runner import EvalConfig, Runner

    cfg = EvalConfig(task=item.run.task, model=item.run.model, task_options=item.options(),
                     model_settings=item.settings(), judge=item.run.judge,
                     judge_settings=dict(item.run.judge_settings), limit=item.limit(), db_url=db_url,
                     run_name=item.run_name(), progress=False)
    summary = Runner(cfg, session_factory=sessions).run()
    note = f"{summary.n_errors} sample error{'s' if summary.n_errors != 1 else ''}" if summary.n_errors else ""
    return summary.run_name, note


def seed_arena(sessions: Any, size: DemoSize) -> int:
    """The arena's text demo task and a seeded vote set; returns the number of votes written (0 when
    they were there already). Its 3D battles come from the families' renders, not from here."""
    from harness.leaderboard.arena import demo as arena_demo

    arena_demo.seed_text(sessions)
    return int(arena_demo.seed_votes(sessions, n_votes=120 if size == "small" else 600, tasks=("arena-demo",)))


Kind = Literal["invalid", "fixture", "run", "arena"]
WHAT = {"invalid": "its demo declaration", "fixture": "fixture", "arena": "demo tasks and votes"}


@dataclass(frozen=True, slots=True)
class _Step:
    kind: Kind
    family: str
    item: PlannedRun | None = None
    note: str = ""  # why an invalid family is left out

    @property
    def what(self) -> str:
        return self.item.label if self.item else WHAT[self.kind]


def _absolute_db_url(url: str) -> str:
    """A relative SQLite path made absolute: the runs execute in the media folder."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.drivername.startswith("sqlite") and parsed.database and parsed.database != ":memory:" \
            and not parsed.database.startswith("file:") and not Path(parsed.database).is_absolute():
        return parsed.set(database=str(Path(parsed.database).resolve())).render_as_string(hide_password=False)
    return url


def build_demo(db_url: str, folder: Path, size: DemoSize = "full", *, only: list[str] | None = None,
               write: Write | None = None, fams: Mapping[str, Family] | None = None) -> DemoReport:
    """Build the demo database at ``db_url`` with its media under ``folder/media``; ``only``: these
    families. Each step is one line ``[i/N] family what ... outcome``: its head is written as the
    step starts and the rest when it ends (``write`` gets raw text; default: stderr)."""
    import logging

    from harness.blender import blender_available, bpy_python_path
    from harness.store.db import open_db

    out = write or _stderr
    found = dict(fams if fams is not None else registered())
    broken = invalid(found, only)
    runs = plan(size, only, {name: fam for name, fam in found.items() if name not in broken})
    root = folder.resolve()
    media = root / MEDIA
    (media / "fixtures").mkdir(parents=True, exist_ok=True)
    db_url = _absolute_db_url(db_url)
    # decided before the environment moves the cache folder (the bpy venv is found through it)
    blender = blender_available()
    # absolute but not resolved: a venv's python is a symlink to an interpreter without bpy
    bpy = os.path.abspath(bpy_python_path()) if blender else None
    notes = {id(item): missing_note(item.run, blender) for item in runs}

    steps = [_Step("invalid", name, note=why) for name, why in sorted(broken.items())]
    fixtured: set[str] = set()
    for item in runs:
        if item.uses_fixture() and not notes[id(item)] and item.family not in fixtured:
            fixtured.add(item.family)
            steps.append(_Step("fixture", item.family))
        steps.append(_Step("run", item.family, item))
    with_arena = not only or ARENA in only
    if with_arena:
        steps.append(_Step("arena", ARENA))

    logging.getLogger("harness").setLevel(logging.WARNING)
    sessions = open_db(db_url)
    report = DemoReport(db_url, root, media)
    width = max([len(s.family) for s in steps] + [6])
    start = time.perf_counter()
    with demo_environment(media, bpy):
        for i, step in enumerate(steps, 1):
            head = f"[{i:>{len(str(len(steps)))}}/{len(steps)}] {step.family:<{width}} {step.what} ... "
            out(head)
            result = _run_step(step, i, found, media, root, sessions, db_url, size, notes)
            report.results.append(result)
            out(_outcome(result) + "\n")
    if with_arena:
        left_out = _why_no_3d(runs, report.results, notes, blender)
        if left_out:
            out(f"{'':>{2 * len(str(len(steps))) + 3}} {ARENA:<{width}} 3D battles left out of this demo: {left_out}\n")
        report.arena_votes = sum(r.votes for r in report.results)
    report.seconds = time.perf_counter() - start
    return report


def _why_no_3d(runs: list[PlannedRun], results: list[DemoResult], notes: dict[int, str], blender: bool) -> str:
    """Empty when a run with 3D renders finished (the arena's 3D battles are its renders); else why not.
    The arena's synthetic 3D task (flat grey PNGs) is never used: nobody can judge it."""
    three_d = {r.label for r in runs if r.run.renders_3d}
    if any(r.kind == "run" and r.status == "ok" and r.what in three_d for r in results):
        return ""
    if not blender:
        from harness.blender import how_to_install

        return f"they need Blender (bpy; {how_to_install()})"
    if not three_d:
        return "no run in this demo renders 3D objects"
    return "; ".join(sorted({notes[id(r)] for r in runs if r.run.renders_3d and notes[id(r)]})) or \
        "its runs with 3D renders did not finish"


def _stderr(text: str) -> None:
    sys.stderr.write(text)
    sys.stderr.flush()


def _outcome(result: DemoResult) -> str:
    if result.status == "ok":
        return f"{result.seconds:.1f} s" + (f"; {result.note}" if result.note else "")
    return f"{result.status}: {result.note}" + (f" ({result.seconds:.1f} s)" if result.status == "failed" else "")


def _run_step(step: _Step, index: int, fams: Mapping[str, Family], media: Path, root: Path, sessions: Any,
              db_url: str, size: DemoSize, notes: dict[int, str]) -> DemoResult:
    result = DemoResult(step.kind, step.family, step.what, "ok")
    if step.kind == "invalid":
        result.status, result.note = "failed", step.note
        return result
    if step.item is not None and notes[id(step.item)]:
        result.status, result.note = "skipped", notes[id(step.item)]
        return result
    if step.item is not None and step.item.uses_fixture() and not (media / "fixtures" / step.family).is_dir():
        result.status, result.note = "skipped", "its fixture was not written (see the fixture step above)"
        return result
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in f"{step.family}-{step.what}")
    log = root / "logs" / f"{index:02d}-{name}.log"
    t0 = time.perf_counter()
    try:
        with output_to(log), warnings.catch_warnings():
            # numerical libraries' RuntimeWarnings (overflow in exp, ...) belong in the step's log at most
            warnings.simplefilter("ignore", RuntimeWarning)
            if step.kind == "fixture":
                result.note = write_fixture(fams[step.family], media)
            elif step.kind == "arena":
                result.votes = seed_arena(sessions, size)
                result.note = f"{result.votes} seeded votes" if result.votes else "the votes seeded before"
            else:
                assert step.item is not None
                result.run_name, result.note = run_one(step.item, sessions, db_url)
    except Exception as exc:  # one family's missing data or component never stops the demo
        result.status, result.note = "failed", _one_line(exc)
        if log.exists():
            result.note += f" (its output: {log.relative_to(root)})"
    result.seconds = time.perf_counter() - t0
    return result
