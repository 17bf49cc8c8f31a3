"""Without Blender, a Blender task is refused before the first model call, in one line that says how
to get it (it used to call the model on every sample, fail each one in the scorer and exit 0)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.blender import BlenderMissing, bpy_python


def test_the_core_says_where_it_looked_and_how_to_install(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HARNESS_BPY_PYTHON", str(tmp_path / "nope" / "python"))
    with pytest.raises(BlenderMissing) as info:
        bpy_python()
    message = str(info.value)
    assert "\n" not in message and str(tmp_path / "nope" / "python") in message
    assert "pip install bpy==5.0.1" in message


def test_eval_code3d_without_blender_exits_2_before_any_model_call(tmp_path: Path) -> None:
    env = {**os.environ, "HARNESS_BPY_PYTHON": str(tmp_path / "no-blender" / "python"),
           "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    db = tmp_path / "h.db"
    done = subprocess.run(
        [str(Path(sys.executable).parent / "harness"), "eval", "-t", "code3d", "-m", "builtin:echo", "--limit", "2",
         "--db", f"sqlite:///{db}"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    assert len(lines) == 1 and "Blender (bpy) not found at" in lines[0], lines
    assert "Traceback" not in done.stderr
    if db.exists():  # nothing was run: no sample rows
        import sqlite3

        with sqlite3.connect(db) as conn:
            tables = {r[0] for r in conn.execute("select name from sqlite_master where type='table'")}
            if "sample_results" in tables:
                assert conn.execute("select count(*) from sample_results").fetchone()[0] == 0
