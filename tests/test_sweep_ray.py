"""Sweeps on a local Ray cluster into the throwaway PostgreSQL (and SQLite): every run complete with
exactly one row per (run, sample, epoch) and the metrics of a single-process run; a worker killed
with SIGKILL mid-unit has that unit redone, only its unfinished samples; a whole sweep killed and
restarted does only what is missing; `harness eval --shards` splits one run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from requirements import require
from sqlalchemy import func, select

from harness.runner import EvalConfig, evaluate
from harness.store.db import open_db
from harness.store.schema import MetricRow, RunRow, SampleResultRow
from harness.store.schema_sweeps import WorkUnitRow
from harness.sweep import SweepOptions, start
from harness.sweep.matrix import Matrix, Resources

ray = require("ray", "tests/setup.d/00-python.sh installs it (the `sweep` extra)")


@pytest.fixture(scope="module", autouse=True)
def local_cluster():
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {k: v for k, v in os.environ.items() if k.startswith(("HARNESS_", "HF_"))}})
    yield
    ray.shutdown()


def _rows(sessions) -> tuple[int, int]:
    """(rows, distinct (run, sample, epoch) keys)."""
    with sessions() as s:
        n = s.scalar(select(func.count()).select_from(SampleResultRow))
        keys = s.execute(select(SampleResultRow.run_id, SampleResultRow.sample_id, SampleResultRow.epoch)
                         .distinct()).all()
    return n, len(keys)


def _metrics(sessions, run_name: str) -> dict[str, float]:
    with sessions() as s:
        run_id = s.scalar(select(RunRow.id).where(RunRow.name == run_name))
        return {m.name: round(m.value, 9) for m in s.scalars(select(MetricRow).where(
            MetricRow.run_id == run_id, MetricRow.breakdown_key == "")).all()}


def test_three_tasks_by_three_models_complete_once_each_with_single_process_metrics(pg_url: str, tmp_path: Path):
    sessions = open_db(pg_url)
    tasks = [("gsm8k", {}), ("reliability_gsm8k", {}), ("reliability_mmlu", {})]
    models = [("builtin:number", {}, Resources()), ("builtin:echo", {}, Resources()),
              ("builtin:constant", {"text": "A"}, Resources())]
    result = start(sessions, pg_url, Matrix(tasks, models, limit=9), SweepOptions(workers=3, unit_size=4,
                                                                                   progress=False))
    assert result.complete and result.units == {"done": 27}
    assert len(result.runs) == 9 and all(r["status"] == "finished" and r["done"] == 9 for r in result.runs)
    assert _rows(sessions) == (81, 81)
    # models are built once per worker, not once per unit
    assert sum(w["models_built"] for w in result.workers) <= 3 * 3
    # the sharded run's metrics are those of the same run done in one process
    alone = f"sqlite:///{tmp_path / 'alone.db'}"
    for task, _ in tasks:
        summary = evaluate(EvalConfig(task=task, model="builtin:number", limit=9, db_url=alone, progress=False))
        name = next(r["run"] for r in result.runs if r["run"] == summary.run_name)
        assert _metrics(sessions, name) == _metrics(open_db(alone), summary.run_name)
    # rerunning the finished sweep does nothing new
    again = start(sessions, pg_url, Matrix(tasks, models, limit=9), SweepOptions(workers=2, unit_size=4,
                                                                                  progress=False))
    assert not again.created and sum(w["samples_new"] for w in again.workers) == 0
    assert _rows(sessions) == (81, 81)


def test_a_worker_killed_mid_unit_has_only_its_unfinished_samples_redone(pg_url: str):
    sessions = open_db(pg_url)
    # one sample per call, 0.15 s each: a unit of 8 takes ~1.2 s and commits every 0.5 s
    matrix = Matrix([("gsm8k", {})], [("builtin:number", {"delay": 0.15, "batch_size": 1}, Resources())], limit=32)
    box: dict = {}
    runner = threading.Thread(target=lambda: box.setdefault("r", start(
        sessions, pg_url, matrix, SweepOptions(workers=2, unit_size=8, lease_seconds=5, progress=False))))
    runner.start()
    victim = None
    deadline = time.monotonic() + 90
    while victim is None and time.monotonic() < deadline:
        time.sleep(0.1)
        with sessions() as s:
            for unit in s.scalars(select(WorkUnitRow).where(WorkUnitRow.status == "leased")).all():
                done = s.scalar(select(func.count()).select_from(SampleResultRow).where(
                    SampleResultRow.sample_id.in_(unit.sample_ids)))
                if 2 <= done < len(unit.sample_ids):
                    victim = unit
                    break
    assert victim is not None, "no unit was seen half done"
    os.kill(int(victim.owner.split(":")[1]), signal.SIGKILL)
    runner.join(120)
    result = box["r"]
    assert result.complete
    assert _rows(sessions) == (32, 32)
    with sessions() as s:
        redone = s.get(WorkUnitRow, victim.id)
        assert redone.status == "done" and redone.attempts >= 2 and redone.owner != victim.owner
    # the unit's second owner found the killed worker's committed rows and did not send them again
    assert sum(w.get("samples_skipped", 0) for w in result.workers) >= 2


def test_a_whole_sweep_killed_and_restarted_does_only_what_is_missing(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    cmd = [sys.executable, "-m", "harness.cli", "sweep", "run", "-t", "gsm8k", "-m", "builtin:number",
           "-M", "delay=0.2", "-M", "batch_size=1", "--limit", "80", "--workers", "2", "--unit-size", "10",
           "--no-progress", "--json", "--db", url]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    first = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    sessions = None
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if not (tmp_path / "h.db").exists():
            continue
        try:
            sessions = sessions or open_db(url, auto_create=False)
            stored = _rows(sessions)[0]
        except Exception:
            continue
        if stored >= 8:
            break
    assert 8 <= stored < 80, f"the first sweep stored {stored} rows before the kill"
    os.killpg(first.pid, signal.SIGKILL)  # the driver; Ray then stops its job's workers
    first.wait(30)
    before, quiet_since = _rows(sessions)[0], time.monotonic()
    while time.monotonic() - quiet_since < 3:  # until no worker of the killed sweep writes any more
        time.sleep(0.5)
        now = _rows(sessions)[0]
        if now != before:
            before, quiet_since = now, time.monotonic()
    assert before < 80, "the killed sweep's workers finished everything"
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["units"] == {"done": 8}
    assert _rows(sessions) == (80, 80)
    assert sum(w["samples_new"] for w in report["workers"]) == 80 - before
    assert report["runs"][0]["status"] == "finished"


def test_a_sweep_whose_run_failed_exits_non_zero(tmp_path: Path):
    """A sweep whose every unit is done but one run measured nothing (every sample an error) prints its
    table and exits 2 with one line naming the run; the good run beside it is finished."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    matrix = tmp_path / "sweep.yaml"
    matrix.write_text("name: half-bad\ntasks: [gsm8k]\nlimit: 3\nmodels:\n  - builtin:number\n"
                      "  - {spec: 'openai:x', settings: {base_url: 'http://127.0.0.1:9/v1', max_retries: 0}}\n")
    out = subprocess.run([sys.executable, "-m", "harness.cli", "sweep", "run", str(matrix), "--workers", "1",
                          "--no-progress", "--json", "--db", url], env=env, capture_output=True, text=True,
                         timeout=240)
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 1 run(s) failed, every sample an error ('gsm8k__openai-x"), last
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert sorted(r["status"] for r in report["runs"]) == ["failed", "finished"]


def test_eval_shards_splits_one_run_and_aggregates_once(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'h.db'}"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    out = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", "builtin:number",
                          "--limit", "24", "--shards", "2", "--no-progress", "--db", url],
                         env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "2 workers" in out.stderr and "SQLite store" in out.stderr
    sessions = open_db(url)
    assert _rows(sessions) == (24, 24)
    with sessions() as s:
        run = s.scalars(select(RunRow)).one()
        assert run.status == "finished" and run.n_samples == 24 and run.n_done == 24
    status = subprocess.run([sys.executable, "-m", "harness.cli", "sweep", "status", "--json", "--db", url],
                            env=env, capture_output=True, text=True, timeout=60)
    data = json.loads(status.stdout)
    assert data["status"] == "finished" and data["runs"][0]["done"] == 24 and data["runs"][0]["pending"] == 0
