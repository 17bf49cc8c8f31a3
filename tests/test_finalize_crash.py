"""Finalisation that a crash cannot wedge. A sweep worker killed with SIGKILL while it finalises a
run (a real process, stopped inside the finalising transaction) leaves the run unfinished, never
"finalizing" for ever; the rerun (the sweep again, or `harness eval` again) computes the metrics and
marks the run finished, with no duplicate row. The state older versions left (status "finalizing",
every row, no metrics) is resumed the same way; on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from requirements import require
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session, sessionmaker

from harness.runner import EvalConfig, evaluate
from harness.store import units
from harness.store.db import open_db
from harness.store.schema import MetricRow, RunRow, SampleResultRow
from harness.sweep.matrix import Matrix, Resources, RunEntry, expand
from harness.sweep.worker import SweepWorker

N = 40
MATRIX = Matrix(tasks=[("gsm8k", {})], models=[("builtin:number", {}, Resources())], limit=N)
# a sweep worker whose aggregation never returns: it stops inside the finalising transaction (after
# the claim, the lease release and the row reads) and says so, so the parent can kill it right there
CHILD = textwrap.dedent("""
    import pathlib, sys, time
    import harness.finalize

    def hold(*args, **kwargs):
        pathlib.Path(sys.argv[3]).write_text("finalising")
        time.sleep(600)

    harness.finalize.aggregate = hold
    from harness.sweep.worker import work
    work(sys.argv[1], int(sys.argv[2]))
""")


@dataclass
class Sweep:
    sessions: sessionmaker[Session]
    url: str
    sweep_id: int
    entry: RunEntry
    plan: list[tuple[int, str, list[str]]]

    def rerun(self) -> dict:
        """What `harness sweep run` does on a rerun: the same sweep (unfinished units back to
        pending), then a worker works it off; its report."""
        assert units.create_sweep(self.sessions, "crash", self.config, self.plan) == (self.sweep_id, False)
        return asyncio.run(SweepWorker(self.sessions, self.sweep_id).run()).to_dict()

    @property
    def config(self) -> dict:
        return {"runs": [self.entry.to_dict()]}

    def state(self) -> tuple[str, int, int, dict[str, float]]:
        """(status, rows, distinct (sample, epoch) keys, overall metrics) of the sweep's run."""
        with self.sessions() as s:
            run = s.scalars(select(RunRow).where(RunRow.name == self.entry.run_name)).one()
            rows = s.scalar(select(func.count()).select_from(SampleResultRow).where(SampleResultRow.run_id == run.id))
            keys = len(s.execute(select(SampleResultRow.sample_id, SampleResultRow.epoch)
                                 .where(SampleResultRow.run_id == run.id).distinct()).all())
            metrics = {m.name: round(m.value, 9) for m in s.scalars(select(MetricRow).where(
                MetricRow.run_id == run.id, MetricRow.breakdown_key == ""))}
            return run.status, rows, keys, metrics


def new_sweep(url: str) -> Sweep:
    sessions = open_db(url)
    (entry,) = expand(MATRIX)
    plan = [(0, entry.run_name, ids) for ids in units.chunk(entry.sample_ids, 10)]
    sweep_id, created = units.create_sweep(sessions, "crash", {"runs": [entry.to_dict()]}, plan)
    assert created
    return Sweep(sessions, url, sweep_id, entry, plan)


@pytest.fixture(scope="module")
def truth(tmp_path_factory) -> dict[str, float]:
    """The run's metrics from one plain, uninterrupted process."""
    url = f"sqlite:///{tmp_path_factory.mktemp('truth') / 'h.db'}"
    summary = evaluate(EvalConfig(task="gsm8k", model="builtin:number", limit=N, db_url=url, progress=False))
    return {m.name: round(m.value, 9) for m in summary.metrics if not m.breakdown_key}


