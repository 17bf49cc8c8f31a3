"""`harness export -o -` writes to standard output (it used to create a file named '-')."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

from harness.runner import EvalConfig, Runner
from harness.store.db import open_db


def _run(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'h.db'}"
    Runner(EvalConfig(task="gsm8k", model="builtin:constant", model_settings={"text": "#### 1"}, limit=3,
                      progress=False), session_factory=open_db(url)).run()
    return url


def _export(tmp_path: Path, url: str, fmt: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([str(Path(sys.executable).parent / "harness"), "export", "1", "-f", fmt, "-o", "-",
                           "--db", url], capture_output=True, timeout=120, cwd=tmp_path, env=dict(os.environ))


def test_jsonl_and_csv_go_to_stdout_and_no_file_named_dash(tmp_path: Path) -> None:
    url = _run(tmp_path)
    done = _export(tmp_path, url, "jsonl")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in done.stdout.decode().splitlines()]
    assert [r["sample_id"] for r in rows] == sorted(r["sample_id"] for r in rows) and len(rows) == 3
    assert b"wrote 3 samples to standard output" in done.stderr
    csv_done = _export(tmp_path, url, "csv")
    assert csv_done.returncode == 0 and csv_done.stdout.decode().splitlines()[0].startswith("sample_id,epoch")
    assert not (tmp_path / "-").exists()


def test_parquet_to_a_pipe_is_readable(tmp_path: Path) -> None:
    import pandas as pd

    url = _run(tmp_path)
    done = _export(tmp_path, url, "parquet")
    assert done.returncode == 0, done.stderr
    assert len(pd.read_parquet(io.BytesIO(done.stdout))) == 3


def test_show_prints_counts_as_integers_not_rates(tmp_path: Path) -> None:
    """``errors 1.0000`` read like a rate; a count with no interval reads as a count."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    Runner(EvalConfig(task="gsm8k", model="builtin:constant", model_settings={"text": "#### 1"}, limit=3,
                      progress=False), session_factory=open_db(url)).run()
    done = subprocess.run([str(Path(sys.executable).parent / "harness"), "show", "1", "--db", url],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "160"})
    assert done.returncode == 0, done.stderr
    cells = {}
    for line in done.stdout.splitlines():
        parts = [c.strip() for c in line.split("│")]
        if len(parts) > 4 and parts[1] == "all":
            cells[parts[2]] = parts[3]
    assert cells["errors"] == "0" and cells["unscored"] == "0"
    assert cells["exact_match_strict"] == "0.0000"  # a rate keeps its decimals
