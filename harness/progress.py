"""The run's progress: a rich bar on a terminal; elsewhere (CI, ``nohup``, a pipe) one status line on
stderr at most every ``interval`` seconds, so a long run is never silent and a log stays short.

Counts are absolute (the runner reports how many samples are done, not how many a worker just
finished): with several workers in flight an increment would count each completion once per worker
that saw it."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

STATUS_INTERVAL_S = 30.0  # HARNESS_STATUS_INTERVAL (seconds) overrides it


def status_interval() -> float:
    try:
        value = float(os.environ.get("HARNESS_STATUS_INTERVAL", STATUS_INTERVAL_S))
    except ValueError:
        return STATUS_INTERVAL_S
    return value if value >= 0 and value == value else STATUS_INTERVAL_S


def _clock(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class RunProgress:
    def __init__(self, enabled: bool, total: int, done: int, label: str, *, stream: TextIO | None = None,
                 interval: float | None = None, clock: Callable[[], float] = time.monotonic,
                 terminal: bool | None = None) -> None:
        self.bar: Any = None
        self.enabled, self.total, self.label = enabled, total, label
        self.start_done = self.completed = done
        self.errors = 0
        self.stream, self.clock = stream, clock
        self.interval = status_interval() if interval is None else interval
        self.t0 = clock()
        self.last_line = self.t0
        self.lines = 0
        self.printed: tuple[int, int] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._heartbeat: threading.Thread | None = None
        on_terminal = os.isatty(2) if terminal is None else terminal
        if enabled and on_terminal:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self.bar = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[rate]:.1f}/s"), TextColumn("errors {task.fields[errors]}"),
                TimeElapsedColumn(), TimeRemainingColumn(), transient=False,
            )
            self.tid = self.bar.add_task(label, total=total, completed=done, rate=0.0, errors=0)

    def __enter__(self) -> RunProgress:
        if self.bar:
            self.bar.__enter__()
        elif self.enabled and self.interval > 0:
            # a heartbeat: one batch of a slow local model can take minutes with no completion to report
            self._heartbeat = threading.Thread(target=self._beat, name="harness-progress", daemon=True)
            self._heartbeat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar:
            self.bar.__exit__(*exc)
            return
        self._stop.set()
        if self._heartbeat is not None:
            self._heartbeat.join()
        if self.enabled and self.lines and self.printed != (self.completed, self.errors):
            self._line()  # the last word on a log: where the run ended (unless the last line said it)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval / 4):
            if self.clock() - self.last_line >= self.interval:
                self._line()

    def rate(self) -> float:
        return (self.completed - self.start_done) / max(self.clock() - self.t0, 1e-9)

    def status_line(self) -> str:
        elapsed = self.clock() - self.t0
        rate = self.rate()
        share = f" ({100 * self.completed / self.total:.0f}%)" if self.total else ""
        left = self.total - self.completed
        eta = f", ETA {_clock(left / rate)}" if rate > 0 and left > 0 else ""
        return (f"{self.label}: {self.completed}/{self.total}{share}, {rate:.2f}/s, errors {self.errors}, "
                f"elapsed {_clock(elapsed)}{eta}")

    def _line(self) -> None:
        with self._lock:  # the heartbeat thread and the run's own updates both write
            stream = self.stream or sys.stderr
            print(self.status_line(), file=stream, flush=True)
            self.printed = (self.completed, self.errors)
            self.last_line = self.clock()
            self.lines += 1

    def update(self, completed: int, errors: int) -> None:
        """``completed``: samples done in total (those of earlier invocations included)."""
        self.completed = min(max(completed, self.completed), self.total)
        self.errors = errors
        if self.bar:
            self.bar.update(self.tid, completed=self.completed, rate=self.rate(), errors=errors)
        elif self.enabled and self.clock() - self.last_line >= self.interval:
            self._line()
