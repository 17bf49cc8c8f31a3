"""The VLA backends never read the demonstrator: they fit and play with the scripted expert made
unimportable, and their modules do not import it.

The demonstrations are recorded here (the expert records them), then a fresh interpreter in which
``import harness.tasks.agents.expert`` raises fits ``vla:3a`` on that file and plays a
crafter_instruct episode through the CLI; its rows are then read back from the database.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import select
from typer.testing import CliRunner

from harness.store.db import open_db
from harness.store.schema import RunRow, SampleResultRow
from harness.tasks.agents.env import ACTIONS

ROOT = Path(__file__).resolve().parent.parent
BACKENDS = ROOT / "tasks" / "agents" / "backends"
EXPERT = "harness.tasks.agents.expert"
# a fresh interpreter where the expert cannot be imported (a None entry makes `import` raise)
WITHOUT_EXPERT = f"""
import sys
sys.modules[{EXPERT!r}] = None
from harness.cli import main
sys.argv = ["harness", *sys.argv[1:]]
try:
    main()
finally:
    assert sys.modules[{EXPERT!r}] is None, "the expert was imported after all"
"""


def _imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
            names |= {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_vla_modules_do_not_import_the_expert():
    files = sorted(BACKENDS.glob("vla*.py")) + [BACKENDS / "abstractions.py"]
    assert len(files) == 3
    for path in files:
        names = _imported(path)
        assert names, path  # the walk sees this file's imports at all
        assert not [n for n in names if "expert" in n.split(".")], f"{path.name} imports the expert"


def test_vla_3a_fits_and_plays_with_the_expert_unimportable(sqlite_url, tmp_path):
    from harness.cli import app

    demo_file = tmp_path / "demos.jsonl"
    result = CliRunner().invoke(app, ["agents", "record", "--out", str(demo_file), "--goals", "collect_wood",
                                      "--episodes", "2", "--max-steps", "25", "--corrupt", "0.3"])
    assert result.exit_code == 0, result.output
    env = {**os.environ, "HARNESS_ARTIFACTS": str(tmp_path / "art"), "OMP_NUM_THREADS": "1"}
    args = ["eval", "-t", "crafter_instruct", "-m", "vla:3a", "-M", "epochs=2", "-T", "goals=collect_wood",
            "-T", "episodes=1", "-T", "max_steps=15", "-T", f"demos={demo_file}", "--db", sqlite_url, "--no-progress"]
    proc = subprocess.run([sys.executable, "-c", WITHOUT_EXPERT, *args], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    sessions = open_db(sqlite_url)
    with sessions() as s:
        run = s.scalars(select(RunRow).where(RunRow.name.like("crafter_instruct__%"))).one()
        rows = s.scalars(select(SampleResultRow).where(SampleResultRow.run_id == run.id)).all()
    assert run.status == "finished" and len(rows) == 1 and rows[0].error is None
    assert set(rows[0].details["actions"]) <= set(ACTIONS) and 1 <= rows[0].details["length"] <= 15
