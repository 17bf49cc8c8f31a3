"""Run progress: exact counts at any concurrency, and on a non-terminal one status line at most every
interval (CI, nohup and pipes see a long run move, not 52 silent minutes)."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from harness.progress import RunProgress


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_non_terminal_prints_one_line_per_interval_with_absolute_counts() -> None:
    clock, out = Clock(), io.StringIO()
    progress = RunProgress(True, 300, 20, "gsm8k · m", stream=out, interval=30.0, clock=clock, terminal=False)
    with progress:
        for step in range(1, 281):
            clock.t = step * 0.5  # 2 samples a second, 140 s in all
            progress.update(20 + step, errors=step // 100)
    lines = out.getvalue().splitlines()
    # one line per 30 s (at 30, 60, 90, 120 s) and the closing one
    assert len(lines) == 5, lines
    assert lines[0] == "gsm8k · m: 80/300 (27%), 2.00/s, errors 0, elapsed 0:30, ETA 1:50"
    assert lines[-1] == "gsm8k · m: 300/300 (100%), 2.00/s, errors 2, elapsed 2:20"


def test_counts_never_go_backwards_or_past_the_total() -> None:
    progress = RunProgress(True, 10, 0, "t", stream=io.StringIO(), clock=Clock(), terminal=False)
    progress.update(7, 0)
    progress.update(5, 0)  # a stale report from a slower worker
    assert progress.completed == 7
    progress.update(12, 0)
    assert progress.completed == 10


def test_the_terminal_bar_holds_the_absolute_count() -> None:
    progress = RunProgress(True, 300, 0, "t", clock=Clock(), terminal=True)
    with progress:
        for done in (8, 16, 24):
            progress.update(done, 0)
        task = progress.bar.tasks[0]
        assert task.completed == 24 and task.total == 300


def test_disabled_progress_prints_nothing() -> None:
    out = io.StringIO()
    progress = RunProgress(False, 10, 0, "t", stream=out, interval=0.0, clock=Clock(), terminal=False)
    with progress:
        progress.update(10, 0)
    assert out.getvalue() == ""


def test_a_concurrent_eval_on_a_pipe_reports_exact_counts(tmp_path) -> None:
    """``--concurrency 8`` used to show 2372/300: each worker added every completion since its chunk began."""
    env = {**os.environ, "HARNESS_STATUS_INTERVAL": "0", "HARNESS_CACHE_DIR": str(tmp_path / "cache")}
    done = subprocess.run(
        [str(Path(sys.executable).parent / "harness"), "eval", "-t", "gsm8k", "-m", "builtin:constant",
         "-M", "text=zero", "-M", "batch_size=1", "-M", "delay=0.01", "--limit", "40", "--concurrency", "8",
         "--db", f"sqlite:///{tmp_path / 'h.db'}"],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    counts = [int(m.group(1)) for m in re.finditer(r": (\d+)/40 \(", done.stderr)]
    assert counts, done.stderr[-2000:]
    assert counts == sorted(counts) and max(counts) == 40 and counts[-1] == 40


def test_a_heartbeat_line_comes_even_while_no_sample_finishes() -> None:
    """One batch of 32 SmolLM2 samples can take minutes: the log still moves."""
    import time

    out = io.StringIO()
    with RunProgress(True, 50, 0, "slow", stream=out, interval=0.05, terminal=False):
        time.sleep(0.4)
    lines = out.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("slow: 0/50 (0%), 0.00/s") for line in lines), lines


def test_the_closing_line_is_not_printed_twice() -> None:
    clock, out = Clock(), io.StringIO()
    with RunProgress(True, 10, 0, "t", stream=out, interval=30.0, clock=clock, terminal=False) as progress:
        clock.t = 31.0
        progress.update(10, 0)  # the interval is up: this line already says where the run ended
    assert out.getvalue().splitlines() == ["t: 10/10 (100%), 0.32/s, errors 0, elapsed 0:31"]
