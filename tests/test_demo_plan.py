"""The demo's plan comes from the families' manifests: what the registered families declare, what the
core does with any family's declaration (a family made here, reached only through its manifest), one
line per step with its time, and a skip that says how to get what is missing."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from harness.demo import build_demo
from harness.demo_plan import STUB_MARK, DemoPlanError, demo_families, missing_note, plan, plan_problems
from harness.family import DemoRun, Family

# each family's seed method (the method of the paper the family reconstructs), run in the small demo
SEED_METHODS = {
    "agents": "vla:3a", "causal": "pncm", "conformal": "ocp:pnorm", "decision": "twostep:bayes",
    "longshot": "longshot-agent:default", "methods": "htaf:mlp", "nvs": "gs:neural_color", "puzzles": "anca",
    "reid": "reid:vital", "reliability": "fec(builtin:number)", "selection": "datasel:gfv", "spa3d": "spa3d:fit",
    "transport": "omt:auto",
}
STEP = re.compile(r"^\[ *(\d+)/(\d+)\] (\S+) +(.+?) \.\.\. (.+)$")


def test_every_registered_family_declares_a_runnable_small_demo() -> None:
    from harness.families import families

    registered = families()
    assert all(not plan_problems(fam) for fam in registered.values())
    small, full = plan("small"), plan("full")
    assert {r.family for r in small} == set(registered)  # every family is in the small demo
    assert len(full) > len(small)
    for family, model in SEED_METHODS.items():
        assert any(r.family == family and r.run.model == model for r in small), (family, model)
    assert any(r.family == "nvs" and r.run.model == "ff:consistency" for r in small)  # nvs's second seed idea
    assert any(r.family == "methods" and r.run.model == "hartigan:batched" for r in small)
    # a family that renders with Blender says so: it runs where bpy is, and is skipped (saying how) elsewhere
    for r in small:
        if r.family in ("code3d", "reid"):
            assert "blender" in r.run.needs
    assert any(r.run.renders_3d for r in small)
    # every judged run has a stub judge that says so
    judged = [r for r in plan("full") if r.run.judge]
    assert judged and all(STUB_MARK in r.run.judge_settings["text"] for r in judged)


def test_the_plan_is_whatever_families_are_given() -> None:
    probe = Family(name="probe", demo=(DemoRun("gsm8k", "builtin:echo", limit=2),
                                       DemoRun("gsm8k", "builtin:number", size="full", limit=2, full_limit=5)))
    fams = {"probe": probe}
    assert [r.label for r in plan("small", fams=fams)] == ["gsm8k · builtin:echo"]
    full = plan("full", fams=fams)
    assert [r.label for r in full] == ["gsm8k · builtin:echo", "gsm8k · builtin:number"]
    assert full[1].limit() == 5 and plan("small", fams=fams)[0].limit() == 2
    assert demo_families(fams) == {"arena": {"small", "full"}, "probe": {"small", "full"}}
    assert plan("small", only=["other"], fams=fams) == []


@pytest.mark.parametrize("run, problem", [
    (DemoRun("t", "m", judge="builtin:constant", judge_settings={"text": "PASS"}), "stub whose reply text says"),
    (DemoRun("t", "m", options={"path": "{fixture}/x.jsonl"}), "declares no fixture writer"),
    (DemoRun("t", "m", needs=("somemodule",)), "how to install it"),
    (DemoRun("t", "m", size="medium"), "size must be small or full"),  # type: ignore[arg-type]
])
def test_a_declaration_that_cannot_run_is_refused_in_one_line(run: DemoRun, problem: str) -> None:
    fam = Family(name="probe", demo=(run,))
    assert any(problem in p for p in plan_problems(fam))
    with pytest.raises(DemoPlanError, match=re.escape(problem)):
        plan("full", fams={"probe": fam})


def test_a_skip_says_how_to_get_what_is_missing() -> None:
    from harness.blender import how_to_install

    run = DemoRun("t", "m", needs=("no_such_module_for_the_demo", "blender"),
                  install="pip install no-such-module-for-the-demo")
    note = missing_note(run, blender=False)
    assert note.startswith("needs no_such_module_for_the_demo (pip install no-such-module-for-the-demo)")
    assert f"Blender (bpy; {how_to_install()})" in note
    assert missing_note(DemoRun("t", "m", needs=("json",), install="-"), blender=False) == ""


@pytest.fixture
def probe_writers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A family package of this test's own: fixture writers that talk (stdout, stderr, a raw write to
    fd 2, as Blender or a native library would) and one that fails."""
    pkg = tmp_path / "site" / "demo_probe_family"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "fixture.py").write_text(
        "import os, sys\n"
        "from harness.tasks.qa.fixture import write as write_qa\n"
        "def write(folder):\n"
        "    print('chatty fixture writer')\n"
        "    print('a warning', file=sys.stderr)\n"
        "    os.write(2, b'native noise\\n')\n"
        "    write_qa(folder)\n"
        "def broken(folder):\n"
        "    raise RuntimeError('no data today')\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    sys.modules.pop("demo_probe_family", None)
    return "demo_probe_family.fixture"


def test_a_demo_of_given_families_one_line_per_step(probe_writers: str, tmp_path: Path) -> None:
    fams = {
        "probe": Family(name="probe", fixture=f"{probe_writers}:write", demo=(
            DemoRun("qa", "builtin:echo", options={"path": "{fixture}/qa.jsonl"}),
            DemoRun("qa", "builtin:constant", options={"path": "{fixture}/qa.jsonl"}, settings={"text": "Paris"}),
            DemoRun("qa", "builtin:number", needs=("no_such_module_for_the_demo",), install="pip install nothing"),
        )),
        "sad": Family(name="sad", fixture=f"{probe_writers}:broken",
                      demo=(DemoRun("qa", "builtin:echo", options={"path": "{fixture}/qa.jsonl"}),)),
        "wrong": Family(name="wrong", demo=(DemoRun("qa", "builtin:echo", judge="builtin:constant",
                                                    judge_settings={"text": "PASS"}),)),
    }
    written: list[str] = []
    cwd, artifacts = os.getcwd(), os.environ.get("HARNESS_ARTIFACTS")
    folder = tmp_path / "demo"
    report = build_demo(f"sqlite:///{tmp_path / 'demo.db'}", folder, "small", only=["probe", "sad", "wrong"],
                        write=written.append, fams=fams)
    assert os.getcwd() == cwd and os.environ.get("HARNESS_ARTIFACTS") == artifacts  # the environment is restored
    lines = "".join(written).splitlines()
    steps = [STEP.match(ln) for ln in lines]
    assert all(steps), lines  # nothing between the step lines: the writers' output went to the step's log
    got = [(m.group(3), m.group(4), m.group(5)) for m in steps if m]
    assert [int(m.group(1)) for m in steps if m] == list(range(1, 8)) and {m.group(2) for m in steps if m} == {"7"}
    assert got[0][:2] == ("wrong", "its demo declaration") and got[0][2].startswith("failed: family wrong")
    assert got[1][:2] == ("probe", "fixture") and re.fullmatch(r"\d+\.\d s", got[1][2])
    assert got[2][:2] == ("probe", "qa · builtin:echo") and re.fullmatch(r"\d+\.\d s", got[2][2])
    assert got[3][1] == "qa · builtin:constant" and re.fullmatch(r"\d+\.\d s", got[3][2])
    assert got[4][2] == "skipped: needs no_such_module_for_the_demo (pip install nothing)"
    assert got[5][:2] == ("sad", "fixture") and got[5][2].startswith("failed: RuntimeError: no data today")
    assert got[6][2] == "skipped: its fixture was not written (see the fixture step above)"
    assert len(report.ok) == 2 and report.arena_votes == 0
    logs = {p.name: p.read_text() for p in (folder / "logs").iterdir()}
    assert any("chatty fixture writer" in t and "a warning" in t and "native noise" in t for t in logs.values())
    # everything the runs wrote or read lies in the media folder, and the database names it relatively
    assert (folder / "media" / "fixtures" / "probe" / "qa.jsonl").is_file()
    assert not list((folder / "media" / "fixtures").glob(".*tmp*"))  # the failed writer left no half fixture
    from sqlalchemy import select

    from harness.store.db import open_db
    from harness.store.schema import RunRow

    with open_db(f"sqlite:///{tmp_path / 'demo.db'}")() as s:
        configs = [c for c in s.scalars(select(RunRow.config))]
    assert {c["task_options"]["path"] for c in configs} == {"fixtures/probe/qa.jsonl"}
    # a rerun resumes: the fixture is there, the runs are done
    again: list[str] = []
    build_demo(f"sqlite:///{tmp_path / 'demo.db'}", folder, "small", only=["probe"], write=again.append, fams=fams)
    assert "fixture ... 0.0 s; there already" in "".join(again)


def test_without_blender_the_3d_runs_and_battles_are_left_out_saying_how(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from sqlalchemy import select

    from harness.blender import how_to_install
    from harness.store.db import open_db
    from harness.store.schema import TaskRow

    monkeypatch.setenv("HARNESS_BPY_PYTHON", str(tmp_path / "no-blender" / "python"))
    fams = {"probe": Family(name="probe", demo=(
        DemoRun("code3d", "code3d-standin:faithful", needs=("blender",), renders_3d=True, limit=1),))}
    written: list[str] = []
    url = f"sqlite:///{tmp_path / 'demo.db'}"
    report = build_demo(url, tmp_path / "demo", "small", only=["probe", "arena"], write=written.append, fams=fams)
    lines = "".join(written).splitlines()
    assert lines[0].endswith(f"skipped: needs Blender (bpy; {how_to_install()})")
    assert re.search(r"arena +demo tasks and votes \.\.\. \d+\.\d s; 120 seeded votes$", lines[1]), lines
    assert lines[2].split()[:2] == ["arena", "3D"]
    assert lines[2].endswith(f"3D battles left out of this demo: they need Blender (bpy; {how_to_install()})")
    assert len(lines) == 3 and report.arena_votes == 120
    with open_db(url)() as s:
        tasks = set(s.scalars(select(TaskRow.name)))
    assert tasks == {"arena-demo"}  # the unjudgeable grey 3D demo task is never written
