"""The command line as a user meets it: real subprocesses, a real SQLite file, kill -9 and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

HARNESS = [sys.executable, "-m", "harness.cli"]


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(HARNESS + args, capture_output=True, text=True, timeout=120, env=env, **kw)


def test_eval_show_runs_export(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    r = run(["eval", "--task", "gsm8k", "--model", "builtin:number", "--limit", "20", "--db", db])
    assert r.returncode == 0, r.stderr
    assert "20 new" in r.stdout and "exact_match_flexible" in r.stdout
    runs = run(["runs", "--db", db])
    assert "gsm8k__builtin-number" in runs.stdout and "20/20" in runs.stdout
    name = runs.stdout.split("gsm8k__builtin-number")[1].split()[0]
    show = run(["show", f"gsm8k__builtin-number{name}", "--db", db])
    assert show.returncode == 0 and "exact_match_strict" in show.stdout
    for fmt in ("jsonl", "csv", "parquet"):
        out = tmp_path / f"x.{fmt}"
        e = run(["export", "1", "--format", fmt, "-o", str(out), "--db", db])
        assert e.returncode == 0, e.stderr
        assert out.stat().st_size > 0
    rows = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert len(rows) == 20 and {"sample_id", "output", "scores", "target"} <= set(rows[0])


def test_a_run_whose_every_sample_failed_exits_non_zero_after_its_table(tmp_path):
    """Nothing measured is not success: the run is stored (a rerun resumes it), the error kinds and the
    table print, and the exit status is 2 with one line, so a script driving the harness sees it."""
    db = f"sqlite:///{tmp_path / 'h.db'}"
    r = run(["eval", "-t", "gsm8k", "-m", "openai:x", "-M", "base_url=http://127.0.0.1:9/v1", "-M",
             "max_retries=0", "--limit", "3", "--no-progress", "--db", db])
    assert r.returncode == 2, r.stderr
    assert "errors by kind: connection=3" in r.stdout
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "failed: every sample is an error" in r.stderr
    assert "Traceback" not in r.stderr
    ok = run(["eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "3", "--no-progress", "--db", db])
    assert ok.returncode == 0, ok.stderr


def test_compare_two_runs(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    assert run(["eval", "-t", "gsm8k", "-m", "builtin:number", "--limit", "40", "--db", db,
                "--run-name", "a"]).returncode == 0
    assert run(["eval", "-t", "gsm8k", "-m", "builtin:echo", "--limit", "40", "--db", db,
                "--run-name", "b"]).returncode == 0
    c = run(["compare", "a", "b", "--metric", "exact_match_flexible", "--db", db])
    assert c.returncode == 0, c.stderr
    assert "McNemar" in c.stdout and "40" in c.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["eval", "--task", "gsm8kk", "--model", "builtin:echo"], "did you mean 'gsm8k'"),
        (["eval", "--task", "gsm8k", "--model", "bultin:echo"], "did you mean 'builtin'"),
        (["eval", "--task", "gsm8k", "--model", "buitlin"], "did you mean 'builtin'"),
        (["eval", "--task", "gsm8k", "--model", "builtin:echo", "-T", "nokey"], "key=value"),
        (["eval", "--task", "gsm8k", "--model", "builtin:echo", "-T", "colour=red"],
         "unknown option -T colour (options: data_file, hub)"),
        (["eval", "--task", "gsm8k", "--model", "builtin:echo", "-T", "data_fil=x"], "did you mean 'data_file'"),
        (["show", "no-such-run"], "no run named"),
    ],
)
def test_bad_input_gives_one_line_error(tmp_path, args, message):
    r = run(args + ["--db", f"sqlite:///{tmp_path / 'h.db'}"])
    assert r.returncode == 2
    assert message in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr


def test_malformed_dataset_row_names_file_row_field(tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"question": "1+1?", "answer": "#### 2"}\n{"question": "2+2?"}\n')
    db = tmp_path / "h.db"
    r = run(["eval", "-t", "gsm8k", "-m", "builtin:number", "-T", f"data_file={data}", "--db", f"sqlite:///{db}"])
    assert r.returncode == 2
    assert f"{data}:2: missing field 'answer'" in r.stderr
    # nothing half-written: no run row was created
    assert sqlite3.connect(db).execute("select count(*) from runs").fetchone()[0] == 0


def test_bad_db_url_and_migration_needed(tmp_path):
    r = run(["runs", "--db", "nosuchdriver://x"])
    assert r.returncode == 2 and "bad database URL" in r.stderr
    r = run(["runs", "--db", "postgresql+psycopg://nobody@127.0.0.1:1/none"])
    assert r.returncode == 2 and "cannot open database" in r.stderr
    db = tmp_path / "old.db"
    assert run(["db", "upgrade", "--db", f"sqlite:///{db}"]).returncode == 0
    con = sqlite3.connect(db)
    con.execute("update alembic_version set version_num='0000'")
    con.commit()
    r = run(["runs", "--db", f"sqlite:///{db}"])
    assert r.returncode == 2 and "harness db upgrade" in r.stderr


def test_kill_9_then_resume_loses_little_and_duplicates_nothing(tmp_path):
    """A slow model (50 ms per 4-sample call): kill -9 mid-run, rerun, every sample exactly once."""
    db = tmp_path / "h.db"
    args = ["eval", "-t", "gsm8k", "-m", "builtin:number", "-M", "delay=0.05", "-M", "batch_size=4",
            "--limit", "200", "--db", f"sqlite:///{db}", "--no-progress"]
    proc = subprocess.Popen(HARNESS + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    done = 0
    while time.time() < deadline:
        time.sleep(0.3)
        if db.exists():
            try:
                done = sqlite3.connect(db).execute("select count(*) from sample_results").fetchone()[0]
            except sqlite3.OperationalError:
                continue
            if done >= 40:
                break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = sqlite3.connect(db).execute("select count(*) from sample_results").fetchone()[0]
    assert 40 <= before < 200
    status = sqlite3.connect(db).execute("select status from runs").fetchone()[0]
    assert status == "running"  # killed: never reached a clean finish
    r = run(args)
    assert r.returncode == 0, r.stderr
    assert f"{200 - before} new, {before} already done" in r.stdout
    con = sqlite3.connect(db)
    assert con.execute("select count(*) from sample_results").fetchone()[0] == 200
    assert con.execute("select count(distinct sample_id) from sample_results").fetchone()[0] == 200
    assert con.execute("select status from runs").fetchone()[0] == "finished"


def test_resume_by_name_uses_stored_settings(tmp_path):
    db = f"sqlite:///{tmp_path / 'h.db'}"
    first = run(["eval", "-t", "gsm8k", "-m", "builtin:constant", "-M", "text='#### 18'", "--limit", "5",
                 "--run-name", "r", "--db", db])
    assert first.returncode == 0, first.stderr
    again = run(["eval", "--resume", "r", "--limit", "8", "--db", db])
    assert again.returncode == 0, again.stderr
    assert "3 new, 5 already done" in again.stdout
    con = sqlite3.connect(tmp_path / "h.db")
    assert {o for (o,) in con.execute("select output from sample_results")} == {"#### 18"}
    assert run(["eval", "--db", db]).returncode == 2


def test_listing_commands():
    t = run(["tasks"])
    assert t.returncode == 0 and "gsm8k" in t.stdout
    m = run(["models"])
    assert m.returncode == 0 and "builtin" in m.stdout


def test_db_upgrade_on_postgres(pg_url):
    r = run(["db", "upgrade", "--db", pg_url])
    assert r.returncode == 0, r.stderr
    assert run(["db", "current", "--db", pg_url]).stdout.strip() == Path(
        sorted((Path(__file__).parent.parent / "harness/store/migrations/versions").glob("[0-9]*.py"))[-1]
    ).name.split("_")[0]