@pytest.fixture
def killed(db_url: str, tmp_path: Path) -> Sweep:
    """A sweep whose only worker was SIGKILLed while finalising its run's last unit."""
    sweep = new_sweep(db_url)
    marker = tmp_path / "finalising"
    proc = subprocess.Popen([sys.executable, "-c", CHILD, db_url, str(sweep.sweep_id), str(marker)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), f"the worker never reached finalisation: {proc.communicate(timeout=5)[1][-2000:]!r}"
    # seen from outside while it finalises: still unfinished (nothing of the finalisation is committed)
    assert sweep.state()[:3] == ("running", N, N)
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.wait(30) == -signal.SIGKILL
    status, rows, keys, metrics = sweep.state()
    assert (status, rows, keys, metrics) == ("running", N, N, {})  # not left "finalizing"
    assert units.outstanding(sweep.sessions, sweep.sweep_id) == {"done": 4}
    yield sweep
    sweep.sessions.kw["bind"].dispose()


def test_the_rerun_sweep_finalises_a_run_whose_finaliser_was_killed(killed: Sweep, truth):
    report = killed.rerun()
    assert report["units_done"] == 0 and report["samples_new"] == 0 and report["errors"] == []
    assert killed.state() == ("finished", N, N, truth)
    assert killed.rerun()["errors"] == [] and killed.state() == ("finished", N, N, truth)  # and only once


def test_harness_eval_again_finalises_a_run_whose_finaliser_was_killed(killed: Sweep, truth):
    out = subprocess.run([sys.executable, "-m", "harness.cli", "eval", "-t", "gsm8k", "-m", "builtin:number",
                          "--limit", str(N), "--no-progress", "--db", killed.url],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert f"0 new, {N} already done" in out.stdout and "finished" in out.stdout
    assert killed.state() == ("finished", N, N, truth)


@pytest.mark.parametrize("rerun", ["sweep", "eval"])
def test_a_run_left_finalizing_by_an_older_version_is_resumed(db_url: str, truth, rerun: str):
    sweep = new_sweep(db_url)
    assert asyncio.run(SweepWorker(sweep.sessions, sweep.sweep_id).run()).units_done == 4
    assert sweep.state() == ("finished", N, N, truth)
    # exactly what a finaliser killed between its committed claim and its metrics left behind
    with sweep.sessions.begin() as s:
        run_id = s.scalar(select(RunRow.id).where(RunRow.name == sweep.entry.run_name))
        s.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
        s.execute(update(RunRow).where(RunRow.id == run_id).values(status="finalizing", finished_at=None))
    assert sweep.state() == ("finalizing", N, N, {})
    if rerun == "sweep":
        assert sweep.rerun()["samples_new"] == 0
    else:
        summary = evaluate(EvalConfig(task="gsm8k", model="builtin:number", limit=N, db_url=db_url, progress=False))
        assert (summary.n_new, summary.n_skipped, summary.status) == (0, N, "finished")
    assert sweep.state() == ("finished", N, N, truth)
    sweep.sessions.kw["bind"].dispose()


def test_the_sweep_driver_rerun_finishes_a_run_left_finalizing(tmp_path: Path, truth):
    """The real driver (`harness.sweep.start` on a local Ray cluster), rerun over that state."""
    ray = require("ray", "tests/setup.d/00-python.sh installs it (the `sweep` extra)")
    from harness.sweep import SweepOptions, start

    url = f"sqlite:///{tmp_path / 'h.db'}"
    sessions = open_db(url)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    try:
        first = start(sessions, url, MATRIX, SweepOptions(workers=1, unit_size=10, progress=False, say=lambda _: None))
        assert first.complete and first.runs[0]["status"] == "finished"
        with sessions.begin() as s:
            s.execute(delete(MetricRow))
            s.execute(update(RunRow).values(status="finalizing", finished_at=None))
        again = start(sessions, url, MATRIX, SweepOptions(workers=1, unit_size=10, progress=False,
                                                          say=lambda _: None))
    finally:
        ray.shutdown()
    assert not again.created and again.runs[0]["status"] == "finished"
    with sessions() as s:
        assert s.scalar(select(func.count()).select_from(SampleResultRow)) == N
        assert {m.name: round(m.value, 9) for m in s.scalars(select(MetricRow).where(MetricRow.breakdown_key == ""))} \
            == truth
    sessions.kw["bind"].dispose()
